"""The group coordinator: Kafka's classic rebalance protocol and committed offsets.


Theory of operation
-------------------
One :class:`GroupCoordinator` per broker owns every group whose ``__consumer_offsets``
partition this broker leads (on a single broker: all of them). It is the only code that mutates
group state, and it runs entirely on the event loop thread: request methods and timer callbacks
are synchronous state changes, so no locks are needed. It is composed as Kafka's group
coordinator is (Kafka's ``GroupCoordinatorShard`` holds a ``GroupMetadataManager`` and an
``OffsetMetadataManager`` as fields and delegates to them; see :mod:`groupcoord.shard`): it
constructs, as fields, :class:`~groupcoord.classic.ClassicGroupManager` (classic groups),
:class:`~groupcoord.consumer.manager.ConsumerGroupManager` (KIP-848 consumer groups) with
:class:`~groupcoord.consumer.classic_members.ClassicMembers` (classic members inside them),
:class:`~groupcoord.share.manager.ShareGroupManager` (KIP-932 share groups) and
:class:`~groupcoord.offsets.OffsetMetadataManager` (committed offsets), each handed what it
needs: config, clock, partition ownership, the write path, the group maps it owns or reads. This
module adds the lifecycle (load/unload of ``__consumer_offsets`` partitions), the ``replay()``
dispatch by record type, and DescribeGroups/ListGroups/DeleteGroups.

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from log.coordinator_runtime import CoordinatorRuntime
from protocol.errors import ErrorCode

from .classic import (
    ClassicGroupManager,
    JoinGroupMember,
    JoinGroupResult,
    LeaveMemberResult,
    SyncGroupResult,
)
from .config import GroupConfig
from .consumer.classic_members import ClassicMembers
from .consumer.group import ConsumerGroup, TopicsView
from .consumer.manager import ConsumerGroupManager
from .consumer.messages import (
    ConsumerGroupDescription,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
)
from .consumer.records import decode_consumer_key
from .group import NO_GENERATION, NO_PROTOCOL, UNKNOWN_MEMBER_ID, GroupMetadata, OffsetAndMetadata
from .offsets import OffsetMetadataManager, PartitionOffset
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    decode_key,
    group_metadata_record,
    offset_commit_record,
)
from .shard import (
    PartitionOwnership,
    RecordWriter,
    TopicPartition,
    _map_store_error,
)
from .share.group import ShareGroup
from .share.manager import ShareGroupDescription, ShareGroupHeartbeatResult, ShareGroupManager
from .share.records import decode_share_key
from .state import GroupState
from .storage import OffsetsStorage, TxnMarker, TxnRecord
from .timer import AsyncioScheduler, Scheduler

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


class GroupCoordinator:
    """Classic, consumer (KIP-848) and share (KIP-932) groups and their offsets, backed by
    ``__consumer_offsets``: the managers held as fields, and what spans them.

    ``topics`` returns the cluster's topics as ``{name: (topic id, partitions, internal)}``;
    consumer and share groups subscribe to them (by name or regex) and are assigned their
    partitions.
    """

    def __init__(self, storage: OffsetsStorage, config: GroupConfig | None = None,
                 scheduler: Scheduler | None = None, *,
                 topics: Callable[[], TopicsView] | None = None) -> None:
        self.storage = storage
        self.config = config or GroupConfig()
        self.scheduler: Scheduler = scheduler or AsyncioScheduler()
        self.topics: Callable[[], TopicsView] = topics or _no_topics
        # The group maps: each owned by one manager, read by the others (an id is one type).
        self.groups: dict[str, GroupMetadata] = {}  # classic groups (and offsets-only groups)
        self.consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848 groups
        self.share_groups: dict[str, ShareGroup] = {}  # KIP-932 groups
        self.runtime = CoordinatorRuntime()
        self.ownership = PartitionOwnership(self.config)
        self.writer = RecordWriter(storage, self.runtime, self.ownership, self._replay_one)
        cfg, clock, own, w = self.config, self.scheduler, self.ownership, self.writer
        self.consumer = ConsumerGroupManager(cfg, clock, own, w, self.consumer_groups, self.groups,
                                             self.share_groups, self.topics, self._on_downgraded)
        self.classic_members = ClassicMembers(self.consumer, cfg, clock, w)
        self.classic = ClassicGroupManager(cfg, clock, own, w, self.groups, self.consumer_groups,
                                           self.share_groups, self.consumer, self.classic_members)
        self.share = ShareGroupManager(cfg, clock, own, w, self.share_groups, self.groups,
                                       self.consumer_groups, self.topics)
        self.offsets = OffsetMetadataManager(cfg, clock, own, w, self.runtime, self.groups,
                                             self.consumer_groups, self.classic)
        # Called with (group id, member id) when a share member leaves or is expired, and with
        # the group id when an empty share group is deleted.
        self.share_member_removed = self.share.share_member_removed
        self.share_group_deleted = self.share.share_group_deleted

    @property
    def active(self) -> bool:
        return self.ownership.active

    def partition_for(self, group_id: str) -> int:
        return self.ownership.partition(group_id)

    def serves(self, partition: int) -> bool:
        """This coordinator owns ``partition`` of __consumer_offsets, or is loading it."""
        return partition in self.ownership.owned or partition in self.ownership.loading

    async def idle(self) -> None:
        """Wait until every write this coordinator started has been applied (tests use this)."""
        await self.writer.idle()

    # ==========================================================================================
    # lifecycle
    # ==========================================================================================

    async def startup(self, partitions: Iterable[int] | None = None) -> None:
        """Replay our ``__consumer_offsets`` partitions, then serve. Requests for a group whose
        partition is still loading answer COORDINATOR_LOAD_IN_PROGRESS."""
        parts = list(range(self.config.offsets_topic_num_partitions)) if partitions is None \
            else list(partitions)
        self.ownership.loading.update(parts)
        self.ownership.active = True
        for p in parts:
            await self.load_partition(p)
        self.offsets.schedule_retention()

    async def on_election(self, partition: int) -> None:
        """This broker now leads ``partition`` of ``__consumer_offsets`` (Kafka's ``onElection``):
        replay it and answer for its groups. Idempotent: a partition owned or loading is left alone."""
        if not self.active or self.serves(partition):
            return
        await self.load_partition(partition)

    async def load_partition(self, partition: int) -> None:
        self.ownership.loading.add(partition)
        n = 0
        for item in self.storage.read_all(partition):
            try:
                if isinstance(item, TxnRecord):
                    self.replay(item.key, item.value, producer_id=item.producer_id)
                elif isinstance(item, TxnMarker):
                    self.offsets.complete_transaction(partition, item.producer_id, item.commit)
                else:
                    self.replay(item[0], item[1])
            except (ValueError, IndexError) as e:  # a record we cannot parse must not stop loading
                log.warning("skipping unreadable __consumer_offsets record in partition %d: %s",
                            partition, e)
            n += 1
            if n % 1000 == 0:
                await asyncio.sleep(0)
        self.ownership.loading.discard(partition)
        self.ownership.owned.add(partition)
        self.classic.on_loaded(partition)
        self.consumer.on_loaded(partition)
        self.share.on_loaded(partition)

    def unload_partition(self, partition: int) -> None:
        """This broker no longer leads ``partition`` of __consumer_offsets: forget its groups, so
        their members are sent to the new coordinator (NOT_COORDINATOR)."""
        self.ownership.owned.discard(partition)
        self.ownership.loading.discard(partition)
        self.runtime.unload(partition)
        self.classic.unload_partition(partition)
        self.consumer.unload_partition(partition)
        self.share.unload_partition(partition)

    async def shutdown(self) -> None:
        """Stop serving: parked requests answer NOT_COORDINATOR, timers stop."""
        self.ownership.active = False
        self.offsets.cancel_retention()
        self.classic.unload_all()
        self.consumer.unload_all()
        self.share.unload_all()
        self.ownership.owned.clear()
        await self.writer.cancel_all()

    # ==========================================================================================
    # classic groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup
    # ==========================================================================================

    async def join_group(self, group_id: str, member_id: str, protocol_type: str,
                         protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int, *, group_instance_id: str | None = None,
                         client_id: str = "", client_host: str = "",
                         require_known_member_id: bool = False, reason: str | None = None,
                         supports_skip_assignment: bool = False) -> JoinGroupResult:
        return await self.classic.join_group(
            group_id, member_id, protocol_type, protocols, session_timeout_ms,
            rebalance_timeout_ms, group_instance_id=group_instance_id, client_id=client_id,
            client_host=client_host, require_known_member_id=require_known_member_id,
            reason=reason, supports_skip_assignment=supports_skip_assignment)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         assignments: Mapping[str, bytes], *, group_instance_id: str | None = None,
                         protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncGroupResult:
        return await self.classic.sync_group(
            group_id, generation_id, member_id, assignments, group_instance_id=group_instance_id,
            protocol_type=protocol_type, protocol_name=protocol_name)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> ErrorCode:
        return self.classic.heartbeat(group_id, member_id, generation_id, group_instance_id)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]],
                    reason: str | None = None) -> tuple[ErrorCode, list[LeaveMemberResult]]:
        return self.classic.leave_group(group_id, members, reason)

    # ==========================================================================================
    # consumer groups (KIP-848) and share groups (KIP-932)
    # ==========================================================================================

    async def consumer_group_heartbeat(self, req: ConsumerGroupHeartbeatRequest, *,
                                       api_version: int = 1, client_id: str = "",
                                       client_host: str = "") -> ConsumerGroupHeartbeatResult:
        return await self.consumer.consumer_group_heartbeat(
            req, api_version=api_version, client_id=client_id, client_host=client_host)

    def describe_consumer_groups(self, group_ids: list[str]) -> list[ConsumerGroupDescription]:
        return self.consumer.describe_consumer_groups(group_ids)

    async def share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                                    rack_id: str | None, subscribed_topic_names: list[str] | None,
                                    *, client_id: str = "", client_host: str = "",
                                    ) -> ShareGroupHeartbeatResult:
        return await self.share.share_group_heartbeat(
            group_id, member_id, member_epoch, rack_id, subscribed_topic_names,
            client_id=client_id, client_host=client_host)

    def share_group_describe(self, group_id: str) -> ShareGroupDescription:
        return self.share.share_group_describe(group_id)

    # ==========================================================================================
    # offsets
    # ==========================================================================================

    async def commit_offsets(self, group_id: str, member_id: str, generation_id: int,
                             offsets: Mapping[TopicPartition, OffsetAndMetadata], *,
                             group_instance_id: str | None = None,
                             retention_ms: int = -1) -> dict[TopicPartition, ErrorCode]:
        return await self.offsets.commit_offsets(group_id, member_id, generation_id, offsets,
                                                 group_instance_id=group_instance_id,
                                                 retention_ms=retention_ms)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool = False, *, member_id: str | None = None,
                      member_epoch: int = -1,
                      ) -> tuple[ErrorCode, dict[TopicPartition, PartitionOffset]]:
        return self.offsets.fetch_offsets(group_id, partitions, require_stable,
                                          member_id=member_id, member_epoch=member_epoch)

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 member_id: str, generation_id: int,
                                 group_instance_id: str | None,
                                 offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                 ) -> dict[TopicPartition, ErrorCode]:
        return await self.offsets.txn_commit_offsets(group_id, producer_id, producer_epoch,
                                                     member_id, generation_id, group_instance_id,
                                                     offsets)

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool,
                             offset: int | None = None) -> None:
        self.offsets.complete_transaction(offsets_partition, producer_id, commit, offset)

    def transaction_marker_committed(self, offsets_partition: int, offset: int) -> None:
        self.offsets.transaction_marker_committed(offsets_partition, offset)

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        return await self.offsets.delete_offsets(group_id, partitions)

    async def expire_offsets(self) -> int:
        return await self.offsets.expire_offsets()

    # ==========================================================================================
    # DescribeGroups, ListGroups, DeleteGroups: across group types
    # ==========================================================================================

    def describe_group(self, group_id: str) -> GroupDescription:
        err = self.ownership.validate(group_id, allow_empty_id=True)
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
        return (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.ownership.loading else ErrorCode.NONE), out

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            err = self.ownership.validate(group_id, allow_empty_id=True)
            if err:
                results[group_id] = err
                continue
            cgroup = self.consumer_groups.get(group_id)
            if cgroup is not None:
                results[group_id] = await self.consumer.delete_group(cgroup)
                continue
            sgroup = self.share_groups.get(group_id)
            if sgroup is not None:
                results[group_id] = await self.share.delete_group(sgroup)
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
                await self.writer.write(group_id, records)
                results[group_id] = ErrorCode.NONE
            except Exception as e:
                # Like Kafka, the group is gone from memory either way; the tombstones are lost.
                self.classic.drop_group(group_id)
                results[group_id] = _map_store_error(e, commit=False)
        return results

    def _on_downgraded(self, group_id: str) -> None:
        """A consumer group just became a classic group (KIP-848 downgrade): its members rejoin."""
        group = self.groups.get(group_id)
        if group is not None and group.members and group.can_rebalance():
            self.classic.prepare_rebalance(group, "the group was converted from a consumer group")

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
                self.consumer.replay_consumer_record(ck, value)
                return
            sk = decode_share_key(key)
            if sk is not None:
                self.share.replay_share_record(sk, value)
            return
        if isinstance(k, OffsetCommitKey):
            self.offsets.replay_offset_commit(k, value, producer_id)
            return
        assert isinstance(k, GroupMetadataKey)
        if value is None:
            self.classic.drop_group(k.group)
            return
        self.classic.replay_group_metadata(k.group, GroupMetadataValue.decode(value))

    def _replay_one(self, key: bytes, value: bytes | None, producer_id: int) -> None:
        self.replay(key, value, producer_id=producer_id)


def _no_topics() -> TopicsView:
    return {}
