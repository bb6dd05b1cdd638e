"""Building and reading small v2 record batches: transaction markers and internal-topic records.

A transaction marker is Kafka's ``EndTransactionMarker``: a control batch (attributes
``transactional | control``) carrying the producer id and epoch of the transaction, base
sequence -1 and exactly one record whose

* key   = int16 version (0) + int16 type (``ControlRecordType``: 0 ABORT, 1 COMMIT)
* value = int16 version (0) + int32 coordinator epoch.

Clients skip control batches; brokers use them to close the producer's open transaction on
that partition (LSO, aborted-transaction index). Records of ``__transaction_state`` are
ordinary uncompressed key/value batches written here too, so the coordinator's storage needs
no other codec. This module does no I/O.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c as _crc32c

from protocol.records import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    COMPRESSION_NONE,
    HEADER_SIZE,
    MAGIC_V2,
    decompress,
    iter_headers,
)
from protocol.varint import put_varint, read_varint

CONTROL_TYPE_ABORT = 0
CONTROL_TYPE_COMMIT = 1
_HEADER = struct.Struct(">qiibIhiqqqhii")
_HH = struct.Struct(">hh")
_HI = struct.Struct(">hi")


def _encode_record(out: bytearray, offset_delta: int, ts_delta: int, key: bytes | None,
                   value: bytes | None) -> None:
    body = bytearray(b"\x00")  # attributes
    put_varint(body, ts_delta)
    put_varint(body, offset_delta)
    for part in (key, value):
        if part is None:
            put_varint(body, -1)
        else:
            put_varint(body, len(part))
            body += part
    put_varint(body, 0)  # headers
    put_varint(out, len(body))
    out += body


def build_batch(records: Sequence[tuple[bytes | None, bytes | None]], *, base_offset: int = 0,
                timestamp_ms: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, attributes: int = 0, partition_leader_epoch: int = 0) -> bytes:
    """One uncompressed magic-v2 batch of ``(key, value)`` records, all stamped ``timestamp_ms``."""
    if not records:
        raise ValueError("a batch needs at least one record")
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    body = bytearray()
    for i, (k, v) in enumerate(records):
        _encode_record(body, i, 0, k, v)
    n = len(records)
    header = bytearray(_HEADER.pack(base_offset, HEADER_SIZE - 12 + len(body), partition_leader_epoch,
                                    MAGIC_V2, 0, attributes, n - 1, ts, ts, producer_id, producer_epoch,
                                    base_sequence, n))
    buf = header + body
    struct.pack_into(">I", buf, 17, _crc32c.crc32c(memoryview(buf)[21:]))
    return bytes(buf)


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One transaction outcome to write to one data partition."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool

    @property
    def control_type(self) -> int:
        return CONTROL_TYPE_COMMIT if self.commit else CONTROL_TYPE_ABORT


def build_marker_batch(marker: TxnMarker, *, base_offset: int = 0, timestamp_ms: int | None = None,
                       partition_leader_epoch: int = 0) -> bytes:
    """The control batch Kafka's ``MemoryRecords.withEndTransactionMarker`` writes."""
    key = _HH.pack(0, marker.control_type)
    value = _HI.pack(0, marker.coordinator_epoch)
    return build_batch([(key, value)], base_offset=base_offset, timestamp_ms=timestamp_ms,
                       producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
                       base_sequence=-1, attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL,
                       partition_leader_epoch=partition_leader_epoch)


def parse_control_record(key: bytes, value: bytes | None) -> tuple[int, int]:
    """``(control type, coordinator epoch)`` of a control record; epoch -1 if it carries none."""
    _version, ctype = _HH.unpack_from(key, 0)
    epoch = -1
    if value is not None and len(value) >= 6:
        epoch = _HI.unpack_from(value, 0)[1]
    return ctype, epoch


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def iter_batch_records(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[tuple[int, Record]]:
    """Yield ``(attributes, record)`` for every record of every whole batch in ``buf[pos:]``.

    For the coordinators' replay of their internal topics and for control records: small,
    rarely compressed data, so decoding in Python is fine here (never on the fetch path).
    """
    for h in iter_headers(buf, pos):
        raw: bytes | memoryview = memoryview(buf)[h.position + HEADER_SIZE: h.position + h.size]
        if h.compression != COMPRESSION_NONE:
            raw = decompress(h.compression, raw)
        raw = bytes(raw)
        p = 0
        for _ in range(h.records_count):
            length, p = read_varint(raw, p)
            end = p + length
            p += 1  # attributes
            ts_delta, p = read_varint(raw, p)
            off_delta, p = read_varint(raw, p)
            klen, p = read_varint(raw, p)
            key = None if klen < 0 else raw[p:p + klen]
            p += max(klen, 0)
            vlen, p = read_varint(raw, p)
            value = None if vlen < 0 else raw[p:p + vlen]
            p = end
            yield h.attributes, Record(h.base_offset + off_delta, h.base_timestamp + ts_delta, key, value)
