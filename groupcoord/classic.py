"""Classic groups: Kafka's JoinGroup/SyncGroup rebalance protocol (Kafka's ``ClassicGroup`` part
of ``GroupMetadataManager``).

Theory of operation
-------------------
A JoinGroup or SyncGroup that must wait (for the other members, for the leader's assignment)
parks an ``asyncio.Future`` on the member; the state change that completes the rebalance
resolves every parked future. A GroupMetadata record is written when a generation's assignment
is persisted (the leader's SyncGroup), when a rebalance leaves the group Empty, and when a
static member is replaced. It persists what the in-memory group already is, so it is not
applied when written (as Kafka's classic groups); :meth:`ClassicGroupManager.replay_group_metadata`
applies it when the partition is loaded. A write's outcome is acted on only if the group is
still at the generation it wrote.
Membership that is not yet durable (a rebalance in flight, parked requests, heartbeats) lives
only in memory, as in Kafka: after a restart, a loaded group with members is Stable at its last
persisted generation and its members either keep heartbeating or expire.

Timers (all via the :class:`~groupcoord.timer.Scheduler`): per-member heartbeat expiry
(``session.timeout.ms``; 5 minutes for a member whose first join is still pending), the
pending-member expiry after MEMBER_ID_REQUIRED, the join deadline (``rebalance.timeout.ms``, or
``group.initial.rebalance.delay.ms`` steps for a group that was Empty), and the pending-sync
deadline after a join completes.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from protocol.errors import ErrorCode

from .config import GroupConfig
from .consumer.classic_members import ClassicMembers
from .consumer.group import ConsumerGroup
from .consumer.manager import ConsumerGroupManager
from .group import (
    CONSUMER_PROTOCOL_TYPE,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    JoinGroupMember,
    JoinGroupResult,
    LeaveMemberResult,
    MemberMetadata,
    SyncGroupResult,
)
from .records import (
    GroupMetadataValue,
    MemberMetadataRecord,
    Record,
    group_metadata_record,
)
from .shard import (
    PartitionOwnership,
    RecordWriter,
    _map_store_error,
    _resolve,
)
from .share.group import ShareGroup
from .state import GroupState
from .timer import Scheduler

__all__ = ["ClassicGroupManager", "JoinGroupMember", "JoinGroupResult", "LeaveMemberResult",
           "SyncGroupResult"]

log = logging.getLogger("groupcoord.coordinator")


class ClassicGroupManager:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup for classic groups (``groups``, which it
    owns). An id held by a consumer group is handed to ``consumers`` (an Empty one is converted)
    and ``classic_members`` (classic members inside it, KIP-848 migration); an id held by a share
    group is refused."""

    def __init__(self, config: GroupConfig, scheduler: Scheduler, ownership: PartitionOwnership,
                 writer: RecordWriter, groups: dict[str, GroupMetadata],
                 consumer_groups: dict[str, ConsumerGroup], share_groups: dict[str, ShareGroup],
                 consumers: ConsumerGroupManager, classic_members: ClassicMembers) -> None:
        self.config = config
        self.scheduler = scheduler
        self.ownership = ownership
        self.writer = writer
        self.groups = groups
        self.consumer_groups = consumer_groups
        self.share_groups = share_groups
        self.consumers = consumers
        self.classic_members = classic_members

    # ==========================================================================================
    # JoinGroup
    # ==========================================================================================

    async def join_group(self, group_id: str, member_id: str, protocol_type: str,
                         protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                         rebalance_timeout_ms: int, *, group_instance_id: str | None = None,
                         client_id: str = "", client_host: str = "",
                         require_known_member_id: bool = False, reason: str | None = None,
                         supports_skip_assignment: bool = False) -> JoinGroupResult:
        """A JoinGroup request. Returns when the group's join phase completes for this member
        (or at once with MEMBER_ID_REQUIRED or an error)."""
        err = self.ownership.validate(group_id)
        if err:
            return JoinGroupResult(err, member_id)
        if group_id in self.share_groups:  # KIP-932: a share group's id
            return JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinGroupResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        if group_id in self.consumer_groups:
            # The id belongs to a KIP-848 consumer group: an Empty one becomes a classic group (its
            # offsets stay), as Kafka's maybeDeleteEmptyConsumerGroup does; a non-empty one takes
            # this member in as a classic member (groupcoord.consumer.migration).
            try:
                if not await self.consumers.convert_empty_consumer_group(group_id):
                    code, mid, gen, proto = await self.classic_members.join(
                        group_id, member_id, protocol_type, protocols, session_timeout_ms,
                        rebalance_timeout_ms, group_instance_id, client_id, client_host,
                        require_known_member_id)
                    return JoinGroupResult(code, mid, gen, CONSUMER_PROTOCOL_TYPE if not code
                                           else None, proto or None, "")
            except Exception as e:
                return JoinGroupResult(_map_store_error(e, commit=False), member_id)
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = GroupMetadata(group_id, current_state_timestamp=self.scheduler.now_ms())
            self.groups[group_id] = group
        if not self._accept_joining_member(group, member_id, group_instance_id):
            return JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
        fut: asyncio.Future[JoinGroupResult] = asyncio.get_running_loop().create_future()
        args = _JoinArgs(group_instance_id, client_id, client_host, rebalance_timeout_ms,
                         session_timeout_ms, protocol_type, list(protocols), reason,
                         supports_skip_assignment)
        if is_unknown:
            self._unknown_member_join(group, args, require_known_member_id, fut)
        else:
            self._known_member_join(group, member_id, args, fut)
        return await fut

    def _accept_joining_member(self, group: GroupMetadata, member_id: str,
                               instance_id: str | None) -> bool:
        if group.has(member_id) or member_id in group.pending_members:
            return True
        if group.static_member_id(instance_id) is not None:
            return True
        return group.size + len(group.pending_members) < self.config.group_max_size

    def _unknown_member_join(self, group: GroupMetadata, a: _JoinArgs, require_known: bool,
                             fut: asyncio.Future[JoinGroupResult]) -> None:
        if group.is_in(GroupState.DEAD):
            # The group is being removed; the client will rediscover the coordinator and rejoin.
            _resolve(fut, JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(a.protocol_type, a.protocols):
            _resolve(fut, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        prefix = a.group_instance_id if a.group_instance_id is not None else a.client_id
        new_member_id = f"{prefix}-{uuid.uuid4()}"
        if a.group_instance_id is not None:
            old_member_id = group.static_member_id(a.group_instance_id)
            if old_member_id is not None:
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, a, fut)
            else:
                self._add_member_and_rebalance(group, new_member_id, a, fut)
        elif require_known:
            # KIP-394 (JoinGroup v4+): hand out the id first, so a client that times out and
            # retries reuses it instead of leaving orphan members behind.
            group.pending_members.add(new_member_id)
            self._schedule_pending_member_expiry(group, new_member_id, a.session_timeout_ms)
            _resolve(fut, JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, new_member_id, a, fut)

    def _known_member_join(self, group: GroupMetadata, member_id: str, a: _JoinArgs,
                           fut: asyncio.Future[JoinGroupResult]) -> None:
        if group.is_in(GroupState.DEAD):
            _resolve(fut, JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(a.protocol_type, a.protocols):
            _resolve(fut, JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if member_id in group.pending_members:
            # The second half of the KIP-394 handshake.
            self._add_member_and_rebalance(group, member_id, a, fut)
            return
        if group.is_static_member_fenced(a.group_instance_id, member_id):
            _resolve(fut, JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id))
            return
        if not group.has(member_id):
            _resolve(fut, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, a, fut)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(a.protocols):
                # A retried join: answer with what the completed join phase said.
                _resolve(fut, self._join_result_for(group, member))
            else:
                self._update_member_and_rebalance(group, member, a, fut)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(a.protocols):
                # The leader rejoining (e.g. its subscription's topics changed) or new metadata.
                self._update_member_and_rebalance(group, member, a, fut)
            else:
                # A follower rejoining with the same metadata gets the current generation back.
                _resolve(fut, JoinGroupResult(ErrorCode.NONE, member_id, group.generation_id,
                                              group.protocol_type, group.protocol_name,
                                              group.leader_id or ""))
        else:  # Empty: the member was removed
            _resolve(fut, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_result_for(self, group: GroupMetadata, member: MemberMetadata) -> JoinGroupResult:
        members = self._current_member_metadata(group) if group.is_leader(member.member_id) else []
        return JoinGroupResult(ErrorCode.NONE, member.member_id, group.generation_id,
                               group.protocol_type, group.protocol_name, group.leader_id or "",
                               False, members)

    def _current_member_metadata(self, group: GroupMetadata) -> list[JoinGroupMember]:
        return [JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()]

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, a: _JoinArgs,
                                  fut: asyncio.Future[JoinGroupResult]) -> None:
        member = MemberMetadata(member_id, a.group_instance_id, a.client_id, a.client_host,
                                a.rebalance_timeout_ms, a.session_timeout_ms, a.protocol_type,
                                a.protocols, is_new=True, awaiting_join=fut, join_reason=a.reason)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.initial_join_delay:
            group.new_member_added = True
        group.add(member)
        self.schedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        reason = f"adding new member {member_id}" + (f" ({a.reason})" if a.reason else "")
        self._maybe_prepare_rebalance(group, reason)
        self._try_complete_join(group)

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     a: _JoinArgs, fut: asyncio.Future[JoinGroupResult]) -> None:
        group.update_member(member, a.protocols, a.rebalance_timeout_ms, a.session_timeout_ms)
        if member.awaiting_join is not None and member.awaiting_join is not fut:
            # A duplicate join from the same member: the older request is superseded.
            _resolve(member.awaiting_join,
                     JoinGroupResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.awaiting_join = fut
        member.join_reason = a.reason
        self._maybe_prepare_rebalance(group, f"updating metadata of member {member.member_id}")
        self._try_complete_join(group)

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str,
                                            new_member_id: str, a: _JoinArgs,
                                            fut: asyncio.Future[JoinGroupResult]) -> None:
        """KIP-345: a static member came back with a new member id. Fence the old incarnation,
        and if the group's protocol would not change, keep the generation and assignment."""
        assert a.group_instance_id is not None
        current_leader = group.leader_id
        member = group.get(old_member_id)
        old_protocols = member.protocols
        old_timeouts = (member.rebalance_timeout_ms, member.session_timeout_ms)
        self._complete_join(member, JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        self._complete_sync(member, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        group.replace_static_member(a.group_instance_id, old_member_id, new_member_id)
        group.update_member(member, a.protocols, a.rebalance_timeout_ms, a.session_timeout_ms)
        member.awaiting_join = fut
        member.client_id, member.client_host = a.client_id, a.client_host
        self.schedule_heartbeat(group, member)
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                generation = group.generation_id
                self.writer.spawn(self._persist_static_replacement(
                    group, member, generation, current_leader, old_member_id, old_protocols,
                    old_timeouts, a, fut))
            else:
                self._maybe_prepare_rebalance(
                    group, f"static member {a.group_instance_id} rejoined with a different protocol")
        elif state is GroupState.COMPLETING_REBALANCE:
            # The join phase already answered the old member id: run it again.
            self.prepare_rebalance(group, f"static member {a.group_instance_id} replaced")
        elif state is GroupState.PREPARING_REBALANCE:
            self._try_complete_join(group)
        else:
            raise AssertionError(f"a group with a static member cannot be {state.value}")

    async def _persist_static_replacement(self, group: GroupMetadata, member: MemberMetadata,
                                          generation: int, current_leader: str | None,
                                          old_member_id: str,
                                          old_protocols: list[tuple[str, bytes]],
                                          old_timeouts: tuple[int, int], a: _JoinArgs,
                                          fut: asyncio.Future[JoinGroupResult]) -> None:
        assignments = {m.member_id: m.assignment for m in group.members.values()}
        try:
            await self._store_group(group, assignments)
        except Exception as e:
            code = _map_store_error(e, commit=False)
            if member.awaiting_join is fut and group.members.get(member.member_id) is member \
                    and a.group_instance_id is not None:
                # Undo the replacement so the old incarnation stays valid.
                group.replace_static_member(a.group_instance_id, member.member_id, old_member_id)
                group.update_member(member, old_protocols, *old_timeouts)
                self.schedule_heartbeat(group, member)
            self._complete_join(member, JoinGroupResult(code, UNKNOWN_MEMBER_ID))
            return
        if member.awaiting_join is not fut or group.generation_id != generation:
            return  # a rebalance started meanwhile; the join phase will answer this member
        if a.supports_skip_assignment and group.is_leader(member.member_id):
            # KIP-814 (JoinGroup v9): tell the static leader it leads, but must not reassign.
            result = JoinGroupResult(ErrorCode.NONE, member.member_id, group.generation_id,
                                     group.protocol_type, group.protocol_name,
                                     group.leader_id or "", True,
                                     self._current_member_metadata(group))
        else:
            # Before v9: report the previous leader id, so a rejoining leader does not run a
            # trivial assignment that a Stable group would never propagate.
            result = JoinGroupResult(ErrorCode.NONE, member.member_id, group.generation_id,
                                     group.protocol_type, group.protocol_name,
                                     current_leader or "")
        self._complete_join(member, result)

    # --- rebalance phases ------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The assignment of the generation that never became Stable is void.
            for m in group.members.values():
                m.assignment = b""
                self._complete_sync(m, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        group.pending_sync_members.clear()
        was_empty = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self.scheduler.now_ms())
        log.info("preparing to rebalance group %s in state PreparingRebalance with old "
                 "generation %d (reason: %s)", group.group_id, group.generation_id, reason)
        if group.join_timer is not None:
            group.join_timer.cancel()
        if was_empty:
            # group.initial.rebalance.delay.ms: let the first members of a new group arrive
            # together instead of rebalancing once per member.
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            group.initial_join_delay = True
            group.new_member_added = False
            self._schedule_initial_join(group, delay, remaining)
        else:
            group.initial_join_delay = False
            group.join_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms, lambda: self._on_join_deadline(group))
            self._try_complete_join(group)

    def _schedule_initial_join(self, group: GroupMetadata, delay: int, remaining: int) -> None:
        def fire() -> None:
            if group.join_timer is not handle or not group.is_in(GroupState.PREPARING_REBALANCE):
                return
            if group.new_member_added and remaining > 0:
                group.new_member_added = False
                step = min(self.config.group_initial_rebalance_delay_ms, remaining)
                self._schedule_initial_join(group, step, max(remaining - step, 0))
            else:
                group.initial_join_delay = False
                self._complete_join_phase(group)
        handle = self.scheduler.call_later(delay, fire)
        group.join_timer = handle

    def _on_join_deadline(self, group: GroupMetadata) -> None:
        if group.is_in(GroupState.PREPARING_REBALANCE) and self.groups.get(group.group_id) is group:
            self._complete_join_phase(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if group.is_in(GroupState.PREPARING_REBALANCE) and not group.initial_join_delay \
                and group.has_all_members_joined():
            self._complete_join_phase(group)

    def _complete_join_phase(self, group: GroupMetadata) -> None:
        """Kafka's ``onCompleteJoin``: drop dynamic members that did not rejoin, start the next
        generation, and answer every parked JoinGroup (the leader gets all members' metadata)."""
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        for m in group.not_yet_rejoined():
            if not m.is_static:
                self._remove_member(group, m)
        if not self._elect_joined_leader(group) and group.members:
            # Only static members that have not rejoined remain: wait another rebalance
            # timeout for them (or for their session expiry to remove them).
            group.join_timer = self.scheduler.call_later(
                group.rebalance_timeout_ms, lambda: self._on_join_deadline(group))
            return
        now = self.scheduler.now_ms()
        group.generation_id += 1
        if group.members:
            group.protocol_name = group.select_protocol()
            group.transition_to(GroupState.COMPLETING_REBALANCE, now)
        else:
            group.protocol_name = None
            group.transition_to(GroupState.EMPTY, now)
        log.info("group %s generation %d (%s) with %d members", group.group_id,
                 group.generation_id, group.state.value, group.size)
        if group.is_in(GroupState.EMPTY):
            self.writer.spawn(self._store_group_logged(group, {}))
            return
        for m in group.members.values():
            self._complete_join(m, self._join_result_for(group, m))
            m.is_new = False
            self.schedule_heartbeat(group, m)
        group.pending_sync_members = set(group.members)
        generation = group.generation_id
        group.sync_timer = self.scheduler.call_later(
            group.rebalance_timeout_ms, lambda: self._on_sync_deadline(group, generation))

    def _elect_joined_leader(self, group: GroupMetadata) -> bool:
        if group.leader_id is None:
            return False
        if group.members[group.leader_id].is_awaiting_join:
            return True
        for m in group.members.values():
            if m.is_awaiting_join:
                group.leader_id = m.member_id
                return True
        return False

    def _on_sync_deadline(self, group: GroupMetadata, generation: int) -> None:
        """Members that got a join response but never sent SyncGroup are removed."""
        if self.groups.get(group.group_id) is not group or group.generation_id != generation:
            return
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        group.sync_timer = None
        missing = list(group.pending_sync_members)
        if not missing:
            return
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member(group, member)
        self.prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def _complete_join(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        fut, member.awaiting_join = member.awaiting_join, None
        _resolve(fut, result)

    def _complete_sync(self, member: MemberMetadata, result: SyncGroupResult) -> None:
        fut, member.awaiting_sync = member.awaiting_sync, None
        _resolve(fut, result)

    # --- membership removal and heartbeats ----------------------------------------------------------

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata,
                                        reason: str) -> None:
        self._complete_join(member, JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        self._complete_sync(member, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self._remove_member(group, member)
        log.info("member %s left group %s (%s)", member.member_id, group.group_id, reason)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            timeout_ms: int | None = None) -> None:
        member.last_heartbeat_ms = self.scheduler.now_ms()
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.heartbeat_timer = self.scheduler.call_later(
            timeout, lambda: self._on_heartbeat_expired(group, member))

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if self.groups.get(group.group_id) is not group or \
                group.members.get(member.member_id) is not member or group.is_in(GroupState.DEAD):
            return
        # A known member parked in JoinGroup or SyncGroup is alive by definition: its request
        # is bounded by the rebalance, whose completion schedules its next expiry.
        if (member.is_awaiting_join and not member.is_new) or member.is_awaiting_sync:
            return
        self._remove_member_and_update_group(group, member, "session timeout expired")

    def _schedule_pending_member_expiry(self, group: GroupMetadata, member_id: str,
                                        timeout_ms: int) -> None:
        def fire() -> None:
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._try_complete_join(group)
        self.scheduler.call_later(timeout_ms, fire)

    # ==========================================================================================
    # SyncGroup, Heartbeat, LeaveGroup
    # ==========================================================================================

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         assignments: Mapping[str, bytes], *, group_instance_id: str | None = None,
                         protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncGroupResult:
        err = self.ownership.validate(group_id)
        if err:
            return SyncGroupResult(err)
        if group_id in self.consumer_groups:
            code, assignment, proto = self.classic_members.sync(
                group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name)
            return SyncGroupResult(code, assignment, CONSUMER_PROTOCOL_TYPE if not code else None,
                                   proto)
        group = self.groups.get(group_id)
        if group is None:
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.DEAD):
            return SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID)
        if not group.has(member_id):
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return SyncGroupResult(ErrorCode.ILLEGAL_GENERATION)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.get(member_id)
        if group.is_in(GroupState.EMPTY):
            return SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_in(GroupState.STABLE):
            group.pending_sync_members.discard(member_id)
            self.schedule_heartbeat(group, member)
            return SyncGroupResult(ErrorCode.NONE, member.assignment, group.protocol_type,
                                   group.protocol_name)
        # CompletingRebalance: park until the leader's assignment is persisted.
        fut: asyncio.Future[SyncGroupResult] = asyncio.get_running_loop().create_future()
        if member.awaiting_sync is not None:
            _resolve(member.awaiting_sync, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = fut
        group.pending_sync_members.discard(member_id)
        if group.is_leader(member_id):
            full = {m: bytes(assignments.get(m, b"")) for m in group.members}
            missing = [m for m in group.members if m not in assignments]
            if missing:
                log.warning("leader %s of group %s sent no assignment for %s", member_id, group_id,
                            missing)
            self.writer.spawn(self._store_leader_assignment(group, generation_id, full))
        return await fut

    async def _store_leader_assignment(self, group: GroupMetadata, generation: int,
                                       assignment: dict[str, bytes]) -> None:
        try:
            await self._store_group(group, assignment)
            error = ErrorCode.NONE
        except Exception as e:
            log.warning("storing group %s assignment failed: %s", group.group_id, e)
            error = _map_store_error(e, commit=False)
        # Another member may have joined while we wrote: only a still-current generation in
        # CompletingRebalance becomes Stable.
        if not group.is_in(GroupState.COMPLETING_REBALANCE) or group.generation_id != generation:
            return
        if error:
            for m in group.members.values():
                m.assignment = b""
                self._complete_sync(m, SyncGroupResult(error))
            self._maybe_prepare_rebalance(group, "error storing the group assignment")
            return
        # The generation's assignment is durable: hand it out (Kafka's setAndPropagateAssignment).
        for m in group.members.values():
            m.assignment = assignment.get(m.member_id, b"")
            self._complete_sync(m, SyncGroupResult(ErrorCode.NONE, m.assignment,
                                                   group.protocol_type, group.protocol_name))
            self.schedule_heartbeat(group, m)
        group.transition_to(GroupState.STABLE, self.scheduler.now_ms())
        log.info("group %s is Stable at generation %d", group.group_id, group.generation_id)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  group_instance_id: str | None = None) -> ErrorCode:
        err = self.ownership.validate(group_id)
        if err:
            return err
        if group_id in self.consumer_groups:
            return self.classic_members.heartbeat(group_id, member_id, generation_id,
                                                  group_instance_id)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id) or group.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self.schedule_heartbeat(group, group.get(member_id))
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE  # Stable, or CompletingRebalance (members heartbeat before sync)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]],
                    reason: str | None = None) -> tuple[ErrorCode, list[LeaveMemberResult]]:
        """LeaveGroup for ``(member_id, group_instance_id)`` pairs (batched from v3, KIP-345).
        An empty member id with an instance id removes that static member (admin removal)."""
        err = self.ownership.validate(group_id)
        if err:
            return err, []
        if group_id in self.consumer_groups:
            return ErrorCode.NONE, [LeaveMemberResult(m, i, code) for m, i, code in
                                    self.classic_members.leave(group_id, members)]
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [LeaveMemberResult(m, i, ErrorCode.UNKNOWN_MEMBER_ID)
                                    for m, i in members]
        if group.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        why = f"leaving the group{f' ({reason})' if reason else ''}"
        for member_id, instance_id in members:
            if member_id == UNKNOWN_MEMBER_ID:
                current = group.static_member_id(instance_id)
                if current is None:
                    code = ErrorCode.UNKNOWN_MEMBER_ID
                else:
                    self._remove_member_and_update_group(group, group.get(current), why)
                    code = ErrorCode.NONE
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._try_complete_join(group)
                code = ErrorCode.NONE
            elif group.is_static_member_fenced(instance_id, member_id):
                code = ErrorCode.FENCED_INSTANCE_ID
            elif group.has(member_id):
                self._remove_member_and_update_group(group, group.get(member_id), why)
                code = ErrorCode.NONE
            else:
                code = ErrorCode.UNKNOWN_MEMBER_ID
            results.append(LeaveMemberResult(member_id, instance_id, code))
        return ErrorCode.NONE, results

    # ==========================================================================================
    # lifecycle
    # ==========================================================================================

    def on_loaded(self, partition: int) -> None:
        """After a load: every member of the partition's groups must heartbeat within its
        session."""
        for group in self.groups.values():
            if self.ownership.partition(group.group_id) == partition:
                for member in group.members.values():
                    self.schedule_heartbeat(group, member)

    def unload_partition(self, partition: int) -> None:
        for gid in [g for g in self.groups if self.ownership.partition(g) == partition]:
            self.unload_group(self.groups.pop(gid))

    def unload_all(self) -> None:
        for group in self.groups.values():
            self.unload_group(group)

    def drop_group(self, group_id: str) -> None:
        """A GroupMetadata tombstone. Committed offsets are records of their own and outlive it
        (as in Kafka): any left stay in an Empty group holding only offsets."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        self.unload_group(group)
        if not group.is_in(GroupState.DEAD):
            group.transition_to(GroupState.DEAD, self.scheduler.now_ms())
        if group.offsets or group.pending_txn_offsets:
            shell = GroupMetadata(group_id, current_state_timestamp=self.scheduler.now_ms())
            shell.offsets = group.offsets
            shell.pending_txn_offsets = group.pending_txn_offsets
            self.groups[group_id] = shell

    def unload_group(self, group: GroupMetadata) -> None:
        for timer in (group.join_timer, group.sync_timer):
            if timer is not None:
                timer.cancel()
        for member in group.members.values():
            if member.heartbeat_timer is not None:
                member.heartbeat_timer.cancel()
            self._complete_join(member, JoinGroupResult(ErrorCode.NOT_COORDINATOR, member.member_id))
            self._complete_sync(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))

    # ==========================================================================================
    # GroupMetadata records
    # ==========================================================================================

    def _group_record(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> Record:
        members = [MemberMetadataRecord(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.session_timeout_ms, m.metadata(group.protocol_name),
            bytes(assignment.get(m.member_id, b""))) for m in group.members.values()] \
            if group.protocol_name is not None else []
        value = GroupMetadataValue(group.protocol_type or "", group.generation_id,
                                   group.protocol_name,
                                   group.leader_id if group.protocol_name is not None else None,
                                   group.current_state_timestamp, members)
        return group_metadata_record(group.group_id, value)

    async def _store_group(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> None:
        # The in-memory group is the truth; the record only makes it durable, so it is not
        # replayed (Kafka's classic groups write with replayRecords=false). The caller acts on
        # the outcome only if the group is still at the generation it wrote.
        await self.writer.write(group.group_id, [self._group_record(group, assignment)], replay=False)

    async def _store_group_logged(self, group: GroupMetadata, assignment: Mapping[str, bytes]) -> None:
        try:
            await self._store_group(group, assignment)
        except Exception as e:
            log.warning("storing metadata of group %s failed: %s", group.group_id, e)

    def replay_group_metadata(self, group_id: str, gv: GroupMetadataValue) -> None:
        """A GroupMetadata record rebuilds the group (the last one wins; committed offsets, which
        are separate records, are kept). Replayed when a partition loads, and when a record that
        creates a classic group is written (a consumer group converted back, KIP-848); the
        classic protocol's own GroupMetadata writes are never replayed (see ``_store_group``),
        so a record can never take a live group back to an older generation."""
        self._rebuild_group(group_id, gv, self.groups.get(group_id))

    def _member_from_record(self, mr: MemberMetadataRecord, gv: GroupMetadataValue) -> MemberMetadata:
        protocols = [(gv.protocol, mr.subscription)] if gv.protocol is not None else []
        return MemberMetadata(mr.member_id, mr.group_instance_id, mr.client_id, mr.client_host,
                              mr.rebalance_timeout, mr.session_timeout, gv.protocol_type, protocols,
                              assignment=mr.assignment)

    def _rebuild_group(self, group_id: str, gv: GroupMetadataValue,
                       old: GroupMetadata | None) -> None:
        if old is not None:
            self.unload_group(old)
        state = GroupState.STABLE if gv.members else GroupState.EMPTY
        group = GroupMetadata(
            group_id, state=state,
            current_state_timestamp=gv.current_state_timestamp if gv.current_state_timestamp >= 0
            else self.scheduler.now_ms(),
            protocol_type=gv.protocol_type or None, protocol_name=gv.protocol,
            generation_id=gv.generation)
        if old is not None:
            group.offsets = old.offsets
        for mr in gv.members:
            group.add(self._member_from_record(mr, gv))
        group.leader_id = gv.leader if gv.leader in group.members else group.leader_id
        self.groups[group_id] = group
        if self.ownership.owns(group_id):
            for m in group.members.values():
                self.schedule_heartbeat(group, m)


@dataclass(slots=True)
class _JoinArgs:
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    reason: str | None
    supports_skip_assignment: bool

