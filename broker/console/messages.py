"""Browsing one partition for the console: a bounded page of records, rendered as safe text.

Theory of operation: a browse is one ``assign`` + ``seek`` + a few ``poll`` calls on a
kafka-python consumer that belongs to the console's worker thread (never the broker's event
loop). The consumer's fetch sizes are capped (``max_partition_fetch_bytes`` = 1 MiB), polling
stops as soon as ``limit`` records are in hand or the end offset is reached, and each key,
value and header is cut to :data:`MAX_FIELD_BYTES` before it is rendered, so a page never
holds more than about a fetch plus ``limit`` small strings, however large the partition is.

Invariants: a rendered field is a dict ``{"format": "null"|"json"|"text"|"hex", "text": str,
"size": int, "truncated": bool}``; ``text`` is plain text (never markup): the pages escape it
(:mod:`.markup`) and the JSON API returns it as a string, so message contents cannot inject HTML.
"""

from __future__ import annotations

import json
import time
from typing import TypedDict

from kafka import KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord
from kafka.structs import TopicPartition

MAX_FIELD_BYTES = 16 * 1024
MAX_PAGE = 200
FETCH_BYTES = 1024 * 1024


class RenderedBytes(TypedDict):
    format: str  # "null", "hex", "json" or "text"
    text: str
    size: int
    truncated: bool


class RenderedHeader(TypedDict):
    key: str
    value: RenderedBytes


class RenderedRecord(TypedDict):
    offset: int
    timestamp: int
    timestamp_type: str
    key: RenderedBytes
    value: RenderedBytes
    headers: list[RenderedHeader]


def render_bytes(data: bytes | None) -> RenderedBytes:
    """Bytes as JSON (pretty-printed), UTF-8 text, or hex, cut to MAX_FIELD_BYTES."""
    if data is None:
        return {"format": "null", "text": "", "size": 0, "truncated": False}
    size = len(data)
    truncated = size > MAX_FIELD_BYTES
    head = bytes(data[:MAX_FIELD_BYTES])
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        # A multi-byte character cut at the limit is still text; anything else is binary.
        if truncated and e.start >= len(head) - 3:
            text = head[:e.start].decode("utf-8", "replace")
        else:
            return {"format": "hex", "text": head.hex(" "), "size": size, "truncated": truncated}
    if not truncated and text.strip()[:1] in ("{", "["):
        try:
            return {"format": "json", "text": json.dumps(json.loads(text), indent=2, ensure_ascii=False),
                    "size": size, "truncated": False}
        except ValueError:
            pass
    if any(ord(c) < 32 and c not in "\t\r\n" for c in text):
        return {"format": "hex", "text": head.hex(" "), "size": size, "truncated": truncated}
    return {"format": "text", "text": text, "size": size, "truncated": truncated}


def render_record(rec: ConsumerRecord) -> RenderedRecord:
    return {
        "offset": rec.offset,
        "timestamp": rec.timestamp,
        "timestamp_type": "LogAppendTime" if rec.timestamp_type == 1 else "CreateTime",
        "key": render_bytes(rec.key),
        "value": render_bytes(rec.value),
        "headers": [{"key": k, "value": render_bytes(v)} for k, v in (rec.headers or [])],
    }


def new_consumer(bootstrap: list[str], request_timeout_ms: int) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, client_id="samsa-console", group_id=None,
                         enable_auto_commit=False, max_poll_records=MAX_PAGE,
                         max_partition_fetch_bytes=FETCH_BYTES, fetch_max_bytes=FETCH_BYTES,
                         fetch_max_wait_ms=100, request_timeout_ms=request_timeout_ms,
                         isolation_level="read_uncommitted", metadata_max_age_ms=10000)


def browse(consumer: KafkaConsumer, topic: str, partition: int, start: int, end: int, limit: int,
           deadline_s: float = 5.0) -> list[RenderedRecord]:
    """Records ``start`` .. at most ``limit`` of them, stopping at ``end`` (exclusive) or the deadline."""
    tp = TopicPartition(topic, partition)
    out: list[RenderedRecord] = []
    if start >= end or limit <= 0:
        return out
    consumer.assign([tp])
    consumer.seek(tp, start)
    stop_at = time.monotonic() + deadline_s
    try:
        while len(out) < limit and time.monotonic() < stop_at:
            polled = consumer.poll(timeout_ms=300, max_records=limit - len(out))
            for rec in polled.get(tp, []):
                if rec.offset >= end or len(out) >= limit:
                    break
                out.append(render_record(rec))
            if consumer.position(tp) >= end:
                break
    finally:
        consumer.assign([])  # drop any prefetched records: only this page stays in memory
    return out
