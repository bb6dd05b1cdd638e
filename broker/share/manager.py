"""The share partitions of this broker and the share sessions that use them (KIP-932; Kafka's
``SharePartitionManager``).

Theory of operation
-------------------
One :class:`SharePartitionManager` per broker owns every :class:`SharePartition` of the
partitions it leads, keyed by (group id, topic id, partition), and the
:class:`~broker.share.session.ShareSessionCache`. Everything runs on the event loop.

* A share-partition is created on its first ShareFetch: from the state the share coordinator
  holds (:mod:`groupcoord.share.state`), or -- the first time the group reads the partition --
  at the high watermark (``share.auto.offset.reset`` = ``latest``, Kafka's default) or the log
  start offset (``earliest``), written as the partition's first snapshot.
* :meth:`acquire` hands records to a member; :meth:`acknowledge` applies its acknowledgements.
  Every change that must survive a restart is written to the share coordinator before the
  acknowledgement is answered.
* Acquisition locks time out in a background task that sleeps until the next deadline;
  records released by a timeout, a RELEASE, a closed session or a departed member wake parked
  ShareFetches, as new data on a partition does.

``share.auto.offset.reset`` and ``share.record.lock.duration.ms`` are group configs
(IncrementalAlterConfigs on a GROUP resource, :mod:`broker.group_configs`): a group's own
value wins, read at each use (a share-partition's first creation, each acquisition); else the
broker's ``group.share.record.lock.duration.ms`` and -- Samsa's extension, Kafka has no broker
property for it -- ``share.auto.offset.reset`` apply. ``share.isolation.level`` is
read_uncommitted: records up to the high watermark.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from groupcoord.share.state import SHARE_STATE_TOPIC, ShareCoordinator, SharePartitionKey
from protocol.errors import ErrorCode, KafkaError

from ..cluster.support import MetadataSupport
from ..replica.purgatory import ParkedFetch
from ..replica.replica_manager import ReplicaManager
from .partition import Acquired, SharePartition
from .persister import SharePersister
from .session import ShareSessionCache

log = logging.getLogger("samsa.share")

READ_CHUNK = 1 << 20


@dataclass(slots=True)
class ShareFetchResult:
    error: ErrorCode = ErrorCode.NONE
    acquired: list[Acquired] = field(default_factory=list)
    records: list[bytes] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


class Properties(Protocol):
    """Where :meth:`ShareConfig.from_broker` reads: the broker's ``BrokerConfig``, or a dict."""

    def get(self, key: str, /) -> object: ...


@dataclass(slots=True)
class ShareConfig:
    """Kafka's broker properties for share groups, with Kafka's defaults."""

    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_share_sessions: int = 2000
    auto_offset_reset: str = "latest"
    min_record_lock_duration_ms: int = 15000
    max_record_lock_duration_ms: int = 60000
    # Dynamic group configs: the very dict broker/group_configs.py keeps (group -> {name: value}).
    group_overrides: dict[str, dict[str, str]] = field(default_factory=dict)

    def record_lock_duration_for(self, group_id: str) -> int:
        raw = self.group_overrides.get(group_id, {}).get("share.record.lock.duration.ms")
        return self.record_lock_duration_ms if raw is None else int(raw)

    def auto_offset_reset_for(self, group_id: str) -> str:
        return self.group_overrides.get(group_id, {}).get("share.auto.offset.reset") or self.auto_offset_reset

    @classmethod
    def from_broker(cls, config: Properties) -> ShareConfig:
        """From the broker's properties, with Kafka's bounds (``group.share.min/max.*``);
        ValueError names the offending property."""
        def get(name: str, default: int) -> int:
            raw = config.get(name)
            return default if raw is None else int(str(raw))

        def between(name: str, value: int, lo_name: str, lo: int, hi_name: str, hi: int) -> int:
            if not get(lo_name, lo) <= value <= get(hi_name, hi):
                raise ValueError(f"{name} ({value}) must be between {lo_name} ({get(lo_name, lo)}) "
                                 f"and {hi_name} ({get(hi_name, hi)})")
            return value

        lock = between("group.share.record.lock.duration.ms", get("group.share.record.lock.duration.ms", 30000),
                       "group.share.min.record.lock.duration.ms", 15000,
                       "group.share.max.record.lock.duration.ms", 60000)
        limit = between("group.share.delivery.count.limit", get("group.share.delivery.count.limit", 5),
                        "group.share.min.delivery.count.limit", 2, "group.share.max.delivery.count.limit", 10)
        reset = str(config.get("share.auto.offset.reset") or "latest").strip().lower()
        if reset not in ("earliest", "latest"):
            raise ValueError(f"Invalid value {reset} for configuration share.auto.offset.reset: "
                             "String must be one of: latest, earliest")
        return cls(lock, limit, get("group.share.max.share.sessions", 2000), reset,
                   get("group.share.min.record.lock.duration.ms", 15000),
                   get("group.share.max.record.lock.duration.ms", 60000))


