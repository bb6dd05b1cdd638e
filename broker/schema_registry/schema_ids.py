"""The schema id checks of :mod:`.validation`, for a broker with a topic that asks for them.

One :class:`SchemaIdChecker` per broker, made the first time one of its topics validates schema
ids. It reads the registry's state from this broker's own registry when it serves one, else from
a :class:`SchemaIdView` of ``_schemas`` it starts (the registry's reader and replay, without a
producer, an election or an HTTP listener). This module brings the registry's Kafka client
(aiokafka) and schema parsing (fastavro, jsonschema, protobuf): :mod:`.validation` loads it only
when a topic first asks, so a broker whose topics validate nothing never imports them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator, Sequence

from log.config import LogConfig
from log.validator import RecordValidationError, iter_records
from protocol.errors import ErrorCode, KafkaError
from protocol.records import ValidatedRecords, read_varint, validate_batches

from .errors import RegistryError
from .host import BrokerHost, kafka_client_settings
from .service import parse_stored
from .state import RegistryState, StoredSchema
from .store import ClientOptions, KafkaStore

RawRecords = bytes | bytearray | memoryview  # a partition's records as the producer sent them

log = logging.getLogger("samsa.schema_registry")


class SchemaIdView:
    """A broker's read-only copy of the registry's state, read from ``_schemas`` (see :mod:`.validation`)."""

    def __init__(self, bootstrap: str, options: ClientOptions) -> None:
        self.state = RegistryState()
        self.store = KafkaStore(bootstrap, self.state, client_options=options, read_only=True, timeout_s=30.0)
        self._started = False
        self._lock = asyncio.Lock()
        self._retry_at = 0.0  # after a failed start, when to try again (not on every produce)

    async def ready(self) -> bool:
        """Started and caught up with ``_schemas``; False (logged) while it cannot be read."""
        async with self._lock:
            loop = asyncio.get_running_loop()
            if not self._started and loop.time() < self._retry_at:
                return False
            try:
                if not self._started:
                    await self.store.start()
                    self._started = True
                    log.info("Schema validation: reading %s at %s for this broker's schema id checks",
                             self.store.topic, self.store.bootstrap)
                await self.store.wait_ready()
                return True
            except Exception as e:  # RegistryError, or whatever aiokafka raises connecting
                log.warning("Schema validation: cannot read %s yet: %s", self.store.topic, e)
                if not self._started:
                    self._retry_at = loop.time() + 5.0
                    await self.store.stop()
                    self.store = KafkaStore(self.store.bootstrap, self.state, client_options=self.store.options,
                                            read_only=True, timeout_s=30.0)
                return False

    async def stop(self) -> None:
        await self.store.stop()


class SchemaIdChecker:
    """A broker's schema id checks: the state they read (its registry's, else its view's). Held
    per broker by :mod:`.validation`, which passes the broker to each call."""

    def __init__(self) -> None:
        self.view: SchemaIdView | None = None

    async def _source(self, broker: BrokerHost) -> tuple[RegistryState, KafkaStore] | None:
        """The state schema ids are checked against, caught up: this broker's registry's, else its view's."""
        sr = broker.schema_registry
        if sr is not None:
            return (sr.state, sr.store) if sr.store.ready.is_set() else None
        if self.view is None:
            try:
                bootstrap, options = kafka_client_settings(broker)
            except ValueError as e:
                log.error("Schema validation: %s", e)
                return None
            self.view = SchemaIdView(bootstrap, options)
        return (self.view.state, self.view.store) if await self.view.ready() else None

    def _state(self, broker: BrokerHost) -> RegistryState | None:
        sr = broker.schema_registry
        if sr is not None:
            return sr.state if sr.store.ready.is_set() else None
        view = self.view
        return view.state if view is not None and view.store.ready.is_set() else None

    async def prepare(self, broker: BrokerHost, entries: Sequence[tuple[RawRecords, LogConfig, Sequence[str]]]) -> None:
        """Make sure the ids the records of ``entries`` (records, their topic's config, the parts
        it checks) name are known if they are registered, reading ``_schemas`` to its end once
        when one is not. Malformed records are left to the append's own validation."""
        source = await self._source(broker)
        if source is None:
            return
        st, store = source
        for raw, cfg, parts in entries:
            try:
                records = validate_batches(raw, max_batch_bytes=cfg.max_message_bytes)
                ids = {int.from_bytes(d[1:5], "big") for _, key, value in _records(records)
                       for d in ((key if p == "key" else value) for p in parts) if d is not None and len(d) >= 5}
            except (KafkaError, ValueError, IndexError):
                continue
            if ids - st.schemas.keys():
                try:
                    await store.catch_up()
                except RegistryError as e:
                    log.warning("Schema validation: cannot read %s to its end: %s", store.topic, e.message)
                return  # read to the end once per request is enough

    def validate(self, broker: BrokerHost, topic: str, records: ValidatedRecords, parts: Sequence[str], strategies: dict[str, str]) -> None:
        """Raise RecordValidationError (INVALID_RECORD) if a record lacks a valid schema id."""
        st = self._state(broker)
        errors: list[tuple[int, str]] = []
        for index, key, value in _records(records):
            for part in parts:
                data = key if part == "key" else value
                if data is None:
                    continue
                problem = "the _schemas topic cannot be read by this broker" \
                    if st is None else _check(st, topic, part, strategies[part], data)
                if problem is not None:
                    errors.append((index, f"This record has failed the validation on broker and hence will be "
                                          f"rejected: {problem}"))
                    break
        if errors:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
            raise RecordValidationError(ErrorCode.INVALID_RECORD,
                                        f"One or more records have been rejected due to {len(errors)} record errors "
                                        f"in total, and only showing the first three errors at most: [{shown}]", errors)

    async def stop(self) -> None:
        if self.view is not None:
            await self.view.stop()


