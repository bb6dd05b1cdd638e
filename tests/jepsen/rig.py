"""The cluster under test: ZooKeeper and N Samsa brokers, each a host in its own network namespace.

Theory of operation: :class:`Rig` makes a :class:`~tests.jepsen.net.Network` with hosts ``zk``,
``n0`` .. ``n{N-1}``, then runs ``java ... QuorumPeerMain`` in ``zk`` and ``python3 -m broker`` in
each ``n<i>`` through ``ip netns exec`` (which execs, so the process we hold *is* the server and
signals reach it). The processes are the cluster tests' own :class:`SamsaBroker` and
:class:`ZooKeeperServer` with that prefix on their command line, bound to their host's address
on the standard ports (2181, 9092): a restarted broker is the same broker at the same address.

The cluster is Kafka's durable configuration (the contract the checker holds it to): every
topic RF 3, ``min.insync.replicas=2``, unclean leader election off, the internal topics likewise.
The ZooKeeper session timeout is short (6 s), so a cut-off broker loses its session quickly and
the "writes resume within session timeout + 5 s of a heal" bound is tight.

:meth:`Rig.close` stops everything and removes the network even when a run failed half-way.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from broker.cluster.zk.server import ZooKeeperServer
from tests.support.brokers import SamsaBroker
from tests.support.rawclient import RawClient
from tests.support.zookeeper import TEST_TICK_TIME_MS

from .net import NS_PREFIX, Network, run, wait_for

BROKER_PORT = 9092
ZK_PORT = 2181
ZK_SESSION_TIMEOUT_MS = 6000

DURABLE_OVERRIDES: dict[str, object] = {
    "zookeeper.session.timeout.ms": ZK_SESSION_TIMEOUT_MS,
    "zookeeper.connection.timeout.ms": 15000,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    "unclean.leader.election.enable": False,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 4,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "transaction.state.log.num.partitions": 4,
    "replica.lag.time.max.ms": 10000,
    "group.initial.rebalance.delay.ms": 0,
    "auto.create.topics.enable": False,
}


class NsZooKeeper(ZooKeeperServer):
    def __init__(self, net: Network, host: str, data_dir: Path, log_path: Path) -> None:
        super().__init__(data_dir, port=ZK_PORT, host=net.ip(host), tick_time_ms=TEST_TICK_TIME_MS,
                         min_session_timeout_ms=1000, max_session_timeout_ms=60000, log_path=log_path)
        self.net, self.netns_host = net, host

    def command(self) -> list[str]:
        return [*self.net.prefix(self.netns_host), *super().command()]


class NsBroker(SamsaBroker):
    def __init__(self, net: Network, host: str, broker_id: int, base: Path,
                 overrides: Mapping[str, object]) -> None:
        props = dict(overrides)
        props["broker.id"] = broker_id
        super().__init__(base / f"{host}-data", base / f"{host}.log", overrides=props, host=net.ip(host),
                         port=BROKER_PORT)
        self.net, self.netns_host, self.broker_id = net, host, broker_id

    def command(self) -> list[str]:
        return [*self.net.prefix(self.netns_host), *super().command()]


class Rig:
    """ZooKeeper + ``size`` brokers in namespaces. Broker i is host ``n<i>`` with ``broker.id`` i."""

    def __init__(self, base_dir: Path, size: int = 3, overrides: Mapping[str, object] | None = None,
                 disk_mb: int | None = None) -> None:
        self.base_dir = Path(base_dir)
        self.size = size
        self.disk_mb = disk_mb
        self.mounts: list[Path] = []
        self.net = Network(["zk", *[f"n{i}" for i in range(size)]])
        self.zookeeper = NsZooKeeper(self.net, "zk", self.base_dir / "zk-data", self.base_dir / "zk.log")
        props = dict(DURABLE_OVERRIDES)
        props.update(overrides or {})
        props["zookeeper.connect"] = f"{self.net.ip('zk')}:{ZK_PORT}/samsa"
        self.brokers = [NsBroker(self.net, f"n{i}", i, self.base_dir, props) for i in range(size)]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def host(self, broker_id: int) -> str:
        return f"n{broker_id}"

    def start(self, timeout: float = 90.0) -> Rig:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.net.create()
        try:
            if self.disk_mb:
                for b in self.brokers:
                    self._mount_small_fs(b.data_dir)
            self.zookeeper.start(timeout)
            self._create_chroot()
            for b in self.brokers:   # one at a time: two cores, and the first becomes controller calmly
                b.start(timeout)
            self.wait_formed(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _create_chroot(self) -> None:
        from kazoo.client import KazooClient

        zk = KazooClient(hosts=self.zookeeper.connect_string, timeout=10.0)
        zk.start(timeout=15)
        try:
            zk.ensure_path("/samsa")
        finally:
            zk.stop()
            zk.close()

    def close(self) -> None:
        for b in self.brokers:
            try:
                b.kill()
            except Exception:  # noqa: BLE001 - cleanup goes on
                pass
        try:
            self.zookeeper.kill()
        except Exception:  # noqa: BLE001
            pass
        self.net.close()
        for m in self.mounts:
            run(["umount", "-l", str(m)], check=False)
        self.mounts.clear()

    def _mount_small_fs(self, path: Path) -> None:
        """A tmpfs of ``disk_mb`` MiB as this log dir, so the disk-full nemesis can fill it in an instant.

        Mounted in the root mount namespace before the broker starts, so the broker (in the mount
        namespace ``ip netns exec`` makes, a slave of this one) sees it; the source name carries our
        pid so a dead run's mounts are found and unmounted by ``cleanup_stale``.
        """
        path.mkdir(parents=True, exist_ok=True)
        run(["mount", "-t", "tmpfs", "-o", f"size={self.disk_mb}m", f"{NS_PREFIX}{self.net.pid}", str(path)])
        self.mounts.append(path)

    def __enter__(self) -> Rig:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the cluster says about itself ----------------------------------------------------------
    def metadata(self, broker_id: int | None = None, topics: list[str] | None = None) -> Any:
        """Metadata v1 from the given broker (else the first that answers)."""
        order = [broker_id] if broker_id is not None else [i for i, b in enumerate(self.brokers) if b.is_running()]
        last: Exception | None = None
        for i in order:
            b = self.brokers[i]
            try:
                with RawClient(b.host, b.port, timeout=5.0) as c:
                    req = MetadataRequest(topics=None if topics is None else
                                          [MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
                    return c.roundtrip(req, 1, MetadataResponse)
            except (OSError, ConnectionError, ValueError, AssertionError) as e:
                last = e
        raise ConnectionError(f"no broker answered Metadata: {last}")

    def controller_id(self) -> int:
        return int(self.metadata(topics=[]).controller_id)

    def leaders(self, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
        """{partition: (leader, replicas, isr)}."""
        out = {}
        for t in self.metadata(topics=[topic]).topics:
            for p in t.partitions:
                out[p.partition_index] = (p.leader_id, list(p.replica_nodes), list(p.isr_nodes))
        return out

    def wait_formed(self, timeout: float = 90.0) -> None:
        def formed() -> bool:
            for i, b in enumerate(self.brokers):
                if b.is_running() and len(self.metadata(i, topics=[]).brokers) != self.size:
                    return False
            return True

        if not wait_for(formed, timeout, 0.3):
            raise RuntimeError(f"the {self.size} brokers did not form a cluster in {timeout}s\n"
                               + "\n".join(b.log_tail(4000) for b in self.brokers))

    def wait_full_isr(self, topic: str, timeout: float = 60.0) -> bool:
        def full() -> bool:
            ls = self.leaders(topic)
            return bool(ls) and all(ldr >= 0 and len(isr) == len(reps) for ldr, reps, isr in ls.values())

        return wait_for(full, timeout, 0.5)
