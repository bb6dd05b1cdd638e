"""pytest plugin (entry point ``pytest11: samsa``): a Samsa broker and Kafka clients as fixtures.

Installing ``samsa-broker`` is enough; nothing here runs unless a test asks for a fixture (no
autouse fixture, no hook that changes collection), and the broker starts on first use. pytest
loads this module in every session of every project that installs Samsa, so the broker and the
clients are imported inside the fixtures that use them (tests/testing/test_plugin.py checks that
loading the plugin imports neither).

* ``samsa_broker`` (session): a :class:`broker.testing.SamsaBroker`, started on first use and
  stopped when the session ends. With ``--samsa-bootstrap HOST:PORT`` it is an
  :class:`ExternalKafka` on that address instead: the same helpers over the Kafka protocol;
  tests that inject faults or restart the broker are skipped there.
* ``samsa`` (function): the same broker, with injected faults and recorded requests cleared
  when the test ends, so one test's faults never reach the next.
* ``samsa_topic`` (function): a fresh, uniquely named topic (1 partition), deleted afterwards.
* ``samsa_kafka_python``, ``samsa_confluent_kafka``, ``samsa_aiokafka`` (function): client
  factories bound to the broker (``.producer(**config)``, ``.consumer(*topics, **config)``,
  ``.admin()``); what they made is closed when the test ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("samsa", "Samsa broker fixtures (broker.testing)")
    group.addoption("--samsa-bootstrap", metavar="HOST:PORT", default=None,
                    help="run the samsa_* fixtures against this Kafka instead of an embedded Samsa broker")


class ExternalKafka:
    """An external Kafka behind the same helpers as SamsaBroker (faults and restarts: skipped)."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._admin: Any = None

    @property
    def admin(self) -> Any:
        if self._admin is None:
            from .helpers import Admin  # noqa: PLC0415

            self._admin = Admin(self.bootstrap_servers)
        return self._admin

    def create_topic(self, name: str | None = None, partitions: int = 1, replication_factor: int = 1,
                     configs: Any = None) -> str:
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        self.admin.create_topic(name, partitions, replication_factor, configs or {})
        return name

    def delete_topic(self, name: str) -> None:
        self.admin.delete_topic(name)

    def records(self, topic: str, partition: int | None = None, timeout: float = 10.0) -> list[Any]:
        return self.admin.records(topic, partition, timeout)

    def committed_offsets(self, group: str) -> dict[Any, int]:
        return self.admin.committed_offsets(group)

    def wait_group_stable(self, group: str, timeout: float = 30.0, members: int | None = None) -> Any:
        return self.admin.wait_group_stable(group, timeout, members)

    def clear_faults(self) -> None:
        pass

    def clear_requests(self) -> None:
        pass

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def __getattr__(self, name: str) -> Any:
        if name in ("inject", "delay", "drop_response", "close_connection", "requests", "restart", "kill",
                    "pause", "resume", "faults"):
            pytest.skip(f"{name}() needs the embedded Samsa broker, not --samsa-bootstrap {self.bootstrap_servers}")
        raise AttributeError(name)


@pytest.fixture(scope="session")
def samsa_broker(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One broker for the session (or the --samsa-bootstrap Kafka)."""
    external = request.config.getoption("--samsa-bootstrap", default=None)
    if external:
        ext = ExternalKafka(external)
        yield ext
        ext.stop()
        return
    from . import SamsaBroker  # noqa: PLC0415

    with SamsaBroker() as kafka:
        yield kafka


@pytest.fixture
def samsa(samsa_broker: Any) -> Iterator[Any]:
    """The session's broker; faults and recorded requests are cleared when the test ends."""
    yield samsa_broker
    samsa_broker.clear_faults()
    samsa_broker.clear_requests()


@pytest.fixture
def samsa_topic(samsa: Any) -> Iterator[str]:
    """A fresh topic (one partition), deleted when the test ends."""
    name = samsa.create_topic(f"test-{uuid.uuid4().hex[:16]}")
    yield name
    try:
        samsa.delete_topic(name)
    except Exception:  # a test that restarted or killed the broker: the folder goes at session end
        pass


class _Clients:
    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.made: list[Any] = []

    def _keep(self, client: Any) -> Any:
        self.made.append(client)
        return client


class KafkaPythonClients(_Clients):
    def producer(self, **config: Any) -> Any:
        from kafka import KafkaProducer  # noqa: PLC0415

        return self._keep(KafkaProducer(bootstrap_servers=self.bootstrap_servers, **config))

    def consumer(self, *topics: str, **config: Any) -> Any:
        from kafka import KafkaConsumer  # noqa: PLC0415

        return self._keep(KafkaConsumer(*topics, bootstrap_servers=self.bootstrap_servers, **config))

    def admin(self, **config: Any) -> Any:
        from kafka import KafkaAdminClient  # noqa: PLC0415

        return self._keep(KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **config))

    def close(self) -> None:
        for c in reversed(self.made):
            try:
                c.close()
            except Exception:
                pass


class ConfluentKafkaClients(_Clients):
    def _conf(self, config: dict[str, Any]) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **config}

    def producer(self, **config: Any) -> Any:
        """``config`` uses librdkafka's names with ``_`` for ``.``: ``enable_idempotence=True``."""
        from confluent_kafka import Producer  # noqa: PLC0415

        return self._keep(Producer(self._conf(_dotted(config))))

    def consumer(self, *topics: str, **config: Any) -> Any:
        from confluent_kafka import Consumer  # noqa: PLC0415

        conf = self._conf(_dotted(config))
        conf.setdefault("group.id", f"samsa-{uuid.uuid4().hex[:12]}")
        c = self._keep(Consumer(conf))
        if topics:
            c.subscribe(list(topics))
        return c

    def admin(self, **config: Any) -> Any:
        from confluent_kafka.admin import AdminClient  # noqa: PLC0415

        return AdminClient(self._conf(_dotted(config)))

    def close(self) -> None:
        for c in reversed(self.made):
            try:
                if hasattr(c, "flush"):
                    c.flush(5)
                else:
                    c.close()
            except Exception:
                pass


class AioKafkaClients(_Clients):
    """aiokafka clients (not started: ``await p.start()`` in the test's event loop; stop them there)."""

    def producer(self, **config: Any) -> Any:
        from aiokafka import AIOKafkaProducer  # noqa: PLC0415

        return AIOKafkaProducer(bootstrap_servers=self.bootstrap_servers, **config)

    def consumer(self, *topics: str, **config: Any) -> Any:
        from aiokafka import AIOKafkaConsumer  # noqa: PLC0415

        return AIOKafkaConsumer(*topics, bootstrap_servers=self.bootstrap_servers, **config)

    def admin(self, **config: Any) -> Any:
        from aiokafka.admin import AIOKafkaAdminClient  # noqa: PLC0415

        return AIOKafkaAdminClient(bootstrap_servers=self.bootstrap_servers, **config)


def _dotted(config: dict[str, Any]) -> dict[str, Any]:
    return {k.replace("_", "."): v for k, v in config.items()}


@pytest.fixture
def samsa_kafka_python(samsa: Any) -> Iterator[KafkaPythonClients]:
    clients = KafkaPythonClients(samsa.bootstrap_servers)
    yield clients
    clients.close()


@pytest.fixture
def samsa_confluent_kafka(samsa: Any) -> Iterator[ConfluentKafkaClients]:
    clients = ConfluentKafkaClients(samsa.bootstrap_servers)
    yield clients
    clients.close()


@pytest.fixture
def samsa_aiokafka(samsa: Any) -> AioKafkaClients:
    return AioKafkaClients(samsa.bootstrap_servers)
