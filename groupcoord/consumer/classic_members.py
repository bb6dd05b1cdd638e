"""Classic members inside a KIP-848 consumer group (online migration): their JoinGroup,
SyncGroup, Heartbeat and LeaveGroup.

A classic member is a :class:`~groupcoord.consumer.group.ConsumerGroupMember` with ``classic``
metadata. Its JoinGroup carries its subscription (and, from ConsumerProtocolSubscription v1, its
owned partitions); the coordinator updates the member, the target assignment and the member's
reconciliation exactly as for a heartbeat (through the consumer group manager's write path), and
answers at once with the member epoch as the generation and no leader (nobody assigns: the
coordinator has). SyncGroup returns the member's partitions as a ConsumerProtocolAssignment;
Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin (a newer group epoch,
partitions to revoke, or partitions that became free). LeaveGroup fences it. Offsets it commits
carry the member epoch as generation (:mod:`groupcoord.offsets`).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

from protocol import kafka_uuid
from protocol.errors import ErrorCode

from ..config import GroupConfig
from ..group import CONSUMER_PROTOCOL_TYPE
from ..records import Record
from ..shard import RecordWriter
from ..timer import Scheduler
from .group import ClassicMemberMetadata, ConsumerGroup, ConsumerGroupMember, MemberState
from .manager import ConsumerGroupManager
from .messages import GroupError
from .migration import encode_assignment, parse_subscription, topic_names
from .reconciliation import Owned
from .records import member_tombstones

log = logging.getLogger("groupcoord.consumer")


class ClassicMembers:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic members inside the consumer
    groups of ``consumers``, whose write path (member update, fencing, timers) they go through."""

    def __init__(self, consumers: ConsumerGroupManager, config: GroupConfig, scheduler: Scheduler,
                 writer: RecordWriter) -> None:
        self.consumers = consumers
        self.consumer_groups = consumers.consumer_groups
        self.config = config
        self.scheduler = scheduler
        self.writer = writer

    def _classic_member(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> ConsumerGroupMember:
        if instance_id is not None:
            m = group.static_member(instance_id)
            if m is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
            if m.member_id != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID)
        m = group.members.get(member_id)
        if m is None or m.classic is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID)
        return m

    async def join(self, group_id: str, member_id: str, protocol_type: str,
                   protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                   rebalance_timeout_ms: int, instance_id: str | None, client_id: str,
                   client_host: str, require_known: bool) -> tuple[ErrorCode, str, int, str]:
        """(error, member id, generation = member epoch, protocol name)."""
        async with self.consumers.lock(group_id):
            group = self.consumer_groups.get(group_id)
            if group is None:
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id, -1, ""
            if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id, -1, ""
            unknown = not member_id
            if unknown:
                member_id = kafka_uuid.to_string(uuid.uuid4())
                if require_known:
                    return ErrorCode.MEMBER_ID_REQUIRED, member_id, -1, ""
            if len(group.members) >= self.config.group_consumer_max_size and \
                    member_id not in group.members and group.static_member(instance_id) is None:
                return ErrorCode.GROUP_MAX_SIZE_REACHED, member_id, -1, ""
            try:
                topics, owned_names = parse_subscription(protocols[0][1])
            except Exception:
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id, -1, ""
            view = self.consumers.topics()
            owned: Owned = [(view[t][0], ps) for t, ps in owned_names if t in view]
            records: list[Record] = []
            members = dict(group.members)
            targets_now = dict(group.target_assignment)
            existing = group.static_member(instance_id)
            if existing is not None and existing.member_id != member_id:
                if not unknown:
                    return ErrorCode.FENCED_INSTANCE_ID, member_id, -1, ""
                # A restarted static member replaces its old incarnation.
                records += member_tombstones(group_id, existing.member_id)
                members.pop(existing.member_id, None)
                targets_now.pop(existing.member_id, None)
            old = group.members.get(member_id)
            if old is not None and old.classic is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, member_id, -1, ""
            is_new = old is None
            current = old or ConsumerGroupMember(member_id)
            updated = replace(
                current, instance_id=instance_id, rebalance_timeout_ms=rebalance_timeout_ms,
                subscribed_topic_names=topics, subscribed_topic_regex=None, server_assignor=None,
                client_id=client_id, client_host=client_host,
                classic=ClassicMemberMetadata(session_timeout_ms,
                                              tuple((n, bytes(m)) for n, m in protocols)),
                assigned={t: set(ps) for t, ps in current.assigned.items()},
                pending_revocation={t: set(ps) for t, ps in current.pending_revocation.items()})
            if is_new:
                log.info("[GroupId %s] member %s joins the consumer group using the classic "
                         "protocol", group_id, member_id)
            member = await self.consumers.update_member(group, members, targets_now, records, current,
                                               updated, is_new, owned if not is_new else [], set())
            if member.join_timer is not None:
                member.join_timer.cancel()
                member.join_timer = None
            return ErrorCode.NONE, member_id, member.member_epoch, protocols[0][0]

    def sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None) -> tuple[ErrorCode, bytes, str | None]:
        group = self.consumer_groups[group_id]
        try:
            m = self._classic_member(group, member_id, instance_id)
        except GroupError as e:
            return e.code, b"", None
        if generation_id != m.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION, b"", None
        assert m.classic is not None
        names = [n for n, _ in m.classic.protocols]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                (protocol_name is not None and protocol_name not in names):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL, b"", None
        self.consumers.schedule_session_timeout(group, m)
        return ErrorCode.NONE, encode_assignment(m.assigned, topic_names(group)), \
            protocol_name or (names[0] if names else None)

    def heartbeat(self, group_id: str, member_id: str, generation_id: int,
                  instance_id: str | None) -> ErrorCode:
        group = self.consumer_groups[group_id]
        try:
            m = self._classic_member(group, member_id, instance_id)
        except GroupError as e:
            return e.code
        if generation_id != m.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.consumers.schedule_session_timeout(group, m)
        if m.member_epoch < group.group_epoch or m.state is MemberState.UNREVOKED_PARTITIONS or \
                (m.state is MemberState.UNRELEASED_PARTITIONS and
                 not self._waiting_on_unreleased(group, m)):
            if m.join_timer is None:
                # Kafka's join timeout: a member told to rejoin has its rebalance timeout to do it.
                timeout = m.rebalance_timeout_ms if m.rebalance_timeout_ms > 0 else 300_000
                epoch = m.member_epoch
                m.join_timer = self.scheduler.call_later(timeout, lambda: self.consumers.on_member_timeout(
                    group_id, member_id, epoch,
                    f"it did not rejoin within its rebalance timeout ({timeout}ms)", rejoin=True))
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _waiting_on_unreleased(self, group: ConsumerGroup, m: ConsumerGroupMember) -> bool:
        for t, ps in group.target_assignment.get(m.member_id, {}).items():
            for p in ps:
                if p not in m.assigned.get(t, ()) and group.current_partition_epoch(t, p) != -1:
                    return True
        return False

    def leave(self, group_id: str, members: list[tuple[str, str | None]],
              ) -> list[tuple[str, str | None, ErrorCode]]:
        """LeaveGroup for classic members of a consumer group: checked now, fenced by a write
        that follows (the answer does not wait for it, as a classic leave does not)."""
        group = self.consumer_groups[group_id]
        out = []
        for member_id, instance_id in members:
            m = group.static_member(instance_id) if not member_id else group.members.get(member_id)
            if m is None:
                out.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
            elif instance_id is not None and member_id and m.member_id != member_id:
                out.append((member_id, instance_id, ErrorCode.FENCED_INSTANCE_ID))
            else:
                log.info("[GroupId %s] member %s left the consumer group (LeaveGroup)", group_id,
                         m.member_id)
                self.writer.spawn(self._fence_by_id(group_id, m.member_id))
                out.append((member_id, instance_id, ErrorCode.NONE))
        return out

    async def _fence_by_id(self, group_id: str, member_id: str) -> None:
        async with self.consumers.lock(group_id):
            group = self.consumer_groups.get(group_id)
            m = group.members.get(member_id) if group is not None else None
            if group is not None and m is not None:
                await self.consumers.fence_member(group, m)
