"""Kafka's size-delimited framing, sans-io.

Every request and response is ``int32 size`` followed by ``size`` bytes. :class:`FrameDecoder`
is fed whatever the socket produced and hands back whole frames; it never blocks and never
touches a socket, so it can be fuzzed and tested in isolation.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be a Kafka frame stream; the connection must be closed."""


class FrameDecoder:
    """Accumulates bytes and splits them into frames.

    Invariant: ``self._buf[self._pos:]`` holds the unconsumed bytes; a frame is handed out
    only once all of it has arrived. Sizes below 0 or above ``max_size``
    (``socket.request.max.bytes``) raise :class:`FrameError` before anything is buffered
    for them, so a hostile size cannot make the broker allocate.
    """

    __slots__ = ("_buf", "_pos", "max_size")

    def __init__(self, max_size: int = 104857600) -> None:
        self._buf = bytearray()
        self._pos = 0
        self.max_size = max_size

    def feed(self, data: bytes) -> list[bytes | memoryview]:
        """Add ``data``; return the frames it completed (without their size prefix).

        Large requests arrive in many reads; they are accumulated in one bytearray and, when
        the buffer holds exactly one whole frame, handed out as a view of it (the buffer is
        replaced, not copied), so a 1 MB Produce costs no extra copy here.
        """
        buf = self._buf
        buf += data
        frames: list[bytes | memoryview] = []
        pos = self._pos
        end = len(buf)
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if size < 0 or size > self.max_size:
                raise FrameError(f"invalid frame size {size} (socket.request.max.bytes={self.max_size})")
            if end - pos - 4 < size:
                break
            if pos == 0 and size + 4 == end:
                frames.append(memoryview(buf)[4:])
                self._buf = bytearray()
                self._pos = 0
                return frames
            frames.append(bytes(memoryview(buf)[pos + 4: pos + 4 + size]))
            pos += 4 + size
        if pos == end:
            buf.clear()
            pos = 0
        elif pos > 65536:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf) - self._pos
