"""The coordinator's shared core: what every manager of ``__consumer_offsets`` state stands on.

Kafka splits its group coordinator into a runtime that owns a shard per ``__consumer_offsets``
partition (``GroupCoordinatorShard``) and managers that own one kind of state each:
``GroupMetadataManager`` (classic and consumer groups) and ``OffsetMetadataManager`` (committed
offsets). Samsa keeps the same seams, on one event loop:

* :class:`CoordinatorShard` (here) -- config, clock, storage, the group maps, ownership of
  partitions (``_validate``), and the one write path (``_write``: append and apply at once,
  through :class:`log.coordinator_runtime.CoordinatorRuntime`; never replayed again when committed);
* :class:`groupcoord.classic.ClassicGroupManager` -- JoinGroup/SyncGroup/Heartbeat/LeaveGroup;
* :class:`groupcoord.consumer.manager.ConsumerGroupManager` -- KIP-848 consumer groups;
* :class:`groupcoord.offsets.OffsetMetadataManager` -- OffsetCommit/OffsetFetch/TxnOffsetCommit,
  OffsetDelete and retention;
* :class:`groupcoord.coordinator.GroupCoordinator` -- composes them: lifecycle (load/unload of
  partitions), ``replay()`` dispatch by record type, and the APIs that span group types
  (DescribeGroups, ListGroups, DeleteGroups).

Invariant: state changes only in ``replay()`` (for durable facts: at write time or at load) or in a manager's own methods
(for in-memory membership), always on the event loop thread, so no locks are needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from log.coordinator_runtime import CoordinatorRuntime, OnAppended
from protocol.errors import ErrorCode, KafkaError

from .config import GroupConfig
from .group import GroupMetadata, MemberMetadata
from .records import Record, partition_for
from .storage import OffsetsStorage
from .timer import AsyncioScheduler, Scheduler

if TYPE_CHECKING:
    from .consumer.group import ConsumerGroup

log = logging.getLogger("groupcoord.coordinator")

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1
NO_PROTOCOL = ""
TopicPartition = tuple[str, int]


def _resolve(fut: asyncio.Future[Any] | None, result: Any) -> None:
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



class CoordinatorShard:
    """State shared by the managers; see the module docstring."""

    def __init__(self, storage: OffsetsStorage, config: GroupConfig | None = None,
                 scheduler: Scheduler | None = None) -> None:
        self.storage = storage
        self.config = config or GroupConfig()
        self.scheduler: Scheduler = scheduler or AsyncioScheduler()
        self.groups: dict[str, GroupMetadata] = {}  # classic groups (and offsets-only groups)
        self.consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848 groups
        self._loading: set[int] = set()
        self._owned: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._retention_timer: Any = None
        self._seq = 0  # records replayed so far: their log order
        self.runtime = CoordinatorRuntime()
        self.active = False

    # ==========================================================================================
    # lifecycle
    # ==========================================================================================

    def replay(self, key: bytes, value: bytes | None, *, producer_id: int = -1) -> None:
        raise NotImplementedError  # GroupCoordinator.replay

    # Implemented by groupcoord.consumer (manager, migration); called by the classic manager.
    async def convert_empty_consumer_group(self, group_id: str) -> bool:
        raise NotImplementedError

    async def classic_join_consumer_group(self, group_id: str, member_id: str, protocol_type: str,
                                          protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                                          rebalance_timeout_ms: int, instance_id: str | None,
                                          client_id: str, client_host: str,
                                          require_known: bool) -> tuple[ErrorCode, str, int, str]:
        raise NotImplementedError

    def classic_sync_consumer_group(self, group_id: str, generation_id: int, member_id: str,
                                    instance_id: str | None, protocol_type: str | None,
                                    protocol_name: str | None) -> tuple[ErrorCode, bytes, str | None]:
        raise NotImplementedError

    def classic_heartbeat_consumer_group(self, group_id: str, member_id: str, generation_id: int,
                                         instance_id: str | None) -> ErrorCode:
        raise NotImplementedError

    def classic_leave_consumer_group(self, group_id: str, members: list[tuple[str, str | None]],
                                     ) -> list[tuple[str, str | None, ErrorCode]]:
        raise NotImplementedError

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            timeout_ms: int | None = None) -> None:
        raise NotImplementedError  # ClassicGroupManager._schedule_heartbeat

    async def idle(self) -> None:
        """Wait until every write this coordinator started has been applied (tests use this)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("group coordinator task failed", exc_info=t.exception())
        task.add_done_callback(done)

    # ==========================================================================================
    # ownership and validation
    # ==========================================================================================

    def _partition(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def partition_for(self, group_id: str) -> int:
        return self._partition(group_id)

    def _validate(self, group_id: str | None, *, allow_empty_id: bool = False) -> ErrorCode:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group_id is None or (group_id == "" and not allow_empty_id):
            return ErrorCode.INVALID_GROUP_ID
        p = self._partition(group_id)
        if p in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if p not in self._owned:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE


    async def _write(self, group_id: str, records: list[Record], *, producer_id: int = -1,
                     producer_epoch: int = -1, replay: bool = True) -> None:
        """Append ``records`` to the group's partition and apply them to the state as soon as
        they are in the leader's log, once; return when they are committed (see
        :mod:`log.coordinator_runtime`). ``replay=False``: the in-memory state already is what the
        records say (a classic group's GroupMetadata), they only make it durable."""
        partition = self._partition(group_id)
        if partition not in self._owned:
            raise KafkaError(ErrorCode.NOT_COORDINATOR,
                             f"this broker no longer coordinates __consumer_offsets-{partition}")

        def apply() -> None:
            for key, value in records:
                self.replay(key, value, producer_id=producer_id)

        def append(on_appended: OnAppended) -> Awaitable[int]:
            if producer_id >= 0:
                return self.storage.append(partition, records, producer_id=producer_id,
                                           producer_epoch=producer_epoch, on_appended=on_appended)
            return self.storage.append(partition, records, on_appended=on_appended)

        await self.runtime.write(partition, append, apply if replay else None)
