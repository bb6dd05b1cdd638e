"""Many topics and partitions in every request.

Ten topics of eight partitions: the idempotent confluent-kafka producer's
Produce requests then carry many topics and partitions at once, and the
consumers' Fetch requests ask for all 80 partitions together, so per-topic and
per-partition results must be matched up correctly inside one request.
kafka-python and aiokafka each read everything back.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.support.workload import topic_name

pytestmark = pytest.mark.slow

TOPICS = 10
PARTITIONS = 8
PER_TOPIC = 1000
TOTAL = TOPICS * PER_TOPIC


@pytest.fixture
def loaded(broker) -> tuple[str, list[str], dict[tuple[str, int], list[bytes]]]:
    """Returns (bootstrap, topics, {(topic, partition): values in offset order}) as acknowledged."""
    topics = [topic_name(f"many{t}") for t in range(TOPICS)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics(
        [NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in topics]
    )
    for f in futures.values():
        f.result(timeout=60)

    acked: dict[tuple[str, int], dict[int, bytes]] = defaultdict(dict)
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[(msg.topic(), msg.partition())][msg.offset()] = msg.value()

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 20,
            "compression.type": "lz4",
        }
    )
    for i in range(PER_TOPIC):
        for t in topics:  # interleaved, so each request spans many topics
            while True:
                try:
                    producer.produce(
                        t, key=f"k{i}".encode(), value=f"{t}:{i}".encode(), on_delivery=on_delivery
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert not errors, errors[:10]
    expected = {tp: [v for _, v in sorted(offsets.items())] for tp, offsets in acked.items()}
    assert sum(len(v) for v in expected.values()) == TOTAL
    for tp, offsets in acked.items():
        assert sorted(offsets) == list(range(len(offsets))), f"{tp}: offsets not contiguous from 0"
    return broker.bootstrap, topics, expected


def check(
    got: dict[tuple[str, int], list[tuple[int, bytes]]], expected: dict[tuple[str, int], list[bytes]]
) -> None:
    for tp, values in expected.items():
        assert got.get(tp, []) == list(enumerate(values)), (
            f"{tp}: got {len(got.get(tp, []))} of {len(values)}"
        )
    assert set(got) <= set(expected), f"records from partitions never written: {set(got) - set(expected)}"


def test_kafka_python_reads_80_partitions(loaded) -> None:
    bootstrap, topics, expected = loaded
    tps = [KpTopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    got: dict[tuple[str, int], list[tuple[int, bytes]]] = defaultdict(list)
    try:
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        deadline = time.monotonic() + 120  # hang guard
        while sum(map(len, got.values())) < TOTAL and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                got[(tp.topic, tp.partition)] += [(r.offset, r.value) for r in records]
    finally:
        consumer.close()
    check(got, expected)


def test_aiokafka_reads_80_partitions(loaded) -> None:
    bootstrap, topics, expected = loaded

    async def run() -> dict[tuple[str, int], list[tuple[int, bytes]]]:
        tps = [AioTopicPartition(t, p) for t in topics for p in range(PARTITIONS)]
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        await consumer.start()
        got: dict[tuple[str, int], list[tuple[int, bytes]]] = defaultdict(list)
        try:
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + 120  # hang guard
            while sum(map(len, got.values())) < TOTAL and time.monotonic() < deadline:
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    got[(tp.topic, tp.partition)] += [(r.offset, r.value) for r in records]
        finally:
            await consumer.stop()
        return got

    check(asyncio.run(run()), expected)
