"""Stock admin tools against a live broker: kafka-python's ``python -m kafka.admin`` CLI, kcat
``-L``, confluent-kafka's AdminClient, and our ``samsa`` CLI, on the same topics.

Each tool creates, describes, alters and deletes topics, partitions and configs, and the
others must see the result: a config altered through one tool is described identically by
the rest and takes effect on the data path (``max.message.bytes`` refuses a large record;
``retention.bytes`` deletes old segments). The Java AdminClient has its own module,
test_admin_java.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from typing import Any

import pytest

pytestmark = pytest.mark.timeout(240)


def run(*cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def kpy(bootstrap: str, *args: str) -> Any:
    """kafka-python's admin CLI with JSON output."""
    out = run(sys.executable, "-m", "kafka.admin", "-b", bootstrap, "--format", "json", *args).stdout
    return json.loads(out) if out.strip() else None


def samsa_json(*args: str) -> Any:
    return json.loads(run(sys.executable, "-m", "broker.cli", *args, "--json").stdout)


def kcat_metadata(bootstrap: str) -> dict[str, int]:
    if shutil.which("kcat") is None:
        pytest.skip("kcat not installed")
    doc = json.loads(run("kcat", "-b", bootstrap, "-L", "-J").stdout)
    return {t["topic"]: len(t["partitions"]) for t in doc["topics"]}


def confluent_admin(bootstrap: str) -> Any:
    ck = pytest.importorskip("confluent_kafka.admin")
    return ck.AdminClient({"bootstrap.servers": bootstrap})


