"""A Samsa cluster for tests: one real ZooKeeper and N ``SamsaBroker`` subprocesses.

Theory of operation: ``SamsaCluster`` starts (or borrows) a ZooKeeper, creates the cluster's
own chroot in it (``/samsa-<name>``, so several clusters can share one ZooKeeper without
seeing each other's znodes), then starts N brokers, each with ``broker.id`` = its index,
``zookeeper.connect=127.0.0.1:<zk port>/<chroot>``, its own free port and data directory.
Every broker is a ``SamsaBroker`` from ``brokers.py``, so kill/restart keep the port and the
data directory: a restarted broker is the same broker to the rest of the cluster.

Readiness has two levels. ``start()`` returns when every broker answers ApiVersions (the
process is up); ``wait_for_brokers(n)`` waits until every running broker's Metadata lists n
brokers (the cluster has formed and the controller has told everyone). Fault helpers act on a
broker index: ``kill`` (SIGKILL), ``stop`` (SIGTERM, controlled shutdown), ``pause``/``resume``
(SIGSTOP/SIGCONT, for session expiry), ``restart``.

The session-scoped ``cluster3`` fixture (see ``tests/cluster/conftest.py``) shares one
3-broker cluster between tests; ``ensure_running()`` restarts and resumes whatever the
previous test left down, so a fault test only has to leave the data in a usable state.
A test that stops ZooKeeper itself must use a cluster with its own ZooKeeper.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from broker.cluster.zk.server import ZooKeeperServer

from .brokers import SamsaBroker
from .net import wait_until
from .rawclient import RawClient
from .zookeeper import make_zookeeper, release, skip_without_zookeeper

METADATA_KEY = 3
METADATA_VERSION = 1  # brokers, controller_id, replicas/isr: all the cluster checks need, non-flexible

# Cluster-wide overrides every test broker gets unless the test says otherwise. The session timeout
# is shorter than Kafka's 18 s so a frozen or killed broker is noticed within a test's patience.
CLUSTER_OVERRIDES: dict[str, object] = {
    "zookeeper.session.timeout.ms": 6000,
    "zookeeper.connection.timeout.ms": 15000,
}


def cluster_mode_implemented() -> bool:
    """Whether this checkout's broker has cluster mode (the controller package, ``broker/controller``).

    Until it lands, brokers started with ``zookeeper.connect`` run as independent single brokers:
    the scaffolding still starts them, but nothing waits for them to form one cluster.
    """
    return importlib.util.find_spec("broker.cluster.controller") is not None


class ClusterError(RuntimeError):
    """The cluster did not reach the expected state in time; carries every broker's log tail."""


