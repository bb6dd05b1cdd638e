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

Fetch requests that find nothing to read park a future on the partitions they asked for
("delayed fetch purgatory"). A consumer's fetch reads up to the high watermark, so an advancing
high watermark wakes it; a follower's reads up to the log end, so only an append wakes it, as
Kafka's DelayedFetch completes on the log end offset for followers. (Waking followers on every
high-watermark move too would answer each parked follower fetch with nothing whenever another
follower's fetch moved the high watermark: an empty round trip per acks=all produce.) Followers
learn the high watermark from their next fetch response.

The request layer only decodes, authorizes and encodes: :meth:`ReplicaManager.append_records`
(validation, the append, acks=all as a :class:`~broker.purgatory.DelayedProduce`) and
:meth:`ReplicaManager.fetch_messages` (the reads, follower progress, the long poll as a
:class:`~broker.purgatory.DelayedFetch`) are Kafka's ``appendRecords`` / ``fetchMessages``; the
replica fetcher appends through :meth:`ReplicaManager.append_records_as_follower` and truncates
through :meth:`ReplicaManager.truncate_follower`.

All of this runs on the event loop thread: one writer per partition, no locks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from log.config import LogConfig
from log.log import AppendInfo, Log
from log.manager import LogManager
from log.segment import ReadInfo
from log.validator import RecordValidationError, validate_client_batches
from protocol.errors import DuplicateSequenceError, ErrorCode, KafkaError, OffsetOutOfRangeError
from protocol.recompress import recompress_to
from protocol.records import COMPRESSION_CODES, ValidatedRecords, validate_batches

from .config import BrokerConfig
from .configs import effective_topic_config
from .metadata import INTERNAL_TOPICS, TopicRegistry, topic_id_base64
from .purgatory import DelayedFetch, DelayedProduce

log = logging.getLogger("samsa.replica")
produce_log = logging.getLogger("samsa.produce")


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True)
class IsrChangeCounts:
    """ISR changes this broker made as leader (Kafka's ReplicaManager IsrShrinksPerSec/IsrExpandsPerSec)."""

    shrinks: int = 0
    expands: int = 0


