"""``samsa cluster up/status/down`` end to end: real ZooKeeper, real broker processes, kafka-python.

The command runs as a user would run it (``python -m broker.cli cluster ...`` in a subprocess
that exits while the cluster keeps running); the test then produces and consumes through the
bootstrap string it printed, checks ``status``, that a second ``up`` refuses, and that ``down``
leaves no process behind and frees every port.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.brokers import thread_cpus
from tests.support.cluster import cluster_mode_implemented
from tests.support.net import free_port, port_accepts
from tests.support.zookeeper import skip_without_zookeeper

pytestmark = pytest.mark.timeout(300)


def samsa(*args: str, timeout: float = 150, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else {**os.environ, **env})


def _free_run(n: int) -> int:
    """A port p with p..p+n-1 all free on loopback."""
    for _ in range(50):
        p = free_port()
        if p + n > 65535:
            continue
        ok = True
        for q in range(p, p + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", q))
                except OSError:
                    ok = False
                    break
        if ok:
            return p
    raise RuntimeError("no run of free ports")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _pids(state: dict[str, Any]) -> list[int]:
    return [state["zookeeper"]["pid"], *(b["pid"] for b in state["brokers"])]


def test_cluster_up_produce_consume_down(tmp_path: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    skip_without_zookeeper()
    folder = tmp_path / "dev-cluster"
    zk_port, base, metrics_base = free_port(), _free_run(3), _free_run(3)
    up_args = ["cluster", "up", "--dir", str(folder), "--brokers", "3", "--zookeeper-port", str(zk_port),
               "--base-port", str(base), "--timeout", "120", "--override", "group.initial.rebalance.delay.ms=0",
               "--metrics-port", str(metrics_base), "--cpus", str(min(os.sched_getaffinity(0)))]
    if not cluster_mode_implemented():
        up_args.append("--no-wait")  # independent brokers never list each other in Metadata
    state: dict[str, Any] = {}
    try:
        up = samsa(*up_args)
        assert up.returncode == 0, up.stdout + up.stderr
        bootstrap = up.stdout.strip().splitlines()[-1]
        assert bootstrap == ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        state = json.loads((folder / "cluster.json").read_text())
        assert state["zookeeper"]["port"] == zk_port and [b["port"] for b in state["brokers"]] == [
            base, base + 1, base + 2]
        assert all(_alive(p) for p in _pids(state))
        # --cpus: every broker, and each of its threads (ZooKeeper's among them), on that CPU
        for b in state["brokers"]:
            assert b["properties"]["cpu.affinity"] == str(min(os.sched_getaffinity(0)))
            threads = thread_cpus(b["pid"])
            assert len(threads) > 1 and all(c == {min(os.sched_getaffinity(0))} for c in threads.values()), threads
        for i in range(3):
            assert (folder / f"broker-{i}.log").exists() and (folder / f"broker-{i}").is_dir()
        assert f"zookeeper.connect=127.0.0.1:{zk_port}/samsa" in (folder / "broker-0.log").read_text()

        status = samsa("cluster", "status", "--dir", str(folder), "--json")
        assert status.returncode == 0, status.stdout + status.stderr
        rows = json.loads(status.stdout)["processes"]
        assert [r["process"] for r in rows] == ["zookeeper", "broker 0", "broker 1", "broker 2"]
        assert all(r["running"] and r["serving"] for r in rows)

        # The printed bootstrap string is what a client uses.
        addresses = [bootstrap] if cluster_mode_implemented() else bootstrap.split(",")
        for n, addr in enumerate(addresses):
            producer = KafkaProducer(bootstrap_servers=addr, acks="all", retries=5)
            for k in range(5):
                producer.send(f"dev{n}", f"m{k}".encode()).get(timeout=30)
            producer.close()
            consumer = KafkaConsumer(f"dev{n}", bootstrap_servers=addr, auto_offset_reset="earliest",
                                     consumer_timeout_ms=20000)
            got = []
            for m in consumer:
                got.append(m.value)
                if len(got) == 5:
                    break
            consumer.close()
            assert got == [f"m{k}".encode() for k in range(5)], addr

        # Every broker serves Prometheus metrics on metrics-port + its id.
        assert f"Prometheus metrics: http://127.0.0.1:{metrics_base}/metrics" in up.stdout
        for i in range(3):
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_base + i}/metrics", timeout=30) as r:
                assert b"kafka_server_replicamanager_partitioncount" in r.read()

        again = samsa("cluster", "up", "--dir", str(folder))
        assert again.returncode == 1 and "already runs" in again.stderr
        # With part of the cluster down, `up` restarts just that part, with the recorded settings.
        os.kill(state["brokers"][1]["pid"], signal.SIGKILL)
        changed = samsa(*up_args)
        assert changed.returncode == 1 and "--brokers, --zookeeper-port, --base-port, --override cannot apply" in \
            changed.stderr
        partial = samsa("cluster", "up", "--dir", str(folder), "--timeout", "120",
                        *([] if cluster_mode_implemented() else ["--no-wait"]))
        assert partial.returncode == 0, partial.stdout + partial.stderr
        assert partial.stdout.splitlines() == [f"Restarted broker 1 from {folder}", bootstrap]
        restarted = json.loads((folder / "cluster.json").read_text())
        assert restarted["brokers"][1]["pid"] != state["brokers"][1]["pid"] and _alive(restarted["brokers"][1]["pid"])
        assert [b["pid"] for i, b in enumerate(restarted["brokers"]) if i != 1] == [
            b["pid"] for i, b in enumerate(state["brokers"]) if i != 1]
        state = restarted

        down = samsa("cluster", "down", "--dir", str(folder))
        assert down.returncode == 0, down.stdout + down.stderr
        assert down.stdout.splitlines() == ["broker 2: stopped", "broker 1: stopped", "broker 0: stopped",
                                            "zookeeper: stopped"]
        assert not any(_alive(p) for p in _pids(state))
        assert not any(port_accepts("127.0.0.1", p) for p in [zk_port, base, base + 1, base + 2])
        after = samsa("cluster", "status", "--dir", str(folder))
        assert after.returncode == 3 and "no" in after.stdout
        again_down = samsa("cluster", "down", "--dir", str(folder))
        assert again_down.returncode == 0 and "not running" in again_down.stdout
    finally:
        for pid in _pids(state) if state else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_cluster_up_refuses_a_busy_port_and_down_needs_state(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        r = samsa("cluster", "up", "--dir", str(tmp_path / "c"), "--brokers", "1", "--zookeeper-port", str(busy),
                  "--base-port", str(free_port()))
    assert r.returncode == 1 and f"port(s) {busy} already in use" in r.stderr
    assert not (tmp_path / "c" / "cluster.json").exists()
    for cpus, says in (("1-x", "is not a CPU number or a range"), ("4096", "none of these CPUs is available")):
        r = samsa("cluster", "up", "--dir", str(tmp_path / "c"), "--brokers", "1", "--zookeeper-port",
                  str(free_port()), "--base-port", str(free_port()), "--cpus", cpus)
        assert r.returncode == 1 and "--cpus" in r.stderr and says in r.stderr, r.stderr
        assert not (tmp_path / "c" / "cluster.json").exists()  # refused before anything started
    d = samsa("cluster", "down", "--dir", str(tmp_path / "nothing"))
    assert d.returncode == 1 and "no cluster state" in d.stderr


def test_missing_zookeeper_says_how_to_install(tmp_path: Path) -> None:
    from broker.cluster.zk.server import INSTALL_HINT, ZooKeeperNotFound, find_classpath

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ZooKeeperNotFound, match="apt-get install zookeeper"):
        find_classpath(zookeeper_home="", java_dir=empty)  # no ZOOKEEPER_HOME, no Debian jars
    r = samsa("cluster", "up", "--dir", str(tmp_path / "c"), "--brokers", "1", "--zookeeper-port", str(free_port()),
              "--base-port", str(free_port()), env={"ZOOKEEPER_HOME": str(empty)})
    assert r.returncode == 1
    [line] = r.stderr.strip().splitlines()
    assert line.startswith("Error: ZOOKEEPER_HOME=") and INSTALL_HINT in line
