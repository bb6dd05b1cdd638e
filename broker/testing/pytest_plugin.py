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

from collections.abc import Iterator
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .clients import (
        AioKafkaClients,
        ConfluentKafkaClients,
        ExternalKafka,
        KafkaPythonClients,
        SamsaBroker,
    )


def _clients() -> ModuleType:
    # The broker and kafka-python cost ~0.2-0.3 s of import (python -X importtime): paid by the
    # first test that uses a fixture, not by every pytest run of every project with Samsa installed.
    from . import clients  # noqa: PLC0415

    return clients


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("samsa", "Samsa broker fixtures (broker.testing)")
    group.addoption("--samsa-bootstrap", metavar="HOST:PORT", default=None,
                    help="run the samsa_* fixtures against this Kafka instead of an embedded Samsa broker")


@pytest.fixture(scope="session")
def samsa_broker(request: pytest.FixtureRequest) -> Iterator[SamsaBroker | ExternalKafka]:
    """One broker for the session (or the --samsa-bootstrap Kafka)."""
    clients = _clients()
    external = request.config.getoption("--samsa-bootstrap", default=None)
    if external:
        ext: ExternalKafka = clients.ExternalKafka(str(external))
        yield ext
        ext.stop()
        return
    kafka: SamsaBroker = clients.SamsaBroker()
    with kafka:
        yield kafka


@pytest.fixture
def samsa(samsa_broker: SamsaBroker | ExternalKafka) -> Iterator[SamsaBroker | ExternalKafka]:
    """The session's broker; faults and recorded requests are cleared when the test ends."""
    yield samsa_broker
    samsa_broker.clear_faults()
    samsa_broker.clear_requests()


@pytest.fixture
def samsa_topic(samsa: SamsaBroker | ExternalKafka) -> Iterator[str]:
    """A fresh topic (one partition), deleted when the test ends."""
    name = samsa.create_topic()
    yield name
    try:
        samsa.delete_topic(name)
    except Exception:  # a test that restarted or killed the broker: the folder goes at session end
        pass


@pytest.fixture
def samsa_kafka_python(samsa: SamsaBroker | ExternalKafka) -> Iterator[KafkaPythonClients]:
    """kafka-python ``.producer(**config)``, ``.consumer(*topics, **config)``, ``.admin()``; closed afterwards."""
    clients: KafkaPythonClients = _clients().KafkaPythonClients(samsa.bootstrap_servers)
    yield clients
    clients.close()


@pytest.fixture
def samsa_confluent_kafka(samsa: SamsaBroker | ExternalKafka) -> Iterator[ConfluentKafkaClients]:
    """confluent-kafka clients (librdkafka names with ``_`` for ``.``); flushed or closed afterwards."""
    clients: ConfluentKafkaClients = _clients().ConfluentKafkaClients(samsa.bootstrap_servers)
    yield clients
    clients.close()


@pytest.fixture
def samsa_aiokafka(samsa: SamsaBroker | ExternalKafka) -> AioKafkaClients:
    """aiokafka clients, not started (start and stop them in the test's event loop)."""
    clients: AioKafkaClients = _clients().AioKafkaClients(samsa.bootstrap_servers)
    return clients