class SamsaCluster:
    """A ZooKeeper and ``size`` Samsa brokers (ids 0..size-1) on loopback."""

    def __init__(self, base_dir: Path, size: int = 3, *, overrides: Mapping[str, object] | None = None,
                 broker_overrides: Mapping[int, Mapping[str, object]] | None = None,
                 zookeeper: ZooKeeperServer | None = None, name: str | None = None) -> None:
        self.base_dir = Path(base_dir)
        self.name = name or uuid.uuid4().hex[:8]
        self.chroot = f"/samsa-{self.name}"
        self._own_zookeeper = zookeeper is None
        self.zookeeper = zookeeper if zookeeper is not None else make_zookeeper(self.base_dir)
        common = dict(CLUSTER_OVERRIDES)
        common.update(overrides or {})
        self.brokers: list[SamsaBroker] = []
        for i in range(size):
            props = dict(common)
            props.update((broker_overrides or {}).get(i, {}))
            props["broker.id"] = i
            props["zookeeper.connect"] = self.zookeeper_connect
            self.brokers.append(SamsaBroker(self.base_dir / f"broker{i}-data", self.base_dir / f"broker{i}.log",
                                            overrides=props))

    # -- addressing -------------------------------------------------------------------------------
    @property
    def zookeeper_connect(self) -> str:
        return f"{self.zookeeper.connect_string}{self.chroot}"

    @property
    def bootstrap(self) -> str:
        """Every broker's host:port, comma separated (clients need only one that is up)."""
        return ",".join(b.bootstrap for b in self.brokers)

    def __len__(self) -> int:
        return len(self.brokers)

    def __getitem__(self, i: int) -> SamsaBroker:
        return self.brokers[i]

    def running(self) -> list[int]:
        return [i for i, b in enumerate(self.brokers) if b.is_running()]

    def __repr__(self) -> str:
        return f"<SamsaCluster {self.name} zk={self.zookeeper_connect} running={self.running()}>"

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> SamsaCluster:
        """Start ZooKeeper (if this cluster owns it), create the chroot, start all brokers in parallel."""
        skip_without_zookeeper()
        if not self.zookeeper.is_running():
            self.zookeeper.start()
        self.create_chroot()
        self._start_brokers([i for i, b in enumerate(self.brokers) if not b.is_running()], timeout)
        return self

    def create_chroot(self) -> None:
        """Create the chroot znode (Kafka's brokers do it too; doing it here makes the tests independent)."""
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zookeeper.connect_string, timeout=10.0)
        zk.start(timeout=15)
        try:
            zk.ensure_path(self.chroot)
        finally:
            zk.stop()
            zk.close()

    def _start_brokers(self, indexes: list[int], timeout: float) -> None:
        if not indexes:
            return
        with ThreadPoolExecutor(max_workers=len(indexes)) as pool:
            futures = [pool.submit(self.brokers[i].start, timeout) for i in indexes]
            errors = [f.exception() for f in futures]
        failed = [e for e in errors if e is not None]
        if failed:
            raise failed[0]

    def close(self) -> None:
        """SIGKILL every broker (fast, tests do not need a clean shutdown), then stop our own ZooKeeper."""
        for b in self.brokers:
            b.kill()
        if self._own_zookeeper:
            release(self.zookeeper)

    def shutdown(self, timeout: float = 30.0) -> None:
        """SIGTERM every broker (controlled shutdown), then stop our own ZooKeeper."""
        for b in self.brokers:
            b.stop(timeout)
        if self._own_zookeeper:
            release(self.zookeeper)

    def __enter__(self) -> SamsaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- faults (by broker index, which is also the broker id) ---------------------------------------
    def kill(self, i: int) -> int | None:
        return self.brokers[i].kill()

    def stop(self, i: int, timeout: float = 30.0) -> int | None:
        return self.brokers[i].stop(timeout)

    def restart(self, i: int, timeout: float = 60.0) -> SamsaBroker:
        self.brokers[i].restart(timeout)
        return self.brokers[i]

    def pause(self, i: int) -> None:
        self.brokers[i].pause()

    def resume(self, i: int) -> None:
        self.brokers[i].resume()

    def ensure_running(self, timeout: float = 60.0) -> None:
        """Bring the cluster back to full strength: ZooKeeper serving, paused brokers resumed, dead ones started."""
        if not self.zookeeper.is_running():
            self.zookeeper.start()
        else:
            self.zookeeper.resume()
        for b in self.brokers:
            b.resume()
        self._start_brokers([i for i, b in enumerate(self.brokers) if not b.is_running()], timeout)

    # -- what the cluster says about itself ---------------------------------------------------------
    def metadata(self, i: int | None = None, topics: list[str] | None = None) -> Any:
        """A Metadata v1 response from broker i (the first running one by default).

        ``topics=None`` asks for all topics; ``[]`` for none (brokers and controller only).
        """
        if i is None:
            alive = self.running()
            if not alive:
                raise ClusterError("no broker is running")
            i = alive[0]
        b = self.brokers[i]
        with RawClient(b.host, b.port, timeout=10.0) as c:
            req = MetadataRequest(topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                                       for t in topics])
            return c.roundtrip(req, METADATA_VERSION, MetadataResponse)

    def broker_ids(self, i: int | None = None) -> list[int]:
        """The broker ids Metadata from broker i lists."""
        return sorted(b.node_id for b in self.metadata(i, topics=[]).brokers)

    def controller_id(self, i: int | None = None) -> int:
        return int(self.metadata(i, topics=[]).controller_id)

    def partition(self, topic: str, partition: int, i: int | None = None) -> dict[str, Any]:
        """``{"leader", "replicas", "isr", "error_code"}`` of one partition, as broker i reports it."""
        for t in self.metadata(i, topics=[topic]).topics:
            for p in t.partitions:
                if p.partition_index == partition:
                    return {"leader": p.leader_id, "replicas": list(p.replica_nodes), "isr": list(p.isr_nodes),
                            "error_code": p.error_code}
        raise ClusterError(f"{topic}-{partition} is not in broker {i}'s metadata")

    def wait_for_brokers(self, n: int | None = None, timeout: float = 60.0) -> list[int]:
        """Wait until every running broker's Metadata lists n brokers (default: all); return the ids."""
        want = len(self.brokers) if n is None else n
        seen: dict[int, list[int]] = {}

        def formed() -> bool:
            for i in self.running():
                try:
                    seen[i] = self.broker_ids(i)
                except (OSError, ConnectionError, ValueError, AssertionError):
                    return False
                if len(seen[i]) != want:
                    return False
            return bool(self.running())

        if not wait_until(formed, timeout, interval=0.25):
            raise ClusterError(f"after {timeout}s the brokers list {seen} (want {want} brokers)\n" + self.log_tails())
        return next(iter(seen.values()))

    def log_tails(self, max_chars: int = 6000) -> str:
        parts = [b.log_tail(max_chars) for b in self.brokers]
        parts.append(self.zookeeper.log_tail(max_chars // 2))
        return "\n".join(parts)
