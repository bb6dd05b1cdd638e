"""Incremental fetch sessions (KIP-227): Kafka's ``FetchSession``, ``FetchSessionCache`` and
``FetchManager.newContext``.

Theory of operation
-------------------
A consumer (or follower) that fetches many partitions would otherwise send every partition in
every Fetch and get every partition back. With a session (Fetch v7+), the first *full* fetch
(``session_epoch`` 0) lists all partitions; the broker caches them -- per partition the fetch
offset and max bytes the client asked for, and the high watermark and log start offset it last
answered -- under a new session id, returned in the response with epoch 1 expected next. Each
*incremental* fetch (``session_id`` = that id, ``session_epoch`` = the expected epoch) then lists
only partitions whose fetch parameters changed (new ones, new fetch offsets) and those to drop
(``forgotten_topics_data``). The broker looks at *every* partition of the session, and answers only
those with something to say: records, a changed high watermark or log start offset, or an error.
A partition with nothing to say is left out of the read itself (``omit_unchanged`` in
``ReplicaManager.fetch_messages``: no row is built for it, a follower's caught-up time still moves),
so the trim below (:meth:`FetchContext.respond`) finds the rows it got by key.

:func:`new_context` turns a request into a :class:`FetchContext` that says what to read
(``wanted``, in the shape ``broker/apis/fetch.py`` reads) and, once read,
:meth:`FetchContext.respond` filters and records the answer and names the session id to return:

* ``session_epoch`` -1 (FINAL): no session; a ``session_id`` given is closed first. Full answer.
* ``session_epoch`` 0 (INITIAL): a full fetch that opens a session (closing ``session_id`` if
  given); the response carries its id, or 0 when the cache has no room (the client then keeps
  sending full fetches).
* ``session_epoch`` > 0: the session must exist (FETCH_SESSION_ID_NOT_FOUND) and expect exactly
  this epoch (INVALID_FETCH_SESSION_EPOCH); both errors come back at the top level with no
  partitions and session id 0, and the client starts over with a full fetch. A session whose
  partitions have all been forgotten is closed and the fetch answered as sessionless.

The cache (``max.incremental.fetch.session.cache.slots``, Kafka's default 1000; 0 disables
sessions) evicts like Kafka's: a session unused for ``EVICTION_MS`` (2 minutes) makes room for a
new one, else a new session may take the place of the least valuable one -- consumer sessions
before follower sessions, smaller before larger -- if it is more valuable itself.

Invariants: session ids are unique, positive and never reused while cached; a session's epoch
is the one its next request must carry, and moves (``next_epoch``) only when an incremental
request is accepted. Everything runs on the event loop thread; no locks. Cost on the hot path:
a sessionless fetch (v4-6, or ``session_epoch`` -1 with no session) takes one branch.
"""

from __future__ import annotations

import logging
import random
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
DEFAULT_CACHE_SLOTS = 1000  # max.incremental.fetch.session.cache.slots

log = logging.getLogger("samsa.fetch")

PartitionKey = tuple[Any, int]  # (topic name, or topic id from v13; partition)