def wait_for(cond: Any, timeout: float = 30, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_kafka_python_admin_cli(broker: Any) -> None:
    b = broker.bootstrap
    kpy(b, "topics", "create", "-t", "kp-topic", "--num-partitions", "2", "--replication-factor", "1")
    assert "kp-topic" in kpy(b, "topics", "list")
    [t] = kpy(b, "topics", "describe", "-t", "kp-topic")
    assert len(t["partitions"]) == 2
    kpy(b, "configs", "alter", "-r", "topic", "-n", "kp-topic", "-c", "retention.ms=3600000",
        "-c", "cleanup.policy=compact")
    got = kpy(b, "configs", "describe", "-r", "topic", "-n", "kp-topic", "--modified")
    assert {k: v["value"] for k, v in got["topic"]["kp-topic"].items()} == \
        {"retention.ms": "3600000", "cleanup.policy": "compact"}
    # the forced legacy AlterConfigs path (the CLI first reads the current overrides)
    kpy(b, "configs", "alter", "-r", "topic", "-n", "kp-topic", "-c", "segment.ms=600000", "--force-alter")
    got = kpy(b, "configs", "describe", "-r", "topic", "-n", "kp-topic", "--modified")
    assert set(got["topic"]["kp-topic"]) == {"retention.ms", "cleanup.policy", "segment.ms"}
    kpy(b, "configs", "reset", "-r", "topic", "-n", "kp-topic", "-c", "segment.ms")
    kpy(b, "partitions", "create", "-p", "kp-topic:4")

    # Seen the same way by our CLI and by kcat.
    [desc] = samsa_json("topics", "--bootstrap-server", b, "--describe", "--topic", "kp-topic")
    assert desc["partition_count"] == 4
    assert desc["configs"] == {"retention.ms": "3600000", "cleanup.policy": "compact"}
    assert kcat_metadata(b)["kp-topic"] == 4

    kpy(b, "topics", "delete", "-t", "kp-topic")
    wait_for(lambda: "kp-topic" not in kcat_metadata(b), what="deletion seen by kcat")


def test_kcat_sees_what_samsa_cli_does(broker: Any) -> None:
    b = broker.bootstrap
    run(sys.executable, "-m", "broker.cli", "topics", "--bootstrap-server", b, "--create", "--topic", "kc",
        "--partitions", "3")
    assert kcat_metadata(b)["kc"] == 3
    run(sys.executable, "-m", "broker.cli", "topics", "--bootstrap-server", b, "--alter", "--topic", "kc",
        "--partitions", "5")
    assert kcat_metadata(b)["kc"] == 5
    # kcat produces and consumes on the new partitions
    subprocess.run(["kcat", "-b", b, "-P", "-t", "kc", "-p", "4"], input="on-partition-4\n", text=True,
                   check=True, timeout=30)
    out = run("kcat", "-b", b, "-C", "-t", "kc", "-p", "4", "-o", "beginning", "-e", "-q").stdout
    assert out.split() == ["on-partition-4"]
    run(sys.executable, "-m", "broker.cli", "topics", "--bootstrap-server", b, "--delete", "--topic", "kc")
    wait_for(lambda: "kc" not in kcat_metadata(b), what="deletion seen by kcat")


def test_confluent_admin_client(broker: Any) -> None:
    from confluent_kafka import KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ConfigSource,
        NewPartitions,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )

    b = broker.bootstrap
    a = confluent_admin(b)
    # validate_only creates nothing; bad configs are refused with INVALID_CONFIG
    fs = a.create_topics([NewTopic("ck", 2, 1, config={"max.message.bytes": "2000"})], validate_only=True)
    fs["ck"].result(10)
    assert "ck" not in a.list_topics(timeout=10).topics
    bad = a.create_topics([NewTopic("ck-bad", 1, 1, config={"cleanup.policy": "shred"})])
    with pytest.raises(KafkaException) as exc:
        bad["ck-bad"].result(10)
    assert exc.value.args[0].name() == "INVALID_CONFIG"
    a.create_topics([NewTopic("ck", 2, 1, config={"max.message.bytes": "2000"})])["ck"].result(10)

    res = ConfigResource(ResourceType.TOPIC, "ck")
    cfg = a.describe_configs([res])[res].result(10)
    assert cfg["max.message.bytes"].value == "2000" and cfg["max.message.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert cfg["segment.bytes"].is_default and cfg["segment.bytes"].value == "1073741824"
    assert cfg["retention.ms"].synonyms  # librdkafka asks for synonyms

    # The limit takes effect on the data path ...
    p = Producer({"bootstrap.servers": b, "message.max.bytes": 10_000_000, "batch.size": 1_000_000})
    errors: list[Any] = []
    p.produce("ck", value=b"x" * 5000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].name() == "MSG_SIZE_TOO_LARGE"
    # ... and an incremental change made here is seen by kafka-python and by samsa, and applies.
    alter = ConfigResource(ResourceType.TOPIC, "ck", incremental_configs=[
        ConfigEntry("max.message.bytes", "100000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    a.incremental_alter_configs([alter])[alter].result(10)
    got = kpy(b, "configs", "describe", "-r", "topic", "-n", "ck", "--modified")["topic"]["ck"]
    assert {k: v["value"] for k, v in got.items()} == {"max.message.bytes": "100000",
                                                      "cleanup.policy": "delete,compact"}
    [desc] = samsa_json("configs", "--bootstrap-server", b, "--describe", "--topic", "ck")
    assert {c["name"]: c["value"] for c in desc["configs"]}["max.message.bytes"] == "100000"
    errors.clear()
    p.produce("ck", key=b"k", value=b"x" * 5000, partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors == [None]
    # a bad incremental value: INVALID_CONFIG, nothing changed
    bad_alter = ConfigResource(ResourceType.TOPIC, "ck", incremental_configs=[
        ConfigEntry("retention.ms", "-7", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        a.incremental_alter_configs([bad_alter])[bad_alter].result(10)
    assert exc.value.args[0].name() == "INVALID_CONFIG"

    # partitions grow, never shrink
    a.create_partitions([NewPartitions("ck", 4)])["ck"].result(10)
    assert len(a.list_topics("ck", timeout=10).topics["ck"].partitions) == 4
    with pytest.raises(KafkaException) as exc:
        a.create_partitions([NewPartitions("ck", 3)])["ck"].result(10)
    assert exc.value.args[0].name() == "INVALID_PARTITIONS"

    # delete records moves the earliest offset that ListOffsets reports
    for i in range(10):
        p.produce("ck", key=b"k%d" % i, value=b"v", partition=1)
    p.flush(10)
    tp = TopicPartition("ck", 1)
    done = a.delete_records([TopicPartition("ck", 1, 6)])[TopicPartition("ck", 1, 6)].result(10)
    assert done.low_watermark == 6
    earliest = a.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10)
    assert earliest.offset == 6
    assert run(sys.executable, "-m", "broker.cli", "get-offsets", "--bootstrap-server", b, "--topic", "ck",
               "--partitions", "1", "--time", "earliest").stdout.split() == ["ck:1:6"]

    cluster = a.describe_cluster().result(10)
    assert [n.id for n in cluster.nodes] == [0]

    a.delete_topics(["ck"])["ck"].result(10)
    wait_for(lambda: "ck" not in a.list_topics(timeout=10).topics, what="deletion")


def test_broker_config_alter_and_retention_effect(broker_factory: Any) -> None:
    """A dynamic broker default set with one tool applies to topics without an override."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

    broker = broker_factory({"log.retention.check.interval.ms": "300"})
    b = broker.bootstrap
    a = confluent_admin(b)
    a.create_topics([NewTopic("rb", 1, 1, config={"segment.bytes": "1000", "file.delete.delay.ms": "0"})])["rb"] \
        .result(10)
    from kafka import KafkaProducer

    prod = KafkaProducer(bootstrap_servers=b)
    for _ in range(60):
        prod.send("rb", value=b"z" * 90).get(timeout=10)
    prod.close()
    assert samsa_json("get-offsets", "--bootstrap-server", b, "--topic", "rb", "--time", "earliest")[0]["offset"] == 0
    res = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry("log.retention.bytes", "2500", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([res])[res].result(10)
    [cfg] = samsa_json("configs", "--bootstrap-server", b, "--describe", "--topic", "rb", "--all")
    rb = {c["name"]: c for c in cfg["configs"]}["retention.bytes"]
    assert rb["value"] == "2500" and rb["source"] == "DYNAMIC_BROKER_CONFIG"
    wait_for(lambda: samsa_json("get-offsets", "--bootstrap-server", b, "--topic", "rb",
                                "--time", "earliest")[0]["offset"] > 30, what="retention by the new default")
    # a topic override wins over the broker default
    kpy(b, "configs", "alter", "-r", "topic", "-n", "rb", "-c", "retention.bytes=-1")
    [cfg] = samsa_json("configs", "--bootstrap-server", b, "--describe", "--topic", "rb", "--all")
    rb = {c["name"]: c for c in cfg["configs"]}["retention.bytes"]
    assert rb["value"] == "-1" and rb["source"] == "DYNAMIC_TOPIC_CONFIG"
