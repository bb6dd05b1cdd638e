"""KIP-848 consumer groups in the coordinator: ConsumerGroupHeartbeat, ConsumerGroupDescribe,
session and rebalance timeouts, and the replay of the consumer-group records.

Theory of operation
-------------------
A heartbeat is handled in three steps, as in Kafka's ``GroupMetadataManager``:

1. Create or update the member. A new member or a changed subscription writes a MemberMetadata
   record; if the group's subscribed topics' metadata changed (subscription, regex match, new
   topic or partitions) a PartitionMetadata record; either bumps the group epoch
   (ConsumerGroupMetadata record).
2. If the group epoch is past the target assignment's epoch, run the server assignor
   (``uniform`` or ``range``) over all members and write the members' changed targets
   (TargetAssignmentMember records) and the new assignment epoch (TargetAssignmentMetadata).
3. Reconcile this member towards its target (:mod:`.reconciliation`): revoke first, then
   assign; a change writes a CurrentMemberAssignment record.

The records are written to the group's ``__consumer_offsets`` partition and applied as they
enter the leader's log (once; never again when they are replicated, :mod:`log.coordinator_runtime`)
by :meth:`ConsumerGroupManager.replay_consumer_record` -- the same method that rebuilds every
consumer group when a partition is loaded. The heartbeat is answered once they are replicated. The computation reads the group as it is and
builds the records; it never mutates it. Heartbeats of one group are serialised (one lock per
group), so each is computed against the state its predecessor left.

The response carries the member's assignment in Kafka's two cases -- a full request (epoch 0,
or every field set, as a client sends after an error) and an assignment this heartbeat changed
-- and in a third: the member has not yet acknowledged its assignment, i.e. the owned partitions
it last reported (``reported_owned``, kept in memory) differ from its assigned ones. Kafka relies
on the client sending a full request after any failed heartbeat; librdkafka (2.x) does so only
after coordinator errors, not after a timed-out request. A lost response that told it to revoke
(or that granted released partitions) would otherwise never be repeated: the member keeps
heartbeating with null owned partitions, stays ``UNREVOKED_PARTITIONS`` (or never consumes
what it was given), and the members waiting for its partitions stay empty until its rebalance
timeout. Repeating an assignment is idempotent for the clients (an unchanged target is
ignored). After a load ``reported_owned`` is unknown and Kafka's rule alone applies until the
member reports its partitions.

Member epochs fence zombies: a heartbeat with a larger epoch than the member's, or a smaller one
that is not the previous epoch of a lost response, gets FENCED_MEMBER_EPOCH; an unknown member
UNKNOWN_MEMBER_ID. Epoch 0 (re)joins, -1 leaves, -2 is a static member leaving temporarily: it
keeps its partitions until its session times out or its instance id rejoins (then the new member
id takes over the assignment without a rebalance). A member that does not heartbeat within
``group.consumer.session.timeout.ms``, or does not revoke within its rebalance timeout, is
removed (tombstones for its records, group epoch bumped).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from protocol import kafka_uuid, kip848
from protocol.errors import ErrorCode, KafkaError

from ..config import GroupConfig
from ..group import GroupMetadata
from ..records import Record, offset_commit_record
from ..shard import PartitionOwnership, RecordWriter, _map_store_error
from ..share.group import ShareGroup
from ..timer import Scheduler
from .assignors import MemberSpec, assignor
from .group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicMetadata,
    TopicsView,
    copy_assignment,
    member_topics,
    subscription_metadata,
)
from .messages import (
    ConsumerGroupDescription,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
    ConsumerMemberDescription,
    GroupError,
)
from .migration import downgrade_records, upgrade_classic_group
from .reconciliation import FencedMemberEpoch, Owned, is_subset, owned_assignment, reconcile
from .records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ConsumerRecordKey,
    assignment_from,
    current_assignment_record,
    decode_value,
    group_epoch_record,
    group_tombstones,
    member_metadata_record,
    member_tombstones,
    partition_metadata_record,
    target_assignment_epoch_record,
    target_assignment_record,
)
from .regex import InvalidRegularExpression, compile_topic_regex

log = logging.getLogger("groupcoord.consumer")

__all__ = ["ConsumerGroupManager", "TopicsView"]


class ConsumerGroupManager:
    """ConsumerGroupHeartbeat and ConsumerGroupDescribe over :class:`ConsumerGroup` state
    (``consumer_groups``, which it owns). It reads the classic ``groups`` (to upgrade one, and
    to hand an Empty one's offsets to a new consumer group) and ``share_groups`` (an id taken);
    ``on_downgraded(group id)`` is called when a consumer group has become a classic group."""

    def __init__(self, config: GroupConfig, scheduler: Scheduler, ownership: PartitionOwnership,
                 writer: RecordWriter, consumer_groups: dict[str, ConsumerGroup],
                 groups: dict[str, GroupMetadata], share_groups: dict[str, ShareGroup],
                 topics: Callable[[], TopicsView], on_downgraded: Callable[[str], None]) -> None:
        self.config = config
        self.scheduler = scheduler
        self.ownership = ownership
        self.writer = writer
        self.consumer_groups = consumer_groups
        self.groups = groups
        self.share_groups = share_groups
        self.topics = topics
        self.on_downgraded = on_downgraded
        self._cg_locks: dict[str, asyncio.Lock] = {}

    def lock(self, group_id: str) -> asyncio.Lock:
        """Serialises the requests and timers of one group: each computes against the state its
        predecessor left."""
        return self._cg_locks.setdefault(group_id, asyncio.Lock())

    # ==========================================================================================
    # ConsumerGroupHeartbeat
    # ==========================================================================================

    async def consumer_group_heartbeat(self, req: ConsumerGroupHeartbeatRequest, *,
                                       api_version: int = 1, client_id: str = "",
                                       client_host: str = "") -> ConsumerGroupHeartbeatResult:
        try:
            self._validate_heartbeat(req, api_version)
            err = self.ownership.validate(req.group_id)
            if err:
                return ConsumerGroupHeartbeatResult(err)
            if req.group_id in self.share_groups:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {req.group_id} is not a consumer group.")
            if req.member_epoch != 0 and req.group_id not in self.consumer_groups and \
                    req.group_id not in self.groups:
                # Not a group: answered without creating per-group state (a lock) for the id.
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Consumer group {req.group_id} not found.")
            async with self.lock(req.group_id):
                if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                    return await self._consumer_group_leave(req)
                return await self._heartbeat(req, api_version, client_id, client_host)
        except GroupError as e:
            return ConsumerGroupHeartbeatResult(e.code, e.message)
        except Exception as e:  # a storage failure: Kafka's remapping at the boundary
            if not isinstance(e, KafkaError):
                log.exception("consumer group heartbeat of %s failed", req.group_id)
            return ConsumerGroupHeartbeatResult(_map_store_error(e, commit=False), str(e))

    def _validate_heartbeat(self, req: ConsumerGroupHeartbeatRequest, version: int) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        def invalid(msg: str) -> GroupError:
            return GroupError(ErrorCode.INVALID_REQUEST, msg)

        if not req.group_id:
            raise invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise invalid("RackId can't be empty.")
        epoch = req.member_epoch
        if version >= 1 and not req.member_id:
            raise invalid("MemberId can't be empty.")
        if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
        elif epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in "
                              "first request.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if not req.member_id:
                raise invalid("MemberId can't be empty.")
            if req.instance_id is None:
                raise invalid("InstanceId can't be null.")
        else:
            raise invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and \
                req.server_assignor not in self.config.group_consumer_assignors:
            raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {req.server_assignor} is not supported. Supported "
                             f"assignors: {', '.join(self.config.group_consumer_assignors)}.")
        if req.subscribed_topic_regex:
            try:
                compile_topic_regex(req.subscribed_topic_regex)
            except InvalidRegularExpression as e:
                raise GroupError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(e)) from None

    def _check_member_epoch(self, member: ConsumerGroupMember, received: int, owned: Owned) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``."""
        if received > member.member_epoch:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a greater member epoch ({received}) "
                             f"than the one known by the group coordinator ({member.member_epoch}). "
                             "The member must abandon all its partitions and rejoin.")
        if received < member.member_epoch:
            # The response that bumped the epoch may have been lost: the previous epoch with a
            # subset of the current assignment is accepted.
            if received != member.previous_member_epoch or not is_subset(owned, member.assigned):
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a smaller member epoch "
                                 f"({received}) than the one known by the group coordinator "
                                 f"({member.member_epoch}). The member must abandon all its "
                                 "partitions and rejoin.")

    def _group_for_join(self, group_id: str, joining: bool) -> tuple[ConsumerGroup, list[Record]]:
        """The group a heartbeat works on, and the records that must precede its own (those
        converting a classic group)."""
        group = self.consumer_groups.get(group_id)
        if group is not None:
            return group, []
        classic = self.groups.get(group_id)
        if classic is not None and (classic.members or classic.pending_members):
            upgraded = upgrade_classic_group(classic, self.config, self.topics()) \
                if joining else None
            if upgraded is None:
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                                 f"Group {group_id} is not a consumer group.")
            return upgraded
        if not joining:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Consumer group {group_id} not found.")
        # A new group (an Empty classic group, holding only offsets, becomes it at replay).
        return ConsumerGroup(group_id), []

    async def _heartbeat(self, req: ConsumerGroupHeartbeatRequest, version: int, client_id: str,
                         client_host: str) -> ConsumerGroupHeartbeatResult:
        gid = req.group_id
        epoch = req.member_epoch
        group, prefix = self._group_for_join(gid, epoch == 0)
        member_id = req.member_id or kafka_uuid.to_string(uuid.uuid4())
        if len(group.members) >= self.config.group_consumer_max_size \
                and member_id not in group.members \
                and group.static_member(req.instance_id) is None:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self.config.group_consumer_max_size} members.")
        records: list[Record] = list(prefix)
        members = dict(group.members)  # the membership the new target is computed over
        targets_now = dict(group.target_assignment)
        replaced = False
        released: set[tuple[uuid.UUID, int]] = set()  # partitions this join frees at once
        old: ConsumerGroupMember | None
        if req.instance_id is None:
            old = group.members.get(member_id)
            if old is None and epoch != 0:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {gid}.")
        else:
            existing = group.static_member(req.instance_id)
            if epoch != 0:
                if existing is None:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Instance id {req.instance_id} is unknown.")
                if existing.member_id != member_id:
                    raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                                     f"Static member {member_id} with instance id "
                                     f"{req.instance_id} was fenced by member "
                                     f"{existing.member_id}.")
                old = existing
            elif existing is None or existing.member_id == member_id:
                old = group.members.get(member_id)
            else:
                if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                    raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                     f"Static member {member_id} with instance id "
                                     f"{req.instance_id} cannot join the group because the "
                                     f"instance id is owned by {existing.member_id} member.")
                # KIP-345 for KIP-848: the new member id takes over the old one's subscription
                # and assignment, at epoch 0, without a rebalance.
                records += member_tombstones(gid, existing.member_id)
                members.pop(existing.member_id, None)
                old = replace(existing, member_id=member_id, member_epoch=0,
                              previous_member_epoch=0, state=MemberState.STABLE,
                              assigned=copy_assignment(existing.assigned), pending_revocation={},
                              session_timer=None, rebalance_timer=None)
                targets_now[member_id] = targets_now.pop(existing.member_id, {})
                records.append(member_metadata_record(gid, member_id, old))
                records.append(target_assignment_record(gid, member_id, targets_now[member_id]))
                records.append(self._current_record(gid, old))
                members[member_id] = old
                replaced = True
                log.info("[GroupId %s] static member %s (instance %s) replaces member %s", gid,
                         member_id, req.instance_id, existing.member_id)
        if old is not None and epoch > 0:
            self._check_member_epoch(old, epoch, req.topic_partitions)
        is_new = old is None and not replaced
        if old is None:
            old = ConsumerGroupMember(member_id)
            log.info("[GroupId %s] member %s joins the consumer group", gid, member_id)
        current = old
        if epoch == 0 and not is_new and not replaced:
            # A rejoin (after a fence, or a restart with the same id): the member owns nothing,
            # so its previous partitions are released now.
            for t, ps in list(old.assigned.items()) + list(old.pending_revocation.items()):
                released.update((t, p) for p in ps)
            current = replace(old, member_epoch=0, previous_member_epoch=0,
                              state=MemberState.STABLE, assigned={}, pending_revocation={})
            records.append(self._current_record(gid, current))

        # 1. The member's subscription.
        updated = replace(
            current,
            instance_id=req.instance_id if req.instance_id is not None else current.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else current.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else current.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None
            else current.server_assignor,
            subscribed_topic_names=list(req.subscribed_topic_names)
            if req.subscribed_topic_names is not None else list(current.subscribed_topic_names),
            subscribed_topic_regex=(req.subscribed_topic_regex or None)
            if req.subscribed_topic_regex is not None else current.subscribed_topic_regex,
            client_id=client_id, client_host=client_host,
            assigned=copy_assignment(current.assigned),
            pending_revocation=copy_assignment(current.pending_revocation))
        before = copy_assignment(old.assigned)  # replay mutates the live member in place
        member = await self.update_member(group, members, targets_now, records, current, updated,
                                           is_new, req.topic_partitions, released)
        if req.topic_partitions is not None:
            member.reported_owned = owned_assignment(req.topic_partitions)
        result = ConsumerGroupHeartbeatResult(
            ErrorCode.NONE, None, member_id, member.member_epoch,
            self.config.consumer_heartbeat_interval_ms(group.group_id))
        full = req.member_epoch == 0 or (req.rebalance_timeout_ms != -1 and
                                          req.subscribed_topic_names is not None and
                                          req.topic_partitions is not None)
        # Kafka's two cases (a full request, a changed assignment), and a third of Samsa's: the
        # member has not yet reported owning what it was given -- the response that told it may
        # have been lost (see the theory of operation).
        unacknowledged = member.reported_owned is not None and \
            member.reported_owned != copy_assignment(member.assigned)
        if full or member.assigned != before or unacknowledged:
            result.assignment = copy_assignment(member.assigned)
        return result

    async def update_member(self, group: ConsumerGroup, members: dict[str, ConsumerGroupMember],
                             targets_now: dict[str, Assignment], records: list[Record],
                             current: ConsumerGroupMember, updated: ConsumerGroupMember,
                             is_new: bool, owned: Owned,
                             released: set[tuple[uuid.UUID, int]]) -> ConsumerGroupMember:
        """Steps 1-3 of the theory of operation for ``updated`` (the member as the request
        describes it; ``current`` as it was), appended to ``records``, written, and applied.
        Returns the live member after replay."""
        gid = group.group_id
        member_id = updated.member_id
        bump = False
        if is_new or not updated.subscription_equals(current):
            records.append(member_metadata_record(gid, member_id, updated))
            if is_new or sorted(updated.subscribed_topic_names) != \
                    sorted(current.subscribed_topic_names) or \
                    updated.subscribed_topic_regex != current.subscribed_topic_regex:
                bump = True
        members[member_id] = updated
        view = self.topics()
        metadata = subscription_metadata(members.values(), view)
        if metadata != group.subscription_metadata:
            records.append(partition_metadata_record(gid, metadata))
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(group_epoch_record(gid, group_epoch))
            log.info("[GroupId %s] bumped group epoch to %d", gid, group_epoch)

        # 2. The target assignment.
        if group_epoch > group.assignment_epoch:
            targets = self._compute_targets(targets_now, members, metadata)
            for mid, target in targets.items():
                if targets_now.get(mid) != target or mid == member_id:
                    records.append(target_assignment_record(gid, mid, target))
            records.append(target_assignment_epoch_record(gid, group_epoch))
            target_epoch, target = group_epoch, targets.get(member_id, {})
        else:
            target_epoch = group.assignment_epoch
            target = targets_now.get(member_id, {})

        # 3. Reconcile the member towards its target.
        if not updated.is_reconciled_to(target_epoch):
            def partition_epoch(t: uuid.UUID, p: int) -> int:
                return -1 if (t, p) in released else group.current_partition_epoch(t, p)
            try:
                nxt = reconcile(updated, target_epoch, target, partition_epoch, owned)
            except FencedMemberEpoch as e:
                raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH, str(e)) from None
            if (nxt.member_epoch, nxt.previous_member_epoch, nxt.state, nxt.assigned,
                    nxt.pending_revocation) != (updated.member_epoch, updated.previous_member_epoch,
                                                updated.state, updated.assigned,
                                                updated.pending_revocation):
                records.append(current_assignment_record(
                    gid, member_id, nxt.member_epoch, nxt.previous_member_epoch, nxt.state,
                    nxt.assigned, nxt.pending_revocation))

        if records:
            await self.writer.write(gid, records)
        live = self.consumer_groups.get(gid)
        member = live.members.get(member_id) if live is not None else None
        if live is None or member is None:  # pragma: no cover - replay must have created both
            raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR, "member vanished after its write")
        self.schedule_session_timeout(live, member)
        for m in live.members.values():
            if m.session_timer is None:  # members converted from a classic group
                self.schedule_session_timeout(live, m)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.rebalance_timer is None or member.rebalance_timer_epoch != member.member_epoch:
                self._schedule_rebalance_timeout(live, member)
        elif member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
        return member

    def _current_record(self, gid: str, m: ConsumerGroupMember) -> Record:
        return current_assignment_record(gid, m.member_id, m.member_epoch, m.previous_member_epoch,
                                         m.state, m.assigned, m.pending_revocation)

    def _compute_targets(self, current: Mapping[str, Assignment],
                         members: Mapping[str, ConsumerGroupMember],
                         metadata: Mapping[str, TopicMetadata]) -> dict[str, Assignment]:
        view = {n: (t.topic_id, t.num_partitions, False) for n, t in metadata.items()}
        specs = {}
        for mid, m in members.items():
            ids = {metadata[n].topic_id for n in member_topics(m, view)}
            specs[mid] = MemberSpec(ids, current.get(mid, {}))
        topics = {t.topic_id: t.num_partitions for t in metadata.values()}
        preferred = _preferred_assignor(members.values(), self.config.group_consumer_assignors[0])
        return assignor(preferred)(specs, topics)

    # ==========================================================================================
    # leaving, fencing, timeouts
    # ==========================================================================================

    async def _consumer_group_leave(self, req: ConsumerGroupHeartbeatRequest,
                                    ) -> ConsumerGroupHeartbeatResult:
        gid = req.group_id
        group = self.consumer_groups.get(gid)
        if group is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Consumer group {gid} not found.")
        result = ConsumerGroupHeartbeatResult(ErrorCode.NONE, None, req.member_id, req.member_epoch)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {gid}.")
            log.info("[GroupId %s] member %s left the consumer group", gid, req.member_id)
            await self.fence_member(group, member)
            return result
        member = group.static_member(req.instance_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Instance id {req.instance_id} is unknown.")
        if member.member_id != req.member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                             f"Static member {req.member_id} with instance id {req.instance_id} "
                             f"was fenced by member {member.member_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Temporarily gone: keep the partitions for the rejoining instance.
            log.info("[GroupId %s] static member %s (instance %s) temporarily left", gid,
                     member.member_id, req.instance_id)
            await self.writer.write(gid, [current_assignment_record(
                gid, member.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                member.previous_member_epoch, member.state, member.assigned, {})])
            return result
        log.info("[GroupId %s] static member %s (instance %s) left the consumer group", gid,
                 member.member_id, req.instance_id)
        await self.fence_member(group, member)
        return result

    async def fence_member(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        gid = group.group_id
        downgrade = downgrade_records(group, member.member_id, self.config,
                                      self.scheduler.now_ms())
        if downgrade is not None:
            await self.writer.write(gid, downgrade)
            self.on_downgraded(gid)
            return
        records = member_tombstones(gid, member.member_id)
        remaining = [m for mid, m in group.members.items() if mid != member.member_id]
        metadata = subscription_metadata(remaining, self.topics())
        if metadata != group.subscription_metadata:
            records.append(partition_metadata_record(gid, metadata))
        records.append(group_epoch_record(gid, group.group_epoch + 1))
        await self.writer.write(gid, records)

    def schedule_session_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = self.scheduler.call_later(
            member.classic.session_timeout_ms if member.classic is not None
            else self.config.consumer_session_timeout_ms(group.group_id),
            lambda: self.on_member_timeout(group.group_id, member.member_id, None,
                                            "session timeout expired"))

    def _schedule_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
        epoch = member.member_epoch
        timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else 300_000
        member.rebalance_timer_epoch = epoch
        member.rebalance_timer = self.scheduler.call_later(
            timeout, lambda: self.on_member_timeout(
                group.group_id, member.member_id, epoch,
                f"it failed to revoke its partitions at epoch {epoch} within {timeout}ms"))

    def on_member_timeout(self, gid: str, member_id: str, epoch: int | None, why: str, *,
                           rejoin: bool = False) -> None:
        """Fence a member whose session expired; with ``epoch``, only if it is still at that
        epoch: still revoking (rebalance timeout) or, with ``rejoin``, a classic member that was
        told to rejoin and did not (Kafka's join timeout)."""
        if not self.ownership.active:
            return

        async def fence() -> None:
            async with self.lock(gid):
                group = self.consumer_groups.get(gid)
                member = group.members.get(member_id) if group is not None else None
                if group is None or member is None:
                    return
                if epoch is not None and (member.member_epoch != epoch or (
                        not rejoin and member.state is not MemberState.UNREVOKED_PARTITIONS)):
                    return
                log.info("[GroupId %s] member %s fenced from the group because %s", gid,
                         member_id, why)
                try:
                    await self.fence_member(group, member)
                except Exception as e:
                    log.warning("fencing member %s of group %s failed: %s", member_id, gid, e)
        self.writer.spawn(fence())

    def _unload_consumer_group(self, group: ConsumerGroup) -> None:
        for m in group.members.values():
            for timer in (m.session_timer, m.rebalance_timer, m.join_timer):
                if timer is not None:
                    timer.cancel()
            m.session_timer = m.rebalance_timer = m.join_timer = None

    def on_loaded(self, partition: int) -> None:
        """After a load: every member gets a fresh session (as Kafka does on load)."""
        for group in self.consumer_groups.values():
            if self.ownership.partition(group.group_id) == partition:
                for m in group.members.values():
                    self.schedule_session_timeout(group, m)

    def unload_partition(self, partition: int) -> None:
        for gid in [g for g in self.consumer_groups if self.ownership.partition(g) == partition]:
            self._unload_consumer_group(self.consumer_groups.pop(gid))
            self._cg_locks.pop(gid, None)

    def unload_all(self) -> None:
        for group in self.consumer_groups.values():
            self._unload_consumer_group(group)

    async def delete_group(self, group: ConsumerGroup) -> ErrorCode:
        """DeleteGroups for a consumer group: its offsets and records tombstoned."""
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        gid = group.group_id
        records = [offset_commit_record(gid, t, p, None) for t, p in group.offsets]
        records += group_tombstones(group)
        try:
            async with self.lock(gid):
                await self.writer.write(gid, records)
        except Exception as e:
            self._drop_consumer_group(gid)
            return _map_store_error(e, commit=False)
        return ErrorCode.NONE

    # ==========================================================================================
    # ConsumerGroupDescribe
    # ==========================================================================================

    def describe_consumer_groups(self, group_ids: list[str]) -> list[ConsumerGroupDescription]:
        out = []
        names = {v[0]: n for n, v in self.topics().items()}

        def listing(a: Assignment) -> list[tuple[uuid.UUID, str, list[int]]]:
            return [(t, names.get(t, ""), sorted(ps))
                    for t, ps in sorted(a.items(), key=lambda kv: names.get(kv[0], ""))]

        for gid in group_ids:
            err = self.ownership.validate(gid)
            if err:
                out.append(ConsumerGroupDescription(gid, err))
                continue
            group = self.consumer_groups.get(gid)
            if group is None:
                msg = f"Group {gid} is not a consumer group." if gid in self.groups \
                    else f"Group {gid} not found."
                out.append(ConsumerGroupDescription(gid, ErrorCode.GROUP_ID_NOT_FOUND, msg))
                continue
            out.append(ConsumerGroupDescription(
                gid, ErrorCode.NONE, None, group.state.value, group.group_epoch,
                group.assignment_epoch,
                _preferred_assignor(group.members.values(), self.config.group_consumer_assignors[0]),
                [ConsumerMemberDescription(
                    m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id,
                    m.client_host, list(m.subscribed_topic_names), m.subscribed_topic_regex,
                    listing(m.assigned), listing(group.target_assignment.get(m.member_id, {})),
                    m.classic is not None)
                 for m in group.members.values()]))
        return out

    # ==========================================================================================
    # replay
    # ==========================================================================================

    def _consumer_group_for_replay(self, gid: str) -> ConsumerGroup:
        group = self.consumer_groups.get(gid)
        if group is None:
            group = ConsumerGroup(gid)
            classic = self.groups.get(gid)
            if classic is not None and not classic.members:
                # An Empty classic group (only offsets) becomes this consumer group.
                group.offsets = classic.offsets
                group.pending_txn_offsets = classic.pending_txn_offsets
                del self.groups[gid]
            self.consumer_groups[gid] = group
        return group

    def replay_consumer_record(self, key: ConsumerRecordKey, value: bytes | None) -> None:
        """Apply one consumer-group record (Kafka's ``GroupMetadataManager.replay`` overloads)."""
        gid = key.group_id
        kind = key.type
        if value is None and gid not in self.consumer_groups:
            return
        if kind == GROUP_METADATA:
            if value is None:
                self._drop_consumer_group(gid)
                return
            v = decode_value(kip848.ConsumerGroupMetadataValue, value)
            self._consumer_group_for_replay(gid).group_epoch = v.epoch
            return
        group = self._consumer_group_for_replay(gid)
        if kind == PARTITION_METADATA:
            if value is None:
                group.subscription_metadata = {}
                return
            pv = decode_value(kip848.ConsumerGroupPartitionMetadataValue, value)
            group.subscription_metadata = {
                t.topic_name: TopicMetadata(t.topic_id, t.topic_name, t.num_partitions)
                for t in pv.topics}
        elif kind == TARGET_ASSIGNMENT_METADATA:
            if value is None:
                group.assignment_epoch = 0
                return
            group.assignment_epoch = decode_value(
                kip848.ConsumerGroupTargetAssignmentMetadataValue, value).assignment_epoch
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            assert key.member_id is not None
            if value is None:
                group.target_assignment.pop(key.member_id, None)
                return
            tv = decode_value(kip848.ConsumerGroupTargetAssignmentMemberValue, value)
            group.target_assignment[key.member_id] = assignment_from(tv.topic_partitions)
        elif kind == MEMBER_METADATA:
            assert key.member_id is not None
            if value is None:
                gone = group.members.pop(key.member_id, None)
                if gone is not None:
                    group.remove_partition_epochs(gone.assigned, gone.member_epoch)
                    group.remove_partition_epochs(gone.pending_revocation, gone.member_epoch)
                    if gone.instance_id is not None and \
                            group.static_members.get(gone.instance_id) == gone.member_id:
                        del group.static_members[gone.instance_id]
                    for timer in (gone.session_timer, gone.rebalance_timer, gone.join_timer):
                        if timer is not None:
                            timer.cancel()
                return
            mv = decode_value(kip848.ConsumerGroupMemberMetadataValue, value)
            member = group.members.get(key.member_id)
            if member is None:
                member = group.members[key.member_id] = ConsumerGroupMember(key.member_id)
            member.instance_id = mv.instance_id
            member.rack_id = mv.rack_id
            member.client_id = mv.client_id
            member.client_host = mv.client_host
            member.subscribed_topic_names = list(mv.subscribed_topic_names or [])
            member.subscribed_topic_regex = mv.subscribed_topic_regex
            member.rebalance_timeout_ms = mv.rebalance_timeout_ms
            member.server_assignor = mv.server_assignor
            cm = mv.classic_member_metadata
            member.classic = None if cm is None else ClassicMemberMetadata(
                cm.session_timeout_ms, tuple((p.name, bytes(p.metadata))
                                             for p in cm.supported_protocols or []))
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        elif kind == CURRENT_MEMBER_ASSIGNMENT:
            assert key.member_id is not None
            member = group.members.get(key.member_id)
            if member is None:
                if value is None:
                    return
                member = group.members[key.member_id] = ConsumerGroupMember(key.member_id)
            group.remove_partition_epochs(member.assigned, member.member_epoch)
            group.remove_partition_epochs(member.pending_revocation, member.member_epoch)
            if value is None:
                member.member_epoch = member.previous_member_epoch = LEAVE_GROUP_MEMBER_EPOCH
                member.assigned, member.pending_revocation = {}, {}
                return
            cv = decode_value(kip848.ConsumerGroupCurrentMemberAssignmentValue, value)
            member.member_epoch = cv.member_epoch
            member.previous_member_epoch = cv.previous_member_epoch
            member.state = MemberState.of(cv.state)
            member.assigned = assignment_from(cv.assigned_partitions)
            member.pending_revocation = assignment_from(cv.partitions_pending_revocation)
            group.add_partition_epochs(member.assigned, member.member_epoch)
            group.add_partition_epochs(member.pending_revocation, member.member_epoch)

    def _drop_consumer_group(self, gid: str) -> None:
        """The group's tombstone: gone, its committed offsets kept in an Empty classic group."""
        group = self.consumer_groups.pop(gid, None)
        if group is None:
            return
        self._unload_consumer_group(group)
        group.dead = True
        self._cg_locks.pop(gid, None)
        if group.offsets or group.pending_txn_offsets:
            # Offsets are separate records: they outlive the group, as a classic Empty group.
            shell = GroupMetadata(gid, current_state_timestamp=self.scheduler.now_ms())
            shell.offsets = group.offsets
            shell.pending_txn_offsets = group.pending_txn_offsets
            self.groups[gid] = shell

    async def convert_empty_consumer_group(self, group_id: str) -> bool:
        """A classic JoinGroup for this id: an Empty consumer group is deleted (its records
        tombstoned; committed offsets stay, in an Empty classic group) so the classic protocol
        can take the id over. False if the group still has members."""
        async with self.lock(group_id):
            group = self.consumer_groups.get(group_id)
            if group is None:
                return True
            if group.members:
                return False
            log.info("[GroupId %s] converting the empty consumer group to a classic group", group_id)
            await self.writer.write(group_id, group_tombstones(group))
            return True


def _preferred_assignor(members: Iterable[ConsumerGroupMember], default: str) -> str:
    """The server assignor most members ask for (ties by name), else the broker's first."""
    counts: dict[str, int] = {}
    for m in members:
        if m.server_assignor:
            counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
    if not counts:
        return default
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
