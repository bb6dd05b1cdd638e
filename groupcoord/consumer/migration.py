"""KIP-848 online migration: converting a group between the two protocols
(``group.consumer.migration.policy``), and the ConsumerProtocol codecs classic members speak.
These are pure functions of a group; the classic requests of members inside a consumer group
are served by :class:`groupcoord.consumer.classic_members.ClassicMembers`.

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

import logging
import uuid

from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from ..config import GroupConfig
from ..group import CONSUMER_PROTOCOL_TYPE, GroupMetadata
from ..records import GroupMetadataValue, MemberMetadataRecord, Record, group_metadata_record
from ..state import GroupState
from .group import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicsView,
    subscription_metadata,
)
from .records import (
    current_assignment_record,
    group_epoch_record,
    group_tombstones,
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


def topic_names(group: ConsumerGroup) -> dict[uuid.UUID, str]:
    """Topic id -> name for the group's subscribed topics (all a member can be assigned)."""
    return {t.topic_id: n for n, t in group.subscription_metadata.items()}


# --- upgrade: a classic group becomes a consumer group ----------------------------------------

def upgrade_classic_group(classic: GroupMetadata, config: GroupConfig,
                          view: TopicsView) -> tuple[ConsumerGroup, list[Record]] | None:
    """The consumer group a non-empty classic group becomes when a consumer-protocol member
    joins it, and the records that make it so; None when the policy or the group forbids
    it (Kafka's ``validateOnlineUpgrade``)."""
    if config.group_consumer_migration_policy not in ("upgrade", "bidirectional"):
        return None
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE or \
            len(classic.members) >= config.group_consumer_max_size:
        return None
    gid = classic.group_id
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
    group.subscription_metadata = subscription_metadata(group.members.values(), view)
    records.append(partition_metadata_record(gid, group.subscription_metadata))
    records.append(target_assignment_epoch_record(gid, epoch))
    records.append(group_epoch_record(gid, epoch))
    log.info("[GroupId %s] converting the classic group (generation %d, %d members) to a "
             "consumer group", gid, epoch, len(group.members))
    return group, records


# --- downgrade: a consumer group becomes a classic group ----------------------------------------

def downgrade_records(group: ConsumerGroup, leaving: str, config: GroupConfig,
                      now_ms: int) -> list[Record] | None:
    """Kafka's ``validateOnlineDowngrade`` + ``convertToClassicGroup``: when ``leaving`` is
    the last consumer-protocol member and the others are classic, the records that turn the
    group into a classic group; else None."""
    rest = [m for mid, m in group.members.items() if mid != leaving]
    if config.group_consumer_migration_policy not in ("downgrade", "bidirectional") or not rest or \
            any(m.classic is None for m in rest) or \
            group.members[leaving].classic is not None or \
            len(rest) > config.group_max_size:
        return None
    common = None
    for m in rest:
        assert m.classic is not None
        names = [n for n, _ in m.classic.protocols]
        common = names if common is None else [n for n in common if n in names]
    if not common:
        return None
    protocol = common[0]
    names_by_id = topic_names(group)
    gid = group.group_id
    records = group_tombstones(group)
    value = GroupMetadataValue(
        CONSUMER_PROTOCOL_TYPE, group.group_epoch, protocol, rest[0].member_id,
        now_ms,
        [MemberMetadataRecord(m.member_id, m.instance_id, m.client_id, m.client_host,
                              m.rebalance_timeout_ms if m.rebalance_timeout_ms > 0 else 300_000,
                              m.classic.session_timeout_ms if m.classic else 45_000,
                              dict(m.classic.protocols if m.classic else ()).get(protocol, b""),
                              encode_assignment(m.assigned, names_by_id)) for m in rest])
    records.append(group_metadata_record(gid, value))
    log.info("[GroupId %s] converting the consumer group to a classic group: its last "
             "consumer-protocol member left", gid)
    return records
