"""The two sparse indexes of a segment: ``.index`` (offset -> position) and ``.timeindex``.

Theory of operation: Kafka memory-maps preallocated index files. We keep the entries in two
``array`` columns in memory (binary-searched with ``bisect``) and append each new entry to the
file with one ``os.write`` on a raw, unbuffered descriptor (one ``os.write`` for all of one
log append's entries), so the file is always exactly
``entries * entry_size`` bytes and an entry written before a SIGKILL is on disk. A torn or
inconsistent file is detected on load (:meth:`load` returns False) and the segment rebuilds
it from the log, as Kafka does after a failed ``sanityCheck``.

File formats are Kafka's, big-endian:

* ``.index``: 8-byte entries, ``relative_offset int32 | position int32``. The offset is the
  *last* offset of the batch that starts at ``position`` (Kafka 3.x LogSegment.append).
* ``.timeindex``: 12-byte entries, ``timestamp int64 | relative_offset int32``: the largest
  timestamp seen so far in the segment, and the offset where it was seen.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_LITTLE = sys.byteorder == "little"


def _open_rw(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)


def _read_all(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _touch(path: Path) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


class _IndexFile:
    """The file behind an index: opened lazily (old segments keep no index fd), fsync, rename."""

    path: Path
    _fd: int

    def _open(self) -> int:
        if self._fd < 0:
            self._fd = _open_rw(self.path)
        return self._fd

    def _emit(self, entry: bytes, out: list[bytes] | None) -> None:
        """One new entry's bytes: to ``out`` when given (written by :meth:`write_entries`), else to the file."""
        if out is not None:
            out.append(entry)
        else:
            os.write(self._fd if self._fd >= 0 else self._open(), entry)

    def write_entries(self, out: list[bytes]) -> None:
        """Write the entries an append put in ``out`` (one append's entries), with one ``os.write``."""
        os.write(self._fd if self._fd >= 0 else self._open(), out[0] if len(out) == 1 else b"".join(out))

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def dup_fd(self) -> int | None:
        """A second descriptor of the open file (for a background fsync), or None when closed."""
        return os.dup(self._fd) if self._fd >= 0 else None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to(self, path: Path) -> None:
        os.rename(self.path, path)
        self.path = path


