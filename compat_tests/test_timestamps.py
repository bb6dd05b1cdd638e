"""Timestamps: ListOffsets by time (the time index) and LogAppendTime topics.

* ``offsets_for_times`` (kafka-python) / ``offsets_for_times`` (confluent-kafka)
  / ``list_offsets`` with ``OffsetSpec.for_timestamp`` and ``max_timestamp``
  (KIP-734): the earliest offset whose timestamp is >= the asked time, none
  past the last record, and the offset of the largest timestamp.  Records go
  in many small segments so the time index and segment lookup both matter.
* A topic with ``message.timestamp.type=LogAppendTime``: the broker stamps
  each batch on append, consumers see the append time with its type, and the
  producer's delivery report carries it too.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.support.workload import topic_name

pytestmark = pytest.mark.slow

N = 3000
T0 = 1_700_000_000_000  # ms; record i has timestamp T0 + 10 * i (strictly increasing)
STEP = 10


def ts(i: int) -> int:
    return T0 + STEP * i


def expected_offset(t: int) -> int | None:
    """First offset whose timestamp >= t, or None if every record is older."""
    if t <= ts(0):
        return 0
    i = -(-(t - T0) // STEP)  # ceil
    return i if i < N else None


QUERIES = [
    ts(0) - 5000,
    ts(0),
    ts(0) + 1,
    ts(17),
    ts(17) + 3,
    ts(1234),
    ts(N // 2) - 1,
    ts(N - 1),
    ts(N - 1) + 1,
]


@pytest.fixture
def timed_topic(broker_factory) -> tuple[str, str]:
    broker = broker_factory({"log.segment.bytes": 16 * 1024, "log.index.interval.bytes": 256})
    topic = topic_name("ts")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        f.result(timeout=30)
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.size": 4096,
        }
    )
    for i in range(N):
        producer.produce(
            topic,
            value=f"v{i}".encode(),
            partition=0,
            timestamp=ts(i),
            on_delivery=lambda err, msg: errors.append(str(err)) if err else None,
        )
        producer.poll(0)
    assert producer.flush(60) == 0 and not errors, errors[:5]
    return broker.bootstrap, topic


def test_kafka_python_offsets_for_times(timed_topic: tuple[str, str]) -> None:
    bootstrap, topic = timed_topic
    tp = KpTopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        for t in QUERIES:
            found = consumer.offsets_for_times({tp: t})[tp]
            want = expected_offset(t)
            if want is None:
                assert found is None, f"t={t}: {found}"
            else:
                assert found is not None, f"t={t}: nothing found, want offset {want}"
                assert (found.offset, found.timestamp) == (want, ts(want)), f"t={t}"
    finally:
        consumer.close()


def test_confluent_offsets_for_times_and_timestamps(timed_topic: tuple[str, str]) -> None:
    bootstrap, topic = timed_topic
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"ts-{topic}", "enable.auto.commit": False}
    )
    try:
        for t in QUERIES:
            (found,) = consumer.offsets_for_times([TopicPartition(topic, 0, t)], timeout=30)
            want = expected_offset(t)
            assert found.error is None, found.error
            assert found.offset == (want if want is not None else -1), f"t={t}: {found.offset}, want {want}"
        # The timestamps themselves come back as sent, typed CreateTime.
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        seen: list[tuple[int | None, tuple[int, int]]] = []
        deadline = time.monotonic() + 60  # hang guard
        while len(seen) < N and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                assert msg.error() is None, msg.error()
                seen.append((msg.offset(), msg.timestamp()))
        assert seen == [(i, (TIMESTAMP_CREATE_TIME, ts(i))) for i in range(N)]
    finally:
        consumer.close()


def test_admin_list_offsets_by_time_and_max_timestamp(timed_topic: tuple[str, str]) -> None:
    bootstrap, topic = timed_topic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, 0)
    for t in (ts(0), ts(999) + 1, ts(N - 1) + 1):
        res = admin.list_offsets({tp: OffsetSpec.for_timestamp(t)})[tp].result(timeout=30)
        want = expected_offset(t)
        assert res.offset == (want if want is not None else -1), f"t={t}: {res.offset}"
    res = admin.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(timeout=30)
    assert (res.offset, res.timestamp) == (N - 1, ts(N - 1))


def test_log_append_time_topic(broker) -> None:
    topic = topic_name("lat")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    new = NewTopic(
        topic, num_partitions=1, replication_factor=1, config={"message.timestamp.type": "LogAppendTime"}
    )
    for f in admin.create_topics([new]).values():
        f.result(timeout=30)

    reports: list[tuple[int, int]] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    before = int(time.time() * 1000)
    for i in range(200):
        producer.produce(
            topic,
            value=f"v{i}".encode(),
            timestamp=ts(i),
            on_delivery=lambda err, msg: reports.append(msg.timestamp()),
        )
    assert producer.flush(60) == 0
    after = int(time.time() * 1000)
    assert len(reports) == 200
    for kind, stamp in reports:
        assert kind == TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= stamp <= after + 1000, (kind, stamp)

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": f"lat-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 60  # hang guard
        while len(seen) < 200 and time.monotonic() < deadline:
            for msg in consumer.consume(200, timeout=0.5):
                assert msg.error() is None, msg.error()
                seen.append(msg.timestamp())
    finally:
        consumer.close()
    assert len(seen) == 200
    for kind, stamp in seen:
        # The clock bounds allow for a second of skew; the point is the broker's time, not the 2023 one sent.
        assert kind == TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= stamp <= after + 1000, (kind, stamp)
