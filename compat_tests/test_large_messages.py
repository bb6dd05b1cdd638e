"""Message size limits and large records.

* A batch larger than ``message.max.bytes`` (broker default 1048588) is refused
  with MESSAGE_TOO_LARGE (10), and nothing is appended; a topic's own
  ``max.message.bytes`` lowers the limit, and a stock producer sees the error
  in its delivery report.
* A record close to the limit is accepted from stock producers, and consumers
  configured with fetch sizes far below it still receive it: the broker
  returns the first batch whole even when it exceeds the fetch's byte limits
  (KIP-74), otherwise such a consumer would be stuck forever.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from tests.support.rawclient import RawClient, build_batch
from tests.support.workload import topic_name

pytestmark = pytest.mark.slow

MESSAGE_TOO_LARGE = 10
BROKER_MESSAGE_MAX_BYTES = 1048588  # Kafka's default message.max.bytes
BIG = 900_000  # under every client's default request/message limit, over any small fetch size


def create_topic(bootstrap: str, topic: str, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, num_partitions=1, replication_factor=1, config=config or {})
    for f in admin.create_topics([new]).values():
        f.result(timeout=30)


def big_value(tag: int) -> bytes:
    return bytes([tag % 251]) * BIG


def test_batch_over_message_max_bytes_is_refused(broker) -> None:
    topic = topic_name("big-raw")
    create_topic(broker.bootstrap, topic)
    with RawClient(broker.host, broker.port) as c:
        too_big = build_batch([(b"k", b"x" * BROKER_MESSAGE_MAX_BYTES, [])])
        assert len(too_big) > BROKER_MESSAGE_MAX_BYTES
        err, _ = c.produce(topic, 0, too_big)
        assert err == MESSAGE_TOO_LARGE
        ok = build_batch([(b"k", b"y" * (BROKER_MESSAGE_MAX_BYTES - 200), [])])
        assert len(ok) <= BROKER_MESSAGE_MAX_BYTES
        assert c.produce(topic, 0, ok) == (0, 0), "a batch at the limit must be accepted, at offset 0"
        # KIP-74: partition_max_bytes=1 still returns the whole first batch.
        err, hw, records = c.fetch(topic, 0, 0, max_bytes=1)
        assert (err, hw) == (0, 1)
        assert [(r.offset, len(r.value or b"")) for r in records] == [(0, BROKER_MESSAGE_MAX_BYTES - 200)]


def test_topic_max_message_bytes_reaches_the_producer(broker) -> None:
    topic = topic_name("big-topic")
    create_topic(broker.bootstrap, topic, {"max.message.bytes": "2048"})
    reports: list[tuple[int | None, int | None]] = []  # (error code or None, offset)

    def on_delivery(err, msg) -> None:
        reports.append((err.code() if err is not None else None, msg.offset()))

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
    producer.produce(topic, value=b"s" * 100, on_delivery=on_delivery)
    producer.flush(60)
    producer.produce(topic, value=b"L" * 4000, on_delivery=on_delivery)
    producer.flush(60)
    assert reports[0] == (None, 0), reports
    assert reports[1][0] == KafkaError.MSG_SIZE_TOO_LARGE, reports
    with RawClient(broker.host, broker.port) as c:
        err, hw, records = c.fetch(topic, 0, 0)
        assert (err, hw, [r.value for r in records]) == (0, 1, [b"s" * 100])


@pytest.fixture
def big_topic(broker) -> tuple[str, str]:
    """Three ~900 KB records, sent by kafka-python (default max_request_size 1 MiB)."""
    topic = topic_name("big")
    create_topic(broker.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=None)
    try:
        mds = [producer.send(topic, key=str(i).encode(), value=big_value(i), partition=0) for i in range(3)]
        producer.flush(60)
        assert [md.get(30).offset for md in mds] == [0, 1, 2]
    finally:
        producer.close(30)
    return broker.bootstrap, topic


def test_kafka_python_small_fetch_sizes_still_progress(big_topic: tuple[str, str]) -> None:
    bootstrap, topic = big_topic
    tp = KpTopicPartition(topic, 0)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        max_partition_fetch_bytes=1024,
        fetch_max_bytes=1024,
    )
    got: list[tuple[int, bytes | None, bytes | None]] = []
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60  # hang guard
        while len(got) < 3 and time.monotonic() < deadline:
            for r in consumer.poll(timeout_ms=500).get(tp, []):
                got.append((r.offset, r.key, r.value))
    finally:
        consumer.close()
    assert got == [(i, str(i).encode(), big_value(i)) for i in range(3)]


def test_aiokafka_small_fetch_sizes_still_progress(big_topic: tuple[str, str]) -> None:
    bootstrap, topic = big_topic

    async def run() -> list[tuple[int, bytes | None, bytes | None]]:
        tp = AioTopicPartition(topic, 0)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            max_partition_fetch_bytes=1024,
            fetch_max_bytes=1024,
        )
        await consumer.start()
        try:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            out = []
            for _ in range(3):
                r = await asyncio.wait_for(consumer.getone(tp), 60)
                out.append((r.offset, r.key, r.value))
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [(i, str(i).encode(), big_value(i)) for i in range(3)]
