"""Delayed operations of the replica manager (Kafka's ``DelayedProduce``, ``DelayedFetch`` and the
purgatories that hold them).

Theory of operation: an operation that cannot complete now is *watched by the partitions it
waits on* and completed by the event that can finish it, in the same loop turn, never by polling:

* :class:`DelayedProduce` (acks=all) is watched by each partition it appended to; a partition
  whose high watermark moves (a follower's Fetch proved its new log end offset, or the ISR
  shrank) checks its watchers and finishes those whose records are now below the high
  watermark; one that loses its leadership fails them (NOT_LEADER_OR_FOLLOWER). One timer per
  operation answers what is left with REQUEST_TIMED_OUT after the request's ``timeout_ms``.
  The operation completes once, when its last partition is done (see below for what runs then).
* :class:`ParkedFetch` parks a Fetch that found fewer than ``min_bytes``: a consumer's is woken
  by a high watermark that moved on one of its partitions, a follower's by an append (Kafka's
  DelayedFetch completes followers on the log end offset) at the end of the append's loop turn
  (so the turn's other appends go in the same response), both by a role change, truncation
  or deletion; one timer wakes it at ``max_wait_ms``. The woken Fetch reads again.

Completion is synchronous, as in Kafka, where the request thread that satisfies an operation
completes it (``tryCompleteElseWatch`` / ``checkAndComplete``): an operation's ``on_done``
callbacks run in the loop turn of the event that finishes it, so the connection writes an
acks=all Produce's response from inside the follower Fetch that advanced the high watermark, and
a leader answers a parked follower Fetch from a callback at the end of the loop turn of the append
that gave it data (:class:`ParkedFetch`; one callback per partition and turn, so one response
carries all of the turn's appends). No task wakes in between: on a busy broker each task wake-up
waits behind a whole loop turn of other work, and a replicated produce used to take four of them.

Everything runs on the event loop thread: no locks. This module knows partitions only through
the two calls they make (``partition_done`` / ``wake``), so it imports nothing of the broker's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from protocol.errors import ErrorCode

log = logging.getLogger("samsa.purgatory")


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


class Completion:
    """Completes once; ``on_done`` callbacks run synchronously when it does (``broker.apis.responses.Pending``).
    A callback that raises is logged and does not stop the others, nor the event that completed it."""

    __slots__ = ("_listeners",)

    def __init__(self) -> None:
        self._listeners: list[Callable[[], None]] | None = []

    @property
    def done(self) -> bool:
        return self._listeners is None

    def on_done(self, callback: Callable[[], None]) -> None:
        if self._listeners is None:
            callback()
        else:
            self._listeners.append(callback)

    async def wait(self) -> None:
        """Until done (for a coroutine: a coordinator's or marker's write, a request hook)."""
        if self._listeners is None:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not fut.done():
                fut.set_result(None)
        self._listeners.append(done)
        await fut

    def _notify(self) -> None:
        listeners, self._listeners = self._listeners, None
        for cb in listeners or ():
            try:
                cb()
            except Exception:
                log.exception("A delayed operation's completion callback failed")


class DelayedProduce(Completion):
    """An acks=all produce waiting until every one of its partitions' high watermarks passed its
    records. Invariant: it completes exactly once, when no status is pending."""

    __slots__ = ("_timer", "_pending")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        super().__init__()
        self._pending: dict[int, ProduceStatus] = {}
        self._timer = loop.call_later(max(timeout_s, 0.0), self._expire)

    def add(self, status: ProduceStatus) -> None:
        """One more partition to wait for (added before any of them can complete: same loop turn)."""
        self._pending[id(status)] = status

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
        if not self.done:
            self._notify()

    def _expire(self) -> None:
        pending, self._pending = self._pending, {}
        for s in pending.values():
            s.error, s.message = ErrorCode.REQUEST_TIMED_OUT, \
                "Replication to the in-sync replicas did not complete within the request timeout"
        self._finish()


class Watchable(Protocol):
    def add_waiter(self, fetch: ParkedFetch, follower: bool = False) -> None: ...
    def remove_waiter(self, fetch: ParkedFetch) -> None: ...


class ParkedFetch:
    """A Fetch parked on its partitions (Kafka's DelayedFetch), without a task: the partition that
    wakes it (an append for a follower's, a moving high watermark for a consumer's, a role change,
    truncation or deletion for both) calls ``on_wake`` at once, in its own loop turn, and so does
    the timer at ``timeout_s``. Fires once; ``cancel`` forgets it without firing."""

    __slots__ = ("_timer", "_parts", "_on_wake", "_fired")

    def __init__(self, loop: asyncio.AbstractEventLoop, parts: Iterable[Watchable], timeout_s: float,
                 on_wake: Callable[[], None], follower: bool = True) -> None:
        self._fired = False
        self._on_wake = on_wake
        self._parts = list(parts)
        for p in self._parts:
            p.add_waiter(self, follower)
        self._timer = loop.call_later(max(timeout_s, 0.0), self.wake)

    @property
    def done(self) -> bool:
        return self._fired

    def cancel(self) -> None:
        if not self._fired:
            self._fired = True
            self._timer.cancel()
            for p in self._parts:
                p.remove_waiter(self)

    def wake(self) -> None:
        if self._fired:
            return
        self.cancel()
        try:
            self._on_wake()
        except Exception:  # never into the append (or role change) that woke it
            log.exception("A parked fetch failed when woken")
