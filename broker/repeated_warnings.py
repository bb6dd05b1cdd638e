"""Summarised warnings: a client that sends garbage must not be able to flood the broker's log.

Theory of operation: each warning has a *cause*, its message with the variable parts (peer
addresses, numbers, quoted client ids, sizes) taken out. Per cause and per window
(``window_s``, a minute by default) the first ``burst`` warnings are logged as they come;
the rest are only counted, and when the window closes one line says how many were
suppressed ("... 23998 more like this from 3 peers in the last 60 s"), as an operator
reading a Kafka log expects from a rate-limited appender. The summary is written by a timer
on the running event loop, so it appears even if the flood stops; without a loop it is
written by the next warning of that cause.

Invariants: at most ``burst`` + 1 lines per cause per window; at most ``max_causes``
causes are tracked (further ones share one "other" bucket), so memory is bounded whatever
the client sends.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

_VARIABLE = re.compile(r"'[^']*'|\"[^\"]*\"|\d+(?:\.\d+)*(?::\d+)?")


def cause_of(message: str) -> str:
    """The message with its variable parts replaced by ``#``, cut to 120 characters."""
    return _VARIABLE.sub("#", message)[:120]


@dataclass(slots=True)
class _Window:
    start: float
    logged: int = 0
    suppressed: int = 0
    peers: set[str] = field(default_factory=set)


class RepeatedWarnings:
    """Logs the first ``burst`` warnings of each cause per window and summarises the rest."""

    def __init__(self, logger: logging.Logger, *, window_s: float = 60.0, burst: int = 5,
                 max_causes: int = 256, clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.window_s = window_s
        self.burst = burst
        self.max_causes = max_causes
        self.clock = clock
        self._windows: dict[str, _Window] = {}
        self._timer: asyncio.TimerHandle | None = None

    def warning(self, cause_text: str, peer: str, msg: str, *args: object) -> None:
        """Log ``msg % args`` unless this cause already had its ``burst`` in this window."""
        now = self.clock()
        cause = cause_of(cause_text)
        w = self._windows.get(cause)
        if w is not None and now - w.start >= self.window_s:
            self._summarise(cause, w)
            w = None
        if w is None:
            if len(self._windows) >= self.max_causes:
                cause = "other"
                w = self._windows.get(cause)
            if w is None:
                w = self._windows[cause] = _Window(now)
        if w.logged < self.burst:
            w.logged += 1
            self.logger.warning(msg, *args)
            if w.logged == self.burst:
                self.logger.warning("Further warnings like this one are summarised once a minute (%s)", cause)
            return
        w.suppressed += 1
        if len(w.peers) < 1000:
            w.peers.add(peer)
        self._schedule(w.start + self.window_s - now)

    def flush(self) -> None:
        """Summarise and forget every window that has closed."""
        now = self.clock()
        for cause, w in list(self._windows.items()):
            if now - w.start >= self.window_s:
                self._summarise(cause, w)
                del self._windows[cause]
        if self._windows and any(w.suppressed for w in self._windows.values()):
            earliest = min(w.start for w in self._windows.values() if w.suppressed)
            self._schedule(earliest + self.window_s - now)

    def _summarise(self, cause: str, w: _Window) -> None:
        if w.suppressed:
            self.logger.warning("%d more warnings like '%s' from %d peers in the last %.0f s", w.suppressed,
                                cause, len(w.peers), self.window_s)

    def _schedule(self, delay: float) -> None:
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        def fire() -> None:
            self._timer = None
            self.flush()

        self._timer = loop.call_later(max(delay, 0.0) + 0.01, fire)
