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

Every broker validates, whether or not it serves the registry (``schema.registry.listeners``):
a broker that does not keeps a read-only view of ``_schemas`` (:class:`~.schema_ids.SchemaIdView`: the
registry's own reader and replay, without a producer, an election or an HTTP listener), started
the first time a topic it leads asks for validation. This is Redpanda's way (every node reads the
registry's topic and checks ids locally) rather than Confluent Server's (each broker asks a
registry over HTTP, ``confluent.schema.registry.url``): it needs no registry URL, no HTTP
round trip, and keeps working while no registry node is up, since the ids are in the topic.
A record naming an id the view does not know makes it read ``_schemas`` to its current end
first (:func:`prepare_schema_validation`), so an id registered a moment ago through any registry
node is accepted, as Redpanda re-reads its store on a miss.

The produce path makes two calls: :func:`prepare_schema_validation` (async, before the append)
and :func:`validate_schema_ids` (in the append). Both cost one dict lookup per partition when no
validation is configured; records are decoded only on topics that ask for it. This module
imports nothing of the registry: the checks, the view and what they need (aiokafka, the schema
parsers) are in :mod:`.schema_ids`, loaded when a topic first asks for validation, so a broker
whose topics validate nothing does not pay their import (about 100 ms of CPU).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

from protocol.errors import KafkaError
from protocol.records import ValidatedRecords

if TYPE_CHECKING:
    from log.config import LogConfig

    from .host import BrokerHost
    from .schema_ids import RawRecords, SchemaIdChecker

_ON = ("true",)


def _enabled(others: dict[str, str], part: str) -> bool:
    return others.get(f"confluent.{part}.schema.validation", "false").lower() in _ON or \
        others.get(f"redpanda.{part}.schema.id.validation", "false").lower() in _ON


def _strategy(others: dict[str, str], part: str) -> str:
    raw = others.get(f"confluent.{part}.subject.name.strategy") or \
        others.get(f"redpanda.{part}.subject.name.strategy") or "TopicNameStrategy"
    return raw.rsplit(".", 1)[-1]


def _parts(others: dict[str, str]) -> list[str]:
    return [p for p in ("key", "value") if _enabled(others, p)] if others else []


def _checked_parts(config: LogConfig) -> tuple[str, ...]:
    """The parts a topic's records are checked for, once per config object (asked on every Produce)."""
    return tuple(_parts(config.others))


_CHECKERS: weakref.WeakKeyDictionary[BrokerHost, SchemaIdChecker] = weakref.WeakKeyDictionary()


def _checker(broker: BrokerHost) -> SchemaIdChecker:
    checker = _CHECKERS.get(broker)
    if checker is None:
        # Loaded when a topic first asks for schema id validation: the registry's Kafka client
        # (aiokafka) and schema parsers (fastavro, jsonschema, protobuf) it brings cost ~100 ms of
        # CPU at import, which every broker whose topics validate nothing would pay at start.
        from .schema_ids import SchemaIdChecker  # noqa: PLC0415

        checker = _CHECKERS[broker] = SchemaIdChecker()
    return checker


async def stop_schema_view(broker: BrokerHost) -> None:
    checker = _CHECKERS.pop(broker, None)
    if checker is not None:
        await checker.stop()


async def prepare_schema_validation(broker: BrokerHost, entries: Sequence[tuple[str, int, RawRecords | None]]) -> None:
    """Before a produce's append: where a partition's topic validates schema ids, make sure the
    ids its records name are known if they are registered (reading ``_schemas`` to its end once
    when one is not). Malformed records are left to the append's own validation."""
    wanted: list[tuple[RawRecords, LogConfig, Sequence[str]]] = []
    for topic, index, raw in entries:
        if raw is None:
            continue
        try:
            cfg = broker.replica_manager.get_partition(topic, index).log.config
        except KafkaError:
            continue
        parts = cfg.derived(_checked_parts)
        if parts:
            wanted.append((raw, cfg, parts))
    if wanted:
        await _checker(broker).prepare(broker, wanted)


def validate_schema_ids(broker: BrokerHost, topic: str, records: ValidatedRecords, config: LogConfig) -> None:
    """Raise RecordValidationError (INVALID_RECORD) if a record lacks a valid schema id."""
    parts = config.derived(_checked_parts)
    if parts:
        _checker(broker).validate(broker, topic, records, parts, {p: _strategy(config.others, p) for p in parts})