def next_epoch(epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``: FINAL stays FINAL, the maximum wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the last request parameters and the last answer's offsets.

    Its attribute names match a request's FetchPartition, so the read path takes either."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    high_watermark: int = -1
    log_start_offset: int = -1
    current_leader_epoch: int = -1  # KIP-320, checked on every read of the session (-1: unchecked)


@dataclass(slots=True)
class FetchSession:
    id: int
    uses_topic_ids: bool
    privileged: bool  # a follower's session: evicted after consumers'
    epoch: int = 1
    last_used_ms: float = 0.0
    cached_size: int = 0  # len(partitions) when the cache last counted it (Kafka's cachedSize)
    # (topic, partition) -> cached state; insertion order is the read order, and a partition
    # that returned records moves to the end so the others get their turn under max_bytes.
    partitions: OrderedDict[PartitionKey, CachedPartition] = field(default_factory=OrderedDict)


class FetchSessionCache:
    """Sessions by id, least recently used first. Bounded by ``max_slots``.

    ``num_partitions`` is the sum of the sessions' ``cached_size`` (Kafka's ``numPartitions``,
    the NumIncrementalFetchPartitionsCached gauge): counted when a session is created, touched
    (an incremental request added or forgot partitions), removed or evicted, so reading it costs
    nothing however many sessions there are. ``evictions`` counts sessions evicted to make room
    (IncrementalFetchSessionEvictionsPerSec)."""

    def __init__(self, max_slots: int = DEFAULT_CACHE_SLOTS, eviction_ms: int = EVICTION_MS) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.num_partitions = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self.num_partitions -= session.cached_size
        return session

    def touch(self, session: FetchSession, now_ms: float) -> None:
        """``session`` was used (and may have new or forgotten partitions): it is now the most
        recently used, and its partitions are counted again."""
        session.last_used_ms = now_ms
        self.sessions.move_to_end(session.id)
        size = len(session.partitions)
        self.num_partitions += size - session.cached_size
        session.cached_size = size

    def maybe_create(self, now_ms: float, privileged: bool, uses_topic_ids: bool,
                     partitions: OrderedDict[PartitionKey, CachedPartition]) -> int:
        """A new session's id, or INVALID_SESSION_ID (0) when the cache has no room for it."""
        if self.max_slots <= 0 or not partitions:
            return INVALID_SESSION_ID
        if len(self.sessions) >= self.max_slots and not self._evict_for(now_ms, privileged, len(partitions)):
            return INVALID_SESSION_ID
        session_id = 0
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = random.randint(1, 0x7FFFFFFF)
        session = FetchSession(session_id, uses_topic_ids, privileged, epoch=next_epoch(INITIAL_EPOCH),
                               last_used_ms=now_ms, cached_size=len(partitions), partitions=partitions)
        self.sessions[session_id] = session
        self.num_partitions += session.cached_size
        log.debug("Created fetch session %d with %d partitions (%s)", session_id, len(partitions),
                  "follower" if privileged else "consumer")
        return session_id

    def _evict_for(self, now_ms: float, privileged: bool, size: int) -> bool:
        oldest = next(iter(self.sessions.values()))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            victim = oldest
        else:
            victim = min(self.sessions.values(), key=lambda s: (s.privileged, len(s.partitions), s.id))
            if not ((privileged and not victim.privileged) or size > len(victim.partitions)):
                return False
        self.remove(victim.id)
        self.evictions += 1
        log.debug("Evicted fetch session %d (%s, %d partitions) to make room for a new one", victim.id,
                  "follower" if victim.privileged else "consumer", victim.cached_size)
        return True


SESSIONLESS, FULL, INCREMENTAL, ERROR = "sessionless", "full", "incremental", "error"
_NO_ERROR = int(ErrorCode.NONE)


def _records_size(records: Any) -> int:
    if records is None:
        return 0
    return len(records) if isinstance(records, (bytes, bytearray)) else int(records.size)


class FetchContext:
    """What one Fetch reads, and how its answer is trimmed and remembered (see the module doc)."""

    __slots__ = ("kind", "error", "wanted", "session", "cache", "_now_ms", "_privileged", "_uses_ids")

    def __init__(self, kind: str, wanted: list[Any], *, error: ErrorCode = ErrorCode.NONE,
                 session: FetchSession | None = None, cache: FetchSessionCache | None = None,
                 now_ms: float = 0.0, privileged: bool = False, uses_topic_ids: bool = False) -> None:
        self.kind = kind
        self.error = error
        self.wanted = wanted
        self.session = session
        self.cache = cache
        self._now_ms = now_ms
        self._privileged = privileged
        self._uses_ids = uses_topic_ids

    def respond(self, topics: list[Any]) -> tuple[int, int, list[Any]]:
        """(error code, session id, topics to send) for the read ``topics`` (protocol.fetch_codec
        TopicData, in ``wanted`` order)."""
        if self.kind == SESSIONLESS:
            return _NO_ERROR, INVALID_SESSION_ID, topics
        if self.kind == ERROR:
            return int(self.error), INVALID_SESSION_ID, []
        if self.kind == FULL:
            assert self.cache is not None
            parts: OrderedDict[PartitionKey, CachedPartition] = OrderedDict()
            for (name, tid, fparts), t in zip(self.wanted, topics, strict=True):
                key_topic = tid if self._uses_ids else name
                for fp, pd in zip(fparts, t.partitions, strict=True):
                    parts[(key_topic, fp.partition)] = CachedPartition(
                        fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                        pd.high_watermark, pd.log_start_offset, _leader_epoch(fp))
            sid = self.cache.maybe_create(self._now_ms, self._privileged, self._uses_ids, parts)
            return _NO_ERROR, sid, topics
        session = self.session
        assert session is not None
        out = []
        moved: list[PartitionKey] = []
        cached = session.partitions
        uses_ids = session.uses_topic_ids
        for t in topics:  # (the read left out partitions with nothing to say: found by key)
            key_topic = t.topic_id if uses_ids else t.topic
            keep = []
            for pd in t.partitions:
                cp = cached.get((key_topic, pd.partition_index))
                if cp is None:  # forgotten meanwhile by the session's next fetch (another connection)
                    keep.append(pd)  # what was read for this request is still its answer
                    continue
                failed = pd.error_code != _NO_ERROR
                has_records = _records_size(pd.records) > 0
                must = failed or has_records
                if cp.high_watermark != pd.high_watermark:
                    must = True
                    cp.high_watermark = pd.high_watermark
                if cp.log_start_offset != pd.log_start_offset:
                    must = True
                    cp.log_start_offset = pd.log_start_offset
                if failed:
                    cp.high_watermark = -1  # as Kafka: the partition is sent again once it recovers
                if must:
                    keep.append(pd)
                    if has_records:
                        moved.append((key_topic, cp.partition))
            if keep:
                t.partitions = keep
                out.append(t)
        for key in moved:
            session.partitions.move_to_end(key)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("Fetch session %d: incremental fetch answered %d of %d partitions", session.id,
                      sum(len(t.partitions) for t in out), len(session.partitions))
        return _NO_ERROR, session.id, out


def _leader_epoch(fp: object) -> int:
    """A request partition's current leader epoch (v9+), -1 before."""
    epoch = getattr(fp, "current_leader_epoch", -1)
    return -1 if epoch is None else int(epoch)


def new_context(cache: FetchSessionCache | None, version: int, req: Any, wanted: list[Any],
                topics: Any, *, follower: bool = False, now_ms: float | None = None) -> FetchContext:
    """The context of one Fetch. ``wanted`` is the request's own ``[(name, topic id, partitions)]``;
    ``topics`` (the topic registry) names a session's topics again by id for v13+."""
    if version < 7 or cache is None:
        return FetchContext(SESSIONLESS, wanted)
    session_id, epoch = req.session_id, req.session_epoch
    if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return FetchContext(SESSIONLESS, wanted)
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        return FetchContext(FULL, wanted, cache=cache, now_ms=now, privileged=follower,
                            uses_topic_ids=version >= 13)
    session = cache.get(session_id)
    if session is None:
        return FetchContext(ERROR, [], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if session.epoch != epoch:
        return FetchContext(ERROR, [], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
    if session.uses_topic_ids != (version >= 13):
        # A session opened with names cannot go on with ids, or the reverse (Kafka: v13 boundary).
        return FetchContext(ERROR, [], error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
    uses_ids = session.uses_topic_ids
    parts = session.partitions
    for name, tid, fparts in wanted:
        key_topic = tid if uses_ids else name
        for fp in fparts:
            cp = parts.get((key_topic, fp.partition))
            epoch = getattr(fp, "current_leader_epoch", -1)  # _leader_epoch(fp), in line: every fetch
            epoch = -1 if epoch is None else int(epoch)
            if cp is None:
                parts[(key_topic, fp.partition)] = CachedPartition(fp.partition, fp.fetch_offset,
                                                                   fp.partition_max_bytes,
                                                                   current_leader_epoch=epoch)
            else:
                cp.fetch_offset = fp.fetch_offset
                cp.partition_max_bytes = fp.partition_max_bytes
                cp.current_leader_epoch = epoch
    for t in req.forgotten_topics_data or ():
        key_topic = t.topic_id if uses_ids else t.topic
        for p in t.partitions:
            parts.pop((key_topic, p), None)
    if not parts:
        cache.remove(session.id)
        return FetchContext(SESSIONLESS, wanted)
    cache.touch(session, time.monotonic() * 1000 if now_ms is None else now_ms)
    session.epoch = next_epoch(session.epoch)
    return FetchContext(INCREMENTAL, _session_wanted(session, topics), session=session)


def _session_wanted(session: FetchSession, topics: Any) -> list[Any]:
    """Every partition of the session, grouped by topic in session order, in ``wanted`` shape."""
    grouped: dict[Any, list[CachedPartition]] = {}
    for (key_topic, _p), cp in session.partitions.items():
        grouped.setdefault(key_topic, []).append(cp)
    if session.uses_topic_ids:
        named = ((topics.by_id(tid), tid, cps) for tid, cps in grouped.items())
        return [(info.name if info is not None else None, tid, cps) for info, tid, cps in named]
    return [(name, None, cps) for name, cps in grouped.items()]
