"""The only metrics bookkeeping on the hot path: per-topic counters and per-API request timings.

Theory of operation. Everything here runs on the broker's event loop thread, which also runs
the scrape, so plain integer attributes need no locks: ``stats.bytes_in += n`` is the whole
cost of counting (prometheus-client's own ``Counter`` takes a mutex per ``inc()``, which is
what this module exists to avoid). The scrape-time collectors in :mod:`broker.metrics.collectors`
turn these numbers into Prometheus families under Kafka's names.

Invariants: counters only grow (a deleted topic's counts are folded into ``retired`` so the
all-topics totals never go backwards); Produce and Fetch count once per partition in a
request, never per record: messages in come from the append's first and last offsets.

Request timing follows Kafka's ``RequestChannel`` breakdown, measured honestly for an asyncio
server (all times in milliseconds):

* ``RequestQueueTimeMs``: from the moment the whole frame was read off the socket until the
  connection's serving task picks it up (it waits behind earlier pipelined requests).
* ``LocalTimeMs``: time the request's code actually ran on the event loop (decode, handler,
  encode), measured by stepping the handler coroutine (:class:`RequestTimer`).
* ``RemoteTimeMs``: time the handler was suspended, waiting on something else: a Fetch long
  poll, a coordinator write, acks from other replicas. Kafka calls this purgatory time.
* ``ThrottleTimeMs``: the quota throttle given to the request (KIP-219: the response is sent at
  once and the connection is then muted this long); not part of the total, as in Kafka.
* ``ResponseQueueTimeMs``: 0 by construction: the serving task writes the response itself.
* ``ResponseSendTimeMs``: writing the response into the transport, including waiting for the
  socket buffer to drain when the client reads slowly (the transport's flow control).
* ``TotalTimeMs``: from frame received to response handed to the kernel.

Fetch is also recorded as ``FetchConsumer`` or ``FetchFollower`` (a broker's replica fetch), as
Kafka does; the handler says which through :func:`mark_follower_fetch`.

Error codes (Kafka's ``RequestMetrics`` ``ErrorsPerSec``, by request and error) are counted once
per response from its ``error_code`` fields (:func:`response_error_counts`; Fetch, which frames
its own response, counts its partitions' codes itself): one short walk of the response's
structs per request, never per record.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections.abc import Awaitable, Coroutine, Generator, Mapping
from contextvars import ContextVar
from typing import Generic, TypeVar

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer

from broker.replica.replica_manager import FetchPartitionData
from protocol.errors import ErrorCode as E
from protocol.kafka_python_internals import SchemaField

T = TypeVar("T")

# Histogram upper bounds in milliseconds (a Python broker answers many requests well under 1 ms).
BUCKETS_MS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0,
                                 1000.0, 2500.0, 5000.0, 10000.0, 30000.0)

# Per-partition errors Kafka does not count as failed requests (ReplicaManager: the client's
# metadata is stale, or the request itself was bad): UNKNOWN_TOPIC_OR_PARTITION,
# NOT_LEADER_OR_FOLLOWER, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, CORRUPT_MESSAGE,
# KAFKA_STORAGE_ERROR, INVALID_TOPIC_EXCEPTION (an append to an internal topic).
NOT_FAILED_PRODUCE = frozenset(int(c) for c in (
    E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE,
    E.CORRUPT_MESSAGE, E.KAFKA_STORAGE_ERROR, E.INVALID_TOPIC_EXCEPTION))
# ... and for Fetch: also OFFSET_OUT_OF_RANGE, the leader epoch errors, REPLICA_NOT_AVAILABLE,
# UNKNOWN_TOPIC_ID and INCONSISTENT_TOPIC_ID.
NOT_FAILED_FETCH = frozenset(int(c) for c in (
    E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR, E.OFFSET_OUT_OF_RANGE,
    E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH, E.REPLICA_NOT_AVAILABLE, E.UNKNOWN_TOPIC_ID,
    E.INCONSISTENT_TOPIC_ID))


class TopicStats:
    """Kafka's ``BrokerTopicMetrics`` for one topic (the all-topics values are sums)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "failed_produce", "failed_fetch",
                 "total_produce", "total_fetch", "replication_bytes_out", "replication_bytes_in")

    def __init__(self) -> None:
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.failed_produce = 0
        self.failed_fetch = 0
        self.total_produce = 0
        self.total_fetch = 0
        self.replication_bytes_out = 0
        self.replication_bytes_in = 0

    def add(self, other: TopicStats) -> None:
        for f in TopicStats.__slots__:
            setattr(self, f, getattr(self, f) + getattr(other, f))


