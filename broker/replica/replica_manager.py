"""Partitions this broker hosts, and the appends and reads on them.

Theory of operation (Kafka's ``ReplicaManager`` + ``Partition``): a :class:`Partition` owns one
:class:`log.Log` and the replication state around it: ``leader_epoch``, ``high_watermark``
(the offset below which every in-sync replica has the data: consumers never read past it)
and, through the log, ``log_end_offset`` (the next offset to be written).

On the single embedded broker every partition is led here, the ISR is this broker alone, and
the high watermark moves to the log end offset as soon as an append returns. In a cluster the
controller's LeaderAndIsr makes each hosted partition a *leader* or a *follower*:

* A leader appends producers' batches, tracks each follower's log end offset from its Fetch
  requests (``replica_id`` = the follower's broker id) and the last time it was caught up, and
  moves the high watermark to the smallest log end offset in the ISR. A follower that has not
  caught up for ``replica.lag.time.max.ms`` is dropped from the ISR, one that has caught up to
  the high watermark is added back; either change is written to ZooKeeper by the leader itself,
  conditional on the partition state's znode version (``isr_writer``), and only then applied.
  The write runs off the event loop (a slow ZooKeeper never stalls requests); while it is in
  flight the high watermark counts the union of the old and the proposed ISR (Kafka's
  "maximal ISR"), so a replica being added cannot fall below a high watermark it never reached,
  and no other ISR change starts.
* acks=all produce requests wait ("delayed produce purgatory") until the high watermark passes
  their last offset; ``min.insync.replicas`` is checked before the append
  (NOT_ENOUGH_REPLICAS) and when the wait completes (NOT_ENOUGH_REPLICAS_AFTER_APPEND).
* A follower appends what its fetcher brings from the leader with the leader's offsets and
  epochs (``append_as_follower``) and learns the high watermark from the fetch response.

Fetch requests that find nothing to read park on the partitions they asked for ("delayed fetch
purgatory", :class:`~broker.replica.purgatory.ParkedFetch`): a consumer's handler awaits its
wake-up, a follower's is answered by the waking append at once
(:meth:`ReplicaManager.fetch_for_follower`). A consumer's fetch reads up to the high watermark, so an advancing
high watermark wakes it; a follower's reads up to the log end, so only an append wakes it, as
Kafka's DelayedFetch completes on the log end offset for followers. (Waking followers on every
high-watermark move too would answer each parked follower fetch with nothing whenever another
follower's fetch moved the high watermark: an empty round trip per acks=all produce.) Followers
learn the high watermark from their next fetch response.

The request layer only decodes, authorizes and encodes: :meth:`ReplicaManager.append_records`
(validation, the append, acks=all as a :class:`~broker.replica.purgatory.DelayedProduce`) and
:meth:`ReplicaManager.fetch_messages` (the reads, follower progress, the long poll as a
:class:`~broker.replica.purgatory.ParkedFetch`) are Kafka's ``appendRecords`` / ``fetchMessages``; the
replica fetcher appends through :meth:`ReplicaManager.append_records_as_follower` and truncates
through :meth:`ReplicaManager.truncate_follower`.

All of this runs on the event loop thread: one writer per partition, no locks.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from log.alter_log_dirs import LogDirMove
from log.config import LogConfig
from log.log import AppendInfo, Log
from log.manager import LogManager
from log.segment import ReadInfo
from log.validator import RecordValidationError, validate_client_batches
from protocol.errors import DuplicateSequenceError, ErrorCode, KafkaError
from protocol.recompress import recompress_to
from protocol.records import COMPRESSION_CODES, BatchHeader, ValidatedRecords, validate_batches

from ..cluster.metadata import INTERNAL_TOPICS, TopicRegistry, topic_id_base64
from ..config.properties import BrokerConfig
from ..config.resolution import effective_topic_config
from . import trace
from .partition import FollowerState, IsrChangeCounts, IsrWriter, Partition, TopicPartition
from .purgatory import Completion, DelayedProduce, ParkedFetch, PartitionProduceResult

log = logging.getLogger("samsa.replica")
produce_log = logging.getLogger("samsa.produce")

__all__ = ["FetchPartitionData", "FollowerFetch", "FollowerState", "IsrChangeCounts", "Partition", "PartitionProduceResult",
           "ReplicaManager", "TopicPartition"]


class FetchPartitionData(NamedTuple):
    """One partition's answer of :meth:`ReplicaManager.fetch_messages`; ``records`` is ``b""``, a
    :class:`log.segment.ReadInfo` (file regions)."""

    partition: int
    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None
    records: ReadInfo | bytes


# KIP-890: (topic, partition, batch headers) -> the transaction coordinator's verdict
TransactionVerifier = Callable[[str, int, list[BatchHeader]], Awaitable[ErrorCode]]


class FetchPartition(Protocol):
    """One partition a Fetch asks for: a request's FetchPartition or a fetch session's CachedPartition
    (``current_leader_epoch``, v9+, is read where present)."""

    @property
    def partition(self) -> int: ...

    @property
    def fetch_offset(self) -> int: ...

    @property
    def partition_max_bytes(self) -> int: ...


# (topic name, or None for an unknown topic id; topic id (v13+) or None; its partitions)
FetchWanted = list[tuple[str | None, uuid.UUID | None, Sequence[FetchPartition]]]


class ProduceStats(Protocol):
    """BrokerTopicMetrics' produce counters (broker.metrics.stats.BrokerTopicStats)."""

    def produced(self, topic: str, messages: int, nbytes: int) -> None: ...

    def produce_failed(self, topic: str, code: int) -> None: ...


