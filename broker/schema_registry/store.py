"""The ``_schemas`` topic as the registry's storage, over the Kafka protocol.

Theory of operation (Confluent's KafkaStore, Karapace's schema reader): one reader task
consumes ``_schemas`` (one partition, ``cleanup.policy=compact``) from the beginning and hands
every record to :meth:`RegistryState.replay`; the registry serves reads once the reader has
caught up with the end offset it saw at start. A write produces one record (acks=all) and
returns only when the reader has read that offset back, so what a client was told is written
is what every node replays, on this node after a restart and on every other node.

The client is aiokafka: it is asyncio-native, so the reader, the producer and the group
membership that elects the primary all run as tasks on the broker's own event loop with no
thread to coordinate; and because it speaks only the Kafka protocol, the same store serves the
standalone ``samsa schema-registry --bootstrap-server`` against any Kafka cluster.

Primary election (:class:`PrimaryElection`) uses a Kafka consumer group, as Confluent's and
Karapace's registries do: every node joins group ``schema-registry`` with its URL in the
member's user data; the group leader's assignor names the primary (the member with the
smallest URL among those eligible) in every member's assignment. Only the primary writes,
so schema ids stay unique; the other nodes forward writes to it over HTTP.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable
from typing import TypedDict

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from ..security.jaas import parse_jaas
from .errors import RegistryError, operation_timeout, schema_too_large, store_error
from .json_types import Json
from .state import RegistryState

log = logging.getLogger("samsa.schema_registry")

class ClientOptions(TypedDict, total=False):
    """aiokafka's keyword arguments for how to connect (from Kafka's client properties)."""

    security_protocol: str
    sasl_mechanism: str
    sasl_plain_username: str
    sasl_plain_password: str
    ssl_context: ssl.SSLContext


TOPIC = "_schemas"
GROUP = "schema-registry"


class KafkaStore:
    def __init__(self, bootstrap: str, state: RegistryState, *, topic: str = TOPIC,
                 client_options: ClientOptions | None = None, timeout_s: float = 60.0,
                 replication_factor: int = 3, read_only: bool = False) -> None:
        self.read_only = read_only  # a reader only: no producer, and the topic is not created
        self.replication_factor = max(1, replication_factor)
        self.bootstrap = bootstrap
        self.state = state
        self.topic = topic
        self.options: ClientOptions = client_options or {}
        self.timeout_s = timeout_s
        self.applied = -1  # offset of the last record replayed
        self.ready = asyncio.Event()  # caught up with the end offset seen at start
        self._advanced = asyncio.Event()
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self.listeners: list[Callable[[], None]] = []  # called after each batch of replayed records

    @property
    def consumer(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise store_error(f"the reader of {self.topic} is not started")
        return self._consumer

    @property
    def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise store_error(f"the writer of {self.topic} is not started" if not self.read_only
                              else f"a read-only view does not write to {self.topic}")
        return self._producer

    async def start(self) -> None:
        if not self.read_only:
            await self._ensure_topic()
            self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0,
                                              enable_idempotence=False, client_id="samsa-schema-registry",
                                              **self.options)
            await self._producer.start()
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False,
                                          auto_offset_reset="earliest", isolation_level="read_committed",
                                          client_id="samsa-schema-registry-reader", fetch_max_wait_ms=100,
                                          **self.options)
        await self._consumer.start()
        if self.read_only and self.topic not in await self._consumer.topics():
            raise store_error(f"there is no {self.topic} topic yet (no schema has been registered)")
        tp = TopicPartition(self.topic, 0)
        self._consumer.assign([tp])
        await self._consumer.seek_to_beginning(tp)
        end = (await self._consumer.end_offsets([tp]))[tp]
        self._reader = asyncio.get_running_loop().create_task(self._read(tp, end))

    async def _ensure_topic(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="samsa-schema-registry-admin",
                                    **self.options)
        await admin.start()
        try:
            if self.topic in await admin.list_topics():
                return
            rf = await self._replication_factor(admin)
            topic = NewTopic(self.topic, 1, rf, topic_configs={"cleanup.policy": "compact"})
            try:
                resp = await admin.create_topics([topic])
                for t in getattr(resp, "topic_errors", []) or getattr(resp, "topics", []):
                    code = t[1] if isinstance(t, tuple) else getattr(t, "error_code", 0)
                    if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS (another node was first)
                        raise RegistryError(500, 50001, f"cannot create {self.topic}: error code {code}")
                log.info("Schema registry: created topic %s (compacted, replication factor %d)", self.topic, rf)
            except TopicAlreadyExistsError:
                pass
        finally:
            await admin.close()

    async def _replication_factor(self, admin: AIOKafkaAdminClient) -> int:
        """``replication_factor``, once that many brokers are up (at most 30 s), else as many as are."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30.0
        while True:
            brokers = len((await admin.describe_cluster()).get("brokers", [])) or 1
            if brokers >= self.replication_factor or loop.time() > deadline:
                break
            await asyncio.sleep(0.5)
        if brokers < self.replication_factor:
            log.warning("Schema registry: only %d brokers up; creating %s with replication factor %d instead of %d",
                        brokers, self.topic, brokers, self.replication_factor)
        return min(brokers, self.replication_factor)

    async def _read(self, tp: TopicPartition, start_end: int) -> None:
        if start_end <= 0:
            self.ready.set()
        while True:
            try:
                batches = await self.consumer.getmany(tp, timeout_ms=500)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("Schema registry: reading %s failed, retrying: %s", self.topic, e)
                await asyncio.sleep(1.0)
                continue
            for msgs in batches.values():
                for m in msgs:
                    self.state.replay(m.key, m.value)
                    self.applied = m.offset
            if batches:
                self._advanced.set()
                self._advanced = asyncio.Event()
                for fn in self.listeners:
                    fn()
            if not self.ready.is_set():
                pos = await self.consumer.position(tp)
                if pos >= start_end:
                    log.info("Schema registry: read %s up to offset %d (%d schemas, %d subjects)", self.topic,
                             pos, len(self.state.schemas), len(self.state.subjects))
                    self.ready.set()

    async def wait_ready(self) -> None:
        try:
            await asyncio.wait_for(self.ready.wait(), self.timeout_s)
        except TimeoutError:
            raise operation_timeout(f"the registry is still reading {self.topic}") from None

    async def write(self, key: bytes, value: bytes | None) -> int:
        """Produce one record and return its offset once the reader has replayed it."""
        try:
            md = await asyncio.wait_for(self.producer.send_and_wait(self.topic, value=value, key=key, partition=0),
                                        self.timeout_s)
        except TimeoutError:
            raise operation_timeout(f"writing to {self.topic} timed out") from None
        except RegistryError:
            raise
        except Exception as e:
            if type(e).__name__ in ("MessageSizeTooLargeError", "RecordTooLargeError"):
                raise schema_too_large(f"Schema too large: the {self.topic} record would be {len(value or b'')} "
                                                "bytes, more than the topic's max.message.bytes") from None
            raise store_error(f"{type(e).__name__}: {e}") from None
        await self.wait_applied(md.offset)
        return int(md.offset)

    async def catch_up(self) -> None:
        """Read the topic up to the end it has now: every write acknowledged before is then applied
        (Confluent's waitUntilKafkaReaderReachesLastOffset)."""
        tp = TopicPartition(self.topic, 0)
        try:
            end = (await asyncio.wait_for(self.consumer.end_offsets([tp]), self.timeout_s))[tp]
        except TimeoutError:
            raise operation_timeout(f"the end offset of {self.topic} was not answered in time") from None
        await self.wait_applied(end - 1)

    async def wait_applied(self, offset: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while self.applied < offset:
            left = deadline - loop.time()
            if left <= 0:
                raise operation_timeout(f"the registry did not read back offset {offset} of {self.topic} in time")
            try:
                await asyncio.wait_for(self._advanced.wait(), left)
            except TimeoutError:
                pass

    async def stop(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
        for c in (self._consumer, self._producer):
            if c is not None:
                await stop_client(c)


async def stop_client(client: AIOKafkaConsumer | AIOKafkaProducer, timeout_s: float = 10.0) -> None:
    """Stop an aiokafka client without letting its shutdown fail ours: bounded in time, and
    aiokafka may re-raise the CancelledError of its own fetch task while closing."""
    try:
        await asyncio.wait_for(client.stop(), timeout_s)
    except (Exception, asyncio.CancelledError) as e:
        current = asyncio.current_task()
        if isinstance(e, asyncio.CancelledError) and current is not None and current.cancelling():
            raise  # we are being cancelled ourselves
        log.debug("Schema registry: stopping a Kafka client: %r", e)


def encode_json(doc: Json) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def client_options(props: dict[str, str]) -> ClientOptions:
    """Kafka client properties (Confluent's ``kafkastore.*`` names without the prefix) -> aiokafka's.

    ``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``sasl.mechanism`` (PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512), ``sasl.jaas.config`` (its username and password) and
    ``ssl.truststore.location`` / ``ssl.ca.location`` (a PEM CA file). Raises ValueError for a value
    the registry cannot use, naming it.
    """
    out: ClientOptions = {}
    protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError(f"security.protocol {protocol!r} is not PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    out["security_protocol"] = protocol
    if protocol.startswith("SASL"):
        mechanism = (props.get("sasl.mechanism") or "PLAIN").strip().upper()
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"sasl.mechanism {mechanism!r} is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        jaas = props.get("sasl.jaas.config") or ""
        try:
            opts = parse_jaas(jaas).options if jaas else {}
        except Exception as e:
            raise ValueError(f"sasl.jaas.config: {e}") from None
        if "username" not in opts or "password" not in opts:
            raise ValueError("sasl.jaas.config needs username=\"...\" password=\"...\"")
        out["sasl_mechanism"] = mechanism
        out["sasl_plain_username"] = opts["username"]
        out["sasl_plain_password"] = opts["password"]
    if protocol.endswith("SSL"):
        cafile = props.get("ssl.truststore.location") or props.get("ssl.ca.location") or None
        ctx = ssl.create_default_context(cafile=cafile)
        if props.get("ssl.endpoint.identification.algorithm", "https") == "":
            ctx.check_hostname = False
        out["ssl_context"] = ctx
    return out
