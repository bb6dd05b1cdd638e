"""Kafka's log validation of produced batches (issue 14 item 2), with librdkafka, the Java
producer and raw frames.

* Keyless records on a compacted topic: INVALID_RECORD with ``record_errors`` (KIP-467)
  naming each keyless record, nothing of the batch appended; librdkafka fails the keyless
  message with INVALID_RECORD and its batch mates with _INVALID_DIFFERENT_RECORD; the Java
  producer fails the keyless one with InvalidRecordException.
* KIP-937 timestamp bounds (``message.timestamp.before.max.ms`` / ``after.max.ms``):
  INVALID_TIMESTAMP with record errors; in-range records still go.
* Raw batches: base offset != 0, a producer id without a sequence, a control batch, a count
  that disagrees with the offset range, two batches in one partition, wrong magic, zstd in
  Produce v3-6, an oversize batch: each gets Kafka's code and nothing is appended.
"""

from __future__ import annotations

import struct
import time

import crc32c
import pytest
from confluent_kafka import KafkaError, Producer
from kafka.protocol.producer import ProduceResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from compat_tests.test_wire_parity import create_topic
from tests.support.java import compile_java, run_java
from tests.support.rawclient import RawClient, build_batch, produce_request
from tests.support.workload import topic_name

pytestmark = pytest.mark.timeout(300)

INVALID_RECORD, INVALID_TIMESTAMP, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE = 87, 32, 2, 10
UNSUPPORTED_COMPRESSION_TYPE = 76


def _deliver(bootstrap: str, topic: str, msgs: list[tuple[bytes | None, bytes, int | None]]) -> list[tuple[int, str]]:
    """Produce msgs (key, value, timestamp ms) in one batch; return (error code or 0, message) each."""
    results: list[tuple[int, str]] = [(-1, "")] * len(msgs)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200, "enable.idempotence": False,
                  "message.send.max.retries": 0})
    for i, (k, v, ts) in enumerate(msgs):
        def cb(err, _m, i: int = i) -> None:
            results[i] = (0, "") if err is None else (err.code(), err.str())
        kw = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, key=k, value=v, partition=0, on_delivery=cb, **kw)
    assert p.flush(30) == 0
    return results


def _log_end(raw: RawClient, topic: str) -> int:
    code, hw, _ = raw.fetch(topic, 0, 0)
    assert code == 0
    return int(hw)


def _raw(broker) -> RawClient:  # type: ignore[no-untyped-def]
    host, port = broker.bootstrap.split(":")
    return RawClient(host, int(port))


