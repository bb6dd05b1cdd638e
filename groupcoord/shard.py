"""What every manager of ``__consumer_offsets`` state is handed: partition ownership and the write
path.

Kafka splits its group coordinator into a runtime that owns a shard per ``__consumer_offsets``
partition (``GroupCoordinatorShard``) and managers that own one kind of state each:
``GroupMetadataManager`` (classic and consumer groups) and ``OffsetMetadataManager`` (committed
offsets), held by the shard as fields and constructed with what they need (time, timer, config,
the runtime that writes their records). Samsa keeps the same seams, on one event loop:

* :class:`PartitionOwnership` (here) -- which ``__consumer_offsets`` partitions this broker serves
  (loaded, loading) and the check every request starts with (``validate``);
* :class:`RecordWriter` (here) -- the one write path (``write``: append and apply at once,
  through :class:`log.coordinator_runtime.CoordinatorRuntime`; never replayed again when
  committed), and the background tasks writes are spawned in;
* :class:`groupcoord.classic.ClassicGroupManager` -- JoinGroup/SyncGroup/Heartbeat/LeaveGroup;
* :class:`groupcoord.consumer.manager.ConsumerGroupManager` -- KIP-848 consumer groups, with
  :class:`groupcoord.consumer.classic_members.ClassicMembers` for classic members inside them;
* :class:`groupcoord.share.manager.ShareGroupManager` -- KIP-932 share groups;
* :class:`groupcoord.offsets.OffsetMetadataManager` -- OffsetCommit/OffsetFetch/TxnOffsetCommit,
  OffsetDelete and retention;
* :class:`groupcoord.coordinator.GroupCoordinator` -- holds them as fields and delegates:
  lifecycle (load/unload of partitions), ``replay()`` dispatch by record type, and the APIs that
  span group types (DescribeGroups, ListGroups, DeleteGroups).

Invariant: state changes only in ``replay()`` (for durable facts: at write time or at load) or in
a manager's own methods (for in-memory membership), always on the event loop thread, so no locks
are needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TypeVar

from log.coordinator_runtime import CoordinatorRuntime, OnAppended
from protocol.errors import ErrorCode, KafkaError

from .config import GroupConfig
from .records import Record, partition_for
from .storage import OffsetsStorage

log = logging.getLogger("groupcoord.coordinator")

TopicPartition = tuple[str, int]

T = TypeVar("T")

# Applies one record: (key, value or None for a tombstone, producer id or -1).
Replay = Callable[[bytes, "bytes | None", int], None]


def _resolve(fut: asyncio.Future[T] | None, result: T) -> None:
    if fut is not None and not fut.done():
        fut.set_result(result)


def _map_store_error(exc: BaseException, *, commit: bool) -> ErrorCode:
    """Kafka's remapping of log append errors at the coordinator boundary."""
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE if commit else ErrorCode.UNKNOWN_SERVER_ERROR
    return code


class PartitionOwnership:
    """The ``__consumer_offsets`` partitions this coordinator serves.

    Invariant: ``loading`` and ``owned`` are disjoint; a group is served only while ``active``
    and its partition is ``owned``.
    """

    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.loading: set[int] = set()
        self.owned: set[int] = set()
        self.active = False

    def partition(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def owns(self, group_id: str) -> bool:
        return self.partition(group_id) in self.owned

    def validate(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode:
        """The check every group request starts with: this broker serves the group now."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group_id is None or (group_id == "" and not allow_empty_id):
            return ErrorCode.INVALID_GROUP_ID
        p = self.partition(group_id)
        if p in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self.owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE


class RecordWriter:
    """Writes a group's records to its ``__consumer_offsets`` partition and applies them through
    ``replay`` as they enter the leader's log, once (:mod:`log.coordinator_runtime`); runs the
    background tasks that such writes are made from (timers, a leader's SyncGroup)."""

    def __init__(self, storage: OffsetsStorage, runtime: CoordinatorRuntime,
                 ownership: PartitionOwnership, replay: Replay) -> None:
        self.storage = storage
        self.runtime = runtime
        self.ownership = ownership
        self._replay = replay
        self.tasks: set[asyncio.Task[object]] = set()

    async def write(self, group_id: str, records: list[Record], *, producer_id: int = -1,
                    producer_epoch: int = -1, replay: bool = True) -> None:
        """Append ``records`` to the group's partition and apply them to the state as soon as
        they are in the leader's log, once; return when they are committed (see
        :mod:`log.coordinator_runtime`). ``replay=False``: the in-memory state already is what the
        records say (a classic group's GroupMetadata), they only make it durable."""
        partition = self.ownership.partition(group_id)
        if partition not in self.ownership.owned:
            raise KafkaError(ErrorCode.NOT_COORDINATOR,
                             f"this broker no longer coordinates __consumer_offsets-{partition}")

        def apply() -> None:
            for key, value in records:
                self._replay(key, value, producer_id)

        def append(on_appended: OnAppended) -> Awaitable[int]:
            if producer_id >= 0:
                return self.storage.append(partition, records, producer_id=producer_id,
                                           producer_epoch=producer_epoch, on_appended=on_appended)
            return self.storage.append(partition, records, on_appended=on_appended)

        await self.runtime.write(partition, append, apply if replay else None)

    def spawn(self, coro: Coroutine[object, object, object]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)

        def done(t: asyncio.Task[object]) -> None:
            self.tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("group coordinator task failed", exc_info=t.exception())
        task.add_done_callback(done)

    async def idle(self) -> None:
        """Wait until every write this coordinator started has been applied (tests use this)."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def cancel_all(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
