"""__transaction_state records: Kafka's byte layout, both value versions, partitioning."""

from __future__ import annotations

import struct

import pytest

from txn import transaction_log as tlog
from txn.metadata import TransactionMetadata, TransactionState


def test_java_string_hash_matches_java() -> None:
    assert tlog.java_string_hash("") == 0
    assert tlog.java_string_hash("a") == 97
    assert tlog.java_string_hash("hello") == 99162322
    # famous Java string whose hashCode is Integer.MIN_VALUE
    assert tlog.java_string_hash("polygenelubricants") == -(1 << 31)
    # non-BMP character: hashed as two UTF-16 code units 0xD83D 0xDE00
    assert tlog.java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00


def test_partition_for_uses_kafka_abs() -> None:
    assert tlog.partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) == 0
    assert tlog.partition_for("hello", 50) == 99162322 % 50
    h = tlog.java_string_hash("my-transactional-id")
    assert tlog.partition_for("my-transactional-id") == abs(h) % 50


def test_key_bytes() -> None:
    assert tlog.encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert tlog.decode_key(b"\x00\x00\x00\x02tx") == "tx"
    with pytest.raises(ValueError):
        tlog.decode_key(b"\x00\x01\x00\x02tx")


def test_value_v0_exact_bytes() -> None:
    m = TransactionMetadata("tx", producer_id=1000, producer_epoch=3, txn_timeout_ms=60000,
                            state=TransactionState.ONGOING, partitions={("t", 1), ("t", 0)},
                            txn_start_timestamp=111, txn_last_update_timestamp=222)
    expected = (struct.pack(">hqhib", 0, 1000, 3, 60000, 1)
                + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">iii", 2, 0, 1)
                + struct.pack(">qq", 222, 111))
    assert tlog.encode_value(m) == expected


def test_empty_has_null_partitions() -> None:
    m = TransactionMetadata("tx", 5, producer_epoch=0, state=TransactionState.EMPTY)
    raw = tlog.encode_value(m)
    assert raw[struct.calcsize(">hqhib"):][:4] == b"\xff\xff\xff\xff"
    d = tlog.decode_value(raw)
    assert d.state is TransactionState.EMPTY and d.partitions == set()


def test_never_written_states_and_invariants() -> None:
    for st in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
        with pytest.raises(ValueError):
            tlog.encode_value(TransactionMetadata("x", 1, state=st))
    with pytest.raises(ValueError):
        tlog.encode_value(TransactionMetadata("x", 1, state=TransactionState.EMPTY, partitions={("a", 0)}))


@pytest.mark.parametrize("state", [s for s in TransactionState
                                   if s not in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE)])
def test_roundtrip_v0_and_v1(state: TransactionState) -> None:
    parts = set() if state is TransactionState.EMPTY else {("orders", 0), ("orders", 2), ("pay", 1)}
    m = TransactionMetadata("tx", producer_id=42, last_producer_id=41, producer_epoch=9, txn_timeout_ms=1234,
                            state=state, partitions=parts, txn_start_timestamp=5, txn_last_update_timestamp=6)
    d0 = tlog.decode_value(tlog.encode_value(m))
    assert (d0.version, d0.producer_id, d0.producer_epoch, d0.txn_timeout_ms, d0.state, d0.partitions,
            d0.txn_start_timestamp, d0.txn_last_update_timestamp) == (0, 42, 9, 1234, state, parts, 5, 6)
    assert d0.previous_producer_id == -1  # not in v0
    d1 = tlog.decode_value(tlog.encode_value_v1(m, next_producer_id=77, client_transaction_version=2))
    assert (d1.version, d1.producer_id, d1.state, d1.partitions) == (1, 42, state, parts)
    assert (d1.previous_producer_id, d1.next_producer_id, d1.client_transaction_version) == (41, 77, 2)
    back = d1.to_metadata("tx")
    assert back.last_producer_id == 41 and back.partitions == parts


def test_v1_unknown_tag_is_skipped() -> None:
    m = TransactionMetadata("tx", 1, producer_epoch=0, state=TransactionState.EMPTY)
    raw = bytearray(tlog.encode_value_v1(m))
    assert raw[-1] == 0  # no tagged fields
    raw[-1:] = bytes([1, 9, 2, 0xAB, 0xCD])  # one tag (9) of 2 bytes, unknown to us
    d = tlog.decode_value(bytes(raw))
    assert d.producer_id == 1 and d.state is TransactionState.EMPTY


def test_unknown_value_version_rejected() -> None:
    with pytest.raises(ValueError):
        tlog.decode_value(struct.pack(">hqhib", 7, 1, 0, 1, 0) + b"\x00" * 20)
