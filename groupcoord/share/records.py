"""The share-group records of ``__consumer_offsets`` (KIP-932), in Kafka's binary layout.

Keys are non-flexible structs whose leading int16 is the record type:

====  ==============================================  =========================================
 10   ShareGroupMemberMetadataKey (g, m)              value: rack, client, subscription
 11   ShareGroupMetadataKey (group)                   value: the group epoch, metadata hash
 12   ShareGroupTargetAssignmentMetadataKey (group)   value: the target assignment's epoch
 13   ShareGroupTargetAssignmentMemberKey (g, m)      value: a member's target partitions
 14   ShareGroupCurrentMemberAssignmentKey (g, m)     value: a member's epochs, state, partitions
====  ==============================================  =========================================

Values are flexible version-0 structs (schemas in :mod:`protocol.schemas`, classes in
:mod:`protocol.kip932`) preceded by their int16 version; ``None`` is a tombstone. No I/O.
Key and value layouts are Kafka 4.1's (``group-coordinator/src/main/resources/common/message``),
pinned by ``tests/protocol/test_kip932_layout.py``. The group's MetadataHash (KIP-1101: the hash
of its subscribed topics' metadata, which Kafka compares to decide on a rebalance) is written as
0, what Kafka computes for a group without topics; Samsa never reads it back (a Kafka coordinator
loading such a record would merely see a changed hash and bump the group epoch once).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafka.protocol.data_container import DataContainer

from protocol import kip932

from ..consumer.records import _value, decode_group_key, encode_group_key
from ..consumer.records import decode_value as decode_share_value  # noqa: F401  (the share manager reads values with it)
from ..records import Record
from .group import Assignment, ShareGroupMember

SHARE_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_TARGET_ASSIGNMENT_METADATA = 12
SHARE_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_KEY_TYPES = range(SHARE_MEMBER_METADATA, SHARE_CURRENT_MEMBER_ASSIGNMENT + 1)
_WITH_MEMBER = (SHARE_MEMBER_METADATA, SHARE_TARGET_ASSIGNMENT_MEMBER, SHARE_CURRENT_MEMBER_ASSIGNMENT)
MEMBER_STATE_STABLE = 0  # Kafka's MemberState.STABLE: share members never revoke


@dataclass(frozen=True, slots=True)
class ShareRecordKey:
    type: int
    group_id: str
    member_id: str | None = None

    def encode(self) -> bytes:
        return encode_group_key(self.type, self.group_id, self.member_id, _WITH_MEMBER)


def decode_share_key(data: bytes) -> ShareRecordKey | None:
    got = decode_group_key(data, SHARE_KEY_TYPES, _WITH_MEMBER)
    return ShareRecordKey(*got) if got is not None else None


def group_epoch_record(group_id: str, epoch: int | None) -> Record:
    key = ShareRecordKey(SHARE_GROUP_METADATA, group_id).encode()
    if epoch is None:
        return key, None
    return key, _value(kip932.ShareGroupMetadataValue(epoch=epoch, metadata_hash=0))


def member_record(group_id: str, member: ShareGroupMember | str) -> Record:
    """A member's metadata; given only a member id, its tombstone."""
    if isinstance(member, str):
        return ShareRecordKey(SHARE_MEMBER_METADATA, group_id, member).encode(), None
    key = ShareRecordKey(SHARE_MEMBER_METADATA, group_id, member.member_id).encode()
    return key, _value(kip932.ShareGroupMemberMetadataValue(
        rack_id=member.rack_id, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names)))


def _partitions(cls: type[DataContainer], a: Assignment) -> list[DataContainer]:
    return [cls(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps]


def assignment_of(items: Iterable[DataContainer] | None) -> Assignment:
    return {tp.topic_id: set(tp.partitions or []) for tp in items or []}


def target_epoch_record(group_id: str, epoch: int | None) -> Record:
    key = ShareRecordKey(SHARE_TARGET_ASSIGNMENT_METADATA, group_id).encode()
    if epoch is None:
        return key, None
    return key, _value(kip932.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def target_member_record(group_id: str, member_id: str, target: Assignment | None) -> Record:
    key = ShareRecordKey(SHARE_TARGET_ASSIGNMENT_MEMBER, group_id, member_id).encode()
    if target is None:
        return key, None
    v = kip932.ShareGroupTargetAssignmentMemberValue
    return key, _value(v(topic_partitions=_partitions(v.TopicPartition, target)))


def current_assignment_record(group_id: str, member_id: str, member_epoch: int | None = None,
                              previous_member_epoch: int = 0,
                              assignment: Assignment | None = None) -> Record:
    """A member's current assignment; without an epoch, its tombstone."""
    key = ShareRecordKey(SHARE_CURRENT_MEMBER_ASSIGNMENT, group_id, member_id).encode()
    if member_epoch is None:
        return key, None
    v = kip932.ShareGroupCurrentMemberAssignmentValue
    return key, _value(v(member_epoch=member_epoch, previous_member_epoch=previous_member_epoch,
                         state=MEMBER_STATE_STABLE,
                         assigned_partitions=_partitions(v.TopicPartitions, assignment or {})))
