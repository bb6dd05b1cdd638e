"""Transaction markers are Kafka's EndTransactionMarker control batches, readable by clients."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch

from protocol.records import read_header, validate_batches
from txn.markers import (
    CONTROL_TYPE_ABORT,
    CONTROL_TYPE_COMMIT,
    TxnMarker,
    build_batch,
    build_marker_batch,
    iter_batch_records,
    parse_control_record,
)


@pytest.mark.parametrize("commit", [True, False])
def test_marker_batch_layout(commit: bool) -> None:
    raw = build_marker_batch(TxnMarker(4000, 7, 3, commit), base_offset=10, timestamp_ms=1234)
    validated = validate_batches(raw)  # CRC, counts, record framing
    h = read_header(raw)
    assert validated.batches[0].records_count == 1
    assert h.is_control and h.is_transactional
    assert (h.base_offset, h.producer_id, h.producer_epoch, h.base_sequence) == (10, 4000, 7, -1)
    assert (h.base_timestamp, h.max_timestamp, h.last_offset_delta) == (1234, 1234, 0)
    [(attrs, rec)] = list(iter_batch_records(raw))
    assert rec.offset == 10
    assert rec.key == struct.pack(">hh", 0, CONTROL_TYPE_COMMIT if commit else CONTROL_TYPE_ABORT)
    assert rec.value == struct.pack(">hi", 0, 3)
    assert parse_control_record(rec.key, rec.value) == (1 if commit else 0, 3)


def test_marker_is_a_control_batch_for_kafka_python() -> None:
    raw = build_marker_batch(TxnMarker(1, 0, 0, True))
    batch = DefaultRecordBatch(bytearray(raw))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert batch.producer_id == 1


def test_key_value_batch_roundtrip() -> None:
    records = [(b"k1", b"v1"), (b"k2", None), (None, b"v3")]
    raw = build_batch(records, base_offset=100, timestamp_ms=5)
    validate_batches(raw)
    got = [(r.offset, r.key, r.value) for _, r in iter_batch_records(raw + raw)]
    assert got == [(100, b"k1", b"v1"), (101, b"k2", None), (102, None, b"v3")] * 2
    batch = DefaultRecordBatch(bytearray(raw))
    assert [(r.key, r.value) for r in batch] == records
