"""What the pytest plugin's fixtures hand to tests: an external Kafka behind SamsaBroker's
helpers, and client factories bound to a broker.

Loaded by :mod:`broker.testing.pytest_plugin` when a test first asks for one of its fixtures
(never when pytest merely loads the plugin). kafka-python is a dependency of the package and is
imported here; confluent-kafka and aiokafka are optional: their factories import them with
``pytest.importorskip``, so a test asking for a client that is not installed is skipped, saying
which package it needs, instead of failing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn, TypeVar

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from .embedded import SamsaBroker
from .helpers import KafkaHelpers

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

__all__ = ["AioKafkaClients", "ConfluentKafkaClients", "ExternalKafka", "KafkaPythonClients", "SamsaBroker"]

EMBEDDED_ONLY = ("inject", "delay", "drop_response", "close_connection", "requests", "restart", "kill",
                 "pause", "resume", "faults", "leader")


class ExternalKafka(KafkaHelpers):
    """An external Kafka behind the same helpers as SamsaBroker (faults and restarts: skipped)."""

    def __init__(self, bootstrap_servers: str) -> None:
        self._bootstrap_servers = bootstrap_servers
        self._admin = None

    @property
    def bootstrap_servers(self) -> str:
        return self._bootstrap_servers

    def clear_faults(self) -> None:
        pass

    def clear_requests(self) -> None:
        pass

    def stop(self) -> None:
        self._close_admin()

    def __getattr__(self, name: str) -> NoReturn:
        if name in EMBEDDED_ONLY:
            pytest.skip(f"{name}() needs the embedded Samsa broker, not --samsa-bootstrap {self.bootstrap_servers}")
        raise AttributeError(name)


_C = TypeVar("_C")


class _Clients:
    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.made: list[object] = []

    def _keep(self, client: _C) -> _C:
        self.made.append(client)
        return client


class KafkaPythonClients(_Clients):
    def producer(self, **config: object) -> KafkaProducer:
        return self._keep(KafkaProducer(bootstrap_servers=self.bootstrap_servers, **config))

    def consumer(self, *topics: str, **config: object) -> KafkaConsumer:
        return self._keep(KafkaConsumer(*topics, bootstrap_servers=self.bootstrap_servers, **config))

    def admin(self, **config: object) -> KafkaAdminClient:
        return self._keep(KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **config))

    def close(self) -> None:
        for c in reversed(self.made):
            try:
                c.close()  # type: ignore[attr-defined]  # all three kafka-python clients have close()
            except Exception:
                pass


class ConfluentKafkaClients(_Clients):
    """confluent-kafka (librdkafka) clients; ``config`` uses librdkafka's names with ``_`` for
    ``.``: ``enable_idempotence=True``."""

    def _conf(self, config: Mapping[str, object]) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap_servers, **{k.replace("_", "."): v for k, v in config.items()}}

    def producer(self, **config: object) -> Producer:
        ck = pytest.importorskip("confluent_kafka", reason="samsa_confluent_kafka needs confluent-kafka")
        producer: Producer = ck.Producer(self._conf(config))
        return self._keep(producer)

    def consumer(self, *topics: str, **config: object) -> Consumer:
        ck = pytest.importorskip("confluent_kafka", reason="samsa_confluent_kafka needs confluent-kafka")
        conf = self._conf(config)
        conf.setdefault("group.id", f"samsa-{uuid.uuid4().hex[:12]}")
        consumer: Consumer = self._keep(ck.Consumer(conf))
        if topics:
            consumer.subscribe(list(topics))
        return consumer

    def admin(self, **config: object) -> AdminClient:
        admin = pytest.importorskip("confluent_kafka.admin", reason="samsa_confluent_kafka needs confluent-kafka")
        client: AdminClient = admin.AdminClient(self._conf(config))
        return client

    def close(self) -> None:
        for c in reversed(self.made):
            try:
                if hasattr(c, "flush"):  # a Producer: deliver what is queued (a Consumer has no flush)
                    c.flush(5)
                else:
                    c.close()  # type: ignore[attr-defined]  # a confluent Consumer
            except Exception:
                pass


class AioKafkaClients(_Clients):
    """aiokafka clients (not started: ``await p.start()`` in the test's event loop; stop them there)."""

    def producer(self, **config: object) -> AIOKafkaProducer:
        aio = pytest.importorskip("aiokafka", reason="samsa_aiokafka needs aiokafka")
        producer: AIOKafkaProducer = aio.AIOKafkaProducer(bootstrap_servers=self.bootstrap_servers, **config)
        return producer

    def consumer(self, *topics: str, **config: object) -> AIOKafkaConsumer:
        aio = pytest.importorskip("aiokafka", reason="samsa_aiokafka needs aiokafka")
        consumer: AIOKafkaConsumer = aio.AIOKafkaConsumer(*topics, bootstrap_servers=self.bootstrap_servers, **config)
        return consumer

    def admin(self, **config: object) -> AIOKafkaAdminClient:
        admin = pytest.importorskip("aiokafka.admin", reason="samsa_aiokafka needs aiokafka")
        client: AIOKafkaAdminClient = admin.AIOKafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **config)
        return client
