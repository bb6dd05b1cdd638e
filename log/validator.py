"""Kafka's log validation of what a client produces (``LogValidator`` and the checks around it).

``protocol.records.validate_batches`` proves a Produce payload is well formed (whole v2
batches, good CRCs, records that tile their batch). This module applies the rules that
depend on who is writing and on the topic's config, before anything is appended, with
Kafka's error codes and messages (Kafka 3.9 ``ProduceRequest.validateRecords``,
``UnifiedLog.analyzeAndValidateRecords`` and ``LogValidator``):

* exactly one batch per partition in a Produce v3+ (INVALID_RECORD); zstd needs Produce v7+
  (UNSUPPORTED_COMPRESSION_TYPE);
* a client batch has base offset 0, a consistent offset range and count, is not a control
  batch, and a batch with a producer id has a sequence (all INVALID_RECORD);
* per record (KIP-467: ``record_errors`` lists each failing record's index in its batch and
  a message; nothing of the batch is appended): a compacted topic refuses records without a
  key (INVALID_RECORD); with ``message.timestamp.type=CreateTime`` a record timestamp outside
  ``[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]`` (KIP-937),
  or a batch claiming LogAppendTime, is INVALID_TIMESTAMP.

Hot path: nothing here decodes a record unless the topic needs it. Keys are read only on
compacted topics. Timestamps are first judged from the batch header (``base_timestamp``, the
first record's, and ``max_timestamp``); records are decoded only when the header shows a
breach, to name the failing records. (A record older than its batch's first record inside
an in-range batch is therefore not caught; producers write batches in time order.) With the
default bounds (Long.MAX_VALUE) no timestamp is ever looked at.
"""

from __future__ import annotations

from collections.abc import Iterator

from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    COMPRESSION_NONE,
    COMPRESSION_ZSTD,
    HEADER_SIZE,
    BatchHeader,
    ValidatedRecords,
    decompress,
)
from protocol.varint import read_varint

from .config import LogConfig

LONG_MAX = 2**63 - 1
NO_TIMESTAMP = -1


