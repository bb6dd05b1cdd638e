"""kafka-python 3.x against a live broker.

KafkaAdminClient creates a 3-partition topic; KafkaProducer with its defaults
(idempotence on, acks=all) and one compression codec sends the workload;
KafkaConsumer with manual assign + seek(0) (no group) reads it back.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

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


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(broker, codec: str) -> None:
    topic = topic_name(f"kp-{codec}")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="compat-kp-admin")
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
    finally:
        admin.close()

    sent = messages(N_MESSAGES)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        compression_type=None if codec == "none" else codec,
        client_id="compat-kp-producer",
    )
    assert producer.config["enable_idempotence"] is True
    try:
        futures = [producer.send(topic, key=m.key, value=m.value, headers=list(m.headers)) for m in sent]
        producer.flush(timeout=120)
        metadata = [f.get(timeout=30) for f in futures]
    finally:
        producer.close(timeout=30)
    assert all(md.topic == topic for md in metadata)

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        client_id="compat-kp-consumer",
    )
    consumed: list[Consumed] = []
    try:
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        end = consumer.end_offsets(tps)
        assert sum(end.values()) == N_MESSAGES, f"end offsets {end}"
        deadline = time.monotonic() + 120  # a hang guard, not a speed assertion
        while len(consumed) < N_MESSAGES and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                for r in records:
                    consumed.append(
                        Consumed(tp.partition, r.offset, r.key, r.value, normalise_headers(r.headers))
                    )
    finally:
        consumer.close()

    # Records acknowledged by the producer sit at the offsets the broker returned.
    acked = {(md.partition, md.offset) for md in metadata}
    assert acked == {(c.partition, c.offset) for c in consumed}
    check_round_trip(consumed, sent)
