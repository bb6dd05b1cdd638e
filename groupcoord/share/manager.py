"""Share groups (KIP-932) in the coordinator: ShareGroupHeartbeat, ShareGroupDescribe, session
timeouts, and the replay of the share-group records.

Theory of operation
-------------------
A share group hands out records, not partitions: the assignor (Kafka's ``simple``) gives every
member every partition of the topics it subscribes to, and the share partitions on the
partition leaders (:mod:`broker.share`) make sure each record is with one member at a time. So
a heartbeat is Kafka's consumer-group heartbeat without reconciliation:

1. Create or update the member. A new member, or a changed subscription or rack, writes a
   ShareGroupMemberMetadata record; that, or a change in the subscribed topics' metadata (a
   topic created, partitions added), bumps the group epoch (ShareGroupMetadata record).
2. If the group epoch is past the assignment epoch, every member's target is recomputed
   (ShareGroupTargetAssignmentMember records for those that changed, then
   ShareGroupTargetAssignmentMetadata with the new epoch).
3. The member takes its target at once (share members never revoke): its epoch becomes the
   assignment epoch (ShareGroupCurrentMemberAssignment record); the response carries its
   assignment when the epoch changed (or it joined).

Records are written to the group's ``__consumer_offsets`` partition and applied as they enter
the leader's log (once, :mod:`log.coordinator_runtime`) by
:meth:`ShareGroupManager.replay_share_record`, the same path that loads them. Heartbeats of one
group are serialised by a lock. A member that does not heartbeat within
``group.share.session.timeout.ms`` is removed like one that leaves (epoch -1); listeners
(``share_member_removed``) are told, so the share partitions release its records at once.

Errors (Kafka's): INVALID_REQUEST for malformed fields, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND when the id is a classic or consumer group,
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from protocol import kip932
from protocol.errors import ErrorCode, KafkaError

from ..config import GroupConfig
from ..consumer.group import ConsumerGroup
from ..group import GroupMetadata
from ..records import Record
from ..shard import PartitionOwnership, RecordWriter, _map_store_error
from ..timer import Scheduler
from .group import Assignment, ShareGroup, ShareGroupMember
from .records import (
    SHARE_CURRENT_MEMBER_ASSIGNMENT,
    SHARE_GROUP_METADATA,
    SHARE_MEMBER_METADATA,
    SHARE_TARGET_ASSIGNMENT_MEMBER,
    SHARE_TARGET_ASSIGNMENT_METADATA,
    ShareRecordKey,
    assignment_of,
    current_assignment_record,
    decode_share_value,
    group_epoch_record,
    member_record,
    target_epoch_record,
    target_member_record,
)

log = logging.getLogger("groupcoord.share")

LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroupError(KafkaError):
    """A share-group request refused with a Kafka error code and message."""


@dataclass(slots=True)
class ShareGroupHeartbeatResult:
    error: ErrorCode
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(slots=True)
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    assignment: list[tuple[uuid.UUID, str, list[int]]]


@dataclass(slots=True)
class ShareGroupDescription:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = "simple"
    members: list[ShareMemberDescription] = field(default_factory=list)


class ShareGroupManager:
    """ShareGroupHeartbeat and ShareGroupDescribe over :class:`ShareGroup` state
    (``share_groups``, which it owns); ``groups`` and ``consumer_groups`` are read to refuse an
    id another group type holds."""

    def __init__(self, config: GroupConfig, scheduler: Scheduler, ownership: PartitionOwnership,
                 writer: RecordWriter, share_groups: dict[str, ShareGroup],
                 groups: dict[str, GroupMetadata], consumer_groups: dict[str, ConsumerGroup],
                 topics: Callable[[], Mapping[str, tuple[uuid.UUID, int, bool]]]) -> None:
        self.config = config
        self.scheduler = scheduler
        self.ownership = ownership
        self.writer = writer
        self.share_groups = share_groups
        self.groups = groups
        self.consumer_groups = consumer_groups
        self._topic_view = topics
        self._sg_locks: dict[str, asyncio.Lock] = {}
        # Called with (group id, member id) when a member leaves or is expired.
        self.share_member_removed: list[Callable[[str, str], None]] = []
        # Called with the group id when an empty share group is deleted (its state goes too).
        self.share_group_deleted: list[Callable[[str], None]] = []

    # ==========================================================================================
    # ShareGroupHeartbeat
    # ==========================================================================================

    async def share_group_heartbeat(self, group_id: str, member_id: str, member_epoch: int,
                                    rack_id: str | None, subscribed_topic_names: list[str] | None,
                                    *, client_id: str = "", client_host: str = "",
                                    ) -> ShareGroupHeartbeatResult:
        try:
            self._validate_share_heartbeat(group_id, member_id, member_epoch, rack_id,
                                           subscribed_topic_names)
            err = self.ownership.validate(group_id)
            if err:
                return ShareGroupHeartbeatResult(err)
            if group_id in self.consumer_groups or group_id in self.groups:
                raise ShareGroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                                      f"Group {group_id} is not a share group.")
            if member_epoch != 0 and group_id not in self.share_groups:
                raise ShareGroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                      f"Share group {group_id} not found.")
            async with self._sg_locks.setdefault(group_id, asyncio.Lock()):
                if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                    return await self._share_leave(group_id, member_id)
                return await self._share_heartbeat(group_id, member_id, member_epoch, rack_id,
                                                   subscribed_topic_names, client_id, client_host)
        except ShareGroupError as e:
            return ShareGroupHeartbeatResult(e.code, e.message)
        except Exception as e:
            if not isinstance(e, KafkaError):
                log.exception("share group heartbeat of %s failed", group_id)
            return ShareGroupHeartbeatResult(_map_store_error(e, commit=False), str(e))

    @staticmethod
    def _validate_share_heartbeat(group_id: str, member_id: str, epoch: int, rack_id: str | None,
                                  subscribed: list[str] | None) -> None:
        """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``."""
        def invalid(msg: str) -> ShareGroupError:
            return ShareGroupError(ErrorCode.INVALID_REQUEST, msg)

        if not group_id:
            raise invalid("GroupId can't be empty.")
        if not member_id:
            raise invalid("MemberId can't be empty.")
        if rack_id == "":
            raise invalid("RackId can't be empty.")
        if epoch == 0:
            if subscribed is None:
                raise invalid("SubscribedTopicNames must be set in first request.")
            if not subscribed:
                raise invalid("SubscribedTopicNames can't be empty.")
        elif epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")

    async def _share_leave(self, group_id: str, member_id: str) -> ShareGroupHeartbeatResult:
        group = self.share_groups.get(group_id)
        if group is None or member_id not in group.members:
            raise ShareGroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                  f"Member {member_id} is not a member of group {group_id}.")
        await self._remove_share_member(group, member_id, "the member left the group")
        return ShareGroupHeartbeatResult(ErrorCode.NONE, None, member_id, LEAVE_GROUP_MEMBER_EPOCH)

    async def _share_heartbeat(self, group_id: str, member_id: str, epoch: int,
                               rack_id: str | None, subscribed: list[str] | None,
                               client_id: str, client_host: str) -> ShareGroupHeartbeatResult:
        group = self.share_groups.get(group_id) or ShareGroup(group_id)
        old = group.members.get(member_id)
        if old is None and epoch != 0:
            raise ShareGroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                  f"Member {member_id} is not a member of group {group_id}.")
        if old is None and len(group.members) >= self.config.group_share_max_size:
            raise ShareGroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                  f"The share group has reached its maximum capacity of "
                                  f"{self.config.group_share_max_size} members.")
        if old is not None and epoch > 0:
            # A smaller epoch is accepted only as the previous one (the response that moved the
            # member on may have been lost).
            if epoch > old.member_epoch or (epoch < old.member_epoch and
                                             epoch != old.previous_member_epoch):
                raise ShareGroupError(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The share group member has a member epoch ({epoch}) that is not the one "
                    f"known by the group coordinator ({old.member_epoch}). The member must "
                    "abandon all its partitions and rejoin.")
        member = old or ShareGroupMember(member_id)
        new_subscription = member.subscribed_topic_names if subscribed is None else sorted(set(subscribed))
        new_rack = member.rack_id if rack_id is None else rack_id
        changed = old is None or new_subscription != member.subscribed_topic_names or \
            new_rack != member.rack_id or (epoch == 0 and (client_id, client_host) !=
                                           (member.client_id, member.client_host))
        records: list[Record] = []
        bump = False
        if changed:
            if old is None:
                log.info("[GroupId %s] member %s joins the share group", group_id, member_id)
            updated = ShareGroupMember(member_id, member.member_epoch, member.previous_member_epoch,
                                       new_rack, client_id if epoch == 0 else member.client_id,
                                       client_host if epoch == 0 else member.client_host,
                                       new_subscription)
            records.append(member_record(group_id, updated))
            bump = old is None or new_subscription != member.subscribed_topic_names
        subscribed_topics = group.subscribed_topics() | set(new_subscription)
        metadata = self._share_subscription_metadata(subscribed_topics)
        if metadata != group.subscription_metadata:
            bump = True
        if bump:
            records.append(group_epoch_record(group_id, group.group_epoch + 1))
        if records:
            await self.writer.write(group_id, records)
        group = self.share_groups[group_id]
        group.subscription_metadata = metadata
        if group.assignment_epoch < group.group_epoch:
            targets = self._share_targets(group, metadata)
            changed_targets = [target_member_record(group_id, mid, t) for mid, t in targets.items()
                               if group.target_assignment.get(mid) != t]
            await self.writer.write(group_id, changed_targets + [target_epoch_record(group_id, group.group_epoch)])
        member = group.members[member_id]
        target = group.target_assignment.get(member_id, {})
        full = epoch == 0 or member.member_epoch != group.assignment_epoch
        if member.member_epoch != group.assignment_epoch or member.assignment != target:
            previous = member.member_epoch if member.member_epoch != group.assignment_epoch \
                else member.previous_member_epoch
            await self.writer.write(group_id, [current_assignment_record(
                group_id, member_id, group.assignment_epoch, previous, target)])
        member = group.members[member_id]
        self._schedule_share_session(group, member)
        return ShareGroupHeartbeatResult(
            ErrorCode.NONE, None, member_id, member.member_epoch,
            self.config.share_heartbeat_interval_ms(group_id),
            {t: set(ps) for t, ps in member.assignment.items()} if full else None)

    def _share_subscription_metadata(self, topics: set[str]) -> tuple[tuple[str, uuid.UUID, int], ...]:
        view = self._topic_view()
        out = []
        for name in sorted(topics):
            info = view.get(name)
            if info is not None and not info[2]:
                out.append((name, info[0], info[1]))
        return tuple(out)

    @staticmethod
    def _share_targets(group: ShareGroup, metadata: tuple[tuple[str, uuid.UUID, int], ...],
                       ) -> dict[str, Assignment]:
        """Kafka's ``SimpleAssignor`` for share groups in its simplest form: every member gets
        every partition of the topics it subscribes to."""
        by_name = {name: (tid, n) for name, tid, n in metadata}
        return {m.member_id: {by_name[t][0]: set(range(by_name[t][1]))
                              for t in m.subscribed_topic_names if t in by_name}
                for m in group.members.values()}

    def _schedule_share_session(self, group: ShareGroup, member: ShareGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        gid, mid = group.group_id, member.member_id

        def expire() -> None:
            g = self.share_groups.get(gid)
            if g is None or mid not in g.members or g.members[mid] is not member:
                return
            member.session_timer = None
            log.info("[GroupId %s] share member %s expired (no heartbeat within %d ms)", gid, mid,
                     self.config.share_session_timeout_ms(gid))
            self.writer.spawn(self._expire_share_member(gid, mid))

        member.session_timer = self.scheduler.call_later(
            self.config.share_session_timeout_ms(gid), expire)

    async def _expire_share_member(self, group_id: str, member_id: str) -> None:
        async with self._sg_locks.setdefault(group_id, asyncio.Lock()):
            group = self.share_groups.get(group_id)
            if group is not None and member_id in group.members:
                await self._remove_share_member(group, member_id, "its session expired")

    async def _remove_share_member(self, group: ShareGroup, member_id: str, why: str) -> None:
        gid = group.group_id
        log.info("[GroupId %s] member %s leaves the share group: %s", gid, member_id, why)
        await self.writer.write(gid, [current_assignment_record(gid, member_id),
                                target_member_record(gid, member_id, None),
                                member_record(gid, member_id),
                                group_epoch_record(gid, group.group_epoch + 1)])
        for listener in self.share_member_removed:
            try:
                listener(gid, member_id)
            except Exception:
                log.exception("share member listener failed")

    # ==========================================================================================
    # ShareGroupDescribe
    # ==========================================================================================

    def share_group_describe(self, group_id: str) -> ShareGroupDescription:
        err = self.ownership.validate(group_id)
        if err:
            return ShareGroupDescription(group_id, err)
        group = self.share_groups.get(group_id)
        if group is None:
            other = group_id in self.consumer_groups or group_id in self.groups
            return ShareGroupDescription(
                group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                f"Group {group_id} is not a share group." if other else
                f"Group {group_id} not found.")
        view = self._topic_view()
        assigned = {t for m in group.members.values() for t in m.assignment}
        names = {view[n][0]: n for n in view if view[n][0] in assigned} if assigned else {}
        members = [ShareMemberDescription(
            m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
            list(m.subscribed_topic_names),
            [(t, names.get(t, ""), sorted(ps)) for t, ps in sorted(m.assignment.items(), key=lambda kv: str(kv[0]))])
            for m in group.members.values()]
        return ShareGroupDescription(group_id, ErrorCode.NONE, None, group.state.value,
                                     group.group_epoch, group.assignment_epoch, "simple", members)

    # ==========================================================================================
    # replay
    # ==========================================================================================

    def replay_share_record(self, key: ShareRecordKey, value: bytes | None) -> None:
        gid = key.group_id
        if key.type == SHARE_GROUP_METADATA:
            if value is None:
                group = self.share_groups.pop(gid, None)
                if group is not None:
                    self._unload_share_group(group)
                return
            epoch = decode_share_value(kip932.ShareGroupMetadataValue, value).epoch
            self.share_groups.setdefault(gid, ShareGroup(gid)).group_epoch = epoch
            return
        group = self.share_groups.setdefault(gid, ShareGroup(gid))
        if key.type == SHARE_TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = 0 if value is None else decode_share_value(
                kip932.ShareGroupTargetAssignmentMetadataValue, value).assignment_epoch
            return
        mid = key.member_id or ""
        if key.type == SHARE_TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                group.target_assignment.pop(mid, None)
            else:
                group.target_assignment[mid] = assignment_of(decode_share_value(
                    kip932.ShareGroupTargetAssignmentMemberValue, value).topic_partitions)
            return
        if key.type == SHARE_CURRENT_MEMBER_ASSIGNMENT:
            member = group.members.get(mid)
            if value is None or member is None:
                return
            cur = decode_share_value(kip932.ShareGroupCurrentMemberAssignmentValue, value)
            member.member_epoch = cur.member_epoch
            member.previous_member_epoch = cur.previous_member_epoch
            member.assignment = assignment_of(cur.assigned_partitions)
            return
        assert key.type == SHARE_MEMBER_METADATA
        if value is None:
            gone = group.members.pop(mid, None)
            if gone is not None and gone.session_timer is not None:
                gone.session_timer.cancel()
            return
        v = decode_share_value(kip932.ShareGroupMemberMetadataValue, value)
        member = group.members.get(mid)
        if member is None:
            member = group.members[mid] = ShareGroupMember(mid)
        member.rack_id = v.rack_id
        member.client_id = v.client_id
        member.client_host = v.client_host
        member.subscribed_topic_names = list(v.subscribed_topic_names or [])

    def _unload_share_group(self, group: ShareGroup) -> None:
        for m in group.members.values():
            if m.session_timer is not None:
                m.session_timer.cancel()
                m.session_timer = None

    def on_loaded(self, partition: int) -> None:
        """After loading ``partition``: its members must heartbeat within a session timeout."""
        for group in self.share_groups.values():
            if self.ownership.partition(group.group_id) == partition:
                for m in group.members.values():
                    self._schedule_share_session(group, m)

    def unload_partition(self, partition: int) -> None:
        for gid in [g for g in self.share_groups if self.ownership.partition(g) == partition]:
            self._unload_share_group(self.share_groups.pop(gid))
            self._sg_locks.pop(gid, None)

    def unload_all(self) -> None:
        for group in self.share_groups.values():
            self._unload_share_group(group)

    async def delete_group(self, group: ShareGroup) -> ErrorCode:
        """DeleteGroups for a share group; ``share_group_deleted`` listeners drop its state."""
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        try:
            async with self._sg_locks.setdefault(group.group_id, asyncio.Lock()):
                await self.writer.write(group.group_id, self.share_group_tombstones(group))
        except Exception as e:
            self.share_groups.pop(group.group_id, None)
            return _map_store_error(e, commit=False)
        for listener in self.share_group_deleted:
            listener(group.group_id)
        return ErrorCode.NONE

    def share_group_tombstones(self, group: ShareGroup) -> list[Record]:
        gid = group.group_id
        out = []
        for m in set(group.members) | set(group.target_assignment):
            out += [current_assignment_record(gid, m), target_member_record(gid, m, None),
                    member_record(gid, m)]
        return out + [target_epoch_record(gid, None), group_epoch_record(gid, None)]
