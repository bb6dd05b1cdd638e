"""Spark's own Kafka connector (`format("kafka")`, spark-sql-kafka-0-10) against a live broker.

These run only when the connector's jars for the installed pyspark are present
(``$SAMSA_SPARK_KAFKA_JARS`` or ``~/.cache/samsa/spark-jars``, see conftest.py); otherwise
each is skipped with the reason. Data is produced and verified with kafka-python directly.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka import TopicPartition as TP
from kafka.admin import KafkaAdminClient
from kafka.errors import IncompatibleBrokerVersion
from spark_jars import CONNECTOR_JARS, requires_connector
from spark_pipeline_scenario import run_scenario
from test_spark_datasource import consume_all, make_topic, produce

pytestmark = [pytest.mark.spark, requires_connector]


def kread(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def kstream(spark: Any, bootstrap: str, **options: str) -> Any:
    r = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def offsets_of(rows: list[Any]) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in rows)


def test_batch_read(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap)
    produce(kbroker.bootstrap, topic, 40)
    rows = kread(spark, kbroker.bootstrap, subscribe=topic).collect()
    log = consume_all(kbroker.bootstrap, topic)
    assert sorted((r.partition, r.offset, bytes(r.key), bytes(r.value)) for r in rows) == sorted(
        (m.partition, m.offset, m.key, m.value) for m in log)
    assert {int(r.timestamp.timestamp() * 1000) for r in rows} == {m.timestamp for m in log}


def test_include_headers(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap)
    produce(kbroker.bootstrap, topic, 10)
    rows = kread(spark, kbroker.bootstrap, subscribe=topic, includeHeaders="true").collect()
    assert sorted((h.key, bytes(h.value)) for r in rows for h in r.headers) == sorted(
        ("seq", str(i).encode()) for i in range(10))


def test_starting_and_ending_offsets_json(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap)
    produce(kbroker.bootstrap, topic, 40)
    rows = kread(spark, kbroker.bootstrap, subscribe=topic,
                 startingOffsets=json.dumps({topic: {"0": 5, "1": -2}}),
                 endingOffsets=json.dumps({topic: {"0": 12, "1": -1}})).collect()
    assert offsets_of(rows) == [(0, o) for o in range(5, 12)] + [(1, o) for o in range(20)]


def test_starting_offsets_by_timestamp(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap, partitions=1)
    base = int(time.time() * 1000) - 100_000
    p = KafkaProducer(bootstrap_servers=kbroker.bootstrap)
    for i in range(10):
        p.send(topic, value=str(i).encode(), partition=0, timestamp_ms=base + i * 1000)
    p.flush()
    p.close()
    rows = kread(spark, kbroker.bootstrap, subscribe=topic,
                 startingOffsetsByTimestamp=json.dumps({topic: {"0": base + 4500}}),
                 endingOffsetsByTimestamp=json.dumps({topic: {"0": base + 8000}})).collect()
    assert offsets_of(rows) == [(0, o) for o in range(5, 8)]


def test_stream_available_now_and_restart_from_checkpoint(spark: Any, kbroker: Any, tmp_path: Path) -> None:
    topic = make_topic(kbroker.bootstrap)
    produce(kbroker.bootstrap, topic, 60)

    def run_once() -> list[int]:
        q = (kstream(spark, kbroker.bootstrap, subscribe=topic, startingOffsets="earliest",
                     maxOffsetsPerTrigger="25")
             .selectExpr("partition", "offset", "CAST(key AS STRING) AS key").writeStream
             .format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
        assert q.awaitTermination(240)
        assert q.exception() is None
        return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]

    first = run_once()
    assert sum(first) == 60 and max(first) <= 25, first
    produce(kbroker.bootstrap, topic, 40, start=60)
    second = run_once()
    assert sum(second) == 40 and max(second) <= 25, second
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert offsets_of(rows) == [(0, o) for o in range(50)] + [(1, o) for o in range(50)]


def test_max_offsets_per_trigger_processing_time(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap)
    produce(kbroker.bootstrap, topic, 90)
    q = (kstream(spark, kbroker.bootstrap, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="20")
         .writeStream.format("memory").queryName("conn_rate").trigger(processingTime="200 milliseconds").start())
    try:
        deadline = time.monotonic() + 180
        while spark.sql("select count(*) c from conn_rate").collect()[0].c < 90:
            assert q.exception() is None and time.monotonic() < deadline
            time.sleep(0.5)
        sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
    assert max(sizes) <= 20 and len(sizes) >= 5, sizes
    assert spark.sql("select count(distinct partition, offset) c from conn_rate").collect()[0].c == 90


def test_stream_write(spark: Any, kbroker: Any, tmp_path: Path) -> None:
    src, dst = make_topic(kbroker.bootstrap), make_topic(kbroker.bootstrap)
    produce(kbroker.bootstrap, src, 30)
    q = (kstream(spark, kbroker.bootstrap, subscribe=src, startingOffsets="earliest", includeHeaders="true")
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value", "headers")
         .writeStream.format("kafka").option("kafka.bootstrap.servers", kbroker.bootstrap)
         .option("topic", dst).option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(240)
    assert q.exception() is None
    log = consume_all(kbroker.bootstrap, dst)
    assert sorted((m.key, m.value, tuple(m.headers)) for m in log) == sorted(
        (f"key-{i}".encode(), f"VALUE-{i}".encode(), (("seq", str(i).encode()),)) for i in range(30))


def test_batch_write(spark: Any, kbroker: Any) -> None:
    topic = make_topic(kbroker.bootstrap)
    df = spark.createDataFrame([(f"k{i}", f"v{i}", i % 2) for i in range(20)], "key string, value string, partition int")
    df.write.format("kafka").option("kafka.bootstrap.servers", kbroker.bootstrap).option("topic", topic).save()
    log = consume_all(kbroker.bootstrap, topic)
    assert sorted((m.partition, m.key, m.value) for m in log) == sorted(
        (i % 2, f"k{i}".encode(), f"v{i}".encode()) for i in range(20))


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
    with pytest.raises(Exception, match="(?i)lost|OffsetOutOfRange|out of range"):
        kread(spark, kbroker.bootstrap, subscribe=topic, startingOffsets=start).collect()
    rows = kread(spark, kbroker.bootstrap, subscribe=topic, startingOffsets=start, failOnDataLoss="false").collect()
    assert offsets_of(rows) == [(0, o) for o in range(10, 20)]


def test_whole_pipeline_on_connector(spark: Any, kbroker: Any, tmp_path: Path) -> None:
    jar_dir = tmp_path / "jars"
    jar_dir.mkdir()
    for j in CONNECTOR_JARS:
        os.symlink(j, jar_dir / os.path.basename(j))
    summary = run_scenario(spark, kbroker.bootstrap, tmp_path, "kafka", env={"SAMSA_SPARK_KAFKA_JARS": str(jar_dir)})
    print(summary)
