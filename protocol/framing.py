"""Kafka's size-delimited framing, sans-io.

Every request and response is ``int32 size`` followed by ``size`` bytes. :class:`FrameDecoder`
owns the buffers the socket reads into and hands back whole frames; it never blocks and never
touches a socket, so it can be fuzzed and tested in isolation.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be a Kafka frame stream; the connection must be closed."""


class FrameDecoder:
    """Splits a byte stream into frames, reading into buffers it owns.

    Two ways in. ``get_buffer()`` / ``buffer_updated(n)`` follow ``asyncio.BufferedProtocol``:
    the transport (the kernel's recv, or OpenSSL decrypting a TLS record) writes straight into
    memory handed out here, so a large request is never copied on its way in. ``feed(data)``
    does the same with bytes already read (tests, tools).

    Theory of operation: small frames are read into one reusable ``SMALL``-byte buffer and
    copied out whole (``bytes``). Once a frame's size prefix says it is large (more than
    ``LARGE`` bytes), a bytearray of exactly its size is allocated, the part already read is
    moved into it, and ``get_buffer`` hands out the rest of it until the frame is complete; it
    then leaves as a ``memoryview`` of that bytearray, which nothing here touches again.

    Invariants: ``self._small[self._start:self._end]`` holds the unconsumed bytes while no large
    frame is in progress; sizes below 0 or above ``max_size`` (``socket.request.max.bytes``)
    raise :class:`FrameError` before anything is allocated for them, so a hostile size cannot
    make the broker allocate. Buffered bytes never exceed one frame plus ``SMALL``.
    """

    __slots__ = ("_small", "_start", "_end", "_big", "_filled", "max_size")

    SMALL = 32 * 1024  # one read's worth of small requests, or the head of a large one (per connection)
    LARGE = 8 * 1024  # frames above this get a buffer of their own

    def __init__(self, max_size: int = 104857600) -> None:
        self._small = bytearray(self.SMALL)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None  # the large frame being read, if any
        self._filled = 0  # bytes of it read so far
        self.max_size = max_size

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Where the next bytes read should go (never empty)."""
        if self._big is not None:
            return memoryview(self._big)[self._filled:]
        if self._end == self.SMALL:  # full of an incomplete small frame's head: move it to the front
            n = self._end - self._start
            self._small[:n] = self._small[self._start:self._end]
            self._start, self._end = 0, n
        return memoryview(self._small)[self._end:]

    def buffer_updated(self, nbytes: int) -> list[bytes | memoryview]:
        """``nbytes`` were written into the last ``get_buffer()``; return the frames completed."""
        big = self._big
        if big is not None:
            self._filled += nbytes
            if self._filled < len(big):
                return []
            self._big = None
            return [memoryview(big)]
        self._end += nbytes
        frames: list[bytes | memoryview] = []
        small, start, end = self._small, self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(small, start)
            if size < 0 or size > self.max_size:
                raise FrameError(f"invalid frame size {size} (socket.request.max.bytes={self.max_size})")
            have = end - start - 4
            if have >= size:
                frames.append(bytes(small[start + 4:start + 4 + size]))
                start += 4 + size
                continue
            if size > self.LARGE:  # a buffer of its own, starting with what has arrived
                big = bytearray(size)
                big[:have] = small[start + 4:end]
                self._big, self._filled = big, have
                start = end
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | memoryview]:
        """Add bytes already read; return the frames they completed (without their size prefix)."""
        frames: list[bytes | memoryview] = []
        view = memoryview(data)
        while view:
            buf = self.get_buffer()
            n = min(len(buf), len(view))
            buf[:n] = view[:n]
            view = view[n:]
            frames += self.buffer_updated(n)
        return frames

    @property
    def buffered(self) -> int:
        """Bytes read that belong to frames not yet complete."""
        if self._big is not None:
            return self._filled + (self._end - self._start)
        return self._end - self._start
