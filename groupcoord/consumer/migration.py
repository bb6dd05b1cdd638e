"""KIP-848 online migration: classic members inside a consumer group, and converting a group
between the two protocols (``group.consumer.migration.policy``).

* A classic member (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) of a consumer group is a
  :class:`~groupcoord.consumer.group.ConsumerGroupMember` with ``classic`` metadata. Its
  JoinGroup carries its subscription (and, from ConsumerProtocolSubscription v1, its owned
  partitions); the coordinator updates the member, the target assignment and the member's
  reconciliation exactly as for a heartbeat, and answers at once with the member epoch as the
  generation and no leader (nobody assigns: the coordinator has). SyncGroup returns the
  member's partitions as a ConsumerProtocolAssignment; Heartbeat answers REBALANCE_IN_PROGRESS
  when the member must rejoin (a newer group epoch, partitions to revoke, or partitions that
  became free). LeaveGroup fences it. Offsets it commits carry the member epoch as generation.
* Upgrade (``upgrade``/``bidirectional``): the first ConsumerGroupHeartbeat for a non-empty
  classic group of protocol type ``consumer`` converts it: each classic member keeps its
  partitions at epoch = the group's generation, then the new member's join bumps the group
  epoch and the classic members rejoin to reconcile. Records: the classic GroupMetadata
  tombstone, then the consumer group's records.
* Downgrade (``downgrade``/``bidirectional``): when the last consumer-protocol member leaves a
  group whose remaining members are all classic, the group becomes a classic group again (the
  consumer records tombstoned, a GroupMetadata record written) and a rebalance starts.

Committed offsets are records of their own and survive every conversion.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import replace

from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from protocol import kafka_uuid
from protocol.errors import ErrorCode

from ..group import CONSUMER_PROTOCOL_TYPE, GroupMetadata
from ..records import GroupMetadataValue, MemberMetadataRecord, group_metadata_record
from ..state import GroupState
from .group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
)
from .manager import ConsumerGroupManager, Record, TopicsView
from .messages import GroupError
from .reconciliation import Owned
from .records import (
    current_assignment_record,
    group_epoch_record,
    member_metadata_record,
    partition_metadata_record,
    target_assignment_epoch_record,
    target_assignment_record,
)

log = logging.getLogger("groupcoord.consumer")


def parse_subscription(metadata: bytes) -> tuple[list[str], list[tuple[str, list[int]]]]:
    """Topics and owned partitions of a ConsumerProtocolSubscription (any version 0-3)."""
    s = ConsumerProtocolSubscription.decode(bytes(metadata))
    owned = [(tp.topic, list(tp.partitions or [])) for tp in (getattr(s, "owned_partitions", None) or [])]
    return list(s.topics or []), owned


def encode_assignment(a: Assignment, names: dict[uuid.UUID, str]) -> bytes:
    A = ConsumerProtocolAssignment
    return bytes(A(version=0, user_data=None, assigned_partitions=[
        A.TopicPartition(topic=names[t], partitions=sorted(ps))
        for t, ps in sorted(a.items(), key=lambda kv: names.get(kv[0], "")) if t in names]
    ).encode(version=0))


def decode_assignment(data: bytes, view: TopicsView) -> Assignment:
    out: Assignment = {}
    if not data:
        return out
    a = ConsumerProtocolAssignment.decode(bytes(data))
    for tp in a.assigned_partitions or []:
        if tp.topic in view and tp.partitions:
            out.setdefault(view[tp.topic][0], set()).update(tp.partitions)
    return out


class ConsumerGroupMigration(ConsumerGroupManager):
    """Classic members in consumer groups, and conversions between the group types."""

    def _policy(self) -> str:
        return self.config.group_consumer_migration_policy

    def _names(self, group: ConsumerGroup) -> dict[uuid.UUID, str]:
        """Topic id -> name for the group's subscribed topics (all a member can be assigned)."""
        return {t.topic_id: n for n, t in group.subscription_metadata.items()}

    # --- classic requests for a consumer group ----------------------------------------------

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

    async def classic_join_consumer_group(self, group_id: str, member_id: str, protocol_type: str,
                                          protocols: list[tuple[str, bytes]], session_timeout_ms: int,
                                          rebalance_timeout_ms: int, instance_id: str | None,
                                          client_id: str, client_host: str,
                                          require_known: bool) -> tuple[ErrorCode, str, int, str]:
        """(error, member id, generation = member epoch, protocol name)."""
        async with self._cg_locks.setdefault(group_id, asyncio.Lock()):
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
            view = self.topics()
            owned: Owned = [(view[t][0], ps) for t, ps in owned_names if t in view]
            records: list[Record] = []
            members = dict(group.members)
            targets_now = dict(group.target_assignment)
            existing = group.static_member(instance_id)
            if existing is not None and existing.member_id != member_id:
                if not unknown:
                    return ErrorCode.FENCED_INSTANCE_ID, member_id, -1, ""
                # A restarted static member replaces its old incarnation.
                records += self._removal_records(group_id, existing.member_id)
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
            member = await self._update_member(group, members, targets_now, records, current,
                                               updated, is_new, owned if not is_new else [], set())
            if member.join_timer is not None:
                member.join_timer.cancel()
                member.join_timer = None
            return ErrorCode.NONE, member_id, member.member_epoch, protocols[0][0]

    def classic_sync_consumer_group(self, group_id: str, generation_id: int, member_id: str,
                                    instance_id: str | None, protocol_type: str | None,
                                    protocol_name: str | None) -> tuple[ErrorCode, bytes, str | None]:
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
        self._schedule_session_timeout(group, m)
        return ErrorCode.NONE, encode_assignment(m.assigned, self._names(group)), \
            protocol_name or (names[0] if names else None)

    def classic_heartbeat_consumer_group(self, group_id: str, member_id: str, generation_id: int,
                                         instance_id: str | None) -> ErrorCode:
        group = self.consumer_groups[group_id]
        try:
            m = self._classic_member(group, member_id, instance_id)
        except GroupError as e:
            return e.code
        if generation_id != m.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_session_timeout(group, m)
        if m.member_epoch < group.group_epoch or m.state is MemberState.UNREVOKED_PARTITIONS or \
                (m.state is MemberState.UNRELEASED_PARTITIONS and
                 not self._waiting_on_unreleased(group, m)):
            if m.join_timer is None:
                # Kafka's join timeout: a member told to rejoin has its rebalance timeout to do it.
                timeout = m.rebalance_timeout_ms if m.rebalance_timeout_ms > 0 else 300_000
                epoch = m.member_epoch
                m.join_timer = self.scheduler.call_later(timeout, lambda: self._on_member_timeout(
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

    def classic_leave_consumer_group(self, group_id: str, members: list[tuple[str, str | None]],
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
                self._spawn(self._fence_by_id(group_id, m.member_id))
                out.append((member_id, instance_id, ErrorCode.NONE))
        return out

    async def _fence_by_id(self, group_id: str, member_id: str) -> None:
        async with self._cg_locks.setdefault(group_id, asyncio.Lock()):
            group = self.consumer_groups.get(group_id)
            m = group.members.get(member_id) if group is not None else None
            if group is not None and m is not None:
                await self._fence_member(group, m)

    # --- upgrade: a classic group becomes a consumer group ----------------------------------

    def upgrade_classic_group(self, classic: GroupMetadata) -> tuple[ConsumerGroup, list[Record]] | None:
        """The consumer group a non-empty classic group becomes when a consumer-protocol member
        joins it, and the records that make it so; None when the policy or the group forbids
        it (Kafka's ``validateOnlineUpgrade``)."""
        if self._policy() not in ("upgrade", "bidirectional"):
            return None
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or \
                len(classic.members) >= self.config.group_consumer_max_size:
            return None
        gid = classic.group_id
        view = self.topics()
        epoch = max(classic.generation_id, 0)
        group = ConsumerGroup(gid, group_epoch=epoch, assignment_epoch=epoch,
                              offsets=classic.offsets, pending_txn_offsets=classic.pending_txn_offsets)
        records: list[Record] = [group_metadata_record(gid, None)]
        for cm in classic.members.values():
            meta = cm.metadata(classic.protocol_name) if classic.protocol_name else \
                (cm.protocols[0][1] if cm.protocols else b"")
            try:
                topics, _ = parse_subscription(meta)
                assigned = decode_assignment(cm.assignment, view) if classic.is_in(GroupState.STABLE) \
                    else {}
            except Exception:
                return None
            m = ConsumerGroupMember(
                cm.member_id, cm.group_instance_id, None, cm.client_id, cm.client_host, topics, None,
                cm.rebalance_timeout_ms, None,
                ClassicMemberMetadata(cm.session_timeout_ms, tuple(cm.protocols)),
                epoch, epoch, MemberState.STABLE, assigned, {})
            group.members[m.member_id] = m
            if m.instance_id is not None:
                group.static_members[m.instance_id] = m.member_id
            group.target_assignment[m.member_id] = {t: set(ps) for t, ps in assigned.items()}
            group.add_partition_epochs(assigned, epoch)
            records.append(member_metadata_record(gid, m.member_id, m))
            records.append(target_assignment_record(gid, m.member_id, assigned))
            records.append(current_assignment_record(gid, m.member_id, epoch, epoch,
                                                     MemberState.STABLE, assigned, {}))
        group.subscription_metadata = self._subscription_metadata(group.members.values(), view)
        records.append(partition_metadata_record(gid, group.subscription_metadata))
        records.append(target_assignment_epoch_record(gid, epoch))
        records.append(group_epoch_record(gid, epoch))
        log.info("[GroupId %s] converting the classic group (generation %d, %d members) to a "
                 "consumer group", gid, epoch, len(group.members))
        return group, records

    # --- downgrade: a consumer group becomes a classic group --------------------------------

    def downgrade_records(self, group: ConsumerGroup, leaving: str) -> list[Record] | None:
        """Kafka's ``validateOnlineDowngrade`` + ``convertToClassicGroup``: when ``leaving`` is
        the last consumer-protocol member and the others are classic, the records that turn the
        group into a classic group; else None."""
        rest = [m for mid, m in group.members.items() if mid != leaving]
        if self._policy() not in ("downgrade", "bidirectional") or not rest or \
                any(m.classic is None for m in rest) or \
                group.members[leaving].classic is not None or \
                len(rest) > self.config.group_max_size:
            return None
        common = None
        for m in rest:
            assert m.classic is not None
            names = [n for n, _ in m.classic.protocols]
            common = names if common is None else [n for n in common if n in names]
        if not common:
            return None
        protocol = common[0]
        topic_names = self._names(group)
        gid = group.group_id
        records = self.consumer_group_tombstones(group)
        value = GroupMetadataValue(
            CONSUMER_PROTOCOL_TYPE, group.group_epoch, protocol, rest[0].member_id,
            self.scheduler.now_ms(),
            [MemberMetadataRecord(m.member_id, m.instance_id, m.client_id, m.client_host,
                                  m.rebalance_timeout_ms if m.rebalance_timeout_ms > 0 else 300_000,
                                  m.classic.session_timeout_ms if m.classic else 45_000,
                                  dict(m.classic.protocols if m.classic else ()).get(protocol, b""),
                                  encode_assignment(m.assigned, topic_names)) for m in rest])
        records.append(group_metadata_record(gid, value))
        log.info("[GroupId %s] converting the consumer group to a classic group: its last "
                 "consumer-protocol member left", gid)
        return records