class OffsetIndex(_IndexFile):
    """Sparse offset -> file position map of one segment.

    Invariants: relative offsets and positions are both strictly increasing; relative offsets
    fit in 4 bytes (``0 <= offset - base_offset <= 2**31 - 1``); at most ``max_entries``.
    """

    ENTRY_SIZE = 8

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._rel = array("i")
        self._pos = array("i")
        # Opened on the first write only: entries live in memory, so an inactive segment's
        # indexes cost no file descriptor.
        self._fd = -1
        _touch(path)

    # -- loading --------------------------------------------------------------------------
    def load(self, log_size: int) -> bool:
        """Read the file; False if it is torn or inconsistent (the caller rebuilds it)."""
        data = _read_all(self.path)
        self._rel = array("i")
        self._pos = array("i")
        if len(data) % self.ENTRY_SIZE:
            return False
        both = array("i")
        both.frombytes(data)
        if _LITTLE:
            both.byteswap()
        rel, pos = both[0::2], both[1::2]
        for i in range(1, len(rel)):
            if rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1]:
                return False
        if len(rel) and (rel[0] < 0 or pos[0] < 0 or pos[-1] >= max(log_size, 1)):
            return False
        if len(rel) > self.max_entries:
            return False
        self._rel, self._pos = rel, pos
        return True

    # -- queries --------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._rel)

    @property
    def is_full(self) -> bool:
        return len(self._rel) >= self.max_entries

    @property
    def last_offset(self) -> int:
        return self.base_offset + self._rel[-1] if self._rel else self.base_offset

    @property
    def size_bytes(self) -> int:
        return len(self._rel) * self.ENTRY_SIZE

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry whose offset <= ``offset``; (base, 0) if none."""
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def lookup_by_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the largest entry whose position <= ``position``; (base, 0) if none."""
        i = bisect_right(self._pos, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos, strict=True)]

    # -- mutation -------------------------------------------------------------------------
    def append(self, offset: int, position: int, out: list[bytes] | None = None) -> None:
        """Add an entry for the batch ending at ``offset`` that starts at ``position``. With
        ``out``, its bytes go there instead of to the file: the caller writes them all at once
        with :meth:`write_entries` (one append's entries, one ``os.write``)."""
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            return  # never break monotonicity (e.g. an empty append); Kafka throws here
        self._rel.append(rel)
        self._pos.append(position)
        self._emit(_OFFSET_ENTRY.pack(rel, position), out)

    def rewrite(self, entries: list[tuple[int, int]]) -> None:
        """Replace the whole index with ``entries`` (absolute offset, position): one write."""
        self._rel = array("i", (o - self.base_offset for o, _ in entries))
        self._pos = array("i", (p for _, p in entries))
        both = array("i", (x for o, p in entries for x in (o - self.base_offset, p)))
        if _LITTLE:
            both.byteswap()
        os.ftruncate(self._open(), 0)
        if entries:
            os.write(self._open(), both.tobytes())

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset >= ``offset``."""
        n = bisect_right(self._rel, offset - self.base_offset - 1)
        self._truncate_entries(n)

    def truncate_to_position(self, position: int) -> None:
        """Remove every entry whose position >= ``position``."""
        n = bisect_right(self._pos, position - 1)
        self._truncate_entries(n)

    def _truncate_entries(self, n: int) -> None:
        if n < len(self._rel):
            del self._rel[n:]
            del self._pos[n:]
            os.ftruncate(self._open(), n * self.ENTRY_SIZE)

    def reset(self) -> None:
        self._truncate_entries(0)


class TimeIndex(_IndexFile):
    """Sparse timestamp -> offset map of one segment.

    Invariants: timestamps strictly increasing (an entry is added only when the segment's
    max timestamp grows), offsets non-decreasing, relative offsets fit in 4 bytes.
    """

    ENTRY_SIZE = 12

    def __init__(self, path: Path, base_offset: int, max_entries: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_entries)
        self._ts = array("q")
        self._rel = array("i")
        self._fd = -1
        _touch(path)

    def load(self, next_offset: int | None = None) -> bool:
        data = _read_all(self.path)
        self._ts = array("q")
        self._rel = array("i")
        if len(data) % self.ENTRY_SIZE:
            return False
        ts = array("q")
        rel = array("i")
        for t, r in _TIME_ENTRY.iter_unpack(data):
            if ts and (t <= ts[-1] or r < rel[-1]):
                return False
            if r < 0:
                return False
            ts.append(t)
            rel.append(r)
        if len(ts) > self.max_entries:
            return False
        if next_offset is not None and rel and self.base_offset + rel[-1] >= max(next_offset, self.base_offset + 1):
            return False
        self._ts, self._rel = ts, rel
        return True

    def __len__(self) -> int:
        return len(self._ts)

    @property
    def is_full(self) -> bool:
        return len(self._ts) >= self.max_entries

    @property
    def size_bytes(self) -> int:
        return len(self._ts) * self.ENTRY_SIZE

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base_offset) if empty."""
        if not self._ts:
            return -1, self.base_offset
        return self._ts[-1], self.base_offset + self._rel[-1]

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry whose timestamp <= ``timestamp``; (-1, base) if none."""
        i = bisect_right(self._ts, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._ts[i], self.base_offset + self._rel[i]

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel, strict=True)]

    def maybe_append(self, timestamp: int, offset: int, out: list[bytes] | None = None) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's. With ``out``,
        as :meth:`OffsetIndex.append`: the bytes go there, for :meth:`write_entries`."""
        if self._ts and timestamp <= self._ts[-1]:
            return
        rel = offset - self.base_offset
        if self._rel and rel < self._rel[-1]:
            return
        self._ts.append(timestamp)
        self._rel.append(rel)
        self._emit(_TIME_ENTRY.pack(timestamp, rel), out)

    def rewrite(self, entries: list[tuple[int, int]]) -> None:
        self._ts = array("q", (t for t, _ in entries))
        self._rel = array("i", (o - self.base_offset for _, o in entries))
        os.ftruncate(self._open(), 0)
        if entries:
            os.write(self._open(), b"".join(_TIME_ENTRY.pack(t, o - self.base_offset) for t, o in entries))

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset >= ``offset``."""
        n = bisect_right(self._rel, offset - self.base_offset - 1)
        if n < len(self._ts):
            del self._ts[n:]
            del self._rel[n:]
            os.ftruncate(self._open(), n * self.ENTRY_SIZE)

    def reset(self) -> None:
        self.truncate_to(self.base_offset)