class Partition:
    """A partition hosted here. Invariant: log_start_offset <= high_watermark <= log_end_offset;
    the high watermark never moves backwards while this broker leads the partition."""

    def __init__(self, tp: TopicPartition, log_: Log, broker_id: int, leader_epoch: int = 0, *,
                 leader_id: int | None = None) -> None:
        self.tp = tp
        self.log = log_
        self.local_broker_id = broker_id
        self.leader_id = broker_id if leader_id is None else leader_id
        self.leader_epoch = leader_epoch
        self.replicas = [broker_id]
        self.isr = [broker_id]
        self.zk_version = 0
        self.controller_epoch = 0
        self.high_watermark = log_.log_end_offset
        self._waiters: set[asyncio.Future[None]] = set()  # consumer fetches: woken by the HW
        self._follower_waiters: set[asyncio.Future[None]] = set()  # follower fetches: by appends
        # leader side: follower id -> (log end offset, last caught-up time, LEO of ours at its last
        # fetch, time of its last fetch); delayed produces: (required offset, future)
        self.followers: dict[int, FollowerState] = {}
        self._produce_waiters: list[tuple[int, DelayedProduce, Any]] = []
        self.isr_writer: IsrWriter | None = None
        self.pending_isr: list[int] | None = None  # an ISR change being written to ZooKeeper
        self.replica_lag_time_max_ms = 30000
        # replica.page.cache.retain.bytes: how much of the active segment's tail a follower keeps
        # in the page cache as it appends (LogSegment.drop_behind); -1 keeps it all, as Kafka does
        self.page_cache_retain_bytes = -1
        self.on_storage_error: Callable[[Partition], None] | None = None  # JBOD: its log dir failed
        self.isr_changes = IsrChangeCounts()  # the ReplicaManager's, once it adopts the partition

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """First offset of the oldest open transaction, else the high watermark."""
        first_unstable = getattr(self.log.producer_state, "first_unstable_offset", None)
        fu = first_unstable() if callable(first_unstable) else None
        return self.high_watermark if fu is None else min(fu, self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping [fetch_offset, upper_bound)."""
        collect = getattr(self.log, "collect_aborted_transactions", None)
        return [] if collect is None else list(collect(fetch_offset, upper_bound))

    def check_leader(self) -> None:
        if not self.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"Broker {self.local_broker_id} is not the leader of {self.tp} "
                             f"(leader: {self.leader_id})")

    def append(self, records: ValidatedRecords, *, required_acks: int = -1) -> AppendInfo:
        self.check_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"The size of the current ISR {self.isr} is insufficient to satisfy the "
                             f"min.isr requirement of {self.min_insync_replicas} for partition {self.tp}")
        try:
            info = self.log.append(records, leader_epoch=self.leader_epoch)
        except OSError as e:
            raise self._storage_error(e) from e
        self._wake(self._follower_waiters)  # followers long-polling for new data
        self.maybe_increment_high_watermark()  # on a single replica: consumers too
        return info

    def watch_produce(self, required_offset: int, op: DelayedProduce, status: Any) -> None:
        """acks=all: finish ``status`` of ``op`` once the high watermark reaches ``required_offset``
        (at once if it already has); checked whenever the high watermark moves."""
        if self.high_watermark >= required_offset:
            self._finish_produce(op, status)
        else:
            self._produce_waiters.append((required_offset, op, status))

    def _finish_produce(self, op: DelayedProduce, status: Any) -> None:
        if len(self.isr) < self.min_insync_replicas:
            op.partition_done(status, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                              f"The size of the current ISR {self.isr} is insufficient to satisfy the min.isr "
                              f"requirement of {self.min_insync_replicas} for partition {self.tp}")
        else:
            op.partition_done(status, ErrorCode.NONE)

    async def wait_for_replication(self, required_offset: int, timeout: float) -> None:
        """acks=all for one partition (a coordinator's or a marker's write): wait until the high
        watermark reaches ``required_offset``; raises the KafkaError the wait ended with."""
        op = DelayedProduce(asyncio.get_running_loop(), timeout)
        status = PartitionProduceResult()
        op.add(status)
        self.watch_produce(required_offset, op, status)
        await op.future
        if status.error == ErrorCode.REQUEST_TIMED_OUT:
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                             f"Replication of {self.tp} up to offset {required_offset} did not complete "
                             f"within the request timeout (high watermark {self.high_watermark}, ISR {self.isr})")
        if status.error != ErrorCode.NONE:
            raise KafkaError(status.error, status.message)

    def _storage_error(self, e: OSError) -> KafkaError:
        """An I/O error in this partition's log dir: Kafka takes the whole dir offline."""
        log.error("I/O error in the log of %s in %s: %s", self.tp, self.log.dir.parent, e)
        if self.on_storage_error is not None:
            self.on_storage_error(self)
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Error while accessing the log of {self.tp}: {e}")

    @property
    def min_insync_replicas(self) -> int:
        try:
            return int(self.log.config.others.get("min.insync.replicas", "1"))
        except (AttributeError, ValueError):
            return 1

    def maybe_increment_high_watermark(self) -> bool:
        """Leader: HW = the smallest log end offset over the ISR. Returns True if it moved."""
        if not self.is_leader:
            return False
        new_hw = self.log.log_end_offset
        pending = self.pending_isr
        for r in self.isr if pending is None else set(self.isr) | set(pending):  # the maximal ISR
            if r != self.local_broker_id:
                f = self.followers.get(r)
                new_hw = min(new_hw, f.log_end_offset if f else self.high_watermark)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self._wake(self._waiters)
            self._complete_produces()
            return True
        return False

    def _complete_produces(self) -> None:
        """The delayed produces watching this partition whose records are now below the high
        watermark are done here (Kafka's checkAndComplete, keyed by partition)."""
        hw = self.high_watermark
        keep = []
        for offset, op, status in self._produce_waiters:
            if op.done:
                continue
            if offset <= hw:
                self._finish_produce(op, status)
            else:
                keep.append((offset, op, status))
        self._produce_waiters = keep

    def _fail_produces(self, error: KafkaError) -> None:
        waiters, self._produce_waiters = self._produce_waiters, []
        for _offset, op, status in waiters:
            op.partition_done(status, error.code, error.message)

    def wake_waiters(self) -> None:
        """Wake every parked fetch, consumers' and followers' (the partition changed role, its
        log was truncated or went offline, records were deleted)."""
        self._wake(self._waiters)
        self._wake(self._follower_waiters)

    @staticmethod
    def _wake(waiters: set[asyncio.Future[None]]) -> None:
        """Complete and forget ``waiters`` (their callbacks run later, on the loop)."""
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
        waiters.clear()

    def add_waiter(self, fut: asyncio.Future[None], follower: bool = False) -> None:
        (self._follower_waiters if follower else self._waiters).add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)
        self._follower_waiters.discard(fut)

    def read(self, fetch_offset: int, max_bytes: int, *, isolation_level: int = 0,
             min_one_batch: bool = True, replica: bool = False) -> ReadInfo | None:
        """Consumers read up to the HW (or LSO); followers (``replica``) up to the log end."""
        if replica:
            upper = self.log.log_end_offset
        else:
            upper = self.last_stable_offset if isolation_level == 1 else self.high_watermark
        if fetch_offset < self.log.log_start_offset or fetch_offset > self.log.log_end_offset:
            raise OffsetOutOfRangeError(
                message=f"Fetch offset {fetch_offset} is out of range for partition {self.tp}, "
                        f"log start {self.log.log_start_offset}, log end {self.log.log_end_offset}")
        if fetch_offset >= upper:
            return None
        try:
            return self.log.read(fetch_offset, max_bytes, max_offset=upper, min_one_batch=min_one_batch)
        except OSError as e:
            raise self._storage_error(e) from e

    # --- leader: follower progress and the ISR ----------------------------------------------------
    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: float) -> None:
        """A follower fetched from ``fetch_offset``: everything below it is on that replica."""
        if replica_id not in self.replicas:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"Broker {replica_id} is not a replica of {self.tp} (replicas {self.replicas})")
        leo = self.log.log_end_offset
        if fetch_offset > leo:
            raise OffsetOutOfRangeError(message=f"Follower {replica_id} fetch offset {fetch_offset} is beyond the "
                                                f"log end offset {leo} of {self.tp}")
        f = self.followers.get(replica_id)
        if f is None:
            f = self.followers[replica_id] = FollowerState()
        if fetch_offset >= leo:
            f.last_caught_up_ms = now_ms
        elif fetch_offset >= f.leader_leo_at_last_fetch:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.log_end_offset = fetch_offset
        f.leader_leo_at_last_fetch = leo
        f.last_fetch_ms = now_ms
        if replica_id not in self.isr and fetch_offset >= self.high_watermark and \
                fetch_offset >= self._epoch_start_offset():
            self._change_isr(sorted([*self.isr, replica_id]), f"broker {replica_id} caught up to {fetch_offset}")
        self.maybe_increment_high_watermark()

    def _epoch_start_offset(self) -> int:
        entries = self.log.leader_epoch_cache.entries
        return entries[-1][1] if entries and entries[-1][0] == self.leader_epoch else 0

    def maybe_shrink_isr(self, now_ms: float) -> None:
        if not self.is_leader or len(self.isr) <= 1:
            return
        lagging = [r for r in self.isr if r != self.local_broker_id and
                   now_ms - self.followers.setdefault(r, FollowerState(last_caught_up_ms=now_ms)).last_caught_up_ms
                   > self.replica_lag_time_max_ms]
        if lagging:
            self._change_isr([r for r in self.isr if r not in lagging],
                             f"out of sync for more than replica.lag.time.max.ms={self.replica_lag_time_max_ms}: "
                             f"{lagging}")

    def _change_isr(self, new_isr: list[int], reason: str) -> None:
        """Propose ``new_isr`` to ZooKeeper (one change in flight at a time); it applies once the
        conditional write succeeded, unless a LeaderAndIsr changed the partition meanwhile."""
        if self.isr_writer is None or self.pending_isr is not None:
            return
        old = self.isr
        proposed = self.pending_isr = list(new_isr)
        token = (self.leader_epoch, self.zk_version)
        log.info("[Partition %s broker=%d] %s ISR from %s to %s (%s)", self.tp, self.local_broker_id,
                 "Shrinking" if len(new_isr) < len(old) else "Expanding", ",".join(map(str, old)),
                 ",".join(map(str, new_isr)), reason)

        def written(zk_version: int | None) -> None:
            if self.pending_isr is not proposed or (self.leader_epoch, self.zk_version) != token:
                return  # the controller's LeaderAndIsr came in between: its state is authoritative
            self.pending_isr = None
            if zk_version is None or not self.is_leader:
                self.maybe_increment_high_watermark()  # the maximal ISR is the ISR again
                return
            self.zk_version = zk_version
            log.info("[Partition %s broker=%d] ISR updated to %s and zkVersion updated to %d", self.tp,
                     self.local_broker_id, ",".join(map(str, proposed)), zk_version)
            if len(proposed) < len(self.isr):
                self.isr_changes.shrinks += 1
            elif len(proposed) > len(self.isr):
                self.isr_changes.expands += 1
            self.isr = proposed
            if not self.maybe_increment_high_watermark():
                self._complete_produces()

        self.isr_writer(self, proposed, written)

    # --- role changes (LeaderAndIsr) ------------------------------------------------------------
    def make_leader(self, leader_epoch: int, isr: list[int], replicas: list[int], zk_version: int,
                    controller_epoch: int, now_ms: float) -> bool:
        """Become (or stay) the leader. Returns True if this broker was not the leader before."""
        was_leader = self.is_leader
        self.leader_id = self.local_broker_id
        self.replicas, self.isr = list(replicas), list(isr)
        self.zk_version, self.controller_epoch = zk_version, controller_epoch
        self.pending_isr = None
        if leader_epoch != self.leader_epoch or not was_leader:
            self.log.leader_epoch_cache.assign(leader_epoch, self.log.log_end_offset)
            # a new leader gives every follower a fresh grace period before the ISR can shrink
            self.followers = {r: FollowerState(last_caught_up_ms=now_ms) for r in replicas
                              if r != self.local_broker_id}
        self.leader_epoch = leader_epoch
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self.maybe_increment_high_watermark()
        return not was_leader

    def make_follower(self, leader_id: int, leader_epoch: int, isr: list[int], replicas: list[int],
                      zk_version: int, controller_epoch: int) -> bool:
        """Become a follower of ``leader_id``. Returns True if the leader changed."""
        changed = self.leader_id != leader_id or self.leader_epoch != leader_epoch
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.replicas, self.isr = list(replicas), list(isr)
        self.zk_version, self.controller_epoch = zk_version, controller_epoch
        self.pending_isr = None
        self.followers = {}
        self._fail_produces(KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                       f"Leadership of {self.tp} moved to broker {leader_id}"))
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)
        self.wake_waiters()
        return changed

    def append_as_follower(self, records: ValidatedRecords, leader_high_watermark: int) -> None:
        if records.batches:
            self.log.append(records, assign_offsets=False, leader_epoch=self.leader_epoch)
            if self.page_cache_retain_bytes >= 0:
                self.log.drop_behind(self.page_cache_retain_bytes)
        self.update_follower_high_watermark(leader_high_watermark)

    def truncate_to(self, offset: int) -> None:
        """Follower: drop everything from ``offset`` on (KIP-101 truncation)."""
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Follower: the leader's log starts past ours: start over at ``offset``."""
        self.log.truncate_fully_and_start_at(offset)
        self.high_watermark = offset

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        new_hw = min(leader_high_watermark, self.log.log_end_offset)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self._wake(self._waiters)  # consumers fetching from this follower (KIP-392)


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = -1
    last_caught_up_ms: float = 0.0
    leader_leo_at_last_fetch: int = 0
    last_fetch_ms: float = 0.0


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


