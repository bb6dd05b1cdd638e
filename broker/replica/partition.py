"""A partition hosted by this broker: its log and the replication state around it (Kafka's
``Partition``). The replica manager (``broker/replica/replica_manager.py``) owns the partitions and is
the only caller of their appends and reads; see its docstring for the theory of operation
(leaders, followers, the ISR, the high watermark and the purgatories).

A partition watches the delayed operations that wait on it (``broker/replica/purgatory.py``): a moving
high watermark finishes the DelayedProduces it satisfies and wakes the consumer fetches parked
on it; an append wakes the parked follower fetches. All on the event loop thread: no locks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from log.config import LogConfig
from log.log import AppendInfo, Log
from log.segment import ReadInfo
from protocol.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from protocol.records import ValidatedRecords

from . import trace
from .purgatory import DelayedProduce, ParkedFetch, PartitionProduceResult, ProduceStatus

log = logging.getLogger("samsa.replica")


class TopicPartition(NamedTuple):
    """A partition's name. A tuple: it keys every partition map, and a tuple hashes and compares
    in C (a frozen dataclass's ``__hash__`` and ``__init__`` run in Python on every lookup)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True)
class IsrChangeCounts:
    """ISR changes this broker made as leader (Kafka's ReplicaManager IsrShrinksPerSec/IsrExpandsPerSec)."""

    shrinks: int = 0
    expands: int = 0


def _min_insync_replicas(config: LogConfig) -> int:
    try:
        return int(config.others.get("min.insync.replicas", "1"))
    except ValueError:
        return 1


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
        self._wake_scheduled = False  # an append scheduled the parked follower fetches' wake-up
        self._waiters: set[ParkedFetch] = set()  # consumer fetches: woken by the HW
        self._follower_waiters: set[ParkedFetch] = set()  # follower fetches: by appends
        # leader side: follower id -> (log end offset, last caught-up time, LEO of ours at its last
        # fetch, time of its last fetch); delayed produces: (required offset, future)
        self.followers: dict[int, FollowerState] = {}
        self._produce_waiters: list[tuple[int, DelayedProduce, ProduceStatus]] = []
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
        fu = self.log.producer_state.first_unstable_offset()
        return self.high_watermark if fu is None else min(fu, self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping [fetch_offset, upper_bound)."""
        return self.log.collect_aborted_transactions(fetch_offset, upper_bound)

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
        if trace.ON:
            trace.event("append", self.tp.topic, self.tp.partition, self.log.log_end_offset)
        if self._follower_waiters and not self._wake_scheduled:
            # Followers long-polling for new data are answered at the end of this loop turn, so
            # that every append of the turn (a producer's pipelined requests, other producers'
            # arrivals read in the same turn) goes out in one Fetch response, not one per round.
            self._wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake_followers)
        self.maybe_increment_high_watermark()  # on a single replica: consumers too
        return info

    def watch_produce(self, required_offset: int, op: DelayedProduce, status: ProduceStatus) -> None:
        """acks=all: finish ``status`` of ``op`` once the high watermark reaches ``required_offset``
        (at once if it already has); checked whenever the high watermark moves."""
        if self.high_watermark >= required_offset:
            self._finish_produce(op, status)
        else:
            self._produce_waiters.append((required_offset, op, status))

    def _finish_produce(self, op: DelayedProduce, status: ProduceStatus) -> None:
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
        await op.wait()
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
            return self.log.config.derived(_min_insync_replicas)
        except AttributeError:
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
            if trace.ON:
                trace.event("hw", self.tp.topic, self.tp.partition, new_hw)
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

    def _wake_followers(self) -> None:
        self._wake_scheduled = False
        self._wake(self._follower_waiters)

    def wake_waiters(self) -> None:
        """Wake every parked fetch, consumers' and followers' (the partition changed role, its
        log was truncated or went offline, records were deleted)."""
        self._wake(self._waiters)
        self._wake(self._follower_waiters)

    @staticmethod
    def _wake(waiters: set[ParkedFetch]) -> None:
        """Wake and forget ``waiters``, now (a follower's is answered here; it may park again)."""
        if not waiters:
            return
        woken = list(waiters)
        waiters.clear()
        for w in woken:
            w.wake()

    def add_waiter(self, fetch: ParkedFetch, follower: bool = False) -> None:
        (self._follower_waiters if follower else self._waiters).add(fetch)

    def remove_waiter(self, fetch: ParkedFetch) -> None:
        self._waiters.discard(fetch)
        self._follower_waiters.discard(fetch)

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
        if self.high_watermark < leo:  # else it cannot move: most of a fetch session's partitions are idle
            self.maybe_increment_high_watermark()

    def idle_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: float | None) -> bool:
        """Whether a follower's fetch from ``fetch_offset`` moves nothing: the follower is in the
        ISR and already known to be there, at the log end, which is the high watermark. If so and
        ``now_ms`` is given (the fetch's arrival, not a parked fetch's read again), only its
        caught-up time moves, which is all update_follower_fetch would do. False: nothing
        recorded. The idle partitions of a follower's fetch session take this path on every
        fetch (every partition of the session is looked at, KIP-227)."""
        f = self.followers.get(replica_id)
        if f is None or f.log_end_offset != fetch_offset or self.high_watermark != fetch_offset or \
                self.log.log_end_offset != fetch_offset or replica_id not in self.isr:
            return False
        if now_ms is not None:
            f.last_caught_up_ms = f.last_fetch_ms = now_ms
            f.leader_leo_at_last_fetch = fetch_offset
        return True

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


# A leader's ISR change: write (partition, proposed ISR) to ZooKeeper off the event loop, then call
# back on the loop with the partition state's new znode version, or None if the write failed.
IsrWriter = Callable[["Partition", list[int], Callable[[int | None], None]], None]
