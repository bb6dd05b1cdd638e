"""A real Apache ZooKeeper for tests: start/stop helpers and pytest fixtures.

Theory of operation: ``broker.cluster.zk.server.ZooKeeperServer`` does the work (finds the jars,
writes zoo.cfg, runs the JVM on a free loopback port, waits for ``srvr``); this module adds
what tests need around it: every server started here is registered and SIGKILLed at
interpreter exit (like the brokers in ``brokers.py``), its log is attached to a failing
test's report, and a test is skipped, with the one-line install hint as the reason, only when
the jars or java truly are not installed (CI installs the Debian package in ``.ci/run``).

Tests use a short ``tickTime`` (500 ms) so ZooKeeper notices an expired session within half a
second of its timeout, and allow sessions from 1 s to 60 s, so each broker's
``zookeeper.session.timeout.ms`` is honoured as given.
"""

from __future__ import annotations

import atexit
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.cluster.zk.server import ZooKeeperServer, zookeeper_available

TEST_TICK_TIME_MS = 500

_LIVE: set[ZooKeeperServer] = set()


@atexit.register
def _kill_leftovers() -> None:
    for zk in list(_LIVE):
        zk.kill()
    _LIVE.clear()


def skip_without_zookeeper() -> None:
    """pytest.skip with the install hint when ZooKeeper (or java) is not installed here."""
    reason = zookeeper_available()
    if reason is not None:
        pytest.skip(reason)


def make_zookeeper(base_dir: Path, name: str = "zookeeper", port: int | None = None) -> ZooKeeperServer:
    """Build (not start) a test ZooKeeper with its data and log under base_dir/name."""
    zk = ZooKeeperServer(Path(base_dir) / name, port=port, tick_time_ms=TEST_TICK_TIME_MS,
                         min_session_timeout_ms=1000, max_session_timeout_ms=60000,
                         log_path=Path(base_dir) / f"{name}.log")
    _LIVE.add(zk)
    return zk


def start_zookeeper(base_dir: Path, name: str = "zookeeper", timeout: float = 60.0) -> ZooKeeperServer:
    """A running test ZooKeeper (skips the test when ZooKeeper is not installed)."""
    skip_without_zookeeper()
    return make_zookeeper(base_dir, name).start(timeout)


def release(zk: ZooKeeperServer) -> None:
    """Stop (SIGTERM) a server from make_zookeeper and forget it."""
    zk.stop()
    _LIVE.discard(zk)


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of the test's own, on a free port, stopped at teardown."""
    zk = start_zookeeper(tmp_path)
    try:
        yield zk
    finally:
        release(zk)


@pytest.fixture(scope="session")
def shared_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper for the session: clusters share it, each under its own chroot."""
    zk = start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    try:
        yield zk
    finally:
        release(zk)