class FetchPartitionData(NamedTuple):
    """One partition's answer of :meth:`ReplicaManager.fetch_messages`; ``records`` is ``b""``, a
    :class:`log.segment.ReadInfo` (file regions) or None."""

    partition: int
    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None
    records: Any


# A leader's ISR change: write (partition, proposed ISR) to ZooKeeper off the event loop, then call
# back on the loop with the partition state's new znode version, or None if the write failed.
IsrWriter = Callable[["Partition", list[int], Callable[[int | None], None]], None]

# KIP-890: (topic, partition, batch headers) -> the transaction coordinator's verdict
TransactionVerifier = Callable[[str, int, list[Any]], Awaitable[ErrorCode]]


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
        self.fetcher_manager: Any = None
        self.isr_writer: IsrWriter | None = None
        self.isr_changes = IsrChangeCounts()
        self.leadership_listeners: list[Callable[[TopicPartition, bool, int], None]] = []
        # JBOD (broker/log_dirs.py): partitions whose log dir is offline, and moves in progress
        self.offline_partitions: set[TopicPartition] = set()
        self.log_dir_moves: dict[TopicPartition, Any] = {}

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
        part = self.partitions.get(TopicPartition(topic, partition))
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
        await DelayedFetch(asyncio.get_running_loop(), partitions, timeout, follower).wait()

    # --- appendRecords / fetchMessages ---------------------------------------------------------------
    async def append_records(self, entries: list[tuple[str, int, Any]], *, required_acks: int, timeout_ms: int,
                             api_version: int, verify_transaction: TransactionVerifier | None = None,
                             record_validator: Callable[[str, ValidatedRecords, LogConfig], None] | None = None,
                             stats: Any = None, client_id: str | None = None
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

    async def fetch_messages(self, wanted: list[tuple[str | None, Any, list[Any]]], *, replica_id: int,
                             isolation_level: int, max_bytes: int, min_bytes: int, max_wait_ms: int,
                             denied: frozenset[str] | set[str] = frozenset()
                             ) -> tuple[list[list[FetchPartitionData]], int]:
        """Kafka's ``fetchMessages``: read each wanted partition (``(topic or None, topic id,
        [partitions with partition, fetch_offset, partition_max_bytes, current_leader_epoch])``),
        recording a follower's (``replica_id`` >= 0) progress first. With fewer than ``min_bytes``
        and no error, park as a :class:`DelayedFetch` until data arrives or ``max_wait_ms``, then
        read again. Returns the rows per topic and the bytes read."""
        deadline = time.monotonic() + max(max_wait_ms, 0) / 1000
        follower = replica_id >= 0
        while True:
            result, total, has_error, parts_seen = self._read_local(wanted, isolation_level, max_bytes, replica_id,
                                                                    denied)
            remaining = deadline - time.monotonic()
            if total >= min_bytes or has_error or remaining <= 0 or not parts_seen:
                return result, total
            await self.wait_for_data(parts_seen, remaining, follower=follower)
            if time.monotonic() >= deadline:
                result, total, _e, _p = self._read_local(wanted, isolation_level, max_bytes, replica_id, denied)
                return result, total

    def _read_local(self, wanted: list[tuple[str | None, Any, list[Any]]], isolation: int, max_bytes: int,
                    replica_id: int, denied: frozenset[str] | set[str]
                    ) -> tuple[list[list[FetchPartitionData]], int, bool, list[Partition]]:
        total = 0
        now_ms = time.time() * 1000 if replica_id >= 0 else 0.0
        has_error = False
        parts_seen = []
        result = []
        E = FetchPartitionData
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
                try:
                    part = self.get_partition(name, fp.partition)
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
                if replica_id >= 0:
                    try:
                        part.update_follower_fetch(replica_id, fp.fetch_offset, now_ms)
                    except KafkaError as e:
                        rows.append(E(fp.partition, e.code, part.high_watermark, part.last_stable_offset,
                                      part.log_start_offset, None, None))
                        has_error = True
                        continue
                hw, lso = part.high_watermark, part.last_stable_offset
                try:
                    limit = min(fp.partition_max_bytes, max_bytes - total)
                    data: Any = b""
                    aborted = None
                    if limit > 0 or total == 0:
                        info = part.read(fp.fetch_offset, max(limit, 0), isolation_level=isolation,
                                         min_one_batch=(total == 0), replica=replica_id >= 0)
                        if info is not None:
                            data = info
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
