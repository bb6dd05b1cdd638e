"""Reads near the log end start at the batch itself (LogSegment.recent), not at the index entry
before it: every offset still finds its own batch, across a large multi-batch append, a
truncation and a reopen."""

from __future__ import annotations

from pathlib import Path

from log import Log, LogConfig
from log.segment import LogSegment
from tests.log.helpers import build_batch, decode, records


def _check_every_offset(lg: Log, leo: int) -> None:
    for off in range(leo):
        info = lg.read(off, 1)  # one batch: the one holding off
        assert info is not None, off
        got = [o for o, *_ in decode(info.read())]
        assert off in got, (off, got)
    assert lg.read(leo, 1 << 20) is None


def test_tail_reads_find_their_batch(tmp_path: Path) -> None:
    # index.interval.bytes far above the data: without the recent positions every read scans from 0
    cfg = LogConfig(segment_bytes=1 << 20, index_interval_bytes=1 << 16)
    lg = Log.open(tmp_path / "t-0", cfg)
    n = 0
    for i in range(40):  # one- and two-record batches, appended one at a time
        values = [b"v%d" % i] * (1 + i % 2)
        lg.append(records(build_batch(values)))
        n += len(values)
    seg = lg.segments[-1]
    assert len(seg.recent) == LogSegment.RECENT_BATCHES
    _check_every_offset(lg, n)

    # one append of more batches than are remembered: only its newest are, with no gap
    many = [build_batch([b"m%d" % i]) for i in range(LogSegment.RECENT_BATCHES + 5)]
    lg.append(records(*many))
    n += len(many)
    _check_every_offset(lg, n)

    # a truncation forgets them; appends after it are remembered again
    lg.truncate_to(n - 10)
    n -= 10
    assert not seg.recent
    _check_every_offset(lg, n)
    lg.append(records(build_batch([b"a", b"b", b"c"])))
    n += 3
    _check_every_offset(lg, n)
    lg.close()

    reopened = Log.open(tmp_path / "t-0", cfg)
    _check_every_offset(reopened, n)
    reopened.close()


def test_tail_bytes_are_the_files_and_never_outlive_a_truncation(tmp_path: Path) -> None:
    """A read of the last append is served from its cached bytes: the same bytes as the file, in
    whole and in slices (TLS's read_into); a region handed out before a truncation reads the file
    again afterwards, never the bytes that were cut."""
    cfg = LogConfig(segment_bytes=1 << 20)
    lg = Log.open(tmp_path / "t-0", cfg)
    lg.append(records(build_batch([b"first"])))
    lg.append(records(build_batch([b"a" * 50]), build_batch([b"b" * 70])))
    seg = lg.segments[-1]
    for off in (1, 2):
        info = lg.read(off, 1)
        assert info is not None and info.data is not None  # within the last append
        with open(info.path, "rb") as f:
            f.seek(info.position)
            on_disk = f.read(info.size)
        assert info.read() == on_disk
        buf = bytearray(info.size)
        info.read_into(memoryview(buf)[5:], 5)
        assert bytes(buf[5:]) == on_disk[5:]
    before = lg.read(0, 1)
    assert before is not None and before.data is None  # an older append: read from the file

    held = lg.read(2, 1)
    assert held is not None and held.data is not None
    lg.truncate_to(2)
    assert seg.tail_bytes == b"" and not seg.recent
    lg.append(records(build_batch([b"c" * 70])))
    assert [r[3] for r in decode(held.read())] == [b"c" * 70]  # what the file holds now, not what was cut
    assert [r[3] for r in decode(lg.read(2, 1).read())] == [b"c" * 70]

    # an append above the bound is not kept: read from the file
    big = [build_batch([b"x" * 1000]) for _ in range(LogSegment.TAIL_BYTES // 1000 + 2)]
    lg.append(records(*big))
    info = lg.read(lg.log_end_offset - 1, 1)
    assert info is not None and info.data is None and seg.tail_bytes == b""
    lg.close()
