"""aiokafka against a live broker.

AIOKafkaAdminClient creates a 3-partition topic; AIOKafkaProducer with
``enable_idempotence=True`` and one codec sends the workload (send() futures
gathered in chunks); AIOKafkaConsumer with manual assign +
seek_to_beginning reads it back.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from tests.support.workload import (
    CODECS,
    N_MESSAGES,
    PARTITIONS,
    Consumed,
    check_round_trip,
    messages,
    normalise_headers,
    topic_name,
)

pytestmark = pytest.mark.slow


async def round_trip(bootstrap: str, topic: str, codec: str) -> tuple[list, list[Consumed], dict]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        await admin.close()

    sent = messages(N_MESSAGES)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        enable_idempotence=True,
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    await producer.start()
    metadata = []
    try:
        for start in range(0, len(sent), 1000):
            futures = [
                await producer.send(topic, key=m.key, value=m.value, headers=list(m.headers))
                for m in sent[start : start + 1000]
            ]
            metadata += await asyncio.gather(*futures)
    finally:
        await producer.stop()

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    consumed: list[Consumed] = []
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        deadline = time.monotonic() + 120  # a hang guard, not a speed assertion
        while len(consumed) < N_MESSAGES and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for tp, records in batches.items():
                for r in records:
                    consumed.append(
                        Consumed(tp.partition, r.offset, r.key, r.value, normalise_headers(r.headers))
                    )
    finally:
        await consumer.stop()
    return metadata, consumed, ends


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(broker, codec: str) -> None:
    topic = topic_name(f"aio-{codec}")
    metadata, consumed, ends = asyncio.run(round_trip(broker.bootstrap, topic, codec))
    assert len(metadata) == N_MESSAGES
    assert sum(ends.values()) == N_MESSAGES, f"end offsets {ends}"
    assert {(md.partition, md.offset) for md in metadata} == {(c.partition, c.offset) for c in consumed}
    check_round_trip(consumed, messages(N_MESSAGES))
