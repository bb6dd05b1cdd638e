"""Share groups (KIP-932) in a 3-broker cluster: share-partitions live on their partitions'
leaders, their state with the share coordinators (the leaders of ``__share_group_state``
partitions, RF 3), reached over Initialize/Read/WriteShareGroupState. A ShareConsumer drains
three partitions led by different brokers; a second member of the group finds nothing left
(the acknowledgements were persisted wherever their keys hash to); after the leader of a
partition is SIGKILLed, the new leader rebuilds the share-partition from the persisted state and
the group receives exactly the records produced since. ``samsa share-groups --describe`` shows
every partition's start offset, wherever its state is kept."""

from __future__ import annotations

import time
import uuid
from typing import Any

from confluent_kafka import Producer, ShareConsumer

from tests.support.cluster import SamsaCluster
from tests.support.replicas import create_topic, wait_for, wait_full_isr
from tests.tools.test_cli import samsa_json


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % 3)
    assert p.flush(60) == 0


def drain(c: ShareConsumer, want: int, timeout: float) -> list[bytes]:
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        out += [m.value() for m in c.poll(0.5) if m.error() is None]
    return out


def test_share_group_across_brokers_and_a_leader_failover(cluster_factory: Any) -> None:
    cluster: SamsaCluster = cluster_factory(3, overrides={"share.auto.offset.reset": "earliest"})
    cluster.wait_for_brokers(3)
    topic, group = f"share-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, 3, 3)
    wait_full_isr(cluster, topic, 3)
    first = [f"one-{i}".encode() for i in range(30)]
    produce(cluster.bootstrap, topic, first)
    c = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    c.subscribe([topic])
    try:
        got = drain(c, 30, 90)
        assert sorted(got) == sorted(first)
        c.poll(1.0)  # acknowledges the last records
    finally:
        c.close()
    c = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    c.subscribe([topic])
    try:
        assert drain(c, 1, 5) == [], "acknowledged records delivered again"
        # DescribeShareGroupOffsets at the group coordinator asks each state's share coordinator.
        offsets = samsa_json("share-groups", "--bootstrap-server", cluster.bootstrap, "--describe",
                             "--group", group)
        assert sorted((o["partition"], o["start_offset"], o["lag"]) for o in offsets) == \
            [(0, 10, 0), (1, 10, 0), (2, 10, 0)]
        leader = cluster.partition(topic, 0)["leader"]
        cluster.kill(leader)
        wait_for(lambda: cluster.partition(topic, 0, i=(leader + 1) % 3)["leader"] not in (-1, leader), 60,
                 "a new leader for partition 0")
        second = [f"two-{i}".encode() for i in range(9)]
        produce(cluster.bootstrap, topic, second)
        got = drain(c, 9, 120)
        assert sorted(got) == sorted(second), f"after the failover: {sorted(got)}"
        assert drain(c, 1, 3) == []
        c.poll(1.0)
    finally:
        c.close()
    # The group is empty: back to the start of every partition (AlterShareGroupOffsets, through
    # the share coordinators wherever they are), and the group reads everything again.
    bs = ("--bootstrap-server", cluster.bootstrap)
    reset = samsa_json("share-groups", *bs, "--reset-offsets", "--group", group, "--topic", topic,
                       "--to-earliest", "--execute")
    assert sorted((r["partition"], r["new_start_offset"], r["error"]) for r in reset) == \
        [(0, 0, None), (1, 0, None), (2, 0, None)]
    c = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    c.subscribe([topic])
    try:
        again = drain(c, 39, 120)
        assert sorted(again) == sorted(first + second)
    finally:
        c.close()