class BrokerTopicStats:
    """Per-topic counters, updated by the Produce and Fetch handlers once per partition."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        self.retired = TopicStats()  # counts of topics since deleted, kept in the totals

    def topic(self, name: str) -> TopicStats:
        s = self.topics.get(name)
        if s is None:
            s = self.topics[name] = TopicStats()
        return s

    def produced(self, topic: str, messages: int, nbytes: int) -> None:
        s = self.topics.get(topic) or self.topic(topic)
        s.total_produce += 1
        s.messages_in += messages
        s.bytes_in += nbytes

    def produce_failed(self, topic: str, code: int) -> None:
        s = self.topics.get(topic)
        if s is None:
            # A name a client made up must not become a label: count it in the totals only.
            s = self.retired if code == E.UNKNOWN_TOPIC_OR_PARTITION else self.topic(topic)
        s.total_produce += 1
        if code not in NOT_FAILED_PRODUCE:
            s.failed_produce += 1

    def replicated_in(self, topic: str, nbytes: int) -> None:
        """A follower appended ``nbytes`` fetched from its leader (ReplicationBytesIn)."""
        s = self.topics.get(topic) or self.topic(topic)
        s.replication_bytes_in += nbytes

    def fetched(self, rows_by_topic: list[tuple[str | None, int, list[FetchPartitionData]]], *,
                follower: bool = False) -> None:
        """One Fetch response: ``(topic, partitions read, [(partition, code, hw, lso, start,
        aborted, data), ...])``. Every partition read counts as a fetch of its topic (Kafka's
        TotalFetchRequestsPerSec), those an incremental session's read left without a row (nothing
        to say: ReplicaManager.fetch_messages' ``omit_unchanged``) as successful ones.

        A follower's fetch is replication traffic: its bytes count as ReplicationBytesOut, not
        BytesOut, as in Kafka (``BrokerTopicStats.updateBytesOut``)."""
        for name, read, rows in rows_by_topic:
            if name is None:
                continue
            s = self.topics.get(name)
            if s is None:  # a new label only for a topic that answered (a made-up name does not)
                s = self.topic(name) if read > len(rows) or any(r[1] == 0 for r in rows) else self.retired
            s.total_fetch += read
            for row in rows:
                code = row[1]
                if code:
                    if code not in NOT_FAILED_FETCH:
                        s.failed_fetch += 1
                    continue
                data = row[6]
                if data:
                    n = data.size if hasattr(data, "size") else len(data)
                    if follower:
                        s.replication_bytes_out += n
                    else:
                        s.bytes_out += n

    def totals(self) -> TopicStats:
        t = TopicStats()
        t.add(self.retired)
        for s in self.topics.values():
            t.add(s)
        return t

    def retire_missing(self, live: set[str]) -> None:
        """Forget deleted topics (as Kafka removes their metrics), keeping their counts in the totals."""
        for name in [n for n in self.topics if n not in live]:
            self.retired.add(self.topics.pop(name))


class Histogram:
    """Bucket counts (not cumulative) and a sum; cumulated only at scrape time."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS_MS) + 1)
        self.sum = 0.0

    def observe(self, ms: float) -> None:
        self.counts[bisect_left(BUCKETS_MS, ms)] += 1
        self.sum += ms

    def cumulative(self) -> list[tuple[str, float]]:
        out = []
        acc = 0
        for bound, n in zip((*BUCKETS_MS, float("inf")), self.counts, strict=True):
            acc += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), float(acc)))
        return out

    @property
    def count(self) -> int:
        return sum(self.counts)


