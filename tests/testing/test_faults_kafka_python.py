"""Injected faults (broker/hooks.py through broker.testing.SamsaBroker) seen by kafka-python."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError

from broker.testing import SamsaBroker


@pytest.fixture(scope="module")
def kafka():
    with SamsaBroker() as k:
        yield k


@pytest.fixture
def topic(kafka):
    name = kafka.create_topic()
    yield name
    kafka.clear_faults()
    kafka.delete_topic(name)


def test_not_leader_three_times_idempotent_producer_lands_once(kafka, topic):
    rule = kafka.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=3, topic=topic)
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, enable_idempotence=True,
                      retry_backoff_ms=10, linger_ms=0)
    try:
        md = p.send(topic, key=b"k", value=b"order-1").get(timeout=30)
    finally:
        p.close()
    assert rule.fired == 3
    assert md.offset == 0
    produces = kafka.requests(api="Produce", topic=topic)
    assert len(produces) == 4  # three answered with the error, the fourth appended
    assert [r.value for r in kafka.records(topic)] == [b"order-1"]


def test_error_without_retries_reaches_the_application(kafka, topic):
    kafka.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=1, topic=topic)
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, retries=0, enable_idempotence=False)
    try:
        with pytest.raises(Exception) as e:
            p.send(topic, value=b"x").get(timeout=30)
    finally:
        p.close()
    assert "NotLeaderForPartition" in type(e.value).__name__ or "NOT_LEADER" in str(e.value).upper()
    assert kafka.records(topic) == []


def test_dropped_response_client_times_out_and_retries_idempotently(kafka, topic):
    rule = kafka.drop_response(api="Produce", times=1, topic=topic)  # appended, answer lost
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, enable_idempotence=True,
                      request_timeout_ms=1500, retry_backoff_ms=10, linger_ms=0)
    try:
        md = p.send(topic, value=b"once").get(timeout=60)
    finally:
        p.close()
    assert rule.fired == 1
    assert md.offset == 0  # the retry was recognised as a duplicate: same offset
    assert [r.value for r in kafka.records(topic)] == [b"once"]
    assert len(kafka.requests(api="Produce", topic=topic)) >= 2


def test_closed_connection_client_reconnects(kafka, topic):
    rule = kafka.close_connection(api="Produce", times=1, topic=topic)
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, enable_idempotence=True,
                      retry_backoff_ms=10, reconnect_backoff_ms=10, linger_ms=0)
    try:
        p.send(topic, value=b"after-close").get(timeout=60)
    finally:
        p.close()
    assert rule.fired == 1
    assert [r.value for r in kafka.records(topic)] == [b"after-close"]


def test_latency_on_fetch_is_waited_out(kafka, topic):
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
    p.send(topic, value=b"slow").get(timeout=30)
    p.close()
    rule = kafka.delay(api="Fetch", ms=300, times=2, topic=topic)
    c = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        for _ in range(100):
            got += [r.value for recs in c.poll(timeout_ms=200).values() for r in recs]
            if got:
                break
    finally:
        c.close()
    assert got == [b"slow"]
    assert rule.fired >= 1
    fetches = kafka.requests(api="Fetch", topic=topic)
    assert fetches and fetches[0].request.topics  # recorded requests decode


def test_offset_commit_error_and_recorded_commits(kafka, topic):
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)
    p.send(topic, value=b"a").get(timeout=30)
    p.close()
    group = f"g-{topic}"
    rule = kafka.inject(api="OffsetCommit", error="COORDINATOR_NOT_AVAILABLE", times=1)
    c = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                      enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        deadline = time.monotonic() + 60
        while not c.poll(timeout_ms=200):  # joins the group, then fetches the record
            assert time.monotonic() < deadline, "the consumer got no record in 60 s"
        c.commit()  # retriable: the client finds the coordinator again and commits once more
    finally:
        c.close()
    assert rule.fired == 1
    assert kafka.committed_offsets(group) == {TopicPartition(topic, 0): 1}
    commits = [r for r in kafka.requests(api="OffsetCommit") if r.request.group_id == group]
    assert len(commits) >= 2


def test_producer_times_out_while_paused_then_delivers(kafka, topic):
    p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, max_block_ms=5000)
    try:
        p.send(topic, value=b"before").get(timeout=30)
        kafka.pause()
        try:
            with pytest.raises(KafkaTimeoutError):
                p.send(topic, value=b"during").get(timeout=0.5)
        finally:
            kafka.resume()
        p.flush(timeout=30)
    finally:
        p.close()
    assert [r.value for r in kafka.records(topic)] == [b"before", b"during"]


def test_kill_then_restart_keeps_acknowledged_records():
    with SamsaBroker() as k:
        topic = k.create_topic()
        p = KafkaProducer(bootstrap_servers=k.bootstrap_servers, acks="all")
        for i in range(5):
            p.send(topic, value=b"%d" % i).get(timeout=30)
        p.close()
        port = k.bootstrap_servers
        k.kill()
        assert not (k.data_dir / "logs" / ".kafka_cleanshutdown").exists()
        k.restart()
        assert k.bootstrap_servers == port
        assert [r.value for r in k.records(topic)] == [b"0", b"1", b"2", b"3", b"4"]
        k.restart()  # a clean stop and start keeps them too
        assert len(k.records(topic)) == 5


def test_recorded_requests_are_bounded_in_bytes(kafka, topic):
    kafka.clear_requests()
    kafka.faults.max_recorded_bytes = 20_000
    try:
        p = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0)
        for i in range(10):
            p.send(topic, value=bytes([i]) * 5000).get(timeout=30)
        p.close()
        produces = kafka.requests(api="Produce", topic=topic)
        assert sum(len(r.frame) for r in kafka.requests()) <= 20_000
        assert 1 <= len(produces) < 10  # the oldest went
        last = produces[-1].request.topic_data[0].partition_data[0].records
        assert bytes([9]) * 100 in bytes(last)  # the newest stays
    finally:
        kafka.faults.max_recorded_bytes = 64 << 20
