"""The records of ``__consumer_offsets``: keys, values, and which partition a group lives on.

Theory of operation: every durable fact about a classic group is one record in the group's
partition of the compacted topic ``__consumer_offsets``, in exactly the binary layout Kafka's
group coordinator writes (``group-coordinator/src/main/resources/common/message/*.json``), so
that Kafka's own tools (``kafka-console-consumer --formatter ...OffsetsMessageFormatter``) and
ours read the same bytes. A record's key and value each begin with an int16 schema version.

Keys:

* version 0 or 1: ``OffsetCommitKey`` (group, topic, partition). Kafka writes 1.
* version 2: ``GroupMetadataKey`` (group).
* versions 3 and up belong to the KIP-848 consumer-group and share-group records; a classic
  coordinator skips them.

Values (``None`` is a tombstone: the offset or the group is deleted):

* ``OffsetCommitValue`` v0-v4. We write v3 (``offset, leaderEpoch, metadata, commitTimestamp``),
  or v1 when the client asked for an explicit retention (``expireTimestamp``), as Kafka does.
* ``GroupMetadataValue`` v0-v4. We write v3 (``currentStateTimestamp`` and
  ``groupInstanceId``, KIP-345). v4 is the first flexible version; we read it.

This module does no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from protocol.varint import read_uvarint

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50

_INT32_MIN = -(2**31)


def java_string_hashcode(s: str) -> int:
    """``java.lang.String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    wrapped to a signed 32-bit int the way Java's int arithmetic overflows."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``Math.abs`` but maps ``Integer.MIN_VALUE`` to 0 (where
    ``Math.abs`` would return the negative ``MIN_VALUE`` itself)."""
    return 0 if n == _INT32_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition whose leader coordinates ``group_id``."""
    return java_abs(java_string_hashcode(group_id)) % num_partitions


# --- a minimal reader/writer for Kafka's (non-flexible and flexible) struct encodings ------------

class _Writer:
    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int16(self, v: int) -> None:
        self.buf += struct.pack(">h", v)

    def int32(self, v: int) -> None:
        self.buf += struct.pack(">i", v)

    def int64(self, v: int) -> None:
        self.buf += struct.pack(">q", v)

    def string(self, s: str | None) -> None:
        if s is None:
            self.int16(-1)
            return
        b = s.encode("utf-8")
        self.int16(len(b))
        self.buf += b

    def bytes_(self, b: bytes | None) -> None:
        if b is None:
            self.int32(-1)
            return
        self.int32(len(b))
        self.buf += b


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            raise ValueError("record truncated")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return bytes(b)

    def int16(self) -> int:
        v: int = struct.unpack_from(">h", self.buf, self.pos)[0]
        self.pos += 2
        return v

    def int32(self) -> int:
        v: int = struct.unpack_from(">i", self.buf, self.pos)[0]
        self.pos += 4
        return v

    def int64(self) -> int:
        v: int = struct.unpack_from(">q", self.buf, self.pos)[0]
        self.pos += 8
        return v

    def uvarint(self) -> int:
        v, self.pos = read_uvarint(self.buf, self.pos)
        return v

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1  # compact: length + 1, 0 means null
        return self.int32() if wide else self.int16()

    def nullable_string(self) -> str | None:
        n = self._length(False)
        return None if n < 0 else self._take(n).decode("utf-8")

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise ValueError("null in a non-nullable string field")
        return s

    def bytes_(self) -> bytes:
        n = self._length(True)
        return b"" if n < 0 else self._take(n)

    def array_length(self) -> int:
        return self._length(True)

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.pos += self.uvarint()


# --- keys --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int

    def encode(self) -> bytes:
        w = _Writer()
        w.int16(OFFSET_COMMIT_KEY_VERSION)
        w.string(self.group)
        w.string(self.topic)
        w.int32(self.partition)
        return bytes(w.buf)


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str

    def encode(self) -> bytes:
        w = _Writer()
        w.int16(GROUP_METADATA_KEY_VERSION)
        w.string(self.group)
        return bytes(w.buf)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """Decode a ``__consumer_offsets`` record key; ``None`` for record types a classic
    coordinator does not own (KIP-848 consumer groups, share groups, ...)."""
    r = _Reader(data)
    version = r.int16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupMetadataKey(r.string())
    return None


