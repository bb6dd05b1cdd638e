"""The group coordinator: Kafka's classic rebalance protocol and committed offsets.


Theory of operation
-------------------
One :class:`GroupCoordinator` per broker owns every group whose ``__consumer_offsets``
partition this broker leads (on a single broker: all of them). It is the only code that mutates
group state, and it runs entirely on the event loop thread: request methods and timer callbacks
are synchronous state changes, so no locks are needed. It is composed as Kafka's group
coordinator is (see :mod:`groupcoord.shard`): :class:`~groupcoord.classic.ClassicGroupManager`
for classic groups, :class:`~groupcoord.offsets.OffsetMetadataManager` for committed offsets;
this module adds the lifecycle (load/unload of ``__consumer_offsets`` partitions), the
``replay()`` dispatch by record type, and DescribeGroups/ListGroups/DeleteGroups.

Durable facts are records in ``__consumer_offsets`` (see :mod:`groupcoord.records`). Every
change is applied by :meth:`GroupCoordinator.replay` -- the same method that rebuilds the state
when a partition is loaded -- once, at the moment its records enter the leader's log, and never
again when they are committed (:mod:`log.coordinator_runtime`): a record replayed after the group
moved on would overwrite newer state. Committed offsets become visible to OffsetFetch when the
high watermark passes them.

The coordinator never raises for a client error: every method returns Kafka error codes for the
handler to put in its response. It never touches sockets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from protocol.errors import ErrorCode

from .classic import (
    ClassicGroupManager,
    JoinGroupMember,
    JoinGroupResult,
    LeaveMemberResult,
    SyncGroupResult,
)
from .config import GroupConfig
from .consumer.group import ConsumerGroup
from .consumer.manager import TopicsView
from .consumer.migration import ConsumerGroupMigration
from .consumer.records import decode_consumer_key
from .group import GroupMetadata
from .offsets import OffsetMetadataManager, PartitionOffset
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_key,
    group_metadata_record,
    offset_commit_record,
)
from .shard import NO_GENERATION, NO_PROTOCOL, UNKNOWN_MEMBER_ID, TopicPartition, _map_store_error
from .share.group import ShareGroup
from .share.manager import ShareGroupManager
from .share.records import decode_share_key
from .state import GroupState
from .storage import OffsetsStorage, TxnMarker, TxnRecord
from .timer import Scheduler

__all__ = [
    "GroupConfig", "GroupCoordinator", "GroupDescription", "GroupListing", "JoinGroupMember",
    "JoinGroupResult", "LeaveMemberResult", "MemberDescription", "NO_GENERATION", "NO_PROTOCOL",
    "PartitionOffset", "SyncGroupResult", "TopicPartition", "UNKNOWN_MEMBER_ID",
]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol: str = NO_PROTOCOL
    members: list[MemberDescription] = field(default_factory=list)


@dataclass(slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


class GroupCoordinator(ClassicGroupManager, ConsumerGroupMigration, ShareGroupManager,
                       OffsetMetadataManager):
    """Classic and consumer (KIP-848) groups and their offsets, backed by ``__consumer_offsets``.

    ``topics`` returns the cluster's topics as ``{name: (topic id, partitions, internal)}``;
    consumer groups subscribe to them (by name or regex) and are assigned their partitions.
    """

    def __init__(self, storage: OffsetsStorage, config: GroupConfig | None = None,
                 scheduler: Scheduler | None = None, *,
                 topics: Callable[[], TopicsView] | None = None) -> None:
        super().__init__(storage, config, scheduler)
        self._init_consumer_groups(topics)
        self._init_share_groups()

    def _topic_view(self) -> TopicsView:
        return self.topics()

    async def startup(self, partitions: Iterable[int] | None = None) -> None:
        """Replay our ``__consumer_offsets`` partitions, then serve. Requests for a group whose
        partition is still loading answer COORDINATOR_LOAD_IN_PROGRESS."""
        parts = list(range(self.config.offsets_topic_num_partitions)) if partitions is None \
            else list(partitions)
        self._loading.update(parts)
        self.active = True
        for p in parts:
            await self.load_partition(p)
        self._schedule_retention()

    async def on_election(self, partition: int) -> None:
        """This broker now leads ``partition`` of ``__consumer_offsets`` (Kafka's ``onElection``):
        replay it and answer for its groups. Idempotent: a partition owned or loading is left alone."""
        if not self.active or partition in self._owned or partition in self._loading:
            return
        await self.load_partition(partition)

    async def load_partition(self, partition: int) -> None:
        self._loading.add(partition)
        n = 0
        for item in self.storage.read_all(partition):
            try:
                if isinstance(item, TxnRecord):
                    self.replay(item.key, item.value, producer_id=item.producer_id)
                elif isinstance(item, TxnMarker):
                    self.complete_transaction(partition, item.producer_id, item.commit)
                else:
                    self.replay(item[0], item[1])
            except (ValueError, IndexError) as e:  # a record we cannot parse must not stop loading
                log.warning("skipping unreadable __consumer_offsets record in partition %d: %s",
                            partition, e)
            n += 1
            if n % 1000 == 0:
                await asyncio.sleep(0)
        self._loading.discard(partition)
        self._owned.add(partition)
        for group in self.groups.values():
            if self._partition(group.group_id) == partition:
                for member in group.members.values():
                    self._schedule_heartbeat(group, member)
        self._schedule_consumer_timers(partition)
        self._schedule_share_timers(partition)

    def unload_partition(self, partition: int) -> None:
        """This broker no longer leads ``partition`` of __consumer_offsets: forget its groups, so
        their members are sent to the new coordinator (NOT_COORDINATOR)."""
        self._owned.discard(partition)
        self._loading.discard(partition)
        self.runtime.unload(partition)
        for gid in [g for g in self.groups if self._partition(g) == partition]:
            self._unload_group(self.groups.pop(gid))
        for gid in [g for g in self.consumer_groups if self._partition(g) == partition]:
            self._unload_consumer_group(self.consumer_groups.pop(gid))
            self._cg_locks.pop(gid, None)
        for gid in [g for g in self.share_groups if self._partition(g) == partition]:
            self._unload_share_group(self.share_groups.pop(gid))
            self._sg_locks.pop(gid, None)

    async def shutdown(self) -> None:
        """Stop serving: parked requests answer NOT_COORDINATOR, timers stop."""
        self.active = False
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        for group in self.groups.values():
            self._unload_group(group)
        for cgroup in self.consumer_groups.values():
            self._unload_consumer_group(cgroup)
        for sgroup in self.share_groups.values():
            self._unload_share_group(sgroup)
        self._owned.clear()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # ==========================================================================================
    # DescribeGroups, ListGroups, DeleteGroups: across group types
    # ==========================================================================================

    def describe_group(self, group_id: str) -> GroupDescription:
        err = self._validate(group_id, allow_empty_id=True)
        if err:
            return GroupDescription(group_id, err)
        group = self.groups.get(group_id)
        if group is None:
            # Kafka: state Dead, no error -- also for a consumer group, which DescribeGroups
            # does not describe (ConsumerGroupDescribe does).
            return GroupDescription(group_id, ErrorCode.NONE)
        stable = group.is_in(GroupState.STABLE)
        members = [MemberDescription(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata(group.protocol_name) if stable else b"",
            m.assignment if stable else b"") for m in group.members.values()]
        return GroupDescription(group_id, ErrorCode.NONE, group.state.value,
                                group.protocol_type or "",
                                (group.protocol_name or NO_PROTOCOL) if stable else NO_PROTOCOL,
                                members)

    def list_groups(self, states: Iterable[str] | None = None,
                    types: Iterable[str] | None = None) -> tuple[ErrorCode, list[GroupListing]]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        wanted = {s.lower() for s in states} if states else None
        wanted_types = {t.lower() for t in types} if types else None
        out = []
        for g in self.groups.values():
            if wanted is not None and g.state.value.lower() not in wanted:
                continue
            if wanted_types is not None and "classic" not in wanted_types:
                continue
            out.append(GroupListing(g.group_id, g.protocol_type or "", g.state.value))
        for cg in self.consumer_groups.values():
            state = cg.state.value
            if wanted is not None and state.lower() not in wanted:
                continue
            if wanted_types is not None and "consumer" not in wanted_types:
                continue
            out.append(GroupListing(cg.group_id, cg.protocol_type, state, "consumer"))
        for sg in self.share_groups.values():
            state = sg.state.value
            if wanted is not None and state.lower() not in wanted:
                continue
            if wanted_types is not None and "share" not in wanted_types:
                continue
            out.append(GroupListing(sg.group_id, sg.protocol_type, state, "share"))
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE), out

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            err = self._validate(group_id, allow_empty_id=True)
            if err:
                results[group_id] = err
                continue
            cgroup = self.consumer_groups.get(group_id)
            if cgroup is not None:
                results[group_id] = await self._delete_consumer_group(cgroup)
                continue
            sgroup = self.share_groups.get(group_id)
            if sgroup is not None:
                results[group_id] = await self._delete_share_group(sgroup)
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if not group.is_in(GroupState.EMPTY):
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
                continue
            group.transition_to(GroupState.DEAD, self.scheduler.now_ms())
            records = [offset_commit_record(group_id, t, p, None) for t, p in group.offsets]
            records.append(group_metadata_record(group_id, None))
            try:
                await self._write(group_id, records)
                results[group_id] = ErrorCode.NONE
            except Exception as e:
                # Like Kafka, the group is gone from memory either way; the tombstones are lost.
                self._drop_group(group_id)
                results[group_id] = _map_store_error(e, commit=False)
        return results

    async def _delete_share_group(self, group: ShareGroup) -> ErrorCode:
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        try:
            async with self._sg_locks.setdefault(group.group_id, asyncio.Lock()):
                await self._write(group.group_id, self.share_group_tombstones(group))
        except Exception as e:
            self.share_groups.pop(group.group_id, None)
            return _map_store_error(e, commit=False)
        for listener in self.share_group_deleted:
            listener(group.group_id)
        return ErrorCode.NONE

    def _on_downgraded(self, group_id: str) -> None:
        """A consumer group just became a classic group (KIP-848 downgrade): its members rejoin."""
        group = self.groups.get(group_id)
        if group is not None and group.members and group.can_rebalance():
            self._prepare_rebalance(group, "the group was converted from a consumer group")

    async def _delete_consumer_group(self, group: ConsumerGroup) -> ErrorCode:
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        gid = group.group_id
        records = [offset_commit_record(gid, t, p, None) for t, p in group.offsets]
        records += self.consumer_group_tombstones(group)
        try:
            async with self._cg_locks.setdefault(gid, asyncio.Lock()):
                await self._write(gid, records)
        except Exception as e:
            self._drop_consumer_group(gid)
            return _map_store_error(e, commit=False)
        return ErrorCode.NONE

    # ==========================================================================================
    # replay: the single path for live updates and loading
    # ==========================================================================================

    def replay(self, key: bytes, value: bytes | None, *, producer_id: int = -1) -> None:
        """Apply one ``__consumer_offsets`` record: the single path for live updates (called by
        the write path when the record enters the log, once) and for loading.

        A record of a transactional batch (``producer_id`` >= 0) is an offset that stays pending
        until :meth:`complete_transaction` sees the transaction's marker.
        """
        k = decode_key(key)
        if k is None:
            ck = decode_consumer_key(key)
            if ck is not None:
                self._seq += 1
                self.replay_consumer_record(ck, value)
                return
            sk = decode_share_key(key)
            if sk is not None:
                self._seq += 1
                self.replay_share_record(sk, value)
            return
        self._seq += 1
        if isinstance(k, OffsetCommitKey):
            self.replay_offset_commit(k, value, producer_id)
            return
        assert isinstance(k, GroupMetadataKey)
        if value is None:
            self._drop_group(k.group)
            return
        self.replay_group_metadata(k.group, GroupMetadataValue.decode(value))

    def _drop_group(self, group_id: str) -> None:
        """A GroupMetadata tombstone. Committed offsets are records of their own and outlive it
        (as in Kafka): any left stay in an Empty group holding only offsets."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        self._unload_group(group)
        if not group.is_in(GroupState.DEAD):
            group.transition_to(GroupState.DEAD, self.scheduler.now_ms())
        if group.offsets or group.pending_txn_offsets:
            shell = GroupMetadata(group_id, current_state_timestamp=self.scheduler.now_ms())
            shell.offsets = group.offsets
            shell.pending_txn_offsets = group.pending_txn_offsets
            self.groups[group_id] = shell

