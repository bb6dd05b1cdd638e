"""Partitions this broker leads, and the appends and reads on them.

Theory of operation (Kafka's ``ReplicaManager`` + ``Partition``): a :class:`Partition` owns one
:class:`log.Log` and the replication state around it: ``leader_epoch``, ``high_watermark``
(the offset below which every in-sync replica has the data — consumers never read past it)
and, through the log, ``log_end_offset`` (the next offset to be written). On a single broker
the ISR is this broker alone, so the high watermark moves to the log end offset as soon as an
append returns; the three stay separate so that replication can slot in later without
changing any caller. Fetch requests that find nothing to read park a future on the
partitions they asked for ("delayed fetch purgatory"); an advancing high watermark wakes them.

All of this runs on the event loop thread: one writer per partition, no locks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from log.config import LogConfig
from log.log import AppendInfo, Log
from log.manager import LogManager
from log.segment import ReadInfo
from protocol.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from protocol.records import ValidatedRecords

from .config import BrokerConfig
from .configs import effective_topic_config
from .metadata import TopicRegistry, topic_id_base64

log = logging.getLogger("samsa.replica")


@dataclass(frozen=True, slots=True)
class TopicPartition:
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class Partition:
    """A partition led by this broker. Invariant: log_start_offset <= high_watermark <= log_end_offset."""

    def __init__(self, tp: TopicPartition, log_: Log, broker_id: int, leader_epoch: int = 0) -> None:
        self.tp = tp
        self.log = log_
        self.leader_id = broker_id
        self.leader_epoch = leader_epoch
        self.replicas = [broker_id]
        self.isr = [broker_id]
        self.high_watermark = log_.log_end_offset
        self._waiters: set[asyncio.Future[None]] = set()

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

    def append(self, records: ValidatedRecords, *, required_acks: int = -1) -> AppendInfo:
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                             f"ISR {self.isr} is smaller than min.insync.replicas {self.min_insync_replicas}")
        info = self.log.append(records, leader_epoch=self.leader_epoch)
        self.maybe_increment_high_watermark()
        return info

    @property
    def min_insync_replicas(self) -> int:
        try:
            return int(self.log.config.others.get("min.insync.replicas", "1"))
        except (AttributeError, ValueError):
            return 1

    def maybe_increment_high_watermark(self) -> None:
        # Single broker: the ISR is {self}, so everything appended is replicated.
        new_hw = self.log.log_end_offset
        if new_hw != self.high_watermark:
            self.high_watermark = new_hw
            self.wake_waiters()

    def wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def read(self, fetch_offset: int, max_bytes: int, *, isolation_level: int = 0,
             min_one_batch: bool = True) -> ReadInfo | None:
        upper = self.last_stable_offset if isolation_level == 1 else self.high_watermark
        if fetch_offset < self.log.log_start_offset or fetch_offset > self.log.log_end_offset:
            raise OffsetOutOfRangeError(
                message=f"Fetch offset {fetch_offset} is out of range for partition {self.tp}, "
                        f"log start {self.log.log_start_offset}, log end {self.log.log_end_offset}")
        if fetch_offset >= upper:
            return None
        return self.log.read(fetch_offset, max_bytes, max_offset=upper, min_one_batch=min_one_batch)


class ReplicaManager:
    """Owns every local Partition; creates and deletes them as the topic registry changes."""

    def __init__(self, config: BrokerConfig, topics: TopicRegistry) -> None:
        self.config = config
        self.topics = topics
        self.broker_id = config.broker_id
        self.log_manager = LogManager(config.log_dirs, self._log_config({}))
        self.partitions: dict[TopicPartition, Partition] = {}

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
            self.partitions[tp] = Partition(tp, lg, self.broker_id)
        for info in self.topics:
            self._ensure_partitions(info.name)
        log.info("Loaded %d partitions in %.0f ms", len(self.partitions), (time.monotonic() - t0) * 1000)

    def shutdown(self) -> None:
        self.log_manager.shutdown()

    def _ensure_partitions(self, topic: str) -> None:
        info = self.topics.get(topic)
        if info is None:
            return
        cfg = self._log_config(info.configs)
        for p in range(info.num_partitions):
            tp = TopicPartition(topic, p)
            if tp not in self.partitions:
                lg = self.log_manager.get_log(topic, p) or self.log_manager.create_log(topic, p, cfg)
                self._write_partition_metadata(lg.dir, info.topic_id)
                self.partitions[tp] = Partition(tp, lg, self.broker_id)

    @staticmethod
    def _write_partition_metadata(d: Path, topic_id: object) -> None:
        f = d / "partition.metadata"
        if not f.exists():
            f.write_text(f"version: 0\ntopic_id: {topic_id_base64(topic_id)}\n")  # type: ignore[arg-type]

    def on_topic_event(self, event: str, topic: str) -> None:
        if event in ("created", "partitions"):
            self._ensure_partitions(topic)
        elif event == "deleted":
            for tp in [tp for tp in self.partitions if tp.topic == topic]:
                part = self.partitions.pop(tp)
                part.wake_waiters()
                self.log_manager.delete_log(tp.topic, tp.partition)
        elif event == "configs":
            self.apply_topic_config(topic)

    def apply_topic_config(self, topic: str) -> None:
        cfg = self.topic_log_config(topic)
        for tp, part in self.partitions.items():
            if tp.topic == topic:
                part.log.config = cfg

    def get_partition(self, topic: str, partition: int) -> Partition:
        part = self.partitions.get(TopicPartition(topic, partition))
        if part is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"This server does not host this topic-partition {topic}-{partition}.")
        return part

    async def wait_for_data(self, partitions: Iterable[Partition], timeout: float) -> None:
        """Park until any of ``partitions`` gets new data (or the timeout)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        parts = list(partitions)
        for p in parts:
            p.add_waiter(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for p in parts:
                p.remove_waiter(fut)

    def append_to_local_log(self, topic: str, partition: int, records: ValidatedRecords,
                            required_acks: int = -1) -> AppendInfo:
        """For coordinators writing to internal topics (__consumer_offsets, __transaction_state)."""
        return self.get_partition(topic, partition).append(records, required_acks=required_acks)

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
