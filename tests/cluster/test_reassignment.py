"""Partition reassignment driven the pre-KIP-455 way: a tool writes Kafka's
``/admin/reassign_partitions`` znode (as old kafka-reassign-partitions.sh --zookeeper did)."""

from __future__ import annotations

import json
import uuid

from kazoo.client import KazooClient

from tests.support.cluster import SamsaCluster
from tests.support.replicas import create_topic, partitions, wait_for, wait_full_isr


def test_legacy_reassign_partitions_znode_moves_replicas(cluster3: SamsaCluster) -> None:
    topic = f"lre-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 1, 2)
    before = list(wait_full_isr(cluster3, topic, 2)[0].replicas)
    target = [b for b in (0, 1, 2) if b not in before] + [before[0]]
    zk = KazooClient(hosts=cluster3.zookeeper_connect, timeout=10)
    zk.start(timeout=15)
    try:
        zk.create("/admin/reassign_partitions", json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": target}]}).encode(),
            makepath=True)
        p = wait_for(lambda: (lambda x: x if list(x.replicas) == target and sorted(x.isrs) == sorted(target)
                              else None)(partitions(cluster3, topic)[0]), 90, f"replicas {target}")
        assert p.leader in target
        wait_for(lambda: zk.exists("/admin/reassign_partitions") is None, 30, "the znode to be taken over")
        assigned = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
        assert assigned["partitions"]["0"] == target and assigned["adding_replicas"] == {}
    finally:
        zk.stop()
        zk.close()
