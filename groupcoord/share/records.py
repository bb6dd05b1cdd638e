"""The share-group records of ``__consumer_offsets`` (KIP-932), in Kafka's binary layout.

Keys are non-flexible structs whose leading int16 is the record type:

====  ===================================  ==============================================
 10   ShareGroupMemberMetadataKey (g, m)   value: the member's rack, client and subscription
 11   ShareGroupMetadataKey (group)        value: the group epoch
====  ===================================  ==============================================

Values are flexible version-0 structs (schemas in :mod:`protocol.schemas`, classes in
:mod:`protocol.kip932`) preceded by their int16 version; ``None`` is a tombstone. The
assignment is not recorded: a share group's assignment is a function of its members'
subscriptions and the topics (every member gets every subscribed partition), recomputed on
replay. No I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from protocol import kip932

from ..records import Record, _Reader, _Writer
from .group import ShareGroupMember

SHARE_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_KEY_TYPES = (SHARE_MEMBER_METADATA, SHARE_GROUP_METADATA)


@dataclass(frozen=True, slots=True)
class ShareRecordKey:
    type: int
    group_id: str
    member_id: str | None = None

    def encode(self) -> bytes:
        w = _Writer()
        w.int16(self.type)
        w.string(self.group_id)
        if self.type == SHARE_MEMBER_METADATA:
            w.string(self.member_id or "")
        return bytes(w.buf)


def decode_share_key(data: bytes) -> ShareRecordKey | None:
    (version,) = struct.unpack_from(">h", data, 0)
    if version not in SHARE_KEY_TYPES:
        return None
    r = _Reader(data, 2)
    group_id = r.string()
    member_id = r.string() if version == SHARE_MEMBER_METADATA else None
    return ShareRecordKey(version, group_id, member_id)


def _value(obj: Any) -> bytes:
    return struct.pack(">h", 0) + bytes(obj.encode(version=0, header=False))


def decode_share_value(cls: Any, data: bytes) -> Any:
    (version,) = struct.unpack_from(">h", data, 0)
    if version != 0:
        raise ValueError(f"unknown {cls.__name__} version {version}")
    return cls.decode(data[2:], version=0, header=False)


def group_epoch_record(group_id: str, epoch: int | None) -> Record:
    key = ShareRecordKey(SHARE_GROUP_METADATA, group_id).encode()
    if epoch is None:
        return key, None
    return key, _value(kip932.ShareGroupMetadataValue(epoch=epoch))


def member_record(group_id: str, member: ShareGroupMember | str) -> Record:
    """A member's metadata; given only a member id, its tombstone."""
    if isinstance(member, str):
        return ShareRecordKey(SHARE_MEMBER_METADATA, group_id, member).encode(), None
    key = ShareRecordKey(SHARE_MEMBER_METADATA, group_id, member.member_id).encode()
    return key, _value(kip932.ShareGroupMemberMetadataValue(
        rack_id=member.rack_id, client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names)))
