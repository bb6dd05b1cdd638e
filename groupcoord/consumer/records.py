"""The consumer-group records of ``__consumer_offsets`` (KIP-848), in Kafka's binary layout.

Keys are non-flexible structs whose leading int16 is the record type (Kafka's key version):

====  ==========================================  =====================================
 3    ConsumerGroupMetadataKey (group)            value: the group epoch
 4    ConsumerGroupPartitionMetadataKey (group)   value: subscribed topics' id, name, partitions
 5    ConsumerGroupMemberMetadataKey (group, m)   value: a member's subscription and client
 6    ConsumerGroupTargetAssignmentMetadataKey    value: the target assignment's epoch
 7    ConsumerGroupTargetAssignmentMemberKey      value: one member's target partitions
 8    ConsumerGroupCurrentMemberAssignmentKey     value: a member's epochs, state, partitions
====  ==========================================  =====================================

Values are flexible version-0 structs encoded by kafka-python from the schemas in
:mod:`protocol.schemas` (classes in :mod:`protocol.kip848`), preceded by their int16 version.
A ``None`` value is a tombstone. No I/O.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import TypeVar

from kafka.protocol.api_data import ApiData
from kafka.protocol.data_container import DataContainer

from protocol import kafka_uuid, kip848

from ..records import Record, _Reader, _Writer
from .group import Assignment, ConsumerGroup, ConsumerGroupMember, MemberState, TopicMetadata

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
CONSUMER_KEY_TYPES = range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1)
_WITH_MEMBER = {MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT}


@dataclass(frozen=True, slots=True)
class ConsumerRecordKey:
    type: int
    group_id: str
    member_id: str | None = None

    def encode(self) -> bytes:
        return encode_group_key(self.type, self.group_id, self.member_id, _WITH_MEMBER)


def encode_group_key(type_: int, group_id: str, member_id: str | None, with_member: Container[int]) -> bytes:
    """A KIP-848/KIP-932 record key in ``__consumer_offsets``: the type, the group id and, for
    the member-scoped types, the member id (the share-group records use the same layout)."""
    w = _Writer()
    w.int16(type_)
    w.string(group_id)
    if type_ in with_member:
        w.string(member_id or "")
    return bytes(w.buf)


def decode_group_key(data: bytes, types: Container[int],
                     with_member: Container[int]) -> tuple[int, str, str | None] | None:
    """(type, group id, member id or None) of a key written by :func:`encode_group_key`; None
    for a type outside ``types``."""
    (version,) = struct.unpack_from(">h", data, 0)
    if version not in types:
        return None
    r = _Reader(data, 2)
    group_id = r.string()
    return version, group_id, (r.string() if version in with_member else None)


def decode_consumer_key(data: bytes) -> ConsumerRecordKey | None:
    got = decode_group_key(data, CONSUMER_KEY_TYPES, _WITH_MEMBER)
    return ConsumerRecordKey(*got) if got is not None else None


D = TypeVar("D", bound=ApiData)


def _value(obj: ApiData) -> bytes:
    return struct.pack(">h", 0) + bytes(obj.encode(version=0, header=False))


def decode_value(cls: type[D], data: bytes) -> D:
    (version,) = struct.unpack_from(">h", data, 0)
    if version != 0:
        raise ValueError(f"unknown {cls.__name__} version {version}")
    return cls.decode(data[2:], version=0, header=False)


def _topic_partitions(cls: type[DataContainer], a: Assignment) -> list[DataContainer]:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(a.items(), key=lambda kv: str(kv[0])) if ps]


def assignment_from(items: Iterable[DataContainer] | None) -> Assignment:
    out: Assignment = {}
    for tp in items or []:
        if tp.partitions:
            out.setdefault(tp.topic_id, set()).update(tp.partitions)
    return out


# --- builders (Kafka's GroupCoordinatorRecordHelpers) -----------------------------------------

def group_epoch_record(group_id: str, epoch: int | None) -> Record:
    key = ConsumerRecordKey(GROUP_METADATA, group_id).encode()
    if epoch is None:
        return key, None
    return key, _value(kip848.ConsumerGroupMetadataValue(version=0, epoch=epoch))


def partition_metadata_record(group_id: str, topics: dict[str, TopicMetadata] | None) -> Record:
    key = ConsumerRecordKey(PARTITION_METADATA, group_id).encode()
    if topics is None:
        return key, None
    V = kip848.ConsumerGroupPartitionMetadataValue
    return key, _value(V(version=0, topics=[
        V.TopicMetadata(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.num_partitions,
                        partition_metadata=[])
        for t in sorted(topics.values(), key=lambda t: t.name)]))


def member_metadata_record(group_id: str, member_id: str, m: ConsumerGroupMember | None) -> Record:
    key = ConsumerRecordKey(MEMBER_METADATA, group_id, member_id).encode()
    if m is None:
        return key, None
    V = kip848.ConsumerGroupMemberMetadataValue
    classic = None
    if m.classic is not None:
        C = V.ClassicMemberMetadata
        classic = C(session_timeout_ms=m.classic.session_timeout_ms, supported_protocols=[
            C.ClassicProtocol(name=n, metadata=bytes(meta)) for n, meta in m.classic.protocols])
    return key, _value(V(
        version=0, instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
        client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex, rebalance_timeout_ms=m.rebalance_timeout_ms,
        server_assignor=m.server_assignor, classic_member_metadata=classic))


def target_assignment_epoch_record(group_id: str, epoch: int | None) -> Record:
    key = ConsumerRecordKey(TARGET_ASSIGNMENT_METADATA, group_id).encode()
    if epoch is None:
        return key, None
    return key, _value(kip848.ConsumerGroupTargetAssignmentMetadataValue(
        version=0, assignment_epoch=epoch))


def target_assignment_record(group_id: str, member_id: str, a: Assignment | None) -> Record:
    key = ConsumerRecordKey(TARGET_ASSIGNMENT_MEMBER, group_id, member_id).encode()
    if a is None:
        return key, None
    V = kip848.ConsumerGroupTargetAssignmentMemberValue
    return key, _value(V(version=0, topic_partitions=_topic_partitions(V.TopicPartition, a)))


def current_assignment_record(group_id: str, member_id: str, epoch: int, previous_epoch: int,
                              state: MemberState, assigned: Assignment,
                              pending_revocation: Assignment) -> Record:
    key = ConsumerRecordKey(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id).encode()
    V = kip848.ConsumerGroupCurrentMemberAssignmentValue
    return key, _value(V(version=0, member_epoch=epoch, previous_member_epoch=previous_epoch,
                         state=state.value,
                         assigned_partitions=_topic_partitions(V.TopicPartitions, assigned),
                         partitions_pending_revocation=_topic_partitions(V.TopicPartitions,
                                                                         pending_revocation)))


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return ConsumerRecordKey(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id).encode(), None


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Kafka's ``removeMember``: the member's three records are tombstoned."""
    return [current_assignment_tombstone(group_id, member_id),
            target_assignment_record(group_id, member_id, None),
            member_metadata_record(group_id, member_id, None)]


