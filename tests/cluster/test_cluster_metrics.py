"""Metrics of a 3-broker cluster (real ZooKeeper), scraped from every broker's metrics.listener.

What a Kafka operator reads off the cluster: messages counted once, on the leader; followers'
fetches counted as replication traffic, not BytesOut; exactly one active controller; leaders
and under-replicated partitions per broker, and under-replication showing up while a broker is
down and clearing when it is back.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer

from tests.support.cluster import SamsaCluster
from tests.support.metrics import Samples, scrape, topic_sum, value
from tests.support.net import free_port
from tests.support.replicas import create_topic, partitions, wait_for, wait_full_isr


def _scrape_all(ports: dict[int, int], running: list[int]) -> dict[int, Samples]:
    return {i: scrape(ports[i]) for i in running}


def test_cluster_metrics_leaders_replication_and_under_replication(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    ports = {i: free_port() for i in range(3)}
    cluster: SamsaCluster = cluster_factory(
        3, broker_overrides={i: {"metrics.listener": f"http://127.0.0.1:{p}"} for i, p in ports.items()})
    topic = f"met-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, 3, 3, {"min.insync.replicas": "2"})
    ps = wait_full_isr(cluster, topic, 3)

    prod = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(2000):
        prod.produce(topic, value=b"v%d" % i, partition=i % 3)
    assert prod.flush(30) == 0

    # Every broker has every byte: the log sizes agree, and followers fetched it all.
    def replicated() -> dict[int, Samples] | None:
        s = _scrape_all(ports, [0, 1, 2])
        sizes = {i: topic_sum(s[i], "kafka_log_log_size", topic) for i in s}
        return s if len(set(sizes.values())) == 1 and sizes[0] > 0 else None

    s = wait_for(replicated, 60, "all replicas of the same size")
    messages = sum(topic_sum(s[i], "kafka_server_brokertopicmetrics_messagesin_total", topic) for i in s)
    assert messages == 2000, "each message counted once, by its leader"
    bytes_in = sum(topic_sum(s[i], "kafka_server_brokertopicmetrics_bytesin_total", topic) for i in s)
    assert bytes_in == topic_sum(s[0], "kafka_log_log_size", topic)
    for i in s:  # a leader counts what it appended; its partition's followers count nothing
        led = [p for p, m in ps.items() if m.leader == i]
        assert topic_sum(s[i], "kafka_server_brokertopicmetrics_messagesin_total", topic) == \
            sum(1 for k in range(2000) if k % 3 in led)
    repl_out = sum(topic_sum(s[i], "kafka_server_brokertopicmetrics_replicationbytesout_total", topic)
                   for i in s)
    assert repl_out >= 2 * bytes_in, "each byte fetched by two followers"

    def repl_in_matches_out() -> bool:
        s = _scrape_all(ports, [0, 1, 2])
        ins = sum(topic_sum(s[i], "kafka_server_brokertopicmetrics_replicationbytesin_total", topic) for i in s)
        outs = sum(topic_sum(s[i], "kafka_server_brokertopicmetrics_replicationbytesout_total", topic) for i in s)
        return ins == outs and ins >= 2 * bytes_in

    wait_for(repl_in_matches_out, 30, "followers' ReplicationBytesIn to equal leaders' ReplicationBytesOut")
    assert sum(topic_sum(s[i], "kafka_server_brokertopicmetrics_bytesout_total", topic) for i in s) == 0

    assert sum(value(s[i], "kafka_controller_kafkacontroller_activecontrollercount") for i in s) == 1
    for i in s:  # every broker leads a partition its followers fetch: FetchFollower, inside Fetch
        follower = value(s[i], "kafka_network_requestmetrics_totaltimems_count", request="FetchFollower")
        consumer = s.get(("kafka_network_requestmetrics_totaltimems_count",
                          frozenset({("request", "FetchConsumer")})), 0.0)
        assert follower > 0
        assert value(s[i], "kafka_network_requestmetrics_totaltimems_count", request="Fetch") == follower + consumer
    assert all(value(s[i], "kafka_server_replicamanager_underreplicatedpartitions") == 0 for i in s)
    assert all(value(s[i], "kafka_controller_kafkacontroller_offlinepartitionscount") == 0 for i in s)
    leaders = {i: value(s[i], "kafka_server_replicamanager_leadercount") for i in s}
    assert all(n >= 1 for n in leaders.values()), leaders  # the topic's leaders are spread
    assert all(value(s[i], "kafka_server_replicamanager_partitioncount") >= 3 for i in s)

    # A broker down: the survivors lead partitions with a shrunken ISR.
    victim = 2
    cluster.kill(victim)
    survivors = [0, 1]

    def under() -> float:
        s = _scrape_all(ports, survivors)
        return sum(value(s[i], "kafka_server_replicamanager_underreplicatedpartitions") for i in s)

    wait_for(lambda: under() >= 3, 90, "under-replicated partitions reported while a broker is down")
    cluster.restart(victim)
    wait_full_isr(cluster, topic, 3, timeout=90)
    wait_for(lambda: under() == 0 and value(scrape(ports[victim]),
                                            "kafka_server_replicamanager_underreplicatedpartitions") == 0,
             90, "under-replication cleared once the broker is back")
    s = _scrape_all(ports, [0, 1, 2])
    assert sum(value(s[i], "kafka_controller_kafkacontroller_activecontrollercount") for i in s) == 1


def test_isr_shrinks_and_expands_are_counted_by_the_leaders(cluster_factory) -> None:  # type: ignore[no-untyped-def]
    """A follower killed: each survivor leading one of its partitions drops it from the ISR
    (replica.lag.time.max.ms=2000 notices well before the 6 s ZooKeeper session expires, which
    would have the controller do it instead); restarted, it catches up and is taken back."""
    ports = {i: free_port() for i in range(3)}
    cluster: SamsaCluster = cluster_factory(
        3, overrides={"replica.lag.time.max.ms": 2000},
        broker_overrides={i: {"metrics.listener": f"http://127.0.0.1:{p}"} for i, p in ports.items()})
    topic = f"isr-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, topic, 3, 3)
    ps = wait_full_isr(cluster, topic, 3)
    prod = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(30):
        prod.produce(topic, value=b"v%d" % i, partition=i % 3)
    assert prod.flush(30) == 0

    def totals(running: list[int], name: str) -> float:
        s = _scrape_all(ports, running)
        return sum(value(s[i], f"kafka_server_replicamanager_{name}_total") for i in s)

    shrinks0, expands0 = totals([0, 1, 2], "isrshrinks"), totals([0, 1, 2], "isrexpands")

    # Followers that keep up stay in the ISR, idle partitions included: an incremental fetch
    # session leaves a partition with nothing to say out of the leader's read (idle_follower_fetch)
    # but must still count the follower caught up on it. Three lag windows of fetches that carry
    # only the written topic's records, then not one shrink, and the idle topic's ISR still full.
    idle = f"idle-{uuid.uuid4().hex[:8]}"
    create_topic(cluster, idle, 3, 3)
    wait_full_isr(cluster, idle, 3)
    end = time.monotonic() + 6.0
    while time.monotonic() < end:
        for i in range(3):
            prod.produce(topic, value=b"busy", partition=i)
        assert prod.flush(30) == 0
        time.sleep(0.01)
    assert totals([0, 1, 2], "isrshrinks") == shrinks0
    assert all(len(m.isrs) == 3 for m in partitions(cluster, idle).values())

    victim = 2
    led_by_survivors = sum(1 for m in ps.values() if m.leader != victim)
    assert led_by_survivors >= 1
    cluster.kill(victim)
    wait_for(lambda: totals([0, 1], "isrshrinks") - shrinks0 >= led_by_survivors, 60,
             f"the survivors to shrink the ISR of the {led_by_survivors} partition(s) they lead")
    cluster.restart(victim)
    wait_full_isr(cluster, topic, 3, timeout=90)
    # every partition of the topic took the restarted broker back (the restarted broker's own
    # counters start at 0, so the sum over all three only grows)
    wait_for(lambda: totals([0, 1, 2], "isrexpands") - expands0 >= 3, 30, "three ISR expansions counted")
