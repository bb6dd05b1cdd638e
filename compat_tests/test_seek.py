"""Seeking into the middle of the log: every client must get exactly the record it asked for.

A fetch at offset N is answered from the batch that *contains* N (found via
the offset index, possibly in an older segment), so with compressed batches
the broker sends records before N and the client drops them.  Small segments
and a small index interval make the lookups cross segment and index-entry
boundaries.  Each client seeks to the same offsets (both ends, segment-ish
boundaries, and a spread in between) and its first record must be exactly
that offset with the value sent there.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.support.brokers import SamsaBroker
from tests.support.workload import N_MESSAGES, topic_name

pytestmark = pytest.mark.slow

GUARD_S = 60.0  # a hang guard per seek, not a speed assertion


def value_at(offset: int) -> bytes:
    return f"value-{offset}".encode()


def targets() -> list[int]:
    rng = random.Random(20261122)
    picks = {0, 1, N_MESSAGES // 2, N_MESSAGES - 2, N_MESSAGES - 1}
    picks |= {rng.randrange(N_MESSAGES) for _ in range(25)}
    return sorted(picks)


@pytest.fixture
def seek_topic(broker_factory) -> tuple[str, str]:
    """A 1-partition topic holding value-<offset> at every offset, in zstd batches over many small segments."""
    broker = broker_factory({"log.segment.bytes": 8 * 1024, "log.index.interval.bytes": 256})
    topic = topic_name("seek")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        f.result(timeout=30)
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))

    # batch.size bounds a batch's uncompressed size, so every batch fits a segment
    # (a batch larger than segment.bytes is rejected, as Kafka does: RECORD_LIST_TOO_LARGE).
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "compression.type": "zstd",
            "linger.ms": 5,
            "batch.size": 16 * 1024,
        }
    )
    for i in range(N_MESSAGES):
        while True:
            try:
                producer.produce(topic, value=value_at(i), partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(120) == 0
    assert not errors, errors[:5]
    if isinstance(broker, SamsaBroker):  # Tansu keeps no files
        segments = list((broker.data_dir / f"{topic}-0").glob("*.log"))
        assert len(segments) >= 3, f"setup: expected several segments, got {len(segments)}"
    return broker.bootstrap, topic


def test_kafka_python_seek(seek_topic: tuple[str, str]) -> None:
    bootstrap, topic = seek_topic
    tp = KpTopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign([tp])
        for target in targets():
            consumer.seek(tp, target)
            deadline = time.monotonic() + GUARD_S
            records: list = []
            while not records and time.monotonic() < deadline:
                records = consumer.poll(timeout_ms=500, max_records=1).get(tp, [])
            assert records, f"nothing after seek({target})"
            assert (records[0].offset, records[0].value) == (target, value_at(target))
    finally:
        consumer.close()


def test_confluent_kafka_seek(seek_topic: tuple[str, str]) -> None:
    bootstrap, topic = seek_topic
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"seek-{topic}", "enable.auto.commit": False}
    )
    try:
        for target in targets():
            consumer.assign([CkTopicPartition(topic, 0, target)])
            deadline = time.monotonic() + GUARD_S
            msg = None
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
            assert msg is not None, f"nothing after assign at {target}"
            assert msg.error() is None, msg.error()
            assert (msg.offset(), msg.value()) == (target, value_at(target))
            consumer.unassign()
    finally:
        consumer.close()


def test_aiokafka_seek(seek_topic: tuple[str, str]) -> None:
    bootstrap, topic = seek_topic

    async def run() -> None:
        tp = AioTopicPartition(topic, 0)
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([tp])
            for target in targets():
                consumer.seek(tp, target)
                record = await asyncio.wait_for(consumer.getone(tp), GUARD_S)
                assert (record.offset, record.value) == (target, value_at(target))
        finally:
            await consumer.stop()

    asyncio.run(run())
