"""A share-partition: which records of one topic-partition a share group has delivered, to whom,
and how they were acknowledged (KIP-932; Kafka's ``SharePartition``).

Theory of operation
-------------------
Records in ``[start_offset, end_offset)`` -- the share-partition start offset (SPSO) and end
offset (SPEO) -- are *in flight*; every record below SPSO is done with, every record from SPEO on
has never been handed out. The in-flight window is a sorted list of :class:`InFlight` spans
covering it exactly, each a run of offsets with one state, delivery count, owner and lock:

* ``AVAILABLE`` -- may be acquired (released, or its lock timed out);
* ``ACQUIRED`` -- handed to ``member_id`` until ``lock_deadline_ms``
  (``group.share.record.lock.duration.ms``), its delivery count raised by one;
* ``ACKNOWLEDGED`` (ACCEPT) and ``ARCHIVED`` (REJECT, a GAP, or a record whose delivery count
  reached ``group.share.delivery.count.limit``) -- final.

Acquisition takes AVAILABLE spans first (redeliveries, lowest offsets first), then new records
from SPEO, whole log batches at a time (so ``MaxRecords`` may be exceeded to the end of a
batch, as Kafka does). Acknowledgement changes only spans ACQUIRED by the acknowledging member;
anything else is INVALID_RECORD_STATE and changes nothing. When the spans at the front become
final, SPSO moves past them. Spans are split only where an acknowledgement or a limit cuts them,
so a partition consumed in batches holds a handful of spans, and records are never parsed: the
hot path moves offsets and hands out the log's batches as stored.

Every change that must survive a restart (acknowledgements, releases, lock timeouts, SPSO) is
reported by :meth:`SharePartition.take_changes` as state batches for the share coordinator
(:mod:`groupcoord.share.state`); acquisitions are not persisted (as in Kafka 4.1), so after a
restart records that were acquired but not acknowledged are delivered again.

One owner: the :class:`~broker.share.manager.SharePartitionManager`, on the event loop.
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

from protocol.errors import ErrorCode

_BATCH_HEAD = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")   # lastOffsetDelta at byte 23 of a v2 batch


class RecordState(IntEnum):
    """Kafka's ``RecordState`` ids (they are persisted)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


FINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
StateBatch = tuple[int, int, int, int]  # first offset, last offset, state, delivery count


class InFlight:
    __slots__ = ("first", "last", "state", "delivery_count", "member_id", "lock_deadline_ms")

    def __init__(self, first: int, last: int, state: RecordState = RecordState.AVAILABLE,
                 delivery_count: int = 0, member_id: str | None = None,
                 lock_deadline_ms: int = 0) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.delivery_count = delivery_count
        self.member_id = member_id
        self.lock_deadline_ms = lock_deadline_ms

    def __repr__(self) -> str:
        return (f"InFlight({self.first}-{self.last} {self.state.name} "
                f"n={self.delivery_count} {self.member_id})")


@dataclass(slots=True)
class Acquired:
    first_offset: int
    last_offset: int
    delivery_count: int


def iter_batches(data: bytes) -> Iterator[tuple[int, int, int, int]]:
    """(base offset, last offset, start, end) of each whole v2 batch in ``data``."""
    pos, n = 0, len(data)
    while pos + 27 <= n:
        base, length = _BATCH_HEAD.unpack_from(data, pos)
        end = pos + 12 + length
        if end > n:
            return
        (delta,) = _LAST_DELTA.unpack_from(data, pos + 23)
        yield base, base + delta, pos, end
        pos = end