def group_tombstones(group: ConsumerGroup) -> list[Record]:
    """Kafka's ``createGroupTombstoneRecords`` for a consumer group."""
    gid = group.group_id
    records: list[Record] = []
    for mid in group.members:
        records += member_tombstones(gid, mid)
    records.append(target_assignment_epoch_record(gid, None))
    records.append(partition_metadata_record(gid, None))
    records.append(group_epoch_record(gid, None))
    return records


VALUE_CLASSES: dict[int, type[ApiData]] = {
    GROUP_METADATA: kip848.ConsumerGroupMetadataValue,
    PARTITION_METADATA: kip848.ConsumerGroupPartitionMetadataValue,
    MEMBER_METADATA: kip848.ConsumerGroupMemberMetadataValue,
    TARGET_ASSIGNMENT_METADATA: kip848.ConsumerGroupTargetAssignmentMetadataValue,
    TARGET_ASSIGNMENT_MEMBER: kip848.ConsumerGroupTargetAssignmentMemberValue,
    CURRENT_MEMBER_ASSIGNMENT: kip848.ConsumerGroupCurrentMemberAssignmentValue,
}


def value_to_plain(key_type: int, value: bytes) -> object:
    """A consumer-group record value as plain data (topic ids in Kafka's text form), for tools."""
    def plain(obj: object) -> object:
        if isinstance(obj, uuid.UUID):
            return kafka_uuid.to_string(obj)
        if isinstance(obj, dict):
            return {k: kafka_uuid.to_string(v) if k == "topic_id" and isinstance(v, str) else plain(v)
                    for k, v in obj.items() if k != "version"}
        if isinstance(obj, (list, tuple)):
            return [plain(x) for x in obj]
        if isinstance(obj, (bytes, bytearray)):
            return bytes(obj).hex()
        return obj

    return plain(decode_value(VALUE_CLASSES[key_type], value).to_dict())
