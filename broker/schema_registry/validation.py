"""Broker-side schema id validation, as Confluent Server and Redpanda offer it.

A topic with ``confluent.value.schema.validation=true`` (or ``confluent.key.schema.validation``;
Redpanda's ``redpanda.value.schema.id.validation`` / ``redpanda.key.schema.id.validation`` mean
the same) accepts a record only if its value (key) starts with the wire format's magic byte 0
and a 4-byte big-endian schema id that is registered under the subject the topic's subject name
strategy names (``confluent.value.subject.name.strategy``, Redpanda's
``redpanda.value.subject.name.strategy``):

* TopicNameStrategy (the default): ``<topic>-value`` / ``<topic>-key``;
* RecordNameStrategy: the fully-qualified name of the schema's record (Avro), first message
  (Protobuf) or ``title`` (JSON);
* TopicRecordNameStrategy: ``<topic>-<that name>``.

A null key or value (a tombstone) is not checked. Anything else fails the whole batch with
INVALID_RECORD and a record error naming each failing record (KIP-467), as those brokers do.

The produce path makes one call, :func:`validate_schema_ids`; it costs one dict lookup per
partition when no validation is configured. Records are decoded only on topics that ask for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from log.validator import RecordValidationError, iter_records
from protocol.errors import ErrorCode
from protocol.records import read_varint

_ON = ("true",)


def _enabled(others: dict[str, str], part: str) -> bool:
    return others.get(f"confluent.{part}.schema.validation", "false").lower() in _ON or \
        others.get(f"redpanda.{part}.schema.id.validation", "false").lower() in _ON


def _strategy(others: dict[str, str], part: str) -> str:
    raw = others.get(f"confluent.{part}.subject.name.strategy") or \
        others.get(f"redpanda.{part}.subject.name.strategy") or "TopicNameStrategy"
    return raw.rsplit(".", 1)[-1]


def validate_schema_ids(broker: Any, topic: str, records: Any, config: Any) -> None:
    """Raise RecordValidationError (INVALID_RECORD) if a record lacks a valid schema id."""
    others = config.others
    if not others:
        return
    parts = [p for p in ("key", "value") if _enabled(others, p)]
    if not parts:
        return
    sr = broker.schema_registry
    errors: list[tuple[int, str]] = []
    for index, key, value in _records(records):
        for part in parts:
            data = key if part == "key" else value
            if data is None:
                continue
            problem = "the schema registry is not running on this broker (set schema.registry.listeners)" \
                if sr is None else _check(sr, topic, part, _strategy(others, part), data)
            if problem is not None:
                errors.append((index, f"This record has failed the validation on broker and hence will be "
                                      f"rejected: {problem}"))
                break
    if errors:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        raise RecordValidationError(ErrorCode.INVALID_RECORD,
                                    f"One or more records have been rejected due to {len(errors)} record errors "
                                    f"in total, and only showing the first three errors at most: [{shown}]", errors)


def _check(sr: Any, topic: str, part: str, strategy: str, data: bytes) -> str | None:
    if len(data) < 5 or data[0] != 0:
        return f"the {part} does not start with the magic byte 0 and a schema id"
    schema_id = int.from_bytes(data[1:5], "big")
    st = sr.state
    stored = st.schemas.get(schema_id)
    if stored is None:
        return f"the {part}'s schema id {schema_id} is not registered"
    if strategy == "TopicNameStrategy":
        subject = f"{topic}-{part}"
    else:
        name = _record_name(sr, stored)
        if name is None:
            return f"the {part}'s schema {schema_id} has no record name for {strategy}"
        subject = name if strategy == "RecordNameStrategy" else f"{topic}-{name}"
    if not any(sv.schema_id == schema_id for sv in st.versions(subject)):
        return f"the {part}'s schema id {schema_id} is not registered under subject {subject}"
    return None


def _record_name(sr: Any, stored: Any) -> str | None:
    try:
        parsed = sr.registry.parsed(stored)
    except Exception:
        return None
    if stored.schema_type == "AVRO":
        return parsed.parsed.get("name") if isinstance(parsed.parsed, dict) else None
    if stored.schema_type == "PROTOBUF":
        fdp = parsed.parsed
        if not fdp.message_type:
            return None
        return f"{fdp.package}.{fdp.message_type[0].name}" if fdp.package else fdp.message_type[0].name
    title = parsed.parsed.get("title") if isinstance(parsed.parsed, dict) else None
    return title if isinstance(title, str) else json.dumps(title) if title is not None else None


def _records(records: Any) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(index in its batch, key, value) of every record (the lengths were validated before)."""
    for h in records.batches:
        for index, _ts, _od, klen, raw, p in iter_records(records.buffer, h):
            key = None if klen < 0 else bytes(raw[p:p + klen])
            p += max(klen, 0)
            vlen, p = read_varint(raw, p)
            yield index, key, None if vlen < 0 else bytes(raw[p:p + vlen])
