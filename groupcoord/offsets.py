"""Committed offsets: Kafka's ``OffsetMetadataManager``.

OffsetCommit writes an OffsetCommit record per partition (a tombstone when an offset is deleted
or expires); TxnOffsetCommit writes them in a transactional batch that stays pending until the
transaction's marker (:meth:`OffsetMetadataManager.complete_transaction`). Offsets belong to a
group of either type: a classic group validates member id and generation, a consumer group
(KIP-848) member id and member epoch. :meth:`OffsetMetadataManager.replay_offset_commit` is the
one path that applies an offset record: when it is written (once) and at load. A group's offsets
are a :class:`~log.coordinator_runtime.TimelineDict`: OffsetFetch sees an offset only once the high
watermark of ``__consumer_offsets`` has passed its record, as in Kafka.

Retention (``offsets.retention.minutes``, KIP-211) runs every
``offsets.retention.check.interval.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from log.coordinator_runtime import CoordinatorRuntime, TimelineDict, committed_view
from protocol.errors import ErrorCode

from .classic import ClassicGroupManager
from .config import GroupConfig
from .consumer.group import ConsumerGroup
from .group import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    OffsetAndMetadata,
    parse_subscription_topics,
)
from .records import (
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    group_metadata_record,
    offset_commit_record,
)
from .shard import (
    PartitionOwnership,
    RecordWriter,
    TopicPartition,
    _map_store_error,
)
from .state import GroupState
from .timer import Scheduler, TimerHandle

log = logging.getLogger("groupcoord.coordinator")


@dataclass(slots=True)
class PartitionOffset:
    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE



class OffsetMetadataManager:
    """OffsetCommit, OffsetFetch, TxnOffsetCommit, OffsetDelete, and offsets retention, for the
    groups of both types (their ``offsets`` and ``pending_txn_offsets``). As Kafka's
    ``OffsetMetadataManager`` is handed its ``GroupMetadataManager``, this one is handed the
    classic manager (a commit is a sign of life of the member) and the group maps."""

    def __init__(self, config: GroupConfig, scheduler: Scheduler, ownership: PartitionOwnership,
                 writer: RecordWriter, runtime: CoordinatorRuntime,
                 groups: dict[str, GroupMetadata], consumer_groups: dict[str, ConsumerGroup],
                 classic: ClassicGroupManager) -> None:
        self.config = config
        self.scheduler = scheduler
        self.ownership = ownership
        self.writer = writer
        self.runtime = runtime
        self.groups = groups
        self.consumer_groups = consumer_groups
        self.classic = classic
        self._retention_timer: TimerHandle | None = None
        # Offset records and transaction markers applied so far: their log order.
        self._seq = 0

    # ==========================================================================================

    async def commit_offsets(self, group_id: str, member_id: str, generation_id: int,
                             offsets: Mapping[TopicPartition, OffsetAndMetadata], *,
                             group_instance_id: str | None = None,
                             retention_ms: int = -1) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit. ``generation_id`` -1 with an empty member id commits for a group that
        does not use the coordinator's membership (simple consumers, admin tools)."""
        def all_(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(offsets, code)

        err = self.ownership.validate(group_id, allow_empty_id=True)
        if err:
            return all_(err)
        cgroup = self.consumer_groups.get(group_id)
        if cgroup is not None:
            code = _consumer_member_error(cgroup, member_id, generation_id)
            if code:
                return all_(code)
            return await self._write_commits(group_id, offsets, retention_ms)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A generation the coordinator never issued.
                return all_(ErrorCode.ILLEGAL_GENERATION)
            group = GroupMetadata(group_id, current_state_timestamp=self.scheduler.now_ms())
            self.groups[group_id] = group
        elif group.is_in(GroupState.DEAD):
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        elif group.is_static_member_fenced(group_instance_id, member_id):
            return all_(ErrorCode.FENCED_INSTANCE_ID)
        elif generation_id < 0 and group.is_in(GroupState.EMPTY):
            pass
        elif group.is_in(GroupState.COMPLETING_REBALANCE):
            # The member will get a new assignment: its offsets may be for partitions it loses.
            return all_(ErrorCode.REBALANCE_IN_PROGRESS)
        elif not group.has(member_id):
            return all_(ErrorCode.UNKNOWN_MEMBER_ID)
        elif generation_id != group.generation_id:
            return all_(ErrorCode.ILLEGAL_GENERATION)
        else:
            # PreparingRebalance is fine: members commit before they rejoin (onPartitionsRevoked).
            self.classic.schedule_heartbeat(group, group.get(member_id))
        return await self._write_commits(group_id, offsets, retention_ms)

    async def _write_commits(self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                             retention_ms: int) -> dict[TopicPartition, ErrorCode]:
        now = self.scheduler.now_ms()
        results: dict[TopicPartition, ErrorCode] = {}
        records: list[Record] = []
        for (topic, partition), om in offsets.items():
            metadata = om.metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            value = OffsetCommitValue(om.offset, metadata, now, om.leader_epoch,
                                      now + retention_ms if retention_ms >= 0 else -1)
            records.append(offset_commit_record(group_id, topic, partition, value))
            results[(topic, partition)] = ErrorCode.NONE
        if not records:
            return results
        try:
            await self.writer.write(group_id, records)
        except Exception as e:
            code = _map_store_error(e, commit=True)
            log.warning("offset commit for group %s failed: %s", group_id, e)
            return {tp: (code if c == ErrorCode.NONE else c) for tp, c in results.items()}
        return results

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None,
                      require_stable: bool = False, *, member_id: str | None = None,
                      member_epoch: int = -1,
                      ) -> tuple[ErrorCode, dict[TopicPartition, PartitionOffset]]:
        """OffsetFetch. ``partitions=None`` means every partition with a committed offset.
        ``require_stable`` (KIP-447): a partition with transactional offsets awaiting their
        marker answers UNSTABLE_OFFSET_COMMIT, and the client retries. A consumer group's member
        (OffsetFetch v9, KIP-848) names itself and its epoch: UNKNOWN_MEMBER_ID /
        STALE_MEMBER_EPOCH when they are not current."""
        err = self.ownership.validate(group_id, allow_empty_id=True)
        if err:
            return err, {}
        cgroup = self.consumer_groups.get(group_id)
        if cgroup is not None:
            if member_id is not None or member_epoch >= 0:
                code = _consumer_member_error(cgroup, member_id or "", member_epoch,
                                              allow_admin=False)
                if code:
                    return code, {}
            return ErrorCode.NONE, _read_offsets(committed_view(cgroup.offsets),
                                                 cgroup.pending_txn_offsets, partitions,
                                                 require_stable)
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.NONE, {tp: PartitionOffset() for tp in partitions or []}
        return ErrorCode.NONE, _read_offsets(committed_view(group.offsets),
                                             group.pending_txn_offsets, partitions, require_stable)

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 member_id: str, generation_id: int,
                                 group_instance_id: str | None,
                                 offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                 ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: write the offsets now as one transactional batch; they become the
        group's committed offsets when the COMMIT marker arrives (:meth:`complete_transaction`)
        and vanish on ABORT. v3+ (KIP-447) sends member id and generation to fence zombies;
        an empty member id / generation -1 skips those checks, as in Kafka."""
        def all_(code: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return dict.fromkeys(offsets, code)

        err = self.ownership.validate(group_id)
        if err:
            return all_(err)
        cgroup = self.consumer_groups.get(group_id)
        if cgroup is not None:
            cmember = cgroup.members.get(member_id)
            if member_id != UNKNOWN_MEMBER_ID and cmember is None:
                return all_(ErrorCode.UNKNOWN_MEMBER_ID)
            if cmember is not None and generation_id >= 0 and generation_id != cmember.member_epoch:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            return await self._write_txn_commits(group_id, producer_id, producer_epoch, offsets)
        group = self.groups.get(group_id)
        if group is None:
            group = GroupMetadata(group_id, current_state_timestamp=self.scheduler.now_ms())
            self.groups[group_id] = group
        if group.is_in(GroupState.DEAD):
            return all_(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return all_(ErrorCode.FENCED_INSTANCE_ID)
        if member_id != UNKNOWN_MEMBER_ID and not group.has(member_id):
            return all_(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id >= 0 and generation_id != group.generation_id:
            return all_(ErrorCode.ILLEGAL_GENERATION)
        return await self._write_txn_commits(group_id, producer_id, producer_epoch, offsets)

    async def _write_txn_commits(self, group_id: str, producer_id: int, producer_epoch: int,
                                 offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                 ) -> dict[TopicPartition, ErrorCode]:
        now = self.scheduler.now_ms()
        results: dict[TopicPartition, ErrorCode] = {}
        records: list[Record] = []
        for (topic, partition), om in offsets.items():
            metadata = om.metadata or ""
            if len(metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                continue
            records.append(offset_commit_record(group_id, topic, partition, OffsetCommitValue(
                om.offset, metadata, now, om.leader_epoch)))
            results[(topic, partition)] = ErrorCode.NONE
        if records:
            try:
                await self.writer.write(group_id, records, producer_id=producer_id,
                                  producer_epoch=producer_epoch)
            except Exception as e:
                code = _map_store_error(e, commit=True)
                return {tp: (code if c == ErrorCode.NONE else c) for tp, c in results.items()}
        return results

    def complete_transaction(self, offsets_partition: int, producer_id: int, commit: bool,
                             offset: int | None = None) -> None:
        """The marker of ``producer_id``'s transaction reached ``offsets_partition`` (live: at
        log ``offset``, just appended, see :meth:`transaction_marker_committed`; or while
        loading): publish its pending offsets on COMMIT, drop them on ABORT."""
        if offset is not None:
            self.runtime.apply_at(offsets_partition, offset, lambda: self.complete_transaction(
                offsets_partition, producer_id, commit))
            return
        self._seq += 1
        holders: list[GroupMetadata | ConsumerGroup] = [*self.groups.values(),
                                                        *self.consumer_groups.values()]
        for group in holders:
            if self.ownership.partition(group.group_id) != offsets_partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id, None)
            if not pending or not commit:
                continue
            offsets = self._offsets_of(group)
            for tp, om in pending.items():
                current = offsets.get(tp)
                if current is None or current.seq < om.seq:
                    offsets[tp] = om

    def transaction_marker_committed(self, offsets_partition: int, offset: int) -> None:
        """The high watermark passed the marker at ``offset``: its offsets are visible."""
        self.runtime.committed(offsets_partition, offset)

    def _offsets_of(self, group: GroupMetadata | ConsumerGroup,
                    ) -> TimelineDict[TopicPartition, OffsetAndMetadata]:
        """The group's offsets as a timeline over its partition's committed offset."""
        reg = self.runtime.registry(self.ownership.partition(group.group_id))
        offsets = group.offsets
        if not isinstance(offsets, TimelineDict) or offsets.registry is not reg:
            offsets = TimelineDict(reg, dict(offsets))
            group.offsets = offsets
        return offsets

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition],
                             ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """OffsetDelete (KIP-496): only offsets of topics the group does not consume."""
        err = self.ownership.validate(group_id)
        if err:
            return err, {}
        results: dict[TopicPartition, ErrorCode] = {}
        holder: GroupMetadata | ConsumerGroup
        subscribed: set[str]
        cgroup = self.consumer_groups.get(group_id)
        group = self.groups.get(group_id)
        if cgroup is not None:
            holder = cgroup
            subscribed = set(cgroup.subscription_metadata) if cgroup.members else set()
        elif group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        elif group.is_in(GroupState.EMPTY):
            holder = group
            subscribed = set()
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            holder = group
            subscribed = self._subscribed_topics_all_protocols(group)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        records = []
        for tp in partitions:
            if tp[0] in subscribed:
                results[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[tp] = ErrorCode.NONE
            if tp in holder.offsets:
                records.append(offset_commit_record(group_id, tp[0], tp[1], None))
        if records:
            try:
                await self.writer.write(group_id, records)
            except Exception as e:
                return _map_store_error(e, commit=False), {}
        return ErrorCode.NONE, results

    def _subscribed_topics_all_protocols(self, group: GroupMetadata) -> set[str]:
        topics: set[str] = set()
        for m in group.members.values():
            meta = m.metadata(group.protocol_name) if group.protocol_name else \
                (m.protocols[0][1] if m.protocols else b"")
            try:
                topics.update(parse_subscription_topics(meta))
            except Exception:
                pass
        return topics

    # ==========================================================================================
    # retention
    # ==========================================================================================

    def schedule_retention(self) -> None:
        def fire() -> None:
            if self.ownership.active:
                self.writer.spawn(self.expire_offsets())
                self.schedule_retention()
        self._retention_timer = self.scheduler.call_later(
            self.config.offsets_retention_check_interval_ms, fire)

    def cancel_retention(self) -> None:
        if self._retention_timer is not None:
            self._retention_timer.cancel()

    async def expire_offsets(self) -> int:
        """``offsets.retention.minutes`` (KIP-211): an Empty group's offsets expire that long after
        it became Empty; a live consumer group's offsets expire only for topics it no longer
        subscribes to. An explicit expire timestamp (OffsetCommit v2-v4) wins. An Empty group
        left with no offsets is deleted. Returns the number of offsets removed."""
        now = self.scheduler.now_ms()
        retention = self.config.offsets_retention_minutes * 60_000
        removed = 0
        for group in list(self.groups.values()):
            if self.ownership.partition(group.group_id) not in self.ownership.owned or group.is_in(GroupState.DEAD):
                continue
            if group.is_in(GroupState.EMPTY):
                subscribed: set[str] = set()
            elif group.is_in(GroupState.STABLE) and group.subscribed_topics() is not None:
                subscribed = group.subscribed_topics() or set()
            else:
                continue
            expired = []
            for tp, om in group.offsets.items():
                if tp[0] in subscribed:
                    continue
                if om.expire_timestamp >= 0:
                    if now >= om.expire_timestamp:
                        expired.append(tp)
                    continue
                base = group.current_state_timestamp \
                    if group.is_in(GroupState.EMPTY) and group.current_state_timestamp >= 0 \
                    else om.commit_timestamp
                if now - base >= retention:
                    expired.append(tp)
            records = [offset_commit_record(group.group_id, t, p, None) for t, p in expired]
            drop_group = group.is_in(GroupState.EMPTY) and len(expired) == len(group.offsets) \
                and not group.pending_members
            if drop_group:
                group.transition_to(GroupState.DEAD, now)
                records.append(group_metadata_record(group.group_id, None))
            if not records:
                continue
            try:
                await self.writer.write(group.group_id, records)
                removed += len(expired)
            except Exception as e:
                log.warning("expiring offsets of group %s failed: %s", group.group_id, e)
        for cgroup in list(self.consumer_groups.values()):
            # A consumer group's offsets expire once it is Empty, or for topics it no longer
            # subscribes to; the group itself stays until deleted.
            if self.ownership.partition(cgroup.group_id) not in self.ownership.owned:
                continue
            subscribed = set(cgroup.subscription_metadata) if cgroup.members else set()
            expired = [tp for tp, om in cgroup.offsets.items() if tp[0] not in subscribed and (
                (om.expire_timestamp >= 0 and now >= om.expire_timestamp) or
                (om.expire_timestamp < 0 and now - om.commit_timestamp >= retention))]
            if not expired:
                continue
            try:
                await self.writer.write(cgroup.group_id, [
                    offset_commit_record(cgroup.group_id, t, p, None) for t, p in expired])
                removed += len(expired)
            except Exception as e:
                log.warning("expiring offsets of group %s failed: %s", cgroup.group_id, e)
        return removed

    # ==========================================================================================

    def replay_offset_commit(self, k: OffsetCommitKey, value: bytes | None, producer_id: int) -> None:
        self._seq += 1
        group: GroupMetadata | ConsumerGroup | None = self.consumer_groups.get(k.group) or \
            self.groups.get(k.group)
        tp = (k.topic, k.partition)
        if value is None:
            if group is not None:
                self._offsets_of(group).pop(tp, None)
            return
        v = OffsetCommitValue.decode(value)
        if group is None:
            group = GroupMetadata(k.group, current_state_timestamp=v.commit_timestamp)
            self.groups[k.group] = group
        om = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                               v.expire_timestamp, self._seq)
        if producer_id >= 0:
            group.pending_txn_offsets.setdefault(producer_id, {})[tp] = om
        else:
            self._offsets_of(group)[tp] = om


def _read_offsets(offsets: Mapping[TopicPartition, OffsetAndMetadata],
                  pending_txn: Mapping[int, Mapping[TopicPartition, OffsetAndMetadata]],
                  partitions: list[TopicPartition] | None, require_stable: bool,
                  ) -> dict[TopicPartition, PartitionOffset]:
    if partitions is None:
        partitions = sorted(offsets)
    unstable: set[TopicPartition] = set()
    if require_stable:
        for pending in pending_txn.values():
            unstable.update(pending)
    out = {}
    for tp in partitions:
        om = offsets.get(tp)
        if tp in unstable:
            out[tp] = PartitionOffset(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
        else:
            out[tp] = PartitionOffset() if om is None else \
                PartitionOffset(om.offset, om.leader_epoch, om.metadata)
    return out


def _consumer_member_error(group: ConsumerGroup, member_id: str, member_epoch: int, *,
                           allow_admin: bool = True) -> ErrorCode:
    """Kafka's ``ConsumerGroup.validateOffsetCommit/Fetch``: epoch -1 from a client outside the
    group (admin tools, manual assignment) is accepted only while the group is Empty."""
    if allow_admin and member_epoch < 0 and not group.members:
        return ErrorCode.NONE
    member = group.members.get(member_id)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch != member.member_epoch:
        # A classic member (KIP-848 migration) understands generations, not member epochs.
        return ErrorCode.ILLEGAL_GENERATION if member.classic is not None \
            else ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE
