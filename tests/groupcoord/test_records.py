"""Codec tests for the ``__consumer_offsets`` records and the group -> partition mapping."""

from __future__ import annotations

import struct

import pytest

from groupcoord.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataRecord,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    java_abs,
    java_string_hashcode,
    partition_for,
)


@pytest.mark.parametrize("s, expected", [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),
    ("é", 233),                       # one UTF-16 unit above ASCII
    ("\U0001F600", 55357 * 31 + 56832),  # a surrogate pair counts as two units
    ("polygenelubricants", -(2**31)),  # the classic String whose hashCode is Integer.MIN_VALUE
])
def test_java_string_hashcode(s: str, expected: int) -> None:
    assert java_string_hashcode(s) == expected


def test_hashcode_overflows_like_java_int() -> None:
    h = java_string_hashcode("a-fairly-long-consumer-group-name-that-overflows")
    assert -(2**31) <= h < 2**31
    # Recompute with explicit 32-bit wrapping at each step, as the JVM does.
    ref = 0
    for ch in "a-fairly-long-consumer-group-name-that-overflows":
        ref = (ref * 31 + ord(ch)) & 0xFFFFFFFF
    assert h == struct.unpack(">i", struct.pack(">I", ref))[0]


def test_partition_for_handles_min_value() -> None:
    assert java_abs(-(2**31)) == 0  # Kafka's Utils.abs, not Math.abs
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("a", 50) == 97 % 50
    for g in ["x", "group-1", "émile", "\U0001F600"]:
        assert 0 <= partition_for(g) < 50


def test_offset_commit_key_bytes() -> None:
    key = OffsetCommitKey("g", "t", 3).encode()
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    # Version 0 keys (written by old brokers) have the same layout.
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetCommitKey("g", "t", 3)


def test_group_metadata_key_bytes() -> None:
    key = GroupMetadataKey("grp").encode()
    assert key == b"\x00\x02\x00\x03grp"
    assert decode_key(key) == GroupMetadataKey("grp")
    # KIP-848 record types are not ours.
    assert decode_key(b"\x00\x03\x00\x03grp") is None


def test_offset_commit_value_v3_bytes() -> None:
    v = OffsetCommitValue(42, "meta", 1000, leader_epoch=7)
    data = v.encode()
    assert data == (b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 7) + b"\x00\x04meta"
                    + struct.pack(">q", 1000))
    assert OffsetCommitValue.decode(data) == v


def test_offset_commit_value_with_expire_is_v1() -> None:
    v = OffsetCommitValue(5, "", 1000, expire_timestamp=2000)
    data = v.encode()
    assert data[:2] == b"\x00\x01"
    assert data == b"\x00\x01" + struct.pack(">q", 5) + b"\x00\x00" + struct.pack(">qq", 1000, 2000)
    back = OffsetCommitValue.decode(data)
    assert (back.offset, back.expire_timestamp, back.leader_epoch) == (5, 2000, -1)


def test_offset_commit_value_v0_v2_v4() -> None:
    v0 = b"\x00\x00" + struct.pack(">q", 9) + b"\x00\x01m" + struct.pack(">q", 77)
    assert OffsetCommitValue.decode(v0) == OffsetCommitValue(9, "m", 77)
    v2 = b"\x00\x02" + v0[2:]
    assert OffsetCommitValue.decode(v2) == OffsetCommitValue(9, "m", 77)
    # v4: flexible; compact string (length+1) and an empty tagged-field section.
    v4 = (b"\x00\x04" + struct.pack(">q", 9) + struct.pack(">i", 3) + b"\x02m"
          + struct.pack(">q", 77) + b"\x00")
    assert OffsetCommitValue.decode(v4) == OffsetCommitValue(9, "m", 77, leader_epoch=3)


def _members() -> list[MemberMetadataRecord]:
    return [MemberMetadataRecord("m1", "inst-1", "client", "/127.0.0.1", 60000, 10000, b"sub", b"asg"),
            MemberMetadataRecord("m2", None, "client2", "/127.0.0.2", 30000, 6000, b"", b"")]


def test_group_metadata_value_v3_round_trip() -> None:
    v = GroupMetadataValue("consumer", 4, "range", "m1", 123456, _members())
    data = v.encode()
    assert data[:2] == b"\x00\x03"
    assert GroupMetadataValue.decode(data) == v


def test_group_metadata_value_empty_group() -> None:
    v = GroupMetadataValue("consumer", 5, None, None, 99, [])
    data = v.encode()
    assert data == (b"\x00\x03\x00\x08consumer" + struct.pack(">i", 5) + b"\xff\xff\xff\xff"
                    + struct.pack(">q", 99) + struct.pack(">i", 0))
    assert GroupMetadataValue.decode(data) == v


def test_group_metadata_value_v0_and_v1() -> None:
    def s(x: str) -> bytes:
        return struct.pack(">h", len(x)) + x.encode()
    common = s("consumer") + struct.pack(">i", 2) + s("range") + s("m1") + struct.pack(">i", 1)
    member_v0 = s("m1") + s("c") + s("h") + struct.pack(">i", 10000) + struct.pack(">i", 1) + b"S" \
        + struct.pack(">i", 1) + b"A"
    v0 = GroupMetadataValue.decode(b"\x00\x00" + common + member_v0)
    assert v0.members[0].session_timeout == 10000 and v0.members[0].rebalance_timeout == 10000
    member_v1 = s("m1") + s("c") + s("h") + struct.pack(">ii", 60000, 10000) \
        + struct.pack(">i", 1) + b"S" + struct.pack(">i", 1) + b"A"
    v1 = GroupMetadataValue.decode(b"\x00\x01" + common + member_v1)
    m = v1.members[0]
    assert (m.rebalance_timeout, m.session_timeout, m.subscription, m.assignment) == (60000, 10000, b"S", b"A")
    assert m.group_instance_id is None and v1.current_state_timestamp == -1


def test_group_metadata_value_v4_flexible() -> None:
    def cs(x: str | None) -> bytes:
        return b"\x00" if x is None else bytes([len(x) + 1]) + x.encode()
    member = (cs("m1") + cs("i1") + cs("c") + cs("h") + struct.pack(">ii", 60000, 10000)
              + b"\x02S" + b"\x02A" + b"\x00")
    data = (b"\x00\x04" + cs("consumer") + struct.pack(">i", 3) + cs("range") + cs("m1")
            + struct.pack(">q", 5) + b"\x02" + member + b"\x00")
    v = GroupMetadataValue.decode(data)
    assert v.generation == 3 and v.protocol == "range" and v.current_state_timestamp == 5
    assert v.members == [MemberMetadataRecord("m1", "i1", "c", "h", 60000, 10000, b"S", b"A")]