class ApiRequestStats:
    """Kafka's ``RequestMetrics`` for one API: requests per version, error codes, time histograms."""

    __slots__ = ("versions", "errors", "queue", "local", "remote", "throttle", "send", "total")

    def __init__(self) -> None:
        self.versions: dict[int, int] = {}
        self.errors: dict[int, int] = {}  # error code -> count (ErrorsPerSec), NONE included
        self.queue = Histogram()
        self.local = Histogram()
        self.remote = Histogram()
        self.throttle = Histogram()
        self.send = Histogram()
        self.total = Histogram()


# Kafka splits Fetch's request metrics by who fetches: FetchConsumer and FetchFollower (both
# also count as Fetch). Pseudo API keys for the two, next to the real ones.
FETCH_CONSUMER, FETCH_FOLLOWER = -1, -2

# The request being served by the current task (the connection's serving task), so that a
# handler can tell the metrics what only it knows (see mark_follower_fetch).
CURRENT_REQUEST: ContextVar[RequestTimer | None] = ContextVar("samsa_current_request", default=None)


def mark_follower_fetch() -> None:
    """Called by the Fetch handler for a follower's fetch: count it as FetchFollower."""
    timer = CURRENT_REQUEST.get()
    if timer is not None:
        timer.follower = True


def note_errors(errors: dict[int, int]) -> None:
    """Hand the current request's error counts to its timer (Kafka's ``response.errorCounts()``)."""
    timer = CURRENT_REQUEST.get()
    if timer is not None:
        timer.errors = errors


def response_error_counts(response: ApiMessage) -> dict[int, int]:
    """Every ``error_code`` in a kafka-python response object, counted by code (NONE too).

    As Kafka's ``AbstractResponse.errorCounts()``: the top-level code and each topic's or
    partition's. The walk visits the response's structs (one per topic, partition, group...),
    never record bytes, so it costs per partition, not per record."""
    counts: dict[int, int] = {}
    stack: list[DataContainer] = [response]
    while stack:
        obj = stack.pop()
        for kind, name in _plan(type(obj)):
            v = getattr(obj, name)
            if kind == 0:
                if v is not None:
                    counts[v] = counts.get(v, 0) + 1
            elif kind == 1:
                if v:
                    stack.extend(v)
            elif v is not None:
                stack.append(v)
    return counts


# response struct class -> [(0 error_code | 1 struct array | 2 struct, field)]: only the fields
# whose schema holds an ErrorCode somewhere below (not record errors, leader hints, endpoints).
# Read from kafka-python's public schema surface: a message class's ``fields`` (name -> schema
# field) and a field's ``is_struct()``/``is_struct_array()`` and ``fields``.
_PLANS: dict[type, list[tuple[int, str]]] = {}


def _holds_error_code(fields: Mapping[str, SchemaField]) -> bool:
    return any(name == "error_code" or ((f.is_struct() or f.is_struct_array()) and _holds_error_code(f.fields))
               for name, f in fields.items())


def _plan(cls: type) -> list[tuple[int, str]]:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = []
        fields: Mapping[str, SchemaField] = cls.fields  # type: ignore[attr-defined]
        for name, f in fields.items():
            if name == "error_code":
                plan.append((0, name))
            elif f.is_struct_array() and _holds_error_code(f.fields):
                plan.append((1, name))
            elif f.is_struct() and _holds_error_code(f.fields):
                plan.append((2, name))
        _PLANS[cls] = plan
    return plan


