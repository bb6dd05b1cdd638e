"""Replication trace: a timestamp at every hop of an acks=all produce (issue 26).

Theory of operation: with ``SAMSA_REPLICATION_TRACE=<dir>`` in a broker's environment, each
broker process appends one line per event to ``<dir>/trace-<pid>.log``:
``<CLOCK_MONOTONIC ns> <pid> <event> <fields...>``. CLOCK_MONOTONIC is one clock for every
process of the machine, so the files of three brokers merge into one timeline, and
``bench/replication_trace.py`` turns them into the hop-by-hop breakdown of the acks=all path:

==========  ==========================================  ==============================
event       where                                       fields
==========  ==========================================  ==============================
``in``      a Produce or Fetch frame arrives             api key, correlation id, peer port
``out``     its response is handed to the socket         api key, correlation id, peer port
``append``  the leader appended a client's records      topic, partition, log end offset
``fetch``   a follower's Fetch reports its progress     topic, partition, replica, fetch offset
``read``    the leader reads records for a follower     topic, partition, replica, from, log end
``hw``      the leader's high watermark moved           topic, partition, high watermark
``fsend``   a follower sends its Fetch                  topic, partition, log end offset
``fgot``    the follower's Fetch response arrived       leader id, bytes
``fappend`` the follower appended what it fetched       topic, partition, log end offset
``gc``      a cyclic garbage collection ended           generation, microseconds
==========  ==========================================  ==============================

Off (the default) a trace point costs one global lookup and a branch; on, lines are buffered
(a write per 256 events and at exit), so tracing costs a few microseconds per event and the
timeline it shows is that of a slightly slower broker. It is a measuring tool, not a log: the
operator-facing account of the same path is the request metrics (``RemoteTimeMs`` of Produce
and ``FetchFollower``).
"""

from __future__ import annotations

import atexit
import gc
import os
import time

ON = False  # read at every trace point: ``if trace.ON: trace.event(...)``

_fd = -1
_pid = 0
_lines: list[str] = []
_gc_started = 0


def event(name: str, *fields: object) -> None:
    _lines.append(f"{time.monotonic_ns()} {_pid} {name} {' '.join(map(str, fields))}\n")
    if len(_lines) >= 256:
        flush()


def flush() -> None:
    if _lines and _fd >= 0:
        data = "".join(_lines).encode()
        _lines.clear()
        os.write(_fd, data)


def _on_gc(phase: str, info: dict[str, int]) -> None:
    global _gc_started
    if phase == "start":
        _gc_started = time.monotonic_ns()
    else:
        event("gc", info.get("generation", -1), (time.monotonic_ns() - _gc_started) // 1000)


def start(directory: str) -> None:
    """Trace this process's events into ``directory`` (called at broker startup when
    ``SAMSA_REPLICATION_TRACE`` is set)."""
    global ON, _fd, _pid
    if ON:
        return
    os.makedirs(directory, exist_ok=True)
    _pid = os.getpid()
    _fd = os.open(os.path.join(directory, f"trace-{_pid}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    gc.callbacks.append(_on_gc)
    atexit.register(flush)
    ON = True


def frame_ids(frame: bytes | memoryview) -> tuple[int, int]:
    """(api key, correlation id) of a request frame (its header's first 8 bytes)."""
    if len(frame) < 8:
        return -1, -1
    return (frame[0] << 8) | frame[1], int.from_bytes(frame[4:8], "big", signed=True)
