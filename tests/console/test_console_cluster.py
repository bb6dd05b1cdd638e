"""One console shows the whole cluster: ``samsa cluster up`` serves it from broker 0.

The console learns everything over the Kafka protocol, so its broker list, controller and a
replicated topic's replicas/ISR must equal what a stock client reads from any broker.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer

from tests.support.cluster import cluster_mode_implemented
from tests.support.console import ConsoleHttp
from tests.support.net import free_port
from tests.support.zookeeper import skip_without_zookeeper
from tests.tools.test_cluster_cli import _alive, _free_run, samsa

pytestmark = pytest.mark.timeout(300)


def test_cluster_up_serves_one_console_for_all_brokers(tmp_path: Path) -> None:
    skip_without_zookeeper()
    folder = tmp_path / "c"
    console_port = free_port()
    base = _free_run(2)
    args = ["cluster", "up", "--dir", str(folder), "--brokers", "2", "--zookeeper-port", str(free_port()),
            "--base-port", str(base), "--timeout", "120", "--console", f"http://127.0.0.1:{console_port}",
            "--metrics-port", str(_free_run(2))]
    clustered = cluster_mode_implemented()
    if not clustered:
        args.append("--no-wait")
    state: dict[str, Any] = {}
    try:
        up = samsa(*args)
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"Web console (read-only): http://127.0.0.1:{console_port}/" in up.stdout
        state = json.loads((folder / "cluster.json").read_text())
        http = ConsoleHttp(console_port)
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{base}")
        try:
            if clustered:
                admin.create_topics({"spread": {"num_partitions": 2, "replication_factor": 2}})
                p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{base}", acks="all")
                for i in range(20):
                    p.send("spread", value=b"x", partition=i % 2)
                p.flush()
                p.close()
            cluster = admin.describe_cluster()
            ov = http.wait_for("/api/overview", lambda d: len(d["brokers"]) == len(cluster["brokers"]), timeout=60)
            assert sorted(b["id"] for b in ov["brokers"]) == sorted(b["broker_id"] for b in cluster["brokers"])
            assert ov["controller"] == cluster["controller_id"]
            if clustered:
                assert len(ov["brokers"]) == 2
                meta = {p["partition_index"]: p for p in admin.describe_topics(["spread"])[0]["partitions"]}
                t = http.get("/api/topics/spread")
                for part in t["partitions"]:
                    m = meta[part["partition"]]
                    assert part["leader"] == m["leader_id"] and part["replicas"] == m["replica_nodes"]
                    assert sorted(part["isr"]) == sorted(m["isr_nodes"]) and len(part["replicas"]) == 2
                assert sum(p["log_end_offset"] for p in t["partitions"]) == 20
                # bytes in/out from both brokers' metrics endpoints (cluster up turns them on)
                http.wait_for("/api/throughput", lambda d: any(p["source"] == "metrics" for p in d["history"]),
                              timeout=60)
                # broker 1 stops: its replicas leave the ISR, and the console counts what Metadata says
                os.kill(state["brokers"][1]["pid"], signal.SIGTERM)

                def under_replicated() -> int:
                    parts = [p for t in admin.describe_topics() for p in t["partitions"]]
                    return sum(1 for p in parts if len(p["isr_nodes"]) < len(p["replica_nodes"]))

                ov = http.wait_for("/api/overview", lambda d: d["under_replicated"] >= 2 and
                                   d["under_replicated"] == under_replicated(), timeout=120)
                assert ov["offline"] == 0  # every partition still has a leader on broker 0
                topic = {t["name"]: t for t in http.get("/api/topics")["topics"]}["spread"]
                assert topic["under_replicated"] == 2
                # the server-rendered pages say the same (read as HTML, no JavaScript)
                page = http.page("/topics/spread")
                meta = {p["partition_index"]: p for p in admin.describe_topics(["spread"])[0]["partitions"]}
                for row in page.section("Partitions").rows():
                    m = meta[int(row[0])]
                    assert row[1] == str(m["leader_id"]) and row[3] == ", ".join(map(str, m["replica_nodes"]))
                    assert row[4] == ", ".join(map(str, m["isr_nodes"])) and len(m["isr_nodes"]) == 1
                http.wait_for_page("/", lambda pg: pg.card("under_replicated") == str(under_replicated()))
        finally:
            admin.close()
        down = samsa("cluster", "down", "--dir", str(folder))
        assert down.returncode == 0, down.stdout + down.stderr
    finally:
        for pid in [state["zookeeper"]["pid"], *(b["pid"] for b in state["brokers"])] if state else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