class SharePartition:
    """The in-flight records of one share group on one partition; see the module docstring."""

    def __init__(self, group_id: str, topic: str, partition: int, start_offset: int,
                 batches: Iterable[StateBatch] = (), *, delivery_count_limit: int = 5) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.delivery_count_limit = delivery_count_limit
        self.start_offset = start_offset
        self.spans: list[InFlight] = []
        offset = start_offset
        for first, last, state, count in sorted(batches):
            if last < offset:
                continue
            first = max(first, offset)
            if first > offset:  # never persisted: delivered to nobody, or not acknowledged
                self.spans.append(InFlight(offset, first - 1))
            st = RecordState(state)
            if st is RecordState.ACQUIRED:
                st = RecordState.AVAILABLE
            self.spans.append(InFlight(first, last, st, count))
            offset = last + 1
        self.end_offset = offset
        self._changed: list[tuple[int, int]] = []
        self._start_moved = False
        self._advance_start()

    # --- queries -------------------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [s.lock_deadline_ms for s in self.spans if s.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def has_available(self, upper: int) -> bool:
        """Could an acquisition hand out anything (``upper``: the high watermark)?"""
        return self.end_offset < upper or any(s.state is RecordState.AVAILABLE for s in self.spans)

    def state_batches(self) -> list[StateBatch]:
        """The whole in-flight window as the share coordinator stores it (ACQUIRED as AVAILABLE)."""
        return [(s.first, s.last, int(RecordState.AVAILABLE if s.state is RecordState.ACQUIRED
                                      else s.state), s.delivery_count) for s in self.spans]

    # --- span surgery ----------------------------------------------------------------------------

    def _index(self, offset: int) -> int:
        return bisect_right(self.spans, offset, key=lambda s: s.first) - 1

    def _split_at(self, offset: int) -> None:
        """Make ``offset`` the first offset of a span (if it is inside the window)."""
        i = self._index(offset)
        if i < 0:
            return
        s = self.spans[i]
        if s.first == offset or offset > s.last:
            return
        tail = InFlight(offset, s.last, s.state, s.delivery_count, s.member_id, s.lock_deadline_ms)
        s.last = offset - 1
        self.spans.insert(i + 1, tail)

    def _spans_in(self, first: int, last: int) -> list[InFlight]:
        """The spans exactly covering ``[first, last]`` (split as needed); [] if outside the window."""
        if first < self.start_offset or last >= self.end_offset or first > last:
            return []
        self._split_at(first)
        self._split_at(last + 1)
        i = self._index(first)
        out = []
        while i < len(self.spans) and self.spans[i].last <= last:
            out.append(self.spans[i])
            i += 1
        return out

    def _advance_start(self) -> None:
        n = 0
        while n < len(self.spans) and self.spans[n].state in FINAL:
            n += 1
        if n:
            self.start_offset = self.spans[n - 1].last + 1
            del self.spans[:n]
            self._start_moved = True
        # Neighbouring spans in the same final-or-available state merge, so the list stays short.
        merged: list[InFlight] = []
        for s in self.spans:
            p = merged[-1] if merged else None
            if p is not None and s.state is p.state and s.state is not RecordState.ACQUIRED and \
                    s.delivery_count == p.delivery_count and p.last + 1 == s.first:
                p.last = s.last
            else:
                merged.append(s)
        self.spans = merged

    def _release(self, s: InFlight) -> None:
        s.state = RecordState.ARCHIVED if s.delivery_count >= self.delivery_count_limit \
            else RecordState.AVAILABLE
        s.member_id = None
        s.lock_deadline_ms = 0
        self._changed.append((s.first, s.last))

    # --- the log's bounds --------------------------------------------------------------------------

    def move_start_to(self, log_start_offset: int) -> None:
        """Records below the log start offset are gone (retention, DeleteRecords): skip them."""
        if log_start_offset <= self.start_offset:
            return
        self.spans = [s for s in self.spans if s.last >= log_start_offset]
        if self.spans and self.spans[0].first < log_start_offset:
            self.spans[0].first = log_start_offset
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)
        self._start_moved = True

    # --- acquisition -------------------------------------------------------------------------------

    def acquire(self, member_id: str, max_records: int, now_ms: int, lock_ms: int, upper: int,
                read: Callable[[int], bytes | None]) -> tuple[list[Acquired], list[bytes]]:
        """Acquire up to ``max_records`` records for ``member_id``; ``upper`` is the high watermark
        and ``read(offset)`` returns whole log batches from ``offset`` (None at the end).

        Returns the acquired ranges and the log batches (as stored) that hold them.
        """
        self.expire_locks(now_ms)
        deadline = now_ms + lock_ms
        got: list[InFlight] = []
        remaining = max(max_records, 1)
        for s in list(self.spans):
            if remaining <= 0:
                break
            if s.state is not RecordState.AVAILABLE:
                continue
            if s.last - s.first + 1 > remaining:
                self._split_at(s.first + remaining)
            got.append(s)
            remaining -= s.last - s.first + 1
        batches: list[tuple[int, int, bytes]] = []
        if remaining > 0 and self.end_offset < upper:
            offset = self.end_offset
            last = offset - 1
            while remaining > 0 and offset < upper:
                data = read(offset)
                if not data:
                    break
                progressed = False
                for base, blast, a, b in iter_batches(data):
                    if blast < offset:
                        continue
                    if base >= upper or remaining <= 0:
                        break
                    batches.append((base, blast, data[a:b]))
                    top = min(blast, upper - 1)
                    remaining -= top - max(base, offset) + 1
                    last = top
                    progressed = True
                if not progressed:
                    break
                offset = last + 1
            if last >= self.end_offset:
                s = InFlight(self.end_offset, last)
                self.spans.append(s)
                self.end_offset = last + 1
                got.append(s)
        for s in got:
            s.state = RecordState.ACQUIRED
            s.delivery_count += 1
            s.member_id = member_id
            s.lock_deadline_ms = deadline
        acquired = [Acquired(s.first, s.last, s.delivery_count) for s in got]
        acquired.sort(key=lambda a: a.first_offset)
        return acquired, self._batches_for(acquired, batches, read)

    @staticmethod
    def _batches_for(acquired: list[Acquired], fresh: list[tuple[int, int, bytes]],
                     read: Callable[[int], bytes | None]) -> list[bytes]:
        """The log batches holding the acquired offsets, each once, in offset order. ``fresh``
        (sorted, just read for new records) is used as is; redelivered ranges are read again."""
        out: list[tuple[int, bytes]] = []
        covered = -1  # last offset of the last batch taken
        fresh_bases = [b for b, _, _ in fresh]
        for a in acquired:
            offset = max(a.first_offset, covered + 1)
            while offset <= a.last_offset:
                i = bisect_right(fresh_bases, offset) - 1
                if i >= 0 and fresh[i][1] >= offset:
                    base, last, raw = fresh[i]
                    out.append((base, raw))
                    covered = last
                    offset = last + 1
                    continue
                data = read(offset)
                if not data:
                    break
                moved = False
                for base, last, x, y in iter_batches(data):
                    if last < offset:
                        continue
                    if base > a.last_offset:
                        break
                    out.append((base, data[x:y]))
                    covered = last
                    offset = last + 1
                    moved = True
                if not moved:
                    break
        out.sort(key=lambda t: t[0])
        return [raw for _, raw in out]

    # --- acknowledgement, release, lock timeout ---------------------------------------------------------

    def acknowledge(self, member_id: str,
                    batches: Iterable[tuple[int, int, list[int]]]) -> ErrorCode:
        """Apply ``(first, last, types)`` batches from ``member_id``: all, or none (then
        INVALID_RECORD_STATE, or INVALID_REQUEST for a malformed batch)."""
        plan: list[tuple[int, int, int]] = []
        for first, last, types in batches:
            if first > last or not types or (len(types) != 1 and len(types) != last - first + 1):
                return ErrorCode.INVALID_REQUEST
            if any(t not in (0, 1, 2, 3) for t in types):
                return ErrorCode.INVALID_REQUEST
            if len(types) == 1:
                plan.append((first, last, types[0]))
            else:
                run = first
                for i in range(1, len(types) + 1):
                    if i == len(types) or types[i] != types[i - 1]:
                        plan.append((run, first + i - 1, types[i - 1]))
                        run = first + i
        for first, last, _t in plan:
            spans = self._spans_in(first, last)
            if not spans or any(s.state is not RecordState.ACQUIRED or s.member_id != member_id
                                for s in spans):
                return ErrorCode.INVALID_RECORD_STATE
        for first, last, t in plan:
            for s in self._spans_in(first, last):
                if t == AcknowledgeType.ACCEPT:
                    s.state = RecordState.ACKNOWLEDGED
                elif t == AcknowledgeType.RELEASE:
                    self._release(s)
                    continue
                else:  # REJECT, GAP
                    s.state = RecordState.ARCHIVED
                s.member_id = None
                s.lock_deadline_ms = 0
                self._changed.append((s.first, s.last))
        self._advance_start()
        return ErrorCode.NONE

    def release_member(self, member_id: str) -> bool:
        """The member's session ended or it left: its acquired records go back (Kafka's
        ``releaseAcquiredRecords``). True if anything changed."""
        hit = False
        for s in self.spans:
            if s.state is RecordState.ACQUIRED and s.member_id == member_id:
                self._release(s)
                hit = True
        if hit:
            self._advance_start()
        return hit

    def expire_locks(self, now_ms: int) -> bool:
        hit = False
        for s in self.spans:
            if s.state is RecordState.ACQUIRED and s.lock_deadline_ms <= now_ms:
                self._release(s)
                hit = True
        if hit:
            self._advance_start()
        return hit

    # --- persistence ----------------------------------------------------------------------------------------

    def take_changes(self) -> tuple[bool, list[StateBatch]]:
        """What changed since the last call, as (start offset moved, state batches of the
        changed ranges still in flight); the share coordinator writes them."""
        ranges, self._changed = self._changed, []
        moved, self._start_moved = self._start_moved, False
        out: list[StateBatch] = []
        for first, last in sorted(ranges):
            first = max(first, self.start_offset)
            last = min(last, self.end_offset - 1)
            if first > last:
                continue
            if out and out[-1][1] >= first:  # overlapping ranges: keep what is not yet covered
                first = out[-1][1] + 1
                if first > last:
                    continue
            i = self._index(first)
            while 0 <= i < len(self.spans) and self.spans[i].first <= last:
                s = self.spans[i]
                st = RecordState.AVAILABLE if s.state is RecordState.ACQUIRED else s.state
                out.append((max(s.first, first), min(s.last, last), int(st), s.delivery_count))
                i += 1
        return moved, out
