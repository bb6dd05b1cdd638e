"""Clocks and timers for the coordinator: real ones on asyncio, and a manual one for tests.

The coordinator never sleeps and never reads the clock directly: it asks its
:class:`Scheduler` for ``now_ms()`` and for ``call_later(delay_ms, callback)``. Callbacks run
on the event loop thread, so the coordinator stays the single owner of its state without locks.
:class:`ManualScheduler` lets the state-machine tests move time by hand and fire every timer
that falls due, deterministically.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle: ...


class AsyncioScheduler:
    """Wall-clock timestamps (they are written into records) and asyncio's loop timers."""

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000.0, callback)


class _ManualHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualScheduler:
    """Virtual time. ``advance(ms)`` fires due timers in deadline order (ties: creation order)."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._heap: list[tuple[int, int, _ManualHandle, Callable[[], None]]] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> _ManualHandle:
        h = _ManualHandle()
        heapq.heappush(self._heap, (self._now + max(delay_ms, 0), next(self._seq), h, callback))
        return h

    def advance(self, ms: int) -> None:
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            deadline, _, h, cb = heapq.heappop(self._heap)
            self._now = max(self._now, deadline)
            if not h.cancelled:
                cb()
        self._now = target

    def pending(self) -> int:
        return sum(1 for _, _, h, _ in self._heap if not h.cancelled)
