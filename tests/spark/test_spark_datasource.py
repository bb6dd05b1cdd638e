"""The `samsa-kafka` Python data source against a live broker: batch and streaming, read and write.

Records are produced and checked with kafka-python directly, so every assertion compares
what Spark saw or wrote with what is actually in the broker's log.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as TP
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import IncompatibleBrokerVersion

pytestmark = [pytest.mark.spark]

FMT = "samsa-kafka"


def make_topic(bootstrap: str, partitions: int = 2) -> str:
    name = f"ds-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    return name


def produce(bootstrap: str, topic: str, n: int, start: int = 0, partitions: int = 2) -> list[tuple[int, bytes, bytes]]:
    """n records spread round-robin over partitions; returns (partition, key, value)."""
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    sent = []
    try:
        for i in range(start, start + n):
            part = i % partitions
            key, value = f"key-{i}".encode(), f"value-{i}".encode()
            p.send(topic, key=key, value=value, partition=part, headers=[("seq", str(i).encode())])
            sent.append((part, key, value))
        p.flush()
    finally:
        p.close()
    return sent


def consume_all(bootstrap: str, topic: str, partitions: int = 2) -> list[Any]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        tps = [TP(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + 30
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                out.extend(recs)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        c.close()


def reader(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format(FMT).option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def test_batch_read_matches_broker_log(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap)
    sent = produce(kbroker.bootstrap, topic, 60)
    rows = reader(spark, kbroker.bootstrap, subscribe=topic, includeHeaders="true").collect()
    log = consume_all(kbroker.bootstrap, topic)
    assert len(rows) == len(sent) == len(log)
    got = sorted((r.partition, r.offset, bytes(r.key), bytes(r.value), r.topic) for r in rows)
    want = sorted((m.partition, m.offset, m.key, m.value, m.topic) for m in log)
    assert got == want
    by_offset = {(r.partition, r.offset): r for r in rows}
    for m in log:
        r = by_offset[(m.partition, m.offset)]
        assert [(h.key, bytes(h.value)) for h in r.headers] == list(m.headers)
        assert int(r.timestamp.timestamp() * 1000) == m.timestamp
        assert r.timestampType == m.timestamp_type
    assert reader(spark, kbroker.bootstrap, subscribe=topic).columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_batch_read_offset_ranges_and_assign(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap)
    produce(kbroker.bootstrap, topic, 40)  # 20 per partition
    df = reader(spark, kbroker.bootstrap, subscribe=topic,
                startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}),
                endingOffsets=json.dumps({topic: {"0": 12, "1": -1}}))
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(5, 12)] + [(1, o) for o in range(20)]
    only1 = reader(spark, kbroker.bootstrap, assign=json.dumps({topic: [1]}))
    assert sorted(r.offset for r in only1.select("offset").collect()) == list(range(20))
    pattern = reader(spark, kbroker.bootstrap, subscribePattern=topic[:6] + ".*")
    assert pattern.where(f"topic = '{topic}'").count() == 40
    with pytest.raises(Exception, match="starting offset can't be latest"):
        reader(spark, kbroker.bootstrap, subscribe=topic, startingOffsets="latest").collect()


def test_batch_write_then_read_back(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap)
    data = [(f"k{i}", f"v{i}", i % 2, [("h", f"{i}".encode())]) for i in range(50)]
    df = spark.createDataFrame(data, "key string, value string, partition int, "
                                     "headers array<struct<key: string, value: binary>>")
    df.write.format(FMT).option("kafka.bootstrap.servers", kbroker.bootstrap).option("topic", topic).mode("append").save()
    log = consume_all(kbroker.bootstrap, topic)
    assert sorted((m.partition, m.key, m.value, tuple(m.headers)) for m in log) == sorted(
        (p, k.encode(), v.encode(), (("h", h[0][1]),)) for k, v, p, h in data)


def _stream_to_parquet(spark: Any, bootstrap: str, topic: str, out: Path, ckpt: Path, limit: int) -> Any:
    df = (spark.readStream.format(FMT).option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(limit)).load())
    return (df.selectExpr("CAST(key AS STRING) AS key", "partition", "offset").writeStream
            .format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
            .trigger(processingTime="500 milliseconds").start())


def _wait_rows(spark: Any, query: Any, out: Path, n: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise AssertionError(f"query failed: {query.exception()}")
        try:
            if spark.read.parquet(str(out)).count() >= n:
                return
        except Exception:  # noqa: BLE001 - no committed file yet
            pass
        time.sleep(0.5)
    raise AssertionError(f"fewer than {n} rows in {out} after {timeout}s")


def test_stream_read_rate_limit_and_restart_exactly_once(spark: Any, kbroker: Any, tmp_path: Path) -> None:
    topic = make_topic(kbroker.bootstrap)
    produce(kbroker.bootstrap, topic, 100)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = _stream_to_parquet(spark, kbroker.bootstrap, topic, out, ckpt, limit=30)
    _wait_rows(spark, q, out, 100)
    q.processAllAvailable()
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    q.stop()
    assert sum(sizes) == 100 and max(sizes) <= 30 and len(sizes) >= 4, sizes

    # More data while the query is down; the restarted query must pick up exactly there.
    produce(kbroker.bootstrap, topic, 60, start=100)
    q = _stream_to_parquet(spark, kbroker.bootstrap, topic, out, ckpt, limit=30)
    _wait_rows(spark, q, out, 160)
    q.processAllAvailable()
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    q.stop()
    assert sum(sizes) == 60 and max(sizes) <= 30, sizes
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        [(0, o) for o in range(80)] + [(1, o) for o in range(80)])
    assert sorted(r.key for r in rows) == sorted(f"key-{i}" for i in range(160))


def test_stream_write(spark: Any, kbroker: Any, tmp_path: Path) -> None:
    src, dst = make_topic(kbroker.bootstrap), make_topic(kbroker.bootstrap)
    produce(kbroker.bootstrap, src, 40)
    df = (spark.readStream.format(FMT).option("kafka.bootstrap.servers", kbroker.bootstrap)
          .option("subscribe", src).option("startingOffsets", "earliest")
          .option("samsa.availableNow", "true").load())
    q = (df.selectExpr("key", "upper(CAST(value AS STRING)) AS value").writeStream.format(FMT)
         .option("kafka.bootstrap.servers", kbroker.bootstrap).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    q.awaitTermination(180)
    assert q.exception() is None
    log = consume_all(kbroker.bootstrap, dst)
    assert sorted((m.key, m.value) for m in log) == sorted(
        (f"key-{i}".encode(), f"VALUE-{i}".encode()) for i in range(40))


def test_fail_on_data_loss_after_delete_records(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap, partitions=1)
    produce(kbroker.bootstrap, topic, 20, partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=kbroker.bootstrap)
    try:
        admin.delete_records({TP(topic, 0): 10})
    except IncompatibleBrokerVersion:
        pytest.skip("the broker does not serve DeleteRecords (API key 21)")
    finally:
        admin.close()
    start = json.dumps({topic: {"0": 0}})
    with pytest.raises(Exception, match="Some data may have been lost"):
        reader(spark, kbroker.bootstrap, subscribe=topic, startingOffsets=start).collect()
    rows = reader(spark, kbroker.bootstrap, subscribe=topic, startingOffsets=start,
                  failOnDataLoss="false").select("offset").collect()
    assert sorted(r.offset for r in rows) == list(range(10, 20))


def test_read_committed_skips_aborted_transactions(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap, partitions=1)
    p = KafkaProducer(bootstrap_servers=kbroker.bootstrap, transactional_id=f"ds-{uuid.uuid4().hex[:8]}")
    try:
        p.init_transactions()
        p.begin_transaction()
        for i in range(3):
            p.send(topic, f"aborted-{i}".encode(), partition=0)
        p.flush()  # so the aborted records really reach the log before the abort marker
        p.abort_transaction()
        p.begin_transaction()
        for i in range(3):
            p.send(topic, f"committed-{i}".encode(), partition=0)
        p.commit_transaction()
    finally:
        p.close()
    # The commit marker is written after EndTxn is answered: wait (bounded) until it is in.
    c = KafkaConsumer(bootstrap_servers=kbroker.bootstrap, group_id=None, isolation_level="read_committed")
    deadline = time.monotonic() + 30
    while c.end_offsets([TP(topic, 0)])[TP(topic, 0)] < 8 and time.monotonic() < deadline:
        time.sleep(0.1)
    c.close()
    committed = reader(spark, kbroker.bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
    assert sorted(bytes(r.value).decode() for r in committed.collect()) == [f"committed-{i}" for i in range(3)]
    everything = reader(spark, kbroker.bootstrap, subscribe=topic)
    assert sorted(bytes(r.value).decode() for r in everything.collect()) == sorted(
        [f"aborted-{i}" for i in range(3)] + [f"committed-{i}" for i in range(3)])
