"""Replication in a 3-broker cluster with a real ZooKeeper: replicas, ISR, HW, acks and leader
routing, seen by stock clients (confluent-kafka, kafka-python, aiokafka, kcat) and on disk."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.protocol.producer import ProduceResponse

from tests.support.cluster import SamsaCluster
from tests.support.rawclient import RawClient, build_batch, produce_request
from tests.support.replicas import (
    assert_replicas_identical,
    create_topic,
    partitions,
    wait_for,
    wait_full_isr,
)

NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7


def _topic() -> str:
    return f"rep-{uuid.uuid4().hex[:8]}"


def test_rf3_topic_spreads_leaders_and_replicates_every_byte(cluster3: SamsaCluster) -> None:
    topic = _topic()
    create_topic(cluster3, topic, 3, 3, {"min.insync.replicas": "2"})
    ps = wait_full_isr(cluster3, topic, 3)
    assert sorted(p.leader for p in ps.values()) == [0, 1, 2], "leaders spread over the brokers"
    for p in ps.values():
        assert sorted(p.replicas) == [0, 1, 2] and p.leader == p.replicas[0]
    prod = Producer({"bootstrap.servers": cluster3.bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 2, "compression.type": "lz4"})
    acked: list[tuple[int, int]] = []
    for i in range(3000):
        prod.produce(topic, key=b"k%d" % (i % 97), value=b"value-%d" % i,
                     on_delivery=lambda err, m: acked.append((m.partition(), m.offset())) if err is None else None)
        if i % 500 == 0:
            prod.poll(0)
    assert prod.flush(30) == 0
    assert len(acked) == 3000
    assert_replicas_identical(cluster3, topic, 3, {p: list(m.replicas) for p, m in ps.items()})
    # consumers see it all through any broker (kafka-python bootstrapping from one broker only)
    c = KafkaConsumer(bootstrap_servers=cluster3[2].bootstrap, auto_offset_reset="earliest",
                      consumer_timeout_ms=5000)
    c.assign([KTopicPartition(topic, p) for p in range(3)])
    got = [m.value for m in c]
    c.close()
    assert sorted(got) == sorted(b"value-%d" % i for i in range(3000))


def test_metadata_from_every_broker_lists_all_brokers_and_the_same_leaders(cluster3: SamsaCluster) -> None:
    topic = _topic()
    create_topic(cluster3, topic, 6, 2)
    wait_full_isr(cluster3, topic, 2)
    views = []
    for i in range(3):
        md = cluster3.metadata(i, [topic])
        assert sorted(b.node_id for b in md.brokers) == [0, 1, 2]
        views.append((md.controller_id, sorted((p.partition_index, p.leader_id, tuple(p.replica_nodes))
                                               for p in md.topics[0].partitions)))
    assert views[0] == views[1] == views[2]
    assert views[0][0] in (0, 1, 2)


def test_produce_to_a_follower_gets_not_leader_and_clients_route_to_the_leader(cluster3: SamsaCluster) -> None:
    topic = _topic()
    create_topic(cluster3, topic, 1, 3)
    ps = wait_full_isr(cluster3, topic, 3)
    leader = ps[0].leader
    follower = next(b for b in range(3) if b != leader)
    b = cluster3[follower]
    from kafka.protocol.producer import ProduceResponse

    with RawClient(b.host, b.port) as c:
        resp = c.roundtrip(produce_request(topic, 0, build_batch([(b"k", b"v", [])])), 9, ProduceResponse)
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == NOT_LEADER_OR_FOLLOWER
    # kafka-python bootstrapped from the follower alone still produces (it follows Metadata)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")
    md = p.send(topic, b"routed").get(timeout=30)
    p.close()
    assert md.offset == 0


def test_new_controller_takes_replicas_of_a_dead_controller_out_of_the_isrs(cluster3: SamsaCluster) -> None:
    """The broker that dies is the controller: the next controller (Kafka's
    ReplicaStateMachine.startup) removes its replicas from every ISR at once, long before the
    leaders' own replica.lag.time.max.ms (30 s) would; the CI failure this pins was an ISR that
    kept a dead controller for 40 s."""
    topic = _topic()
    create_topic(cluster3, topic, 3, 3)
    ps = wait_full_isr(cluster3, topic, 3)
    controller = cluster3.controller_id()
    followed = [p for p, m in ps.items() if m.leader != controller]
    cluster3.kill(controller)
    try:
        # ZooKeeper expires the session after 6 s; a new controller then acts at once
        wait_for(lambda: all(controller not in partitions(cluster3, topic)[p].isrs for p in followed), 20,
                 f"the dead controller {controller} to leave the ISRs of partitions {followed}")
        assert cluster3.controller_id() != controller
    finally:
        cluster3.restart(controller)
    wait_full_isr(cluster3, topic, 3)


def test_acks_all_needs_min_insync_replicas(cluster3: SamsaCluster) -> None:
    """RF 3, min.insync.replicas 3: with a follower down, acks=all is refused (NOT_ENOUGH_REPLICAS)
    and nothing is appended; acks=1 still works. With all back, acks=all works again."""
    topic = _topic()
    create_topic(cluster3, topic, 1, 3, {"min.insync.replicas": "3"})
    ps = wait_full_isr(cluster3, topic, 3)
    leader = ps[0].leader
    victim = next(b for b in range(3) if b != leader)
    cluster3.kill(victim)
    wait_for(lambda: len(partitions(cluster3, topic)[0].isrs) == 2, 40, "the ISR to shrink to 2")
    p = Producer({"bootstrap.servers": cluster3.bootstrap, "acks": "all", "message.timeout.ms": 3000,
                  "retries": 0})
    errors: list[str] = []
    p.produce(topic, b"refused", on_delivery=lambda err, m: errors.append(err.name() if err else "OK"))
    p.flush(15)
    assert errors == ["NOT_ENOUGH_REPLICAS"]
    p1 = Producer({"bootstrap.servers": cluster3.bootstrap, "acks": "1"})
    ok: list[str] = []
    p1.produce(topic, b"accepted", on_delivery=lambda err, m: ok.append(err.name() if err else "OK"))
    p1.flush(15)
    assert ok == ["OK"]
    cluster3.restart(victim)
    wait_full_isr(cluster3, topic, 3)
    errors.clear()
    p.produce(topic, b"after", on_delivery=lambda err, m: errors.append(err.name() if err else "OK"))
    p.flush(15)
    assert errors == ["OK"]
    c = Consumer({"bootstrap.servers": cluster3.bootstrap, "group.id": "x", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    vals = []
    while True:
        m = c.poll(3)
        if m is None:
            break
        if not m.error():
            vals.append(m.value())
    c.close()
    assert vals == [b"accepted", b"after"]


def test_kcat_lists_the_cluster_and_round_trips(cluster3: SamsaCluster) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    topic = _topic()
    create_topic(cluster3, topic, 2, 3)
    wait_full_isr(cluster3, topic, 3)
    out = subprocess.run([kcat, "-b", cluster3[1].bootstrap, "-L", "-t", topic], capture_output=True, text=True,
                         timeout=30).stdout
    assert "3 brokers:" in out and "replicas: " in out and "isrs: " in out, out
    subprocess.run([kcat, "-b", cluster3.bootstrap, "-t", topic, "-P", "-K:", "-X", "acks=all"],
                   input="a:1\nb:2\nc:3\n", text=True, check=True, timeout=30)
    out = subprocess.run([kcat, "-b", cluster3[0].bootstrap, "-t", topic, "-C", "-o", "beginning", "-e", "-q",
                          "-f", "%k=%s\n"], capture_output=True, text=True, timeout=30).stdout
    assert sorted(out.split()) == ["a=1", "b=2", "c=3"]


def test_aiokafka_round_trip(cluster3: SamsaCluster) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATopicPartition

    topic = _topic()
    create_topic(cluster3, topic, 3, 3)
    wait_full_isr(cluster3, topic, 3)

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=cluster3.bootstrap, acks="all")
        await p.start()
        try:
            for i in range(300):
                await p.send(topic, b"a%d" % i, partition=i % 3)
            await p.flush()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=cluster3.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        out: list[bytes] = []
        try:
            c.assign([ATopicPartition(topic, i) for i in range(3)])
            await c.seek_to_beginning()
            while len(out) < 300:
                batch = await c.getmany(timeout_ms=5000)
                if not batch:
                    break
                out += [m.value for ms in batch.values() for m in ms]
        finally:
            await c.stop()
        return out

    got = asyncio.run(run())
    assert sorted(got) == sorted(b"a%d" % i for i in range(300))


def test_unknown_broker_cannot_send_controller_requests(cluster3: SamsaCluster) -> None:
    """Inter-broker APIs from a client that is not a broker of this cluster are refused."""
    from protocol.inter_broker import LeaderAndIsrRequest, LeaderAndIsrResponse

    b = cluster3[0]
    req = LeaderAndIsrRequest(controller_id=99, controller_epoch=10**6, max_broker_epoch=-1, topic_states=[],
                              live_leaders=[])
    with RawClient(b.host, b.port) as c:
        resp = c.roundtrip(req, 5, LeaderAndIsrResponse)
    assert resp.error_code == 31  # CLUSTER_AUTHORIZATION_FAILED


def test_stale_controller_epoch_is_refused(cluster3: SamsaCluster) -> None:
    from protocol.inter_broker import UpdateMetadataRequest, UpdateMetadataResponse

    md = cluster3.metadata(0, [])
    b = cluster3[0]
    req = UpdateMetadataRequest(controller_id=md.controller_id, controller_epoch=0, max_broker_epoch=-1,
                                topic_states=[], live_brokers=[])
    with RawClient(b.host, b.port) as c:
        resp = c.roundtrip(req, 7, UpdateMetadataResponse)
    assert resp.error_code == 11  # STALE_CONTROLLER_EPOCH
    # and the cluster view was not wiped by it
    assert sorted(x.node_id for x in cluster3.metadata(0, []).brokers) == [0, 1, 2]


def test_not_leader_answers_name_the_new_leader_kip951(cluster3: SamsaCluster) -> None:
    """Produce v10+ and Fetch v16+ from a follower: NOT_LEADER_OR_FOLLOWER with the current
    leader and its endpoint in KIP-951's tagged fields."""
    from kafka.protocol.consumer import FetchRequest, FetchResponse
    from kafka.protocol.producer import ProduceResponse

    topic = _topic()
    create_topic(cluster3, topic, 1, 3)
    ps = wait_full_isr(cluster3, topic, 3)
    leader, epoch = ps[0].leader, None
    follower = next(b for b in range(3) if b != leader)
    b = cluster3[follower]
    with RawClient(b.host, b.port) as c:
        resp = c.roundtrip(produce_request(topic, 0, build_batch([(b"k", b"v", [])])), 11, ProduceResponse)
        part = resp.responses[0].partition_responses[0]
        assert part.error_code == NOT_LEADER_OR_FOLLOWER
        assert part.current_leader.leader_id == leader and part.current_leader.leader_epoch >= 0
        epoch = part.current_leader.leader_epoch
        assert [(n.node_id, n.port) for n in resp.node_endpoints] == [(leader, cluster3[leader].port)]
        T = FetchRequest.FetchTopic
        req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           session_id=0, session_epoch=-1, topics=[T(topic=topic, topic_id=None, partitions=[
                               T.FetchPartition(partition=0, current_leader_epoch=-1, fetch_offset=0,
                                                last_fetched_epoch=-1, log_start_offset=-1,
                                                partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
        fr = c.roundtrip(req, 12, FetchResponse)
        fp = fr.responses[0].partitions[0]
        assert fp.error_code == NOT_LEADER_OR_FOLLOWER
        assert (fp.current_leader.leader_id, fp.current_leader.leader_epoch) == (leader, epoch)


def test_acks_all_retry_of_a_written_batch_waits_for_the_isr_too(cluster3: SamsaCluster) -> None:
    """An idempotent producer's retry of a batch the leader already has (a duplicate) is answered
    as Kafka's DelayedProduce answers it: only once the ISR has the batch. Answering at once would
    acknowledge records that die with the leader."""
    topic = _topic()
    create_topic(cluster3, topic, 1, 3, {"min.insync.replicas": "2"})
    ps = wait_full_isr(cluster3, topic, 3)
    leader = cluster3[ps[0].leader]
    followers = [b for b in ps[0].replicas if b != ps[0].leader]
    batch = build_batch([(b"k", b"dup-%d" % i, []) for i in range(3)], producer_id=424242, producer_epoch=0,
                        base_sequence=0)

    def send(c: RawClient, timeout_ms: int = 1500) -> tuple[int, int]:
        r = c.roundtrip(produce_request(topic, 0, batch, acks=-1, timeout_ms=timeout_ms), 9, ProduceResponse)
        p = r.responses[0].partition_responses[0]
        return p.error_code, p.base_offset

    with RawClient(leader.host, leader.port, timeout=30) as c:
        for f in followers:  # the ISR stays {leader, f1, f2} for replica.lag.time.max.ms and the ZK session
            cluster3[f].pause()
        try:
            first = send(c)  # appended, not replicated
            retry = send(c)  # the same batch again: a duplicate of a batch above the high watermark
        finally:
            for f in followers:
                cluster3[f].resume()
        assert first[0] == REQUEST_TIMED_OUT, first
        assert retry[0] == REQUEST_TIMED_OUT, f"a duplicate was acknowledged before the ISR had it: {retry}"
        after = send(c, 20000)  # followers back: the same duplicate, acknowledged at its first offset once replicated
        assert after == (0, 0), after
        _err, hw, records = c.fetch(topic, 0, 0)
    assert hw == 3 and [r.value for r in records] == [b"dup-0", b"dup-1", b"dup-2"]  # written once


def test_followers_replicate_through_sendfile_on_the_asyncio_loop(cluster_factory: Callable[..., SamsaCluster]) -> None:
    """fetch.sendfile.enable on asyncio's own loop: a leader sends its followers' Fetch responses
    by sendfile(2), which is the one write of a parked (delayed) response that must wait for a
    task (KafkaConnection._drain) rather than go out in the loop turn that completes it."""
    cluster = cluster_factory(3, overrides={"fetch.sendfile.enable": "true"}, start=False)
    for b in cluster.brokers:
        b.args = ["--no-uvloop"]
    cluster.start()
    cluster.wait_for_brokers(3)
    topic = _topic()
    create_topic(cluster, topic, 2, 3, {"min.insync.replicas": "2"})
    ps = wait_full_isr(cluster, topic, 3)
    prod = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                     "linger.ms": 0, "message.max.bytes": 2_000_000})
    acked: list[int] = []
    values = [(b"%d-" % i) * (1 if i % 10 else 20_000) for i in range(400)]  # some of ~100-140 KB
    for v in values:
        prod.produce(topic, value=v, on_delivery=lambda err, m: acked.append(m.offset()) if err is None else None)
        prod.poll(0)
    assert prod.flush(60) == 0
    assert len(acked) == len(values)
    assert_replicas_identical(cluster, topic, 2, {p: list(m.replicas) for p, m in ps.items()})
    assert all(len(p.isrs) == 3 for p in partitions(cluster, topic).values())