class RecordValidationError(KafkaError):
    """Some records of a batch are invalid (KIP-467): the batch is refused as a whole and
    ``record_errors`` names them as (index in the batch, message)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


def timestamp_bounds(config: LogConfig) -> tuple[int, int]:
    """(before.max.ms, after.max.ms); the deprecated difference.max.ms stands in for either
    that is left at its default, as Kafka 3.6+ does."""
    def get(name: str) -> int:
        try:
            return int(config.others.get(name, LONG_MAX))
        except ValueError:
            return LONG_MAX
    diff = get("message.timestamp.difference.max.ms")
    before = get("message.timestamp.before.max.ms")
    after = get("message.timestamp.after.max.ms")
    if diff != LONG_MAX:
        before = diff if before == LONG_MAX else before
        after = diff if after == LONG_MAX else after
    return before, after


def _compacted(config: LogConfig) -> bool:
    return "compact" in config.cleanup_policy.split(",")


def validate_client_batches(records: ValidatedRecords, topic_partition: str, config: LogConfig, *,
                            api_version: int, now_ms: int) -> None:
    """Raise KafkaError / RecordValidationError if a client may not append ``records``."""
    batches = records.batches
    if len(batches) != 1:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"Produce requests with version {api_version} are only allowed to contain exactly one "
                         "record batch per partition")
    h = batches[0]
    if api_version < 7 and h.compression == COMPRESSION_ZSTD:
        raise KafkaError(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                         f"Produce requests with version {api_version} are not allowed to use ZStandard compression")
    _validate_batch(h, topic_partition)
    compacted = config.derived(_compacted)
    create_time = not config.log_append_time
    before, after = config.derived(timestamp_bounds)
    check_ts = create_time and (
        h.timestamp_type == 1
        or (before != LONG_MAX and h.base_timestamp != NO_TIMESTAMP and now_ms - h.base_timestamp > before)
        or (after != LONG_MAX and h.max_timestamp != NO_TIMESTAMP and h.max_timestamp - now_ms > after))
    if not compacted and not check_ts:
        return
    errors: list[tuple[int, ErrorCode, str]] = []
    for index, timestamp, offset_delta, key_length, _raw, _key_pos in iter_records(records.buffer, h):
        if compacted and key_length < 0:
            errors.append((index, ErrorCode.INVALID_RECORD,
                           f"Compacted topic cannot accept message without key in topic partition {topic_partition}."))
        elif check_ts:
            if h.timestamp_type == 1:
                errors.append((index, ErrorCode.INVALID_TIMESTAMP,
                               f"Invalid timestamp type in message with offset {offset_delta}. Producer should not "
                               "set timestamp type to LogAppendTime."))
            elif timestamp != NO_TIMESTAMP and (now_ms - timestamp > before or timestamp - now_ms > after):
                lo = now_ms - before if before != LONG_MAX else -LONG_MAX
                hi = now_ms + after if after != LONG_MAX else LONG_MAX
                errors.append((index, ErrorCode.INVALID_TIMESTAMP,
                               f"Timestamp {timestamp} of message with offset {offset_delta} is out of range. "
                               f"The timestamp should be within [{lo}, {hi}]"))
    if not errors:
        return
    record_errors = [(i, m) for i, _c, m in errors]
    if any(c == ErrorCode.INVALID_TIMESTAMP for _i, c, _m in errors):
        raise RecordValidationError(ErrorCode.INVALID_TIMESTAMP,
                                    "One or more records have been rejected due to invalid timestamp", record_errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in record_errors[:3])
    raise RecordValidationError(ErrorCode.INVALID_RECORD,
                                f"One or more records have been rejected due to {len(record_errors)} record errors "
                                f"in total, and only showing the first three errors at most: [{shown}]",
                                record_errors)


def _validate_batch(h: BatchHeader, tp: str) -> None:
    """``analyzeAndValidateRecords`` + ``LogValidator.validateBatch`` for a client's v2 batch."""
    if h.base_offset != 0:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"The baseOffset of the record batch in the append to {tp} should be 0, but it is "
                         f"{h.base_offset}")
    last = h.base_offset + h.last_offset_delta
    if h.last_offset_delta < 0:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"Batch has an invalid offset range: [{h.base_offset}, {last}] in topic partition {tp}")
    if h.records_count <= 0:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"Invalid reported count for record batch: {h.records_count} in topic partition {tp}")
    if h.last_offset_delta + 1 != h.records_count:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"Inconsistent batch offset range [{h.base_offset}, {last}] and count of records "
                         f"{h.records_count} in topic partition {tp}")
    if h.is_control:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"Clients are not allowed to write control records in topic partition {tp}")
    if h.has_producer_id and h.base_sequence < 0:
        raise KafkaError(ErrorCode.INVALID_RECORD,
                         f"Invalid sequence number {h.base_sequence} in record batch with producerId "
                         f"{h.producer_id} in topic partition {tp}")


def iter_records(buf: bytearray | memoryview, h: BatchHeader
                 ) -> Iterator[tuple[int, int, int, int, bytes | memoryview, int]]:
    """(index in batch, timestamp, offset delta, key length, records section, key position) of
    each record of the batch.

    Only the fields before the key are decoded; a caller that wants the key or value reads them
    from the (decompressed) records section at the key position.  The rest of each record is
    skipped by its length prefix (validate_batches has already proved the lengths tile the section).
    """
    body = memoryview(buf)[h.position + HEADER_SIZE: h.position + h.size]
    raw = body if h.compression == COMPRESSION_NONE else decompress(h.compression, body)
    pos, end, index = 0, len(raw), 0
    while pos < end:
        length, pos = read_varint(raw, pos)
        record_end = pos + length
        p = pos + 1  # attributes
        ts_delta, p = read_varint(raw, p)
        offset_delta, p = read_varint(raw, p)
        key_length, p = read_varint(raw, p)
        yield index, h.base_timestamp + ts_delta, offset_delta, key_length, raw, p
        pos = record_end
        index += 1
