"""Delayed operations of the replica manager (Kafka's ``DelayedProduce``, ``DelayedFetch`` and the
purgatories that hold them).

Theory of operation: an operation that cannot complete now is *watched by the partitions it
waits on* and completed by the event that can finish it, in the same loop turn, never by polling:

* :class:`DelayedProduce` (acks=all) is watched by each partition it appended to; a partition
  whose high watermark moves (a follower's Fetch proved its new log end offset, or the ISR
  shrank) checks its watchers and finishes those whose records are now below the high
  watermark; one that loses its leadership fails them (NOT_LEADER_OR_FOLLOWER). One timer per
  operation answers what is left with REQUEST_TIMED_OUT after the request's ``timeout_ms``.
  The operation's future completes once, when its last partition is done: the request's
  handler awaits that one future.
* :class:`DelayedFetch` parks a Fetch that found fewer than ``min_bytes``: a consumer's is woken
  by a high watermark that moved on one of its partitions, a follower's by an append (Kafka's
  DelayedFetch completes followers on the log end offset), both by a role change, truncation
  or deletion; one timer wakes it at ``max_wait_ms``. The woken Fetch reads again.

Everything runs on the event loop thread: no locks. This module knows partitions only through
the two calls they make (``partition_done`` / ``wake``), so it imports nothing of the broker's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from protocol.errors import ErrorCode


class ProduceStatus(Protocol):
    """What a DelayedProduce writes its outcome into (a partition's produce result)."""

    error: ErrorCode
    message: str | None


@dataclass(slots=True)
class PartitionProduceResult:
    """One partition's outcome of :meth:`ReplicaManager.append_records` (Kafka's PartitionResponse)."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    last_offset: int = -1
    record_errors: list[tuple[int, str]] = field(default_factory=list)


class DelayedProduce:
    """An acks=all produce waiting until every one of its partitions' high watermarks passed its
    records. Invariant: ``future`` completes exactly once, when no status is pending."""

    __slots__ = ("future", "_timer", "_pending")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self.future: asyncio.Future[None] = loop.create_future()
        self._pending: dict[int, ProduceStatus] = {}
        self._timer = loop.call_later(max(timeout_s, 0.0), self._expire)

    def add(self, status: ProduceStatus) -> None:
        """One more partition to wait for (added before any of them can complete: same loop turn)."""
        self._pending[id(status)] = status

    @property
    def done(self) -> bool:
        return self.future.done()

    def partition_done(self, status: ProduceStatus, error: ErrorCode, message: str | None = None) -> None:
        """A watching partition finished ``status`` (its high watermark passed the records, or it
        lost its leadership)."""
        if self._pending.pop(id(status), None) is None:
            return
        status.error, status.message = error, message
        if not self._pending:
            self._finish()

    def complete_if_nothing_pending(self) -> None:
        if not self._pending:
            self._finish()

    def _finish(self) -> None:
        self._timer.cancel()
        if not self.future.done():
            self.future.set_result(None)

    def _expire(self) -> None:
        pending, self._pending = self._pending, {}
        for s in pending.values():
            s.error, s.message = ErrorCode.REQUEST_TIMED_OUT, \
                "Replication to the in-sync replicas did not complete within the request timeout"
        if not self.future.done():
            self.future.set_result(None)


class Watchable(Protocol):
    def add_waiter(self, fut: asyncio.Future[None], follower: bool = False) -> None: ...
    def remove_waiter(self, fut: asyncio.Future[None]) -> None: ...


class DelayedFetch:
    """A Fetch parked on its partitions until one of them has something for it, or ``timeout_s``."""

    __slots__ = ("future", "_timer", "_parts")

    def __init__(self, loop: asyncio.AbstractEventLoop, parts: Iterable[Watchable], timeout_s: float,
                 follower: bool) -> None:
        self.future: asyncio.Future[None] = loop.create_future()
        self._parts = list(parts)
        for p in self._parts:
            p.add_waiter(self.future, follower)
        self._timer = loop.call_later(max(timeout_s, 0.0), self._expire)

    def _expire(self) -> None:
        if not self.future.done():
            self.future.set_result(None)

    async def wait(self) -> None:
        try:
            await self.future
        finally:
            self._timer.cancel()
            for p in self._parts:
                p.remove_waiter(self.future)
