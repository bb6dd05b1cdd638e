"""FrameDecoder: the broker's only way from a byte stream to frames.

The decoder owns the buffers the transport reads into (asyncio.BufferedProtocol's
get_buffer/buffer_updated), copies small frames out of one reusable buffer and gives a large
frame a buffer of its own. These tests split a stream of frames at arbitrary points, through
both entry points, and check that exactly the frames sent come out, in order, and that a bad
size prefix is refused before anything is allocated for it.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.framing import FrameDecoder, FrameError

SIZES = [0, 1, 4, 1000, FrameDecoder.LARGE - 1, FrameDecoder.LARGE, FrameDecoder.LARGE + 1,
         FrameDecoder.SMALL - 4, FrameDecoder.SMALL, FrameDecoder.SMALL + 1, 3 * FrameDecoder.SMALL + 7, 1 << 20]


def wire(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def frame_of(i: int, size: int) -> bytes:
    return bytes((i * 31 + j) & 0xFF for j in range(min(size, 64))) + bytes([i & 0xFF]) * max(size - 64, 0)


@settings(max_examples=150, deadline=None)
@given(sizes=st.lists(st.sampled_from(SIZES), min_size=1, max_size=6),
       cuts=st.lists(st.integers(1, 300_000), min_size=1, max_size=40), buffered=st.booleans())
def test_any_split_gives_back_the_frames_sent(sizes: list[int], cuts: list[int], buffered: bool) -> None:
    frames = [frame_of(i, n) for i, n in enumerate(sizes)]
    data = wire(frames)
    d = FrameDecoder()
    out: list[bytes] = []
    pos, k = 0, 0
    while pos < len(data):
        n = cuts[k % len(cuts)]
        k += 1
        if buffered:  # what the transport does: fill at most the buffer it was given
            buf = d.get_buffer(-1)
            assert len(buf) > 0
            n = min(n, len(buf), len(data) - pos)
            buf[:n] = data[pos:pos + n]
            got = d.buffer_updated(n)
        else:
            got = d.feed(data[pos:pos + n])
            n = min(n, len(data) - pos)
        pos += n
        out += [bytes(f) for f in got]
        assert d.buffered <= max(sizes) + 4 + FrameDecoder.SMALL  # one frame plus one read, at most
    assert out == frames
    assert d.buffered == 0


def test_large_frame_is_its_own_buffer_and_small_ones_are_copies() -> None:
    big, small = frame_of(1, 200_000), frame_of(2, 10)
    d = FrameDecoder()
    [f1, f2] = d.feed(wire([big, small]))
    assert isinstance(f1, memoryview) and f1 == big and not f1.readonly  # patched in place by the log
    assert isinstance(f2, bytes) and f2 == small
    # the large frame's buffer is not reused: a later frame leaves it intact
    d.feed(wire([frame_of(3, 200_000)]))
    assert f1 == big


@pytest.mark.parametrize("size", [-1, -(1 << 31), 1001])
def test_bad_size_is_refused_before_buffering(size: int) -> None:
    d = FrameDecoder(max_size=1000)
    with pytest.raises(FrameError, match="invalid frame size"):
        d.feed(struct.pack(">i", size) + b"x" * 10)


def test_size_prefix_split_across_reads() -> None:
    f = frame_of(5, 50_000)
    data = wire([f, b"tail"])
    d = FrameDecoder()
    out: list[bytes | memoryview] = []
    for i in range(0, len(data), 3):
        out += d.feed(data[i:i + 3])
    assert [bytes(x) for x in out] == [f, b"tail"]