# --- values ------------------------------------------------------------------------------------

@dataclass(slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only v1 carries it: an explicit retention from OffsetCommit v2-v4

    def encode(self) -> bytes:
        w = _Writer()
        if self.expire_timestamp >= 0:
            w.int16(OFFSET_COMMIT_VALUE_VERSION_EXPIRE)
            w.int64(self.offset)
            w.string(self.metadata)
            w.int64(self.commit_timestamp)
            w.int64(self.expire_timestamp)
        else:
            w.int16(OFFSET_COMMIT_VALUE_VERSION)
            w.int64(self.offset)
            w.int32(self.leader_epoch)
            w.string(self.metadata)
            w.int64(self.commit_timestamp)
        return bytes(w.buf)

    @classmethod
    def decode(cls, data: bytes) -> OffsetCommitValue:
        r = _Reader(data)
        version = r.int16()
        if version > 4 or version < 0:
            raise ValueError(f"unknown OffsetCommitValue version {version}")
        r.flexible = version >= 4
        offset = r.int64()
        leader_epoch = r.int32() if version >= 3 else -1
        metadata = r.nullable_string() or ""
        commit_ts = r.int64()
        expire_ts = r.int64() if version == 1 else -1
        r.skip_tagged_fields()
        return cls(offset, metadata, commit_ts, leader_epoch, expire_ts)


@dataclass(slots=True)
class MemberMetadataRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadataRecord] = field(default_factory=list)

    def encode(self) -> bytes:
        w = _Writer()
        w.int16(GROUP_METADATA_VALUE_VERSION)
        w.string(self.protocol_type)
        w.int32(self.generation)
        w.string(self.protocol)
        w.string(self.leader)
        w.int64(self.current_state_timestamp)
        w.int32(len(self.members))
        for m in self.members:
            w.string(m.member_id)
            w.string(m.group_instance_id)
            w.string(m.client_id)
            w.string(m.client_host)
            w.int32(m.rebalance_timeout)
            w.int32(m.session_timeout)
            w.bytes_(m.subscription)
            w.bytes_(m.assignment)
        return bytes(w.buf)

    @classmethod
    def decode(cls, data: bytes) -> GroupMetadataValue:
        r = _Reader(data)
        version = r.int16()
        if version > 4 or version < 0:
            raise ValueError(f"unknown GroupMetadataValue version {version}")
        r.flexible = version >= 4
        protocol_type = r.string()
        generation = r.int32()
        protocol = r.nullable_string()
        leader = r.nullable_string()
        ts = r.int64() if version >= 2 else -1
        members = []
        for _ in range(max(r.array_length(), 0)):
            member_id = r.string()
            instance_id = r.nullable_string() if version >= 3 else None
            client_id = r.string()
            client_host = r.string()
            session_timeout = r.int32()
            rebalance_timeout = session_timeout
            if version >= 1:
                # rebalanceTimeout precedes sessionTimeout on the wire from v1
                rebalance_timeout, session_timeout = session_timeout, r.int32()
            subscription = r.bytes_()
            assignment = r.bytes_()
            r.skip_tagged_fields()
            members.append(MemberMetadataRecord(member_id, instance_id, client_id, client_host,
                                                rebalance_timeout, session_timeout, subscription,
                                                assignment))
        r.skip_tagged_fields()
        return cls(protocol_type, generation, protocol, leader, ts, members)


Record = tuple[bytes, bytes | None]


def offset_commit_record(group: str, topic: str, partition: int,
                         value: OffsetCommitValue | None) -> Record:
    return OffsetCommitKey(group, topic, partition).encode(), None if value is None else value.encode()


def group_metadata_record(group: str, value: GroupMetadataValue | None) -> Record:
    return GroupMetadataKey(group).encode(), None if value is None else value.encode()
