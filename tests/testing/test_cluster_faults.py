"""``SamsaBroker(brokers=3)``: per-broker SIGKILL, SIGSTOP/SIGCONT, restart keeping data, and
injected faults reaching one broker's process, seen by kafka-python."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError

from broker.cluster.zk.server import zookeeper_available
from broker.testing import SamsaBroker

pytestmark = pytest.mark.skipif(zookeeper_available() is not None, reason=str(zookeeper_available()))


@pytest.fixture(scope="module")
def cluster():
    # a killed broker leaves the cluster when its ZooKeeper session expires: 6 s, not Kafka's 18
    with SamsaBroker({"zookeeper.session.timeout.ms": 6000}, brokers=3) as k:
        yield k


def wait_until(check, timeout=60.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout} s")
        time.sleep(0.2)
    return value


def isr(kafka, topic, partition=0):
    for t in kafka.admin.client.describe_topics([topic]):
        for p in t["partitions"]:
            if p["partition_index"] == partition:
                return sorted(p["isr_nodes"])
    return []


def test_injected_not_leader_on_broker_2_is_retried_and_recorded_there(cluster):
    topic = cluster.create_topic(partitions=3, replication_factor=3)
    led_by_2 = wait_until(lambda: [p for p in range(3) if cluster.leader(topic, p) == 2], what="a partition led by 2")
    rule = cluster.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=2, topic=topic, broker=2)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, acks="all",
                             retry_backoff_ms=20, linger_ms=0)
    try:
        md = producer.send(topic, value=b"through-2", partition=led_by_2[0]).get(timeout=60)
    finally:
        producer.close(timeout=10)
    assert md.offset == 0
    assert rule.fired == 2
    on_2 = cluster.requests(api="Produce", topic=topic, broker=2)
    assert len(on_2) == 3 and {r.broker_id for r in on_2} == {2}  # two refused, the third appended
    assert [r for r in cluster.requests(api="Produce", topic=topic) if r.broker_id != 2] == []
    assert [r.value for r in cluster.records(topic, led_by_2[0])] == [b"through-2"]
    cluster.clear_faults()
    cluster.clear_requests()
    assert cluster.requests(api="Produce") == []


def test_kill_the_leader_producer_with_retries_delivers_everything_then_restart_keeps_data(cluster):
    topic = cluster.create_topic(partitions=1, replication_factor=3, configs={"min.insync.replicas": 2})
    wait_until(lambda: isr(cluster, topic) == [0, 1, 2], what="full ISR")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, enable_idempotence=True, acks="all",
                             retry_backoff_ms=100, request_timeout_ms=5000, linger_ms=0, max_block_ms=60000)
    try:
        acked = [producer.send(topic, value=b"before-%d" % i).get(timeout=60).offset for i in range(20)]
        old_leader = cluster.leader(topic)
        cluster.kill(old_leader)  # SIGKILL: no controlled shutdown, the controller learns from ZooKeeper
        futures = [producer.send(topic, value=b"after-%d" % i) for i in range(20)]
        acked += [f.get(timeout=90).offset for f in futures]
    finally:
        producer.close(timeout=10)
    assert acked == list(range(40))  # every record acknowledged once, in order
    new_leader = cluster.leader(topic)
    assert new_leader not in (old_leader, -1)
    want = [b"before-%d" % i for i in range(20)] + [b"after-%d" % i for i in range(20)]
    assert [r.value for r in cluster.records(topic)] == want

    cluster.clear_requests()
    cluster.restart(old_leader)  # a new process on the same port and log dirs
    wait_until(lambda: old_leader in isr(cluster, topic), what=f"broker {old_leader} back in the ISR")
    # it kept its log: as a follower it resumes fetching past the records it had before the
    # kill (an empty log would fetch from offset 0)
    topic_id = cluster.admin.client.describe_topics([topic])[0]["topic_id"]
    offsets = [p.fetch_offset for f in cluster.requests(api="Fetch", broker=new_leader)
               if replica_id(f) == old_leader for t in f.request.topics
               if str(t.topic_id if f.api_version >= 13 else t.topic) in (topic, str(topic_id))
               for p in t.partitions]
    assert offsets and offsets[0] > 0, offsets
    assert [r.value for r in cluster.records(topic)] == want


def replica_id(recorded):
    req = recorded.request
    if recorded.api_version >= 15:  # KIP-903: the follower's id moved into replica_state
        return req.replica_state.replica_id if req.replica_state is not None else -1
    return req.replica_id


def test_paused_broker_answers_nothing_until_resumed(cluster):
    b = 1
    address = cluster.bootstrap_servers.split(",")[b]
    cluster.pause(b)  # SIGSTOP: the socket accepts (the kernel does), the broker never answers
    try:
        with pytest.raises(KafkaTimeoutError):
            KafkaProducer(bootstrap_servers=address, bootstrap_timeout_ms=1500)
    finally:
        cluster.resume(b)
    producer = KafkaProducer(bootstrap_servers=address, bootstrap_timeout_ms=30000)
    producer.close(timeout=5)
    with pytest.raises(ValueError, match="which broker"):
        cluster.kill()
