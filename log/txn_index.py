"""The aborted-transaction index: Kafka's ``TransactionIndex`` (``<base offset>.txnindex`` files).

Theory of operation: a read_committed consumer receives aborted data (the broker never
rewrites the log) together with the list of aborted transactions that overlap what it fetched,
``(producer_id, first_offset)``; it drops a producer's records from ``first_offset`` until that
producer's ABORT marker. To answer without scanning the log, each segment has a
``.txnindex`` file with one 34-byte entry per transaction aborted by a marker in that segment,
in marker order (all big-endian)::

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64 |
    last_stable_offset int64

``last_offset`` is the marker's offset; ``last_stable_offset`` is the partition's LSO right
after the abort (first offset of the oldest transaction still open, else ``last_offset + 1``).
:meth:`TransactionIndex.collect` returns the entries overlapping ``[fetch_offset, upper_bound)``
and reports the search complete as soon as an entry's ``last_stable_offset >= upper_bound``:
no transaction aborted later can start below the upper bound.

:class:`LogTransactionIndex` holds the indexes of one partition's segments and exposes the
hooks the log calls (see its docstring). Entries are written with the segment data and
flushed when the log flushes; after a crash, the log rebuilds the tail of the index while it
replays batches to recover producer state (:meth:`LogTransactionIndex.truncate_to`, then
:meth:`LogTransactionIndex.on_completed` for each replayed marker).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .producer_state import CompletedTxn, ProducerStateManager

log = logging.getLogger("samsa.txnindex")

SUFFIX = ".txnindex"
ENTRY_SIZE = 34
ENTRY_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(ENTRY_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)

    @classmethod
    def decode(cls, buf: bytes | memoryview, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = _ENTRY.unpack_from(buf, pos)
        if version != ENTRY_VERSION:
            raise ValueError(f"unknown aborted transaction entry version {version}")
        return cls(pid, first, last, lso)


def index_path(log_dir: Path, base_offset: int) -> Path:
    return Path(log_dir) / f"{base_offset:020d}{SUFFIX}"


class TransactionIndex:
    """One segment's ``.txnindex``. Invariant: ``last_offset`` strictly increases along the file.

    Entries are cached in memory (a segment rarely holds more than a few thousand aborts, 34
    bytes each) and appended to the file as they come; the file is created lazily on the
    first abort, as Kafka does.
    """

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._fd: int | None = None
        if path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        usable = len(data) - len(data) % ENTRY_SIZE
        if usable != len(data):
            log.warning("Truncating torn tail of %s (%d bytes)", self.path, len(data) - usable)
        entries: list[AbortedTxn] = []
        for pos in range(0, usable, ENTRY_SIZE):
            try:
                e = AbortedTxn.decode(data, pos)
            except ValueError:
                log.warning("Truncating %s at corrupt entry %d", self.path, pos // ENTRY_SIZE)
                break
            if entries and e.last_offset <= entries[-1].last_offset:
                log.warning("Truncating %s at out-of-order entry %d", self.path, pos // ENTRY_SIZE)
                break
            entries.append(e)
        self.entries = entries
        if len(entries) * ENTRY_SIZE != len(data):
            self._rewrite()

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def _rewrite(self) -> None:
        self.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(e.encode() for e in self.entries))
        os.replace(tmp, self.path)

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"aborted transaction with last offset {txn.last_offset} is not after "
                             f"{self.entries[-1].last_offset} in {self.path}")
        os.write(self._open(), txn.encode())
        self.entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping ``[fetch_offset, upper_bound)``; True if no later entry can match."""
        out = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                out.append(e)
            if e.last_stable_offset >= upper_bound:
                return out, True
        return out, False

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or above ``offset`` (log truncation, recovery)."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.entries = []
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class LogTransactionIndex:
    """The ``.txnindex`` files of one partition, keyed by segment base offset.

    Hooks for :class:`log.Log` (each one line at the matching place):

    * ``load(segment_base_offsets)`` after the segments are opened (drops orphan files);
    * ``on_completed(completed_txns, producer_state, segment_base)`` after
      ``producer_state.commit`` / ``replay`` returned :class:`log.producer_state.CompletedTxn`
      objects (non-aborted ones are ignored), with the base offset of the segment the marker
      went to;
    * ``collect_aborted_transactions(fetch_offset, upper_bound)`` for Fetch (isolation 1);
    * ``delete_segment(base)`` when a segment is deleted (retention, truncation);
    * ``truncate_to(offset)`` on log truncation and before replaying batches from ``offset``
      during recovery; ``flush()`` with the segments; ``close()``.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = Path(log_dir)
        self.indexes: dict[int, TransactionIndex] = {}

    def load(self, segment_base_offsets: Iterable[int]) -> None:
        bases = sorted(set(segment_base_offsets))
        live = set(bases)
        for p in self.log_dir.glob(f"*{SUFFIX}"):
            try:
                base = int(p.name[: -len(SUFFIX)])
            except ValueError:
                continue
            if base not in live:
                log.info("Deleting orphan transaction index %s", p)
                p.unlink(missing_ok=True)
        self.indexes = {b: TransactionIndex(index_path(self.log_dir, b), b) for b in bases}

    def _index(self, base: int) -> TransactionIndex:
        idx = self.indexes.get(base)
        if idx is None:
            idx = self.indexes[base] = TransactionIndex(index_path(self.log_dir, base), base)
        return idx

    def on_completed(self, completed: Iterable[CompletedTxn] | None, producer_state: ProducerStateManager | None,
                     segment_base: int) -> None:
        if not completed:
            return
        fu = producer_state.first_unstable_offset() if producer_state is not None else None
        for c in completed:
            if not c.is_aborted:
                continue
            lso = c.last_offset + 1 if fu is None else min(fu, c.last_offset + 1)
            idx = self._index(segment_base)
            if idx.entries and c.last_offset <= idx.entries[-1].last_offset:
                continue  # already indexed (replay over a tail that survived the crash)
            idx.append(AbortedTxn(c.producer_id, c.first_offset, c.last_offset, lso))

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of aborted transactions overlapping the fetch range."""
        out: list[tuple[int, int]] = []
        bases = sorted(self.indexes)
        # Any segment can hold the marker of a transaction that started before fetch_offset,
        # but markers are below their transaction's end: scan from the segment holding
        # fetch_offset's transactions' markers, i.e. every segment whose entries reach it.
        for b in bases:
            idx = self.indexes[b]
            if not idx.entries or idx.entries[-1].last_offset < fetch_offset:
                continue
            found, complete = idx.collect(fetch_offset, upper_bound)
            out.extend((e.producer_id, e.first_offset) for e in found)
            if complete:
                break
        return out

    def delete_segment(self, base: int) -> None:
        idx = self.indexes.pop(base, None)
        if idx is not None:
            idx.delete()
        else:
            index_path(self.log_dir, base).unlink(missing_ok=True)

    def truncate_to(self, offset: int) -> None:
        for idx in self.indexes.values():
            idx.truncate_to(offset)

    def flush(self) -> None:
        for idx in self.indexes.values():
            idx.flush()

    def close(self) -> None:
        for idx in self.indexes.values():
            idx.close()