class RequestTimer:
    """The timings of one request, filled in by :meth:`run` and the connection."""

    __slots__ = ("received", "started", "local", "remote", "follower", "errors")

    def __init__(self, received: float) -> None:
        self.received = received
        self.started = time.perf_counter()
        self.local = 0.0
        self.remote = 0.0
        self.follower = False
        self.errors: dict[int, int] | None = None  # set by note_errors once the response exists

    def run(self, coro: Coroutine[object, object, T]) -> Awaitable[T]:
        """Await ``coro``, splitting its wall time into running (local) and suspended (remote)."""
        return _Stepped(self, coro)


class _Stepped(Generic[T]):
    """An awaitable that drives a coroutine step by step, timing each step.

    It forwards every value the coroutine yields (asyncio futures) to the task and every
    result or exception back, exactly as ``await`` would, so the coroutine cannot tell.
    """

    __slots__ = ("timer", "coro")

    def __init__(self, timer: RequestTimer, coro: Coroutine[object, object, T]) -> None:
        self.timer = timer
        self.coro = coro

    def __await__(self) -> Generator[object, object, T]:
        timer, coro = self.timer, self.coro
        CURRENT_REQUEST.set(timer)  # in the serving task's context, until its next request
        clock = time.perf_counter
        value: object = None
        exc: BaseException | None = None
        while True:
            t0 = clock()
            try:
                yielded = coro.send(value) if exc is None else coro.throw(exc)
            except StopIteration as stop:
                timer.local += clock() - t0
                return stop.value
            except BaseException:
                timer.local += clock() - t0
                raise
            t1 = clock()
            timer.local += t1 - t0
            try:
                value = yield yielded
                exc = None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # CancelledError and friends go into the coroutine
                value, exc = None, e
            timer.remote += clock() - t1


class RequestStats:
    """Every API's request metrics, keyed by API key."""

    def __init__(self) -> None:
        self.apis: dict[int, ApiRequestStats] = {}

    def finish(self, frame: bytes | memoryview, timer: RequestTimer, handled: float, sent: float,
               throttle_ms: float = 0.0) -> None:
        """Record one request once its response is written (or dropped: acks=0, closed)."""
        if len(frame) < 4:
            return
        key = (frame[0] << 8) | frame[1]
        version = (frame[2] << 8) | frame[3]
        self._record(key, version, timer, handled, sent, throttle_ms)
        errors = timer.errors
        if errors:  # ErrorsPerSec is kept per API only (Fetch, not FetchConsumer/FetchFollower)
            counts = self.apis[key].errors
            for code, n in errors.items():
                counts[code] = counts.get(code, 0) + n
        if key == 1:  # Fetch
            self._record(FETCH_FOLLOWER if timer.follower else FETCH_CONSUMER, version, timer, handled, sent,
                         throttle_ms)

    def _record(self, key: int, version: int, timer: RequestTimer, handled: float, sent: float,
                throttle_ms: float) -> None:
        s = self.apis.get(key)
        if s is None:
            s = self.apis[key] = ApiRequestStats()
        s.versions[version] = s.versions.get(version, 0) + 1
        s.queue.observe((timer.started - timer.received) * 1000.0)
        s.local.observe(timer.local * 1000.0)
        s.remote.observe(timer.remote * 1000.0)
        s.throttle.observe(throttle_ms)
        s.send.observe((sent - handled) * 1000.0)
        s.total.observe((sent - timer.received) * 1000.0)


LAG_PROBE_INTERVAL = 0.5  # seconds between event-loop lag probes


class EventLoopLag:
    """Sleeps ``interval`` again and again and records how late each wake-up is."""

    def __init__(self, interval: float = LAG_PROBE_INTERVAL) -> None:
        self.interval = interval
        self.last = 0.0
        self.max = 0.0
        self.histogram = Histogram()

    def take_max(self) -> float:
        m, self.max = self.max, self.last
        return m

    async def run(self) -> None:
        clock = time.monotonic
        while True:
            t0 = clock()
            await asyncio.sleep(self.interval)
            lag = max(clock() - t0 - self.interval, 0.0)
            self.last = lag
            self.max = max(self.max, lag)
            self.histogram.observe(lag * 1000.0)
