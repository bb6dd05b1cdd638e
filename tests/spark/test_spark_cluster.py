"""Spark's ``samsa-kafka`` source and sink against a 3-broker Samsa cluster (real ZooKeeper),
with a partition leader SIGKILLed while a streaming query runs: the query carries on without a
restart and its output holds every record exactly once."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from tests.support.cluster import SamsaCluster
from tests.support.replicas import partitions, wait_full_isr

pytestmark = [pytest.mark.spark]
FMT = "samsa-kafka"


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SamsaCluster]:
    cluster = SamsaCluster(tmp_path_factory.mktemp("spark-cluster"), 3)
    try:
        cluster.start()
        cluster.wait_for_brokers(3)
        yield cluster
    finally:
        cluster.close()


def _topic(cluster: SamsaCluster) -> str:
    name = f"sc-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.create_topics([NewTopic(name, 2, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    wait_full_isr(cluster, name, 3)
    return name


def _produce(cluster: SamsaCluster, topic: str, start: int, n: int) -> None:
    p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", retries=20, retry_backoff_ms=500)
    try:
        for i in range(start, start + n):
            p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
        p.flush(120)
    finally:
        p.close()


def test_batch_read_and_write_on_a_cluster(spark: Any, spark_cluster: SamsaCluster) -> None:
    topic = _topic(spark_cluster)
    _produce(spark_cluster, topic, 0, 40)
    rows = (spark.read.format(FMT).option("kafka.bootstrap.servers", spark_cluster.bootstrap)
            .option("subscribe", topic).load().collect())
    assert sorted(bytes(r.value) for r in rows) == sorted(f"v{i}".encode() for i in range(40))
    out = _topic(spark_cluster)
    df = spark.createDataFrame([(f"k{i}", f"w{i}") for i in range(30)], "key string, value string")
    df.write.format(FMT).option("kafka.bootstrap.servers", spark_cluster.bootstrap).option("topic", out) \
        .mode("append").save()
    back = (spark.read.format(FMT).option("kafka.bootstrap.servers", spark_cluster.bootstrap)
            .option("subscribe", out).load().collect())
    assert sorted(bytes(r.value) for r in back) == sorted(f"w{i}".encode() for i in range(30))


def test_streaming_query_carries_on_through_a_leader_failover(spark: Any, spark_cluster: SamsaCluster,
                                                              tmp_path: Path) -> None:
    topic = _topic(spark_cluster)
    _produce(spark_cluster, topic, 0, 100)
    df = (spark.readStream.format(FMT).option("kafka.bootstrap.servers", spark_cluster.bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest").load())
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = (df.selectExpr("CAST(value AS STRING) AS value", "partition", "offset").writeStream.format("parquet")
         .option("path", str(out)).option("checkpointLocation", str(ckpt))
         .trigger(processingTime="500 milliseconds").start())

    def count() -> int:
        try:
            return int(spark.read.parquet(str(out)).count())
        except Exception:
            return 0
    try:
        deadline = time.monotonic() + 120
        while count() < 100 and time.monotonic() < deadline:
            time.sleep(1)
        assert count() == 100
        victim = partitions(spark_cluster, topic)[0].leader
        spark_cluster.kill(victim)
        _produce(spark_cluster, topic, 100, 100)
        deadline = time.monotonic() + 180
        while count() < 200 and time.monotonic() < deadline:
            assert q.exception() is None, q.exception()
            time.sleep(1)
        values = sorted(r.value for r in spark.read.parquet(str(out)).select("value").collect())
        assert values == sorted(f"v{i}" for i in range(200)), "every record exactly once"
        assert q.isActive, "the query did not need a restart"
    finally:
        q.stop()
        spark_cluster.ensure_running()