class SharePartitionManager:
    def __init__(self, replicas: ReplicaManager, metadata: MetadataSupport, coordinator: ShareCoordinator,
                 config: ShareConfig | None = None) -> None:
        self.replicas = replicas
        self.metadata = metadata
        self.coordinator = coordinator
        self.config = config or ShareConfig()
        self.persister = SharePersister(metadata, replicas, coordinator)
        self.partitions: dict[SharePartitionKey, SharePartition] = {}
        self.sessions = ShareSessionCache(self.config.max_share_sessions)
        self._init_locks: dict[SharePartitionKey, asyncio.Lock] = {}
        self._waiters: set[asyncio.Future[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._acquired = asyncio.Event()  # set when records are acquired: a new lock deadline

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._expire_locks_loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @staticmethod
    def now_ms() -> int:
        return int(time.time() * 1000)

    # --- share partitions -----------------------------------------------------------------------

    async def share_partition(self, group_id: str, topic_id: uuid.UUID, topic: str,
                              partition: int) -> SharePartition:
        """The share-partition, created on first use. KafkaError if this broker cannot serve it."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is not None:
            return sp
        part = self.replicas.get_partition(topic, partition)
        part.check_leader()
        async with self._init_locks.setdefault(key, asyncio.Lock()):
            sp = self.partitions.get(key)
            if sp is not None:
                return sp
            state = await self.persister.read(key, part.leader_epoch)
            if state is None:
                start = part.log_start_offset if self.config.auto_offset_reset_for(group_id) == "earliest" \
                    else part.high_watermark
                await self.persister.initialize(key, start, part.leader_epoch)
                sp = SharePartition(group_id, topic, partition, start,
                                    delivery_count_limit=self.config.delivery_count_limit)
            else:
                sp = SharePartition(group_id, topic, partition, state.start_offset, state.batches,
                                    delivery_count_limit=self.config.delivery_count_limit)
            sp.move_start_to(part.log_start_offset)
            self.partitions[key] = sp
            log.info("Share partition %s-%d of group %s starts at offset %d", topic, partition,
                     group_id, sp.start_offset)
            return sp

    def acquire(self, sp: SharePartition, member_id: str, max_records: int) -> ShareFetchResult:
        try:
            part = self.replicas.get_partition(sp.topic, sp.partition)
            part.check_leader()
        except KafkaError as e:
            return ShareFetchResult(e.code)
        sp.move_start_to(part.log_start_offset)

        def read(offset: int) -> bytes | None:
            info = part.read(offset, READ_CHUNK)
            return info.read() if info is not None else None

        acquired, records = sp.acquire(member_id, max_records, self.now_ms(),
                                       self.config.record_lock_duration_for(sp.group_id), part.high_watermark,
                                       read)
        if acquired:
            self._acquired.set()
        return ShareFetchResult(ErrorCode.NONE, acquired, records, part.leader_id, part.leader_epoch)

    def has_available(self, sp: SharePartition) -> bool:
        try:
            part = self.replicas.get_partition(sp.topic, sp.partition)
        except KafkaError:
            return True  # an error is something to answer
        return sp.has_available(part.high_watermark)

    async def acknowledge(self, key: SharePartitionKey, member_id: str,
                          batches: list[tuple[int, int, list[int]]]) -> ErrorCode:
        sp = self.partitions.get(key)
        if sp is None:
            return ErrorCode.INVALID_RECORD_STATE  # nothing was acquired here (or a restart since)
        sp.expire_locks(self.now_ms())
        err = sp.acknowledge(member_id, batches)
        try:
            await self._persist(key, sp)
        except KafkaError as e:
            return e.code
        if err == ErrorCode.NONE:
            self.wake()
        return err

    async def release(self, group_id: str, member_id: str,
                      keys: Iterable[SharePartitionKey] | None = None) -> None:
        """Give back what ``member_id`` holds (its session closed, or it left the group)."""
        hit = False
        for key, sp in list(self.partitions.items()):
            if key[0] != group_id or (keys is not None and key not in keys):
                continue
            if sp.release_member(member_id):
                hit = True
                await self._persist_quietly(key, sp)
        if hit:
            self.wake()
        if not self.sessions.of_group(group_id):
            # No member of the group fetches here any more: its share-partitions are all persisted
            # (nothing is acquired), so they are dropped and read again on the next fetch -- which
            # then sees what AlterShareGroupOffsets / DeleteShareGroupOffsets did meanwhile, even
            # through another broker's share coordinator.
            for key in [k for k in self.partitions if k[0] == group_id]:
                sp = self.partitions[key]
                if sp.next_deadline_ms() is None and not sp._changed and not sp._start_moved:
                    del self.partitions[key]

    def on_connection_closed(self, connection: object) -> None:
        """A client connection closed: the share sessions it opened end, their records go back."""
        for s in self.sessions.of_connection(connection):
            self.sessions.close(s.group_id, s.member_id)
            keys = {(s.group_id, t, p) for t, p in s.partitions}
            task = asyncio.get_running_loop().create_task(self.release(s.group_id, s.member_id, keys))
            _tasks.add(task)
            task.add_done_callback(_tasks.discard)

    def on_leadership_lost(self, topic: str, partition: int) -> None:
        """Another broker leads the partition now: its share-partitions are served there (from the
        persisted state; what was acquired here is delivered again)."""
        for key in [k for k, sp in self.partitions.items() if (sp.topic, sp.partition) == (topic, partition)]:
            del self.partitions[key]

    def on_member_removed(self, group_id: str, member_id: str) -> None:
        self.sessions.close(group_id, member_id)
        task = asyncio.get_running_loop().create_task(self.release(group_id, member_id))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)

    def on_group_deleted(self, group_id: str) -> None:
        keys = [k for k in self.partitions if k[0] == group_id]
        for k in keys:
            del self.partitions[k]
        keys += [k for k in self.coordinator.states if k[0] == group_id and k not in keys]
        task = asyncio.get_running_loop().create_task(self.coordinator.delete(keys))
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)

    # --- admin: DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets -------

    def start_offset(self, key: SharePartitionKey) -> tuple[int, int] | None:
        """(share-partition start offset, leader epoch), or None if the group never read it."""
        sp = self.partitions.get(key)
        state = self.coordinator.read_state(key)
        epoch = state.leader_epoch if state is not None else -1
        if sp is not None:
            return sp.start_offset, epoch
        return (state.start_offset, epoch) if state is not None else None

    async def read_start_offset(self, key: SharePartitionKey) -> tuple[int, int] | None:
        """:meth:`start_offset`, asking the share coordinator that owns the key when it is another
        broker (in a cluster); None if the group never read the partition or it cannot be asked."""
        found = self.start_offset(key)
        if found is not None or not self.metadata.clustered or \
                self.metadata.topics.get(SHARE_STATE_TOPIC) is None:
            return found
        try:
            state = await self.persister.read(key)
        except KafkaError:
            return None
        return (state.start_offset, state.leader_epoch) if state is not None else None

    def keys_of(self, group_id: str) -> list[SharePartitionKey]:
        keys = {k for k in self.partitions if k[0] == group_id}
        keys |= {k for k in self.coordinator.states if k[0] == group_id}
        return sorted(keys, key=lambda k: (str(k[1]), k[2]))

    async def reset_start_offset(self, key: SharePartitionKey, offset: int, leader_epoch: int) -> None:
        """Start the share-partition afresh at ``offset`` (AlterShareGroupOffsets on an empty group)."""
        self.partitions.pop(key, None)
        await self.persister.initialize(key, offset, leader_epoch)

    async def delete_state(self, keys: list[SharePartitionKey]) -> None:
        for key in keys:
            self.partitions.pop(key, None)
        await self.persister.delete(keys)

    async def _persist(self, key: SharePartitionKey, sp: SharePartition) -> None:
        moved, batches = sp.take_changes()
        if moved or batches:
            await self.persister.write(key, sp.start_offset, batches)

    async def _persist_quietly(self, key: SharePartitionKey, sp: SharePartition) -> None:
        try:
            await self._persist(key, sp)
        except Exception as e:  # the state is in memory; the next write carries it again
            log.warning("Could not write the share state of %s: %s", key, e)

    # --- waiting ------------------------------------------------------------------------------------

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait(self, sps: list[SharePartition], timeout: float) -> None:
        """Park until new data on one of the partitions, a release, or ``timeout`` seconds."""
        if timeout <= 0:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        parts = []
        for sp in sps:
            try:
                parts.append(self.replicas.get_partition(sp.topic, sp.partition))
            except KafkaError:
                continue

        def woken() -> None:  # new data on a partition, or the timeout
            if not fut.done():
                fut.set_result(None)
        parked = ParkedFetch(loop, parts, timeout, woken, follower=False)
        self._waiters.add(fut)
        try:
            await fut
        finally:
            self._waiters.discard(fut)
            parked.cancel()

    async def _expire_locks_loop(self) -> None:
        """Release records whose acquisition lock timed out, at the earliest deadline; idle (no
        record acquired anywhere) it sleeps until an acquisition wakes it."""
        while True:
            self._acquired.clear()  # before the scan: an acquisition during it is seen next round
            now = self.now_ms()
            nxt = None
            released = False
            for key, sp in list(self.partitions.items()):
                if sp.expire_locks(now):
                    released = True
                    await self._persist_quietly(key, sp)
                d = sp.next_deadline_ms()
                if d is not None and (nxt is None or d < nxt):
                    nxt = d
            if released:
                self.wake()
            timeout = None if nxt is None else max((nxt - self.now_ms()) / 1000, 0.005)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._acquired.wait(), timeout)


_tasks: set[asyncio.Task[None]] = set()
