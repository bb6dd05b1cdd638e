"""Spark's Kafka connector's client calls, made by kafka-clients 3.9.1 directly, against Samsa.

Spark's connector jar cannot be had everywhere, but the Kafka client it drives can: this
test runs tests/spark/java/SparkConnectorCalls.java, which makes exactly the calls that
spark-sql-kafka-0-10 (Spark 4.0) makes — Admin describeTopics/listTopics/listOffsets
(earliest, latest, forTimestamp, both isolation levels), an executor KafkaConsumer
(assign, seek before every poll, position, seekToBeginning/seekToEnd, auto.offset.reset=none,
enable.auto.commit=false, never joining its group) and the sink's default idempotent producer
— and checks every answer against what was produced. Under read_committed it checks what
the connector depends on: listOffsets(latest) is the last stable offset while a transaction
is open, and aborted records and markers are skipped by following the consumer's position.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.java]

SOURCE = Path(__file__).resolve().parent / "java" / "SparkConnectorCalls.java"
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
PARTITIONS = 2
PER_PARTITION = 12


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac/java not on PATH: install a JDK (Debian: apt-get install openjdk-17-jdk-headless)")
    from tests.support import jars

    cp = jars.classpath()
    out = tmp_path_factory.mktemp("spark-connector-classes")
    proc = subprocess.run(["javac", "-Xlint:all", "-cp", cp, "-d", str(out), str(SOURCE)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return os.pathsep.join([str(out), cp])


def test_spark_connector_client_calls(broker: object, classpath: str) -> None:
    topic = f"spark-calls-{uuid.uuid4().hex[:6]}"
    proc = subprocess.run(
        ["java", *JVM_FLAGS, "-cp", classpath, "SparkConnectorCalls", broker.bootstrap,  # type: ignore[attr-defined]
         topic, str(PARTITIONS), str(PER_PARTITION)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"java exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-5000:]}"
    facts: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, _, value = line.partition(" ")
        facts[key] = value
    assert facts.get("done") == "ok", proc.stdout
    assert facts["produce.error"] == "none"
    assert facts["listTopics.contains"] == "true"
    assert facts["describeTopics.partitions"] == str(PARTITIONS)
    assert facts["describeTopics.internal"] == "false"
    for p in range(PARTITIONS):
        for level in ("read_uncommitted", "read_committed"):
            assert facts[f"earliest.{level}.{p}"] == "0"
            assert facts[f"latest.{level}.{p}"] == str(PER_PARTITION)
            assert facts[f"range.{level}.{p}"] == f"0..{PER_PARTITION}"
            # [2, latest-1): every offset once, in order, with key, value, header and timestamp intact
            want = "".join(f"{i}:k{p}-{i}:v{p}-{i}:{i}:{i * 1000}," for i in range(2, PER_PARTITION - 1))
            assert facts[f"read.{level}.{p}"] == want
            assert f"gap.{level}.{p}" not in facts
            assert facts[f"outOfRange.{level}.{p}"] == "OffsetOutOfRangeException"
        # record i has timestamp base + i*1000: exact hit -> 5, between 5 and 6 -> 6, future -> -1
        assert facts[f"forTimestamp.exact.{p}"] == "5"
        assert facts[f"forTimestamp.between.{p}"] == "6"
        assert facts[f"forTimestamp.future.{p}"] == "-1"
    # Transactions: aborted 0-2 + marker 3, committed 4-6 + marker 7, then an open txn at 8-9.
    assert facts["txn.closed.latest.read_uncommitted"] == "8"
    assert facts["txn.closed.latest.read_committed"] == "8"
    assert facts["txn.read.read_uncommitted"] == "0,1,2,4,5,6,"
    assert facts["txn.read.read_committed"] == "4,5,6,"
    assert facts["txn.open.latest.read_uncommitted"] == "10"
    assert facts["txn.open.latest.read_committed"] == "8"  # the last stable offset
