"""Fixtures for the cluster tests: a real ZooKeeper and Samsa brokers started as subprocesses.

* ``zookeeper``: a ZooKeeper of the test's own (free port, temp dir), stopped at teardown.
* ``shared_zookeeper``: one ZooKeeper for the whole session; clusters share it under chroots.
* ``cluster3``: one 3-broker cluster shared by the session (starting three brokers costs
  seconds on two cores). Before each test it is brought back to full strength (dead brokers
  restarted, paused ones resumed) and waited on until Metadata lists all three brokers (once
  the broker has cluster mode, ``cluster_mode_implemented()``), so a
  test may kill, stop or pause brokers freely. Tests that stop ZooKeeper, or need other
  broker settings, use ``cluster_factory`` instead.
* ``cluster_factory(size=3, overrides=..., broker_overrides=..., own_zookeeper=False)``: a
  cluster of the test's own, SIGKILLed at teardown.

Every broker's log is attached to a failing test's report. Tests are skipped (with the
install hint) only when ZooKeeper or java is not installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from broker.cluster.zk.server import ZooKeeperServer
from tests.support.cluster import SamsaCluster, cluster_mode_implemented
from tests.support.fixtures import report_broker_log
from tests.support.zookeeper import shared_zookeeper, zookeeper  # noqa: F401

ClusterFactory = Callable[..., SamsaCluster]


@pytest.fixture(scope="session")
def _cluster3_session(tmp_path_factory: pytest.TempPathFactory,
                      shared_zookeeper: ZooKeeperServer) -> Iterator[SamsaCluster]:  # noqa: F811
    cluster = SamsaCluster(tmp_path_factory.mktemp("cluster3"), 3, zookeeper=shared_zookeeper, name="cluster3")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def cluster3(request: pytest.FixtureRequest, _cluster3_session: SamsaCluster) -> SamsaCluster:
    """The shared 3-broker cluster, all brokers running and known to each other."""
    for b in _cluster3_session.brokers:
        report_broker_log(request.node, b)
    _cluster3_session.ensure_running()
    if cluster_mode_implemented():
        _cluster3_session.wait_for_brokers(3)
    return _cluster3_session


@pytest.fixture
def cluster_factory(request: pytest.FixtureRequest, tmp_path: Path,
                    shared_zookeeper: ZooKeeperServer) -> Iterator[ClusterFactory]:  # noqa: F811
    made: list[SamsaCluster] = []

    def factory(size: int = 3, *, overrides: Mapping[str, object] | None = None,
                broker_overrides: Mapping[int, Mapping[str, object]] | None = None,
                own_zookeeper: bool = False, start: bool = True) -> SamsaCluster:
        base = tmp_path / f"cluster{len(made)}"
        cluster = SamsaCluster(base, size, overrides=overrides, broker_overrides=broker_overrides,
                               zookeeper=None if own_zookeeper else shared_zookeeper)
        made.append(cluster)
        for b in cluster.brokers:
            report_broker_log(request.node, b)
        if start:
            cluster.start()
        return cluster

    try:
        yield factory
    finally:
        for c in made:
            c.close()
