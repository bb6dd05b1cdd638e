"""The history: every operation of a run, one JSON object per line in ``history.jsonl``.

Each line is ``{"index", "type", "process", "f", "value", "time"}`` as in Jepsen: ``type`` is
``invoke`` when a client starts an operation and ``ok`` (it happened), ``fail`` (it certainly
did not happen) or ``info`` (unknown: it may or may not have happened) when it completes;
``process`` names the client (a client that crashes comes back as a new process); ``time`` is
seconds on the monotonic clock since the run started. The nemesis writes ``info`` lines with
``process: "nemesis"`` and ``f`` ``start``/``stop``. Completions repeat the invocation's ``f``;
the ``value`` of a completion carries what the client learned (offsets, records read).

Writers are client threads; one lock orders the lines, so the file's order is the real-time
order of the events as this process saw them.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Op = dict[str, Any]


class History:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._t0 = time.monotonic()
        self._file = open(path, "w", buffering=1) if path is not None else None  # noqa: SIM115 - closed in close()

    def now(self) -> float:
        return time.monotonic() - self._t0

    def add(self, type_: str, process: Any, f: str, value: Any = None, **extra: Any) -> Op:
        with self._lock:
            op: Op = {"index": len(self._ops), "type": type_, "process": process, "f": f, "value": value,
                      "time": round(self.now(), 6)}
            op.update(extra)
            self._ops.append(op)
            if self._file is not None:
                self._file.write(json.dumps(op, separators=(",", ":")) + "\n")
            return op

    def invoke(self, process: Any, f: str, value: Any = None) -> Op:
        return self.add("invoke", process, f, value)

    def complete(self, type_: str, invoked: Op, value: Any = None, **extra: Any) -> Op:
        assert type_ in ("ok", "fail", "info"), type_
        return self.add(type_, invoked["process"], invoked["f"], value, **extra)

    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def load(path: Path) -> list[Op]:
    return list(read(path))


def read(path: Path) -> Iterator[Op]:
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                yield json.loads(line)