class FollowerFetchers(Protocol):
    """The replica fetchers of a cluster broker (broker.cluster.replication.ReplicaFetcherManager)."""

    def add_partition(self, part: Partition, leader_id: int) -> None: ...

    def remove_partition(self, tp: TopicPartition) -> None: ...


class ReplicaManager:
    """Owns every local Partition; creates and deletes them as the topic registry changes."""

    def __init__(self, config: BrokerConfig, topics: TopicRegistry) -> None:
        self.config = config
        self.topics = topics
        self.broker_id = config.broker_id
        self.log_manager = LogManager(config.log_dirs, self._log_config({}))
        self.partitions: dict[TopicPartition, Partition] = {}
        # Cluster mode (zookeeper.connect set): partitions get their role from the controller's
        # LeaderAndIsr; the cluster services plug in the fetchers, the ISR writer and the
        # coordinators' leadership hooks.
        self.cluster_mode = bool(str(config.get("zookeeper.connect") or "").strip())
        self.controller_epoch = 0
        self.fetcher_manager: FollowerFetchers | None = None
        self.isr_writer: IsrWriter | None = None
        self.isr_changes = IsrChangeCounts()
        self.leadership_listeners: list[Callable[[TopicPartition, bool, int], None]] = []
        # JBOD (broker/replica/log_dirs.py): partitions whose log dir is offline, and moves in progress
        self.offline_partitions: set[TopicPartition] = set()
        self.log_dir_moves: dict[TopicPartition, LogDirMove] = {}

    def _log_config(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.from_properties(effective_topic_config(self.config, overrides))

    def topic_log_config(self, topic: str) -> LogConfig:
        info = self.topics.get(topic)
        return self._log_config(info.configs if info else {})

    def startup(self) -> None:
        t0 = time.monotonic()
        logs = self.log_manager.startup()
        for (topic, partition), lg in logs.items():
            info = self.topics.get(topic)
            if info is None or partition >= info.num_partitions:
                log.warning("Log directory for %s-%d belongs to no known topic; deleting it", topic, partition)
                self.log_manager.delete_log(topic, partition)
                continue
            lg.config = self._log_config(info.configs)
            tp = TopicPartition(topic, partition)
            # in a cluster a partition has no role until the controller's LeaderAndIsr gives it one
            self.partitions[tp] = self._new_partition(tp, lg, leader_id=-1 if self.cluster_mode else None)
        if not self.cluster_mode:
            for info in self.topics:
                self._ensure_partitions(info.name, is_new=False)
        log.info("Loaded %d partitions in %.0f ms", len(self.partitions), (time.monotonic() - t0) * 1000)

    def shutdown(self) -> None:
        self.log_manager.shutdown()

    def _ensure_partitions(self, topic: str, *, is_new: bool = True) -> None:
        info = self.topics.get(topic)
        if info is None:
            return
        cfg = self._log_config(info.configs)
        for p in range(info.num_partitions):
            tp = TopicPartition(topic, p)
            if tp not in self.partitions and tp not in self.offline_partitions:
                lg = self.log_manager.get_log(topic, p)
                if lg is None and not is_new and self.log_manager.offline_dirs:
                    # Kafka: a log that is not new may be in an offline dir; never recreate it elsewhere
                    self.offline_partitions.add(tp)
                    continue
                lg = lg or self.log_manager.create_log(topic, p, cfg)
                self._write_partition_metadata(lg.dir, info.topic_id)
                self.partitions[tp] = self._new_partition(tp, lg)

    def _new_partition(self, tp: TopicPartition, lg: Log, leader_id: int | None = None) -> Partition:
        part = Partition(tp, lg, self.broker_id, leader_id=leader_id)
        part.isr_writer = self.isr_writer
        part.isr_changes = self.isr_changes
        part.replica_lag_time_max_ms = self.config.int("replica.lag.time.max.ms")
        part.page_cache_retain_bytes = self.config.int("replica.page.cache.retain.bytes")
        part.on_storage_error = self.handle_log_dir_failure
        return part

    def handle_log_dir_failure(self, part: Partition) -> None:
        """Take the failed partition's log dir offline, and every partition stored in it (Kafka's
        ``handleLogDirFailure``): the other log dirs keep serving."""
        log_dir = self.log_manager.dir_of(part.tp.topic, part.tp.partition)
        if log_dir is None:
            return
        lost = self.log_manager.mark_offline(log_dir)
        for topic, p in lost:
            tp = TopicPartition(topic, p)
            gone = self.partitions.pop(tp, None)
            self.offline_partitions.add(tp)
            if gone is not None:
                gone.wake_waiters()
        log.error("Log dir %s is offline: %d partitions stopped (KAFKA_STORAGE_ERROR), the other log dirs keep "
                  "serving", log_dir, len(lost))

    @staticmethod
    def _write_partition_metadata(d: Path, topic_id: object) -> None:
        f = d / "partition.metadata"
        if not f.exists():
            f.write_text(f"version: 0\ntopic_id: {topic_id_base64(topic_id)}\n")  # type: ignore[arg-type]

    def on_topic_event(self, event: str, topic: str) -> None:
        if event in ("created", "partitions"):
            if not self.cluster_mode:  # in a cluster, LeaderAndIsr creates the replicas
                self._ensure_partitions(topic)
        elif event == "deleted":
            self.offline_partitions -= {tp for tp in self.offline_partitions if tp.topic == topic}
            for tp in [tp for tp in self.log_dir_moves if tp.topic == topic]:
                self.log_dir_moves.pop(tp).cancelled = True
            self.remove_partitions([tp for tp in self.partitions if tp.topic == topic], delete=True)
        elif event == "configs":
            self.apply_topic_config(topic)

    def apply_topic_config(self, topic: str) -> None:
        cfg = self.topic_log_config(topic)
        for tp, part in self.partitions.items():
            if tp.topic == topic:
                part.log.config = cfg

    def get_partition(self, topic: str, partition: int, *, require_leader: bool = True) -> Partition:
        """The local replica of ``topic``-``partition``; unless asked otherwise it must be the leader
        (NOT_LEADER_OR_FOLLOWER otherwise, so that clients refresh their metadata)."""
        # A plain tuple finds the TopicPartition key (a NamedTuple hashes and compares as one)
        # without building it: this runs for every partition of every Produce and Fetch.
        part = self.partitions.get((topic, partition))  # type: ignore[call-overload]
        if part is None:
            if TopicPartition(topic, partition) in self.offline_partitions:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 f"The log of {topic}-{partition} is in an offline log dir.")
            info = self.topics.get(topic)
            if self.cluster_mode and info is not None and 0 <= partition < info.num_partitions:
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                 f"Broker {self.broker_id} does not host {topic}-{partition}")
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"This server does not host this topic-partition {topic}-{partition}.")
        if require_leader and not part.is_leader:
            part.check_leader()
        return part

    def partition_exists(self, topic: str, partition: int) -> bool:
        """Whether ``topic``-``partition`` exists in the cluster (hosted here or not)."""
        info = self.topics.get(topic)
        return info is not None and 0 <= partition < info.num_partitions

    # --- cluster: the controller's requests ------------------------------------------------------
    def check_controller_epoch(self, controller_epoch: int) -> None:
        if controller_epoch < self.controller_epoch:
            raise KafkaError(ErrorCode.STALE_CONTROLLER_EPOCH,
                             f"Controller epoch {controller_epoch} is older than the latest seen "
                             f"({self.controller_epoch})")
        self.controller_epoch = controller_epoch

    def become_leader_or_follower(self, topic: str, index: int, leader: int, leader_epoch: int, isr: list[int],
                                  replicas: list[int], zk_version: int, controller_epoch: int) -> ErrorCode:
        """Apply one partition's state from a LeaderAndIsr request (Kafka's ``makeLeaders`` /
        ``makeFollowers``)."""
        tp = TopicPartition(topic, index)
        part = self.partitions.get(tp)
        if part is not None and leader_epoch < part.leader_epoch:
            log.info("Ignoring LeaderAndIsr for %s with leader epoch %d older than ours (%d)", tp, leader_epoch,
                     part.leader_epoch)
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if self.broker_id not in replicas:
            return ErrorCode.NONE
        if part is None:
            info = self.topics.get(topic)
            if info is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            cfg = self._log_config(info.configs)
            lg = self.log_manager.get_log(topic, index) or self.log_manager.create_log(topic, index, cfg)
            self._write_partition_metadata(lg.dir, info.topic_id)
            part = self.partitions[tp] = self._new_partition(tp, lg, leader_id=-1)
        now_ms = time.time() * 1000
        if leader == self.broker_id:
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_partition(tp)
            became = part.make_leader(leader_epoch, isr, replicas, zk_version, controller_epoch, now_ms)
            if became:
                log.info("[Partition %s broker=%d] Became leader at leader epoch %d, ISR %s, log end offset %d, "
                         "high watermark %d", tp, self.broker_id, leader_epoch, isr, part.log_end_offset,
                         part.high_watermark)
        else:
            changed = part.make_follower(leader, leader_epoch, isr, replicas, zk_version, controller_epoch)
            if changed:
                log.info("[Partition %s broker=%d] Became follower of broker %d at leader epoch %d", tp,
                         self.broker_id, leader, leader_epoch)
            if self.fetcher_manager is not None and leader >= 0 and changed:
                self.fetcher_manager.add_partition(part, leader)
            elif self.fetcher_manager is not None and leader < 0:
                self.fetcher_manager.remove_partition(tp)
        for listener in self.leadership_listeners:
            listener(tp, leader == self.broker_id, leader_epoch)
        return ErrorCode.NONE

    def remove_partitions(self, tps: Iterable[TopicPartition], *, delete: bool) -> None:
        """StopReplica: stop fetching; with ``delete`` also drop the local log."""
        for tp in list(tps):
            if self.fetcher_manager is not None:
                self.fetcher_manager.remove_partition(tp)
            part = self.partitions.get(tp)
            if part is None:
                continue
            was_leader = part.is_leader
            part.make_follower(-1, part.leader_epoch, part.isr, part.replicas, part.zk_version,
                               part.controller_epoch)
            if was_leader:
                for listener in self.leadership_listeners:
                    listener(tp, False, part.leader_epoch)
            if delete:
                self.partitions.pop(tp, None)
                self.log_manager.delete_log(tp.topic, tp.partition)

    def shrink_isrs(self) -> None:
        now_ms = time.time() * 1000
        for part in list(self.partitions.values()):
            if part.is_leader:
                part.maybe_shrink_isr(now_ms)

    async def wait_for_data(self, partitions: Iterable[Partition], timeout: float, follower: bool = False) -> None:
        """Park until any of ``partitions`` gets new data (or the timeout): for a consumer, data
        below the high watermark; for a ``follower``, an append."""
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)
        parked = ParkedFetch(asyncio.get_running_loop(), partitions, timeout, wake, follower)
        try:
            await woken
        finally:
            parked.cancel()  # the request went away meanwhile (its connection closed)

    # --- appendRecords / fetchMessages ---------------------------------------------------------------
    async def append_records(self, entries: list[tuple[str, int, bytes | memoryview | None]], *, required_acks: int, timeout_ms: int,
                             api_version: int, verify_transaction: TransactionVerifier | None = None,
                             record_validator: Callable[[str, ValidatedRecords, LogConfig], None] | None = None,
                             stats: ProduceStats | None = None, client_id: str | None = None
                             ) -> tuple[list[PartitionProduceResult], DelayedProduce | None]:
        """Kafka's ``appendRecords``: validate and append each ``(topic, partition, records)`` on
        its leader, one result per entry in order. With acks=all, the partitions whose records are
        not yet below the high watermark are watched by the returned :class:`DelayedProduce`
        (None when nothing waits): its future completes when they are replicated, failed or timed
        out, the results updated in place. Clients may not write to the internal topics."""
        results = []
        appended: list[tuple[Partition, PartitionProduceResult]] = []
        for topic, index, raw in entries:
            res = PartitionProduceResult()
            results.append(res)
            part = None
            try:
                if required_acks not in (-1, 0, 1):
                    raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={required_acks} is not -1, 0 or 1")
                part = self.get_partition(topic, index)
                if topic in INTERNAL_TOPICS:
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
                if raw is None:
                    raise KafkaError(ErrorCode.INVALID_RECORD, "records are null")
                cfg = part.log.config
                records = validate_batches(raw, max_batch_bytes=cfg.max_message_bytes)
                validate_client_batches(records, f"{topic}-{index}", cfg, api_version=api_version,
                                        now_ms=int(time.time() * 1000))
                if record_validator is not None:  # a broker-side check beyond Kafka's (schema ids)
                    record_validator(topic, records, cfg)
                wanted = cfg.others.get("compression.type", "producer")
                if wanted != "producer":
                    records = recompress_to(records, COMPRESSION_CODES.get(wanted, 0))
                if verify_transaction is not None and any(h.is_transactional for h in records.batches):
                    # KIP-890 part 1: only into a partition of the producer's open transaction
                    code = await verify_transaction(topic, index, records.batches)
                    if code:
                        raise KafkaError(code, "the partition is not part of the producer's open transaction")
                info = part.append(records, required_acks=required_acks)
                res.base_offset, res.log_append_time, res.log_start_offset = \
                    info.first_offset, info.log_append_time, info.log_start_offset
                res.last_offset = info.last_offset
                if stats is not None:
                    stats.produced(topic, info.last_offset - info.first_offset + 1, len(raw))
                appended.append((part, res))
            except DuplicateSequenceError as d:  # KIP-98: answered with the first attempt's offsets
                part = self.get_partition(topic, index)
                res.base_offset, res.log_start_offset, res.last_offset = \
                    d.first_offset, part.log_start_offset, d.last_offset
                res.log_append_time = d.timestamp if part.log.config.log_append_time else -1
                appended.append((part, res))
            except KafkaError as e:
                res.error, res.message = e.code, e.message
                if isinstance(e, RecordValidationError):  # KIP-467: which records, and why
                    res.record_errors = list(e.record_errors)
                if stats is not None:
                    stats.produce_failed(topic, int(e.code))
                if e.code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER):
                    produce_log.info("Produce to %s-%d from %r failed: %s", topic, index, client_id, e)
        if required_acks != -1:
            return results, None
        waiting = [(part, res) for part, res in appended if res.last_offset >= part.high_watermark]
        if not waiting:
            return results, None
        op = DelayedProduce(asyncio.get_running_loop(), max(timeout_ms, 0) / 1000)
        for _part, res in waiting:  # all added first: watching may complete one at once
            op.add(res)
        for part, res in waiting:
            part.watch_produce(res.last_offset + 1, op, res)
        return results, op

    async def fetch_messages(self, wanted: FetchWanted, *, replica_id: int,
                             isolation_level: int, max_bytes: int, min_bytes: int, max_wait_ms: int,
                             denied: frozenset[str] | set[str] = frozenset(), omit_unchanged: bool = False
                             ) -> tuple[list[list[FetchPartitionData]], int]:
        """Kafka's ``fetchMessages``: read each wanted partition (``(topic or None, topic id,
        [partitions with partition, fetch_offset, partition_max_bytes, current_leader_epoch])``),
        recording a follower's (``replica_id`` >= 0) progress first. With fewer than ``min_bytes``
        and no error, park as a :class:`ParkedFetch` until data arrives or ``max_wait_ms``, then
        read again. Returns the rows per topic and the bytes read.

        ``omit_unchanged`` (an incremental fetch session's read, whose ``wanted`` holds the
        session's cached partitions): a partition with nothing to say -- no records to read, the
        high watermark and log start offset it was last answered with -- gets no row, as the
        session's answer would leave it out anyway (fetch_session.FetchContext.respond); most of
        a session's partitions are such, on every fetch."""
        deadline = time.monotonic() + max(max_wait_ms, 0) / 1000
        follower = replica_id >= 0
        record_progress = follower  # a follower's fetch offset is its progress once, when the fetch arrives
        while True:
            result, total, has_error, parts_seen = self._read_local(wanted, isolation_level, max_bytes, replica_id,
                                                                    denied, record_progress, omit_unchanged)
            record_progress = False
            remaining = deadline - time.monotonic()
            if total >= min_bytes or has_error or remaining <= 0 or not parts_seen:
                return result, total
            await self.wait_for_data(parts_seen, remaining, follower=follower)
            if time.monotonic() >= deadline:
                result, total, _e, _p = self._read_local(wanted, isolation_level, max_bytes, replica_id, denied,
                                                         False, omit_unchanged)
                return result, total

    def fetch_for_follower(self, wanted: FetchWanted, *, replica_id: int, max_bytes: int, min_bytes: int,
                           max_wait_ms: int, denied: frozenset[str] | set[str] = frozenset(),
                           omit_unchanged: bool = False) -> FollowerFetch:
        """``fetch_messages`` for a follower's Fetch, without a task: its progress is recorded
        (which may move the high watermark and complete delayed produces) and its partitions read
        now; with fewer than ``min_bytes`` it parks as a :class:`ParkedFetch` that the next append
        answers at the end of its loop turn. The returned operation is done when the rows are final."""
        op = FollowerFetch(self, wanted, replica_id, max_bytes, min_bytes, denied,
                           time.monotonic() + max(max_wait_ms, 0) / 1000, omit_unchanged)
        op.settle(*self._read_local(wanted, 0, max_bytes, replica_id, denied, True, omit_unchanged))
        return op

    def _read_local(self, wanted: FetchWanted, isolation: int, max_bytes: int,
                    replica_id: int, denied: frozenset[str] | set[str], record_progress: bool,
                    omit_unchanged: bool = False) -> tuple[list[list[FetchPartitionData]], int, bool, list[Partition]]:
        """Each wanted partition's row (one list per topic; see fetch_messages for
        ``omit_unchanged``), the bytes read, whether a row is an error, and the partitions read
        (a parked fetch waits on them all, omitted ones included)."""
        total = 0
        now_ms = time.time() * 1000 if record_progress else 0.0
        has_error = False
        parts_seen = []
        result = []
        E = FetchPartitionData
        hosted = self.partitions.get  # (get_partition in line for a partition led here: every partition of every fetch)
        local = self.broker_id
        for name, _tid, fparts in wanted:
            rows: list[FetchPartitionData] = []
            for fp in fparts:
                if name is None:
                    rows.append(E(fp.partition, ErrorCode.UNKNOWN_TOPIC_ID, -1, -1, -1, None, b""))
                    has_error = True
                    continue
                if denied and name in denied:  # not has_error: the authorized partitions may long-poll
                    rows.append(E(fp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, None, b""))
                    continue
                part = hosted((name, fp.partition))  # type: ignore[call-overload]
                if part is None or part.leader_id != local:
                    try:
                        part = self.get_partition(name, fp.partition)  # raises the error to answer
                    except KafkaError as e:
                        rows.append(E(fp.partition, e.code, -1, -1, -1, None, b""))
                        has_error = True
                        continue
                epoch = getattr(fp, "current_leader_epoch", -1)
                if epoch >= 0 and epoch != part.leader_epoch:  # KIP-320 (v9+): the client's view is stale or ahead
                    rows.append(E(fp.partition, ErrorCode.FENCED_LEADER_EPOCH if epoch < part.leader_epoch
                                  else ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1, -1, None, b""))
                    has_error = True
                    continue
                parts_seen.append(part)
                if omit_unchanged and fp.log_start_offset == part.log.log_start_offset:  # type: ignore[attr-defined]
                    # (fp is the session's CachedPartition: what it was last answered with)
                    offset = fp.fetch_offset
                    if replica_id >= 0:
                        if fp.high_watermark == offset and part.idle_follower_fetch(  # type: ignore[attr-defined]
                                replica_id, offset, now_ms if record_progress else None):
                            continue
                    elif fp.high_watermark == part.high_watermark and offset == (  # type: ignore[attr-defined]
                            part.last_stable_offset if isolation == 1 else part.high_watermark):
                        continue
                if record_progress:
                    try:
                        if trace.ON:  # before: the high watermark may move in the update
                            trace.event("fetch", name, fp.partition, replica_id, fp.fetch_offset)
                        part.update_follower_fetch(replica_id, fp.fetch_offset, now_ms)
                    except KafkaError as e:
                        rows.append(E(fp.partition, e.code, part.high_watermark, part.last_stable_offset,
                                      part.log_start_offset, None, b""))
                        has_error = True
                        continue
                hw, lso = part.high_watermark, part.last_stable_offset
                try:
                    limit = min(fp.partition_max_bytes, max_bytes - total)
                    data: ReadInfo | bytes = b""
                    aborted = None
                    if limit > 0 or total == 0:
                        info = part.read(fp.fetch_offset, max(limit, 0), isolation_level=isolation,
                                         min_one_batch=(total == 0), replica=replica_id >= 0)
                        if info is not None:
                            data = info
                            if trace.ON and replica_id >= 0:
                                trace.event("read", name, fp.partition, replica_id, fp.fetch_offset,
                                            part.log.log_end_offset)
                            total += info.size
                            if isolation == 1:
                                aborted = part.aborted_transactions(fp.fetch_offset, lso)
                    rows.append(E(fp.partition, ErrorCode.NONE, hw, lso, part.log_start_offset, aborted, data))
                except KafkaError as e:
                    rows.append(E(fp.partition, e.code, hw, lso, part.log_start_offset, None, b""))
                    has_error = True
            result.append(rows)
        return result, total, has_error, parts_seen

    # --- the replica fetcher's side ------------------------------------------------------------------
    def append_records_as_follower(self, part: Partition, records: memoryview, leader_high_watermark: int,
                                   leader_log_start_offset: int) -> int:
        """What a fetch from the leader brought: append it with the leader's offsets and epochs
        (each batch's CRC checked, its records never walked, as Kafka's ``appendAsFollower``),
        take the leader's high watermark and log start offset. Returns the bytes appended."""
        if records:
            part.append_as_follower(validate_batches(records, deep=False), leader_high_watermark)
        else:
            part.update_follower_high_watermark(leader_high_watermark)
        if part.log_start_offset < leader_log_start_offset <= part.log_end_offset:
            part.log.delete_records(leader_log_start_offset)
        return len(records)

    def truncate_follower(self, part: Partition, offset: int) -> None:
        """KIP-101: drop the follower's divergent tail from ``offset`` on."""
        part.truncate_to(offset)

    def restart_follower_at(self, part: Partition, offset: int) -> None:
        """The leader's log starts past the follower's end: start over at ``offset``."""
        part.truncate_fully_and_start_at(offset)

    async def append_internal(self, topic: str, partition: int, records: ValidatedRecords,
                              timeout: float = 30.0,
                              on_appended: Callable[[int], None] | None = None) -> AppendInfo:
        """A coordinator's write to its internal topic, answered once every in-sync replica has it
        (Kafka's coordinators append with acks=all). ``on_appended(last offset)`` is called as
        soon as the records are in the local log, before waiting: the coordinator applies them
        there, once (log/coordinator_runtime.py), never again when replication completes."""
        part = self.get_partition(topic, partition)
        info = part.append(records, required_acks=-1)
        if on_appended is not None:
            on_appended(info.last_offset)
        if part.high_watermark <= info.last_offset:
            await part.wait_for_replication(info.last_offset + 1, timeout)
        return info

    def retention_pass(self, now_ms: int | None = None) -> int:
        """Delete segments past retention, and forget producers idle past
        ``producer.id.expiration.ms`` (Kafka runs both as scheduled tasks)."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        expiration_ms = self.config.int("producer.id.expiration.ms")
        deleted = expired = 0
        for part in list(self.partitions.values()):
            deleted += part.log.delete_old_segments(now_ms)  # the log applies its cleanup.policy
            expired += part.log.producer_state.remove_expired_producers(now_ms, expiration_ms)
        if expired:
            log.info("Removed %d expired producer ids (producer.id.expiration.ms=%d)", expired, expiration_ms)
        return deleted


class FollowerFetch(Completion):
    """A follower's Fetch on the leader (see :meth:`ReplicaManager.fetch_for_follower`): done
    once its rows are final; ``outcome()`` returns them with the bytes read, or raises what
    reading them raised."""

    __slots__ = ("_rm", "_wanted", "_replica_id", "_max_bytes", "_min_bytes", "_denied", "_deadline",
                 "_omit_unchanged", "_rows", "_total", "_error")

    def __init__(self, rm: ReplicaManager, wanted: FetchWanted, replica_id: int, max_bytes: int, min_bytes: int,
                 denied: frozenset[str] | set[str], deadline: float, omit_unchanged: bool) -> None:
        super().__init__()
        self._rm, self._wanted, self._replica_id = rm, wanted, replica_id
        self._max_bytes, self._min_bytes, self._denied, self._deadline = max_bytes, min_bytes, denied, deadline
        self._omit_unchanged = omit_unchanged
        self._rows: list[list[FetchPartitionData]] = []
        self._total = 0
        self._error: Exception | None = None

    def settle(self, rows: list[list[FetchPartitionData]], total: int, has_error: bool,
               parts: list[Partition]) -> None:
        remaining = self._deadline - time.monotonic()
        if total >= self._min_bytes or has_error or remaining <= 0 or not parts:
            self._rows, self._total = rows, total
            self._notify()
        else:
            ParkedFetch(asyncio.get_running_loop(), parts, remaining, self._woken)

    def _woken(self) -> None:
        try:
            self.settle(*self._rm._read_local(self._wanted, 0, self._max_bytes, self._replica_id, self._denied,
                                              False, self._omit_unchanged))
        except Exception as e:  # answered as the handler's failure (UNKNOWN_SERVER_ERROR), never lost
            self._error = e
            self._notify()

    def outcome(self) -> tuple[list[list[FetchPartitionData]], int]:
        if self._error is not None:
            raise self._error
        return self._rows, self._total