def test_librdkafka_keyless_records_on_compacted_topic(broker) -> None:
    topic = topic_name("cmp-nokey")
    create_topic(broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    got = _deliver(broker.bootstrap, topic, [(b"k0", b"a", None), (None, b"b", None), (b"k2", b"c", None),
                                             (None, b"d", None)])
    assert got[1][0] == KafkaError.INVALID_RECORD and got[3][0] == KafkaError.INVALID_RECORD, got
    assert got[0][0] == KafkaError._INVALID_DIFFERENT_RECORD and got[2][0] == KafkaError._INVALID_DIFFERENT_RECORD
    with _raw(broker) as raw:
        assert _log_end(raw, topic) == 0  # nothing appended
        # the raw response: record_errors name indexes 1 and 3
        batch = build_batch([(b"k", b"v", []), (None, b"v", []), (b"k", b"v", []), (None, b"v", [])])
        resp = raw.roundtrip(produce_request(topic, 0, batch), 9, ProduceResponse)
        p = resp.responses[0].partition_responses[0]
        assert p.error_code == INVALID_RECORD and p.base_offset == -1
        assert [e.batch_index for e in p.record_errors] == [1, 3]
        assert all(e.batch_index_error_message == f"Compacted topic cannot accept message without key in topic "
                   f"partition {topic}-0." for e in p.record_errors)
        assert p.error_message.startswith("One or more records have been rejected due to 2 record errors")
        # keyed records go in
        assert _deliver(broker.bootstrap, topic, [(b"k", b"ok", None)]) == [(0, "")]
        assert _log_end(raw, topic) == 1


def test_librdkafka_timestamp_bounds(broker) -> None:
    topic = topic_name("ts-bounds")
    create_topic(broker.bootstrap, topic, config={"message.timestamp.before.max.ms": "86400000",
                                                  "message.timestamp.after.max.ms": "3600000"})
    now = int(time.time() * 1000)
    got = _deliver(broker.bootstrap, topic, [(b"k", b"future", now + 2 * 3600_000)])
    assert got[0][0] == KafkaError.INVALID_TIMESTAMP, got
    got = _deliver(broker.bootstrap, topic, [(b"k", b"past", now - 3 * 86400_000)])
    assert got[0][0] == KafkaError.INVALID_TIMESTAMP, got
    assert _deliver(broker.bootstrap, topic, [(b"k", b"now", now), (b"k", b"soon", now + 600_000)]) == [(0, "")] * 2
    with _raw(broker) as raw:
        assert _log_end(raw, topic) == 2
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
        b.append(0, timestamp=now, key=b"k", value=b"ok", headers=[])
        b.append(1, timestamp=now + 5 * 3600_000, key=b"k", value=b"late", headers=[])
        resp = raw.roundtrip(produce_request(topic, 0, bytes(b.build())), 9, ProduceResponse)
        p = resp.responses[0].partition_responses[0]
        assert p.error_code == INVALID_TIMESTAMP
        assert [e.batch_index for e in p.record_errors] == [1]
        assert "is out of range. The timestamp should be within" in p.record_errors[0].batch_index_error_message
        assert p.error_message == "One or more records have been rejected due to invalid timestamp"
        assert _log_end(raw, topic) == 2


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_raw_batch_fields(broker) -> None:
    topic = topic_name("raw-fields")
    create_topic(broker.bootstrap, topic, config={"max.message.bytes": "2000"})
    one = bytearray(build_batch([(b"k", b"v", []), (b"k", b"w", [])]))
    cases: list[tuple[str, bytes, int, int]] = []
    b = bytearray(one)
    struct.pack_into(">q", b, 0, 5)  # base offset (not covered by the CRC)
    cases.append(("base offset 5", bytes(b), INVALID_RECORD, 9))
    b = bytearray(one)
    struct.pack_into(">qhi", b, 43, 1000, 0, -1)  # producer id without a sequence
    cases.append(("pid without sequence", _recrc(b), INVALID_RECORD, 9))
    b = bytearray(one)
    struct.pack_into(">h", b, 21, 0x20)  # control batch from a client
    cases.append(("control batch", _recrc(b), INVALID_RECORD, 9))
    b = bytearray(one)
    struct.pack_into(">i", b, 57, 3)  # count 3, offsets say 2
    cases.append(("count mismatch", _recrc(b), INVALID_RECORD, 9))
    cases.append(("two batches", bytes(one) + bytes(one), INVALID_RECORD, 9))
    b = bytearray(one)
    b[16] = 1  # magic v1
    cases.append(("magic 1", bytes(b), INVALID_RECORD, 9))
    b = bytearray(one)
    b[16] = 7  # no such magic
    cases.append(("magic 7", bytes(b), INVALID_RECORD, 9))
    b = bytearray(one)
    b[30] ^= 0xFF  # body changed under the old CRC
    cases.append(("bad crc", bytes(b), CORRUPT_MESSAGE, 9))
    cases.append(("oversize", build_batch([(b"k", b"x" * 5000, [])]), MESSAGE_TOO_LARGE, 9))
    zb = DefaultRecordBatchBuilder(magic=2, compression_type=4, is_transactional=False, producer_id=-1,
                                   producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    zb.append(0, timestamp=None, key=b"k", value=b"zstd" * 200, headers=[])
    zstd = bytes(zb.build())
    cases.append(("zstd in v6", zstd, UNSUPPORTED_COMPRESSION_TYPE, 6))
    with _raw(broker) as raw:
        for what, records, code, version in cases:
            resp = raw.roundtrip(produce_request(topic, 0, records), version, ProduceResponse)
            p = resp.responses[0].partition_responses[0]
            assert p.error_code == code, (what, p.error_code, getattr(p, "error_message", None))
            assert _log_end(raw, topic) == 0, what
        resp = raw.roundtrip(produce_request(topic, 0, zstd), 7, ProduceResponse)
        assert resp.responses[0].partition_responses[0].error_code == 0  # zstd from v7
        assert raw.produce(topic, 0, bytes(one)) == (0, 1)
    assert "Traceback" not in broker.log_text()


JAVA_SOURCE = r"""
import java.util.*;
import java.util.concurrent.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class ValidationCompat {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("enable.idempotence", "false");
        p.put("retries", "0");
        p.put("linger.ms", "200");
        long now = System.currentTimeMillis();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            fs.add(producer.send(new ProducerRecord<>(args[1], 0, "k".getBytes(), "a".getBytes())));
            fs.add(producer.send(new ProducerRecord<>(args[1], 0, null, "b".getBytes())));
            producer.flush();
            fs.add(producer.send(new ProducerRecord<>(args[2], 0, now + 7200000L, "k".getBytes(), "late".getBytes())));
            producer.flush();
            fs.add(producer.send(new ProducerRecord<>(args[2], 0, now, "k".getBytes(), "ok".getBytes())));
            for (Future<RecordMetadata> f : fs) {
                try {
                    System.out.println("ok " + f.get().offset());
                } catch (ExecutionException e) {
                    System.out.println("err " + e.getCause().getClass().getSimpleName() + " " + e.getCause().getMessage());
                }
            }
        }
    }
}
"""


@pytest.mark.java
def test_java_producer_validation(broker, tmp_path_factory: pytest.TempPathFactory) -> None:
    cp = compile_java(JAVA_SOURCE, "ValidationCompat", tmp_path_factory.mktemp("validation-java"))
    compacted, bounded = topic_name("j-cmp"), topic_name("j-ts")
    create_topic(broker.bootstrap, compacted, config={"cleanup.policy": "compact"})
    create_topic(broker.bootstrap, bounded, config={"message.timestamp.after.max.ms": "3600000"})
    lines = run_java(cp, "ValidationCompat", broker.bootstrap, compacted, bounded)
    assert len(lines) == 4, lines
    assert lines[0].startswith("err KafkaException") and "invalid records" in lines[0], lines[0]
    assert lines[1].startswith("err InvalidRecordException") and \
        "Compacted topic cannot accept message without key" in lines[1], lines[1]
    assert lines[2].startswith("err InvalidTimestampException"), lines[2]
    assert lines[3] == "ok 0", lines[3]
