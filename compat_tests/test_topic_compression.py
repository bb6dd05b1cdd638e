"""Broker-side compression: a topic whose ``compression.type`` differs from the producer's codec.

Kafka re-encodes such batches on append (LogValidator): the log, and so every
fetch, carries the topic's codec, offsets are assigned by the broker, and the
idempotent producer's ids and sequences survive.  Here a confluent-kafka
idempotent producer sends the workload with one codec to a topic configured
with another; a raw Fetch must show only batches in the topic's codec, and a
kafka-python consumer must read everything back intact and in order.
"""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

from tests.support.rawclient import RawClient
from tests.support.workload import (
    N_MESSAGES,
    PARTITIONS,
    Consumed,
    check_round_trip,
    messages,
    normalise_headers,
    topic_name,
)

pytestmark = pytest.mark.slow

CODEC_IDS = {"uncompressed": 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

# (topic compression.type, producer compression.type): always different codecs.
CASES = [
    ("uncompressed", "zstd"),
    ("gzip", "none"),
    ("snappy", "lz4"),
    ("lz4", "gzip"),
    ("zstd", "snappy"),
]


def batch_codecs(raw: bytes) -> tuple[list[int], int]:
    """Codec id of each v2 batch in raw fetch bytes, and the offset after the last whole batch."""
    codecs, pos, next_offset = [], 0, -1
    while pos + 61 <= len(raw):
        base_offset, length = struct.unpack_from(">qi", raw, pos)
        if pos + 12 + length > len(raw):
            break  # a partial batch at the end of a fetch is allowed
        magic = raw[pos + 16]
        assert magic == 2, f"batch at offset {base_offset} has magic {magic}"
        (attributes,) = struct.unpack_from(">h", raw, pos + 21)
        (last_offset_delta,) = struct.unpack_from(">i", raw, pos + 23)
        codecs.append(attributes & 0x07)
        next_offset = base_offset + last_offset_delta + 1
        pos += 12 + length
    return codecs, next_offset


@pytest.mark.parametrize("topic_codec, producer_codec", CASES)
def test_broker_recompresses(broker, topic_codec: str, producer_codec: str) -> None:
    topic = topic_name(f"tc-{topic_codec}")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    new = NewTopic(
        topic, num_partitions=PARTITIONS, replication_factor=1, config={"compression.type": topic_codec}
    )
    for f in admin.create_topics([new]).values():
        f.result(timeout=30)

    sent = messages(N_MESSAGES)
    delivered: dict[tuple[int, int], int] = {}
    errors: list[str] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            delivered[(msg.partition(), msg.offset())] = 1

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "compression.type": producer_codec,
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
    assert producer.flush(120) == 0
    assert not errors, errors[:10]
    assert len(delivered) == N_MESSAGES

    # What the log holds, as served: only the topic's codec.
    want = CODEC_IDS[topic_codec]
    with RawClient(broker.host, broker.port) as c:
        for p in range(PARTITIONS):
            offset, seen = 0, []
            while True:
                err, hw, raw = c.fetch_raw(topic, p, offset)
                assert err == 0, f"fetch {topic}-{p}@{offset}: error {err}"
                if offset >= hw:
                    break
                codecs, offset = batch_codecs(raw)
                assert codecs, f"fetch {topic}-{p} returned no whole batch below hw {hw}"
                seen += codecs
            assert seen and set(seen) == {want}, (
                f"partition {p}: batch codecs {sorted(set(seen))}, want {want}"
            )

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    consumed: list[Consumed] = []
    try:
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        deadline = time.monotonic() + 120  # a hang guard, not a speed assertion
        while len(consumed) < N_MESSAGES and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                for r in records:
                    consumed.append(
                        Consumed(tp.partition, r.offset, r.key, r.value, normalise_headers(r.headers))
                    )
    finally:
        consumer.close()
    assert set(delivered) == {(c.partition, c.offset) for c in consumed}
    check_round_trip(consumed, sent)
