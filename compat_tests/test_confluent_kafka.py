"""confluent-kafka (librdkafka) against a live broker.

AdminClient creates a 3-partition topic; a Producer with
``enable.idempotence=true`` and one compression codec sends the workload,
recording each delivery report; a Consumer with manual ``assign`` from
OFFSET_BEGINNING reads it back.  ``list_offsets`` through the AdminClient must
agree with what was delivered.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

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


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        f.result(timeout=30)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(broker, codec: str) -> None:
    topic = topic_name(f"ck-{codec}")
    create_topic(broker.bootstrap, topic)

    sent = messages(N_MESSAGES)
    delivered: list[tuple[int, int]] = []
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered.append((msg.partition(), msg.offset()))

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "compression.type": codec,
            "linger.ms": 5,
        }
    )
    for m in sent:
        while True:
            try:
                producer.produce(
                    topic, key=m.key, value=m.value, headers=list(m.headers), on_delivery=on_delivery
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(120)
    assert remaining == 0, f"{remaining} messages still undelivered"
    assert not errors, f"delivery errors: {errors[:10]}"
    assert len(delivered) == N_MESSAGES

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    latest = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)})
    ends = {tp.partition: f.result(timeout=30).offset for tp, f in latest.items()}
    assert sum(ends.values()) == N_MESSAGES, f"latest offsets {ends}"

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"compat-ck-{topic}",  # required by librdkafka even for assign(); never joined
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "check.crcs": True,
        }
    )
    consumed: list[Consumed] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 120  # a hang guard, not a speed assertion
        while len(consumed) < N_MESSAGES and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, f"consumer error: {err}"
                    continue
                p, o, headers = msg.partition(), msg.offset(), msg.headers()
                assert p is not None and o is not None and not isinstance(headers, dict)
                consumed.append(Consumed(p, o, msg.key(), msg.value(), normalise_headers(headers)))
    finally:
        consumer.close()

    assert set(delivered) == {(c.partition, c.offset) for c in consumed}
    check_round_trip(consumed, sent)
