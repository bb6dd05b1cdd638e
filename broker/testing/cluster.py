"""``SamsaBroker(brokers=3)``: a ZooKeeper and N Samsa broker processes, through ``samsa cluster``.

Cluster brokers run as child processes (each owns a ZooKeeper session, a controller candidate
and its replica fetchers: one per process, as in production) started and stopped by
``samsa cluster up/down`` (broker/tools/cluster.py), on free ports, in the SamsaBroker's
temporary folder. Needs Apache ZooKeeper and a JDK; without them ``start()`` raises
:class:`ClusterUnavailable` saying how to install them.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


class ClusterUnavailable(RuntimeError):
    """ZooKeeper (or java) is missing, or the cluster did not form; the message says why."""


def _consecutive_free_ports(n: int, host: str) -> int:
    for _ in range(200):
        with socket.socket() as s:
            s.bind((host, 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        ok = True
        for p in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind((host, p))
                except OSError:
                    ok = False
                    break
        if ok:
            return int(base)
    raise ClusterUnavailable(f"no {n} consecutive free ports on {host}")


class EmbeddedCluster:
    def __init__(self, brokers: int, folder: Path, properties: Mapping[str, str], host: str = "127.0.0.1") -> None:
        if brokers < 1:
            raise ValueError("brokers must be at least 1")
        self.n = brokers
        self.folder = folder / "cluster"
        self.properties = dict(properties)
        self.host = host
        self.bootstrap_servers = ""

    def _run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "broker.cli", "cluster", *args, "--dir", str(self.folder)],
                              capture_output=True, text=True, timeout=timeout)

    def start(self, timeout: float = 90.0) -> None:
        from ..cluster.zk.server import zookeeper_available  # noqa: PLC0415

        missing = zookeeper_available()
        if missing is not None:
            raise ClusterUnavailable(f"SamsaBroker(brokers={self.n}) needs Apache ZooKeeper and a JDK: {missing}")
        props = {k: v for k, v in self.properties.items() if not k.startswith(("offsets.topic.replication",
                                                                                   "transaction.state.log.replication",
                                                                                   "transaction.state.log.min.isr"))}
        base = _consecutive_free_ports(self.n, self.host)
        args = ["up", "--brokers", str(self.n), "--base-port", str(base),
                "--zookeeper-port", str(_consecutive_free_ports(1, self.host)), "--console", "",
                "--metrics-port", "0", "--timeout", str(timeout), "--json"]
        for k, v in props.items():
            args += ["--override", f"{k}={v}"]
        out = self._run(*args, timeout=timeout + 30)
        if out.returncode != 0:
            raise ClusterUnavailable(f"samsa cluster up failed: {(out.stderr or out.stdout).strip()[-2000:]}")
        self.bootstrap_servers = json.loads(out.stdout)["bootstrap"]

    def stop(self) -> None:
        self._run("down", "--delete-data", "--timeout", "20", timeout=120)
