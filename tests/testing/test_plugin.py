"""The pytest plugin (broker/testing/pytest_plugin.py) through pytest's own ``pytester``.

Each inner session runs in a subprocess with this worktree first on PYTHONPATH, so it tests
this checkout's plugin with its own embedded broker.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from kafka import KafkaProducer

from broker.testing import SamsaBroker

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str) -> pytest.RunResult:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    installed = any(ep.value == "broker.testing.pytest_plugin" for ep in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "broker.testing.pytest_plugin"]
    return pytester.runpytest_subprocess(*plugin, "-p", "no:cacheprovider", "-q", *args, timeout=300)


APP_TESTS = '''
import threading
from kafka import TopicPartition

def test_no_broker_unless_asked():
    assert not any(t.name.startswith("samsa-broker") for t in threading.enumerate())

def test_produce_consume_kafka_python(samsa, samsa_topic, samsa_kafka_python):
    p = samsa_kafka_python.producer()
    p.send(samsa_topic, key=b"k", value=b"v").get(timeout=30)
    assert [r.value for r in samsa.records(samsa_topic)] == [b"v"]

def test_confluent_producer(samsa, samsa_topic, samsa_confluent_kafka):
    p = samsa_confluent_kafka.producer(enable_idempotence=True)
    p.produce(samsa_topic, b"c")
    assert p.flush(30) == 0
    assert [r.value for r in samsa.records(samsa_topic)] == [b"c"]

def test_topics_are_fresh(samsa, samsa_topic):
    assert samsa.records(samsa_topic) == []

def test_injected_fault_retried(samsa, samsa_topic, samsa_kafka_python):
    rule = samsa.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=2, topic=samsa_topic)
    samsa_kafka_python.producer(retry_backoff_ms=10).send(samsa_topic, value=b"r").get(timeout=30)
    assert rule.fired == 2

def test_faults_do_not_leak_into_the_next_test(samsa):
    assert samsa.faults.rules == []

async def _aio(samsa_aiokafka, topic):
    p = samsa_aiokafka.producer()
    await p.start()
    try:
        return (await p.send_and_wait(topic, b"a")).offset
    finally:
        await p.stop()

def test_aiokafka(samsa, samsa_topic, samsa_aiokafka):
    import asyncio
    assert asyncio.run(_aio(samsa_aiokafka, samsa_topic)) == 0
'''


def test_fixtures_in_a_test_file(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_app=APP_TESTS)
    result = _run(pytester, monkeypatch)
    result.assert_outcomes(passed=7)


@pytest.fixture(scope="module")
def outside() -> Iterator[SamsaBroker]:
    """An in-process broker started before (module scope) the test's ``pytester``. pytester
    snapshots ``sys.modules`` when it is set up and, when the test ends, drops every module
    imported meanwhile, but not the attributes that name them on the packages that stay
    (``broker.apis`` on ``broker``): a broker started inside the test would leave the next one
    in this process half old modules and half new (``from . import apis`` finds the dropped
    module, ``from .apis import x`` imports a second copy), and that broker then answered
    Metadata without leaders (test_a_broker_started_after_a_pytester_test_serves_leaders)."""
    with SamsaBroker() as kafka:
        yield kafka


def test_samsa_bootstrap_runs_against_an_external_broker(outside: SamsaBroker, pytester: pytest.Pytester,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_app=APP_TESTS.replace(
        "def test_no_broker_unless_asked", "def _not_here").replace(
        "def test_faults_do_not_leak_into_the_next_test", "def _not_here_either"))
    result = _run(pytester, monkeypatch, f"--samsa-bootstrap={outside.bootstrap_servers}")
    created = outside.requests(api="CreateTopics")
    produced = outside.requests(api="Produce")
    # inject() needs the embedded broker: that test is skipped, the others ran against `outside`
    result.assert_outcomes(passed=4, skipped=1)
    assert len(created) == 5  # one fresh topic per test using samsa_topic (the skipped one too)
    produced_to = {t for r in produced for t in r.topics}
    assert len(produced_to) == 3 and produced_to <= {t for r in created for t in r.topics}


def test_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"samsa": "broker.testing.pytest_plugin"}


def test_loading_the_plugin_imports_no_broker_code() -> None:
    """pytest loads the plugin in every session where the package is installed: it must stay light."""
    import subprocess
    import sys

    probe = ("import sys, broker.testing.pytest_plugin\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('broker', 'protocol', 'kafka', 'log') and m != 'broker'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['broker.testing', 'broker.testing.pytest_plugin']"


def test_a_broker_started_after_a_pytester_test_serves_leaders() -> None:
    """Runs after the pytester tests above (a file's tests run in order): a fresh broker in this
    process answers Metadata with its leader, so an idempotent producer gets through injected
    NOT_LEADER_OR_FOLLOWER errors (it hung in Metadata when a broker had been started inside
    a pytester test: see ``outside``)."""
    with SamsaBroker() as kafka:
        topic = kafka.create_topic()
        rule = kafka.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=2, topic=topic)
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, enable_idempotence=True,
                                 retry_backoff_ms=10, linger_ms=0, max_block_ms=20000)
        try:
            assert producer.send(topic, value=b"after").get(timeout=30).offset == 0
        finally:
            producer.close(timeout=5)
        assert rule.fired == 2
        assert [r.value for r in kafka.records(topic)] == [b"after"]