def _check(st: RegistryState, topic: str, part: str, strategy: str, data: bytes) -> str | None:
    if len(data) < 5 or data[0] != 0:
        return f"the {part} does not start with the magic byte 0 and a schema id"
    schema_id = int.from_bytes(data[1:5], "big")
    stored = st.schemas.get(schema_id)
    if stored is None:
        return f"the {part}'s schema id {schema_id} is not registered"
    if strategy == "TopicNameStrategy":
        subject = f"{topic}-{part}"
    else:
        name = _record_name(st, stored)
        if name is None:
            return f"the {part}'s schema {schema_id} has no record name for {strategy}"
        subject = name if strategy == "RecordNameStrategy" else f"{topic}-{name}"
    if not any(sv.schema_id == schema_id for sv in st.versions(subject)):
        return f"the {part}'s schema id {schema_id} is not registered under subject {subject}"
    return None


def _record_name(st: RegistryState, stored: StoredSchema) -> str | None:
    try:
        parsed = parse_stored(st, stored)
    except RegistryError:
        return None
    if stored.schema_type == "AVRO":
        name = parsed.doc.get("name") if isinstance(parsed.doc, dict) else None
        return name if isinstance(name, str) else None
    if stored.schema_type == "PROTOBUF":
        fdp = parsed.descriptor
        if not fdp.message_type:
            return None
        return f"{fdp.package}.{fdp.message_type[0].name}" if fdp.package else fdp.message_type[0].name
    title = parsed.doc.get("title") if isinstance(parsed.doc, dict) else None
    return title if isinstance(title, str) else json.dumps(title) if title is not None else None


def _records(records: ValidatedRecords) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(index in its batch, key, value) of every record (the lengths were validated before)."""
    for h in records.batches:
        for index, _ts, _od, klen, raw, p in iter_records(records.buffer, h):
            key = None if klen < 0 else bytes(raw[p:p + klen])
            p += max(klen, 0)
            vlen, p = read_varint(raw, p)
            yield index, key, None if vlen < 0 else bytes(raw[p:p + vlen])
