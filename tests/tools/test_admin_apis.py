"""The admin API handlers over the wire, with kafka-python's KafkaAdminClient and raw requests.

Covers what the CLI tests do not pin down: each DescribeConfigs version's shape (v0
``is_default``, v1 sources and synonyms, v3 types and documentation), AlterConfigs
replacing the whole override set, IncrementalAlterConfigs APPEND/SUBTRACT/DELETE and their
errors, CreatePartitions assignments, DeleteRecords and what a consumer sees afterwards,
DescribeLogDirs sizes, ElectLeaders answers, and that configs persist across a restart.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, KafkaAdminClient
from kafka.errors import OffsetOutOfRangeError
from kafka.protocol.admin import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
)
from kafka.structs import TopicPartition

pytestmark = pytest.mark.timeout(120)

TOPIC, BROKER = 2, 4


def send(admin: KafkaAdminClient, req: Any, node_id: int | None = 0) -> Any:
    async def _send() -> Any:
        return await admin._manager.send(req, node_id=node_id)

    return admin._manager.run(_send)


@pytest.fixture
def admin(broker: Any) -> Any:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield a
    a.close()


def _configs(resp: Any) -> dict[str, Any]:
    [res] = resp.results
    assert res.error_code == 0, res.error_message
    return {c.name: c for c in res.configs}


def test_describe_configs_versions(admin: Any) -> None:
    admin.create_topics({"dc": {"num_partitions": 1, "replication_factor": 1,
                                "configs": {"retention.ms": "1000", "cleanup.policy": "compact"}}})
    for version in (0, 1, 2, 3, 4):
        req = DescribeConfigsRequest(resources=[(TOPIC, "dc", None)], include_synonyms=version >= 1,
                                     include_documentation=version >= 3, min_version=version, max_version=version)
        resp = send(admin, req)
        assert resp.API_VERSION == version
        cfg = _configs(resp)
        assert cfg["retention.ms"].value == "1000" and cfg["segment.bytes"].value == "1073741824"
        if version == 0:
            assert cfg["retention.ms"].is_default is False and cfg["segment.bytes"].is_default is True
        else:
            assert cfg["retention.ms"].config_source == 1  # DYNAMIC_TOPIC_CONFIG
            assert cfg["segment.bytes"].config_source == 5  # DEFAULT_CONFIG
            syn = [(s.name, s.value, s.source) for s in cfg["retention.ms"].synonyms]
            assert syn[0] == ("retention.ms", "1000", 1)
            assert syn[-1] == ("log.retention.hours", "168", 5)
        if version >= 3:
            assert cfg["cleanup.policy"].config_type == 7  # LIST
            assert cfg["retention.ms"].config_type == 5  # LONG
            assert "tombstone" in cfg["delete.retention.ms"].documentation
    # Specific keys only; unknown topic is a per-resource error.
    resp = send(admin, DescribeConfigsRequest(resources=[(TOPIC, "dc", ["cleanup.policy"]),
                                                         (TOPIC, "nope", None)]))
    assert [c.name for c in resp.results[0].configs] == ["cleanup.policy"]
    assert resp.results[1].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    # Broker: static overrides show as STATIC_BROKER_CONFIG, others as defaults, non-dynamic read-only.
    cfg = _configs(send(admin, DescribeConfigsRequest(resources=[(BROKER, "0", None)], include_synonyms=True)))
    assert cfg["group.initial.rebalance.delay.ms"].config_source == 4 and \
        cfg["group.initial.rebalance.delay.ms"].value == "0"
    assert cfg["log.dirs"].read_only and not cfg["log.retention.ms"].read_only
    assert send(admin, DescribeConfigsRequest(resources=[(BROKER, "7", None)])).results[0].error_code == 42


def test_alter_configs_replaces_whole_set(admin: Any) -> None:
    admin.create_topics({"ac": {"num_partitions": 1, "replication_factor": 1,
                                "configs": {"retention.ms": "1000", "segment.ms": "60000"}}})
    resp = send(admin, AlterConfigsRequest(resources=[(TOPIC, "ac", [("retention.bytes", "1048576")])],
                                           validate_only=False))
    assert resp.responses[0].error_code == 0
    got = admin.describe_configs([ConfigResource("topic", "ac")])["topic"]["ac"]
    assert {k: v["value"] for k, v in got.items()} == {"retention.bytes": "1048576"}
    # One bad entry rejects the whole resource: nothing changes.
    resp = send(admin, AlterConfigsRequest(resources=[(TOPIC, "ac", [("retention.bytes", "5"),
                                                                     ("segment.bytes", "10")])], validate_only=False))
    assert resp.responses[0].error_code == 40 and "segment.bytes" in resp.responses[0].error_message
    assert "at least 14" in resp.responses[0].error_message
    got = admin.describe_configs([ConfigResource("topic", "ac")])["topic"]["ac"]
    assert got["retention.bytes"]["value"] == "1048576"
    # validate_only checks without applying.
    resp = send(admin, AlterConfigsRequest(resources=[(TOPIC, "ac", [])], validate_only=True))
    assert resp.responses[0].error_code == 0
    assert admin.describe_configs([ConfigResource("topic", "ac")])["topic"]["ac"]


def test_incremental_alter_configs_ops(admin: Any) -> None:
    admin.create_topics({"ia": {"num_partitions": 1, "replication_factor": 1}})

    def alter(*entries: tuple[str, int, str | None], validate_only: bool = False) -> Any:
        resp = send(admin, IncrementalAlterConfigsRequest(resources=[(TOPIC, "ia", list(entries))],
                                                          validate_only=validate_only))
        return resp.responses[0]

    def current() -> dict[str, str]:
        got = admin.describe_configs([ConfigResource("topic", "ia")])["topic"]["ia"]
        return {k: v["value"] for k, v in got.items()}

    assert alter(("cleanup.policy", 2, "compact")).error_code == 0  # APPEND to the default "delete"
    assert current() == {"cleanup.policy": "delete,compact"}
    assert alter(("cleanup.policy", 3, "delete")).error_code == 0  # SUBTRACT
    assert current() == {"cleanup.policy": "compact"}
    # SUBTRACT of the last policy leaves an empty list, which Kafka accepts (kept: neither
    # deleted nor compacted) and describes as an empty value (issue 14 item 4)
    assert alter(("cleanup.policy", 3, "compact")).error_code == 0
    assert current() == {"cleanup.policy": ""}
    r = alter(("cleanup.policy", 2, "shred"))
    assert r.error_code == 40 and "compact, delete" in r.error_message
    r = alter(("retention.ms", 2, "5"))
    assert r.error_code == 40 and "append is not allowed" in r.error_message
    r = alter(("retention.ms", 0, "-2"))
    assert r.error_code == 40 and "at least -1" in r.error_message
    r = alter(("message.timestamp.type", 0, "Wallclock"))
    assert r.error_code == 40 and "CreateTime, LogAppendTime" in r.error_message
    r = alter(("compression.type", 0, "brotli"))
    assert r.error_code == 40
    r = alter(("retention.ms", 0, "1"), ("retention.ms", 1, None))
    assert r.error_code == 42
    assert alter(("retention.ms", 0, "123"), validate_only=True).error_code == 0
    assert "retention.ms" not in current()
    assert alter(("retention.ms", 0, "123"), ("min.insync.replicas", 0, "1")).error_code == 0
    assert alter(("cleanup.policy", 1, None)).error_code == 0  # DELETE: back to the default
    assert current() == {"retention.ms": "123", "min.insync.replicas": "1"}


def test_configs_persist_and_apply_after_restart(broker: Any) -> None:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        a.create_topics({"pz": {"num_partitions": 1, "replication_factor": 1}})
        a.alter_configs([ConfigResource("topic", "pz", {"max.message.bytes": "100"})])
        a.alter_configs([ConfigResource("broker", "0", {"log.retention.bytes": "999999"})])
    finally:
        a.close()
    broker.restart()
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        t = a.describe_configs([ConfigResource("topic", "pz")], config_filter="all")["topic"]["pz"]
        assert t["max.message.bytes"]["value"] == "100"
        assert t["retention.bytes"]["value"] == "999999"
        assert t["retention.bytes"]["config_source"] == "DYNAMIC_BROKER_CONFIG"
    finally:
        a.close()
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0)
    try:
        with pytest.raises(Exception, match="MessageSizeTooLarge|RecordTooLarge|too large"):
            p.send("pz", b"x" * 500).get(timeout=10)
        assert p.send("pz", b"x" * 10).get(timeout=10).offset == 0
    finally:
        p.close()


def test_create_partitions(admin: Any) -> None:
    admin.create_topics({"cp": {"num_partitions": 2, "replication_factor": 1}})
    resp = send(admin, CreatePartitionsRequest(topics=[("cp", 4, [[0], [0]]), ("missing", 3, None)],
                                               timeout_ms=5000, validate_only=False))
    assert [(r.name, r.error_code) for r in resp.results] == [("cp", 0), ("missing", 3)]
    resp = send(admin, CreatePartitionsRequest(topics=[("cp", 6, [[0]]), ], timeout_ms=5000, validate_only=False))
    assert resp.results[0].error_code == 39  # one assignment for two new partitions
    resp = send(admin, CreatePartitionsRequest(topics=[("cp", 5, [[3]])], timeout_ms=5000, validate_only=False))
    assert resp.results[0].error_code == 39  # broker 3 does not exist
    resp = send(admin, CreatePartitionsRequest(topics=[("cp", 8, None)], timeout_ms=5000, validate_only=True))
    assert resp.results[0].error_code == 0
    [t] = admin.describe_topics(["cp"])
    assert len(t["partitions"]) == 4
    resp = send(admin, CreatePartitionsRequest(topics=[("cp", 3, None)], timeout_ms=5000, validate_only=False))
    assert resp.results[0].error_code == 37 and resp.results[0].error_message == \
        "The topic cp currently has 4 partition(s); 3 would not be an increase."
    # The new partitions work.
    p = KafkaProducer(bootstrap_servers=admin.config["bootstrap_servers"])
    md = p.send("cp", b"v", partition=3).get(timeout=10)
    p.close()
    assert (md.partition, md.offset) == (3, 0)


def test_delete_records_and_consumers(broker: Any, admin: Any) -> None:
    admin.create_topics({"dr": {"num_partitions": 1, "replication_factor": 1,
                                "configs": {"segment.bytes": "500"}}})
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    for i in range(100):  # one batch per request: a batch may not exceed segment.bytes
        p.send("dr", b"%03d" % i + b"." * 20).get(timeout=10)
    p.close()
    tp = TopicPartition("dr", 0)
    res = admin.delete_records({tp: 40})
    assert res[tp]["low_watermark"] == 40
    res = admin.delete_records({tp: 10})  # below the start: no-op
    assert res[tp]["low_watermark"] == 40
    with pytest.raises(OffsetOutOfRangeError):
        admin.delete_records({tp: 101})
    # Whole segments below the new start are gone from disk.
    seg_bases = sorted(int(f.name.split(".")[0]) for f in (broker.data_dir / "dr-0").glob("*.log"))
    assert seg_bases[0] <= 40 and (len(seg_bases) == 1 or seg_bases[1] > 40)
    # A consumer that asks for an offset below the start gets OFFSET_OUT_OF_RANGE and resets.
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([tp])
    c.seek(tp, 5)
    got = []
    for _ in range(50):
        for recs in c.poll(timeout_ms=200).values():
            got.extend(r.offset for r in recs)
        if len(got) >= 60:
            break
    c.close()
    assert got[0] == 40 and got[-1] == 99
    strict = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none", enable_auto_commit=False)
    strict.assign([tp])
    strict.seek(tp, 5)
    with pytest.raises(Exception, match="OffsetOutOfRange|NoOffsetForPartition"):
        for _ in range(50):
            strict.poll(timeout_ms=200)
    strict.close()
    assert admin.delete_records({tp: -1})[tp]["low_watermark"] == 100


def test_describe_log_dirs_and_elect_leaders(broker: Any, admin: Any) -> None:
    admin.create_topics({"ld": {"num_partitions": 2, "replication_factor": 1}})
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    p.send("ld", b"x" * 1000, partition=1).get(timeout=10)
    p.close()
    resp = send(admin, DescribeLogDirsRequest(topics=None))
    [d] = resp.results
    assert d.error_code == 0 and d.log_dir == str(broker.data_dir)
    sizes = {(t.name, p.partition_index): p.partition_size for t in d.topics for p in t.partitions}
    assert sizes[("ld", 0)] == 0 and sizes[("ld", 1)] > 1000
    if resp.API_VERSION >= 4:
        assert d.total_bytes > 0 and 0 <= d.usable_bytes <= d.total_bytes
    resp = send(admin, DescribeLogDirsRequest(topics=[("ld", [1])]))
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in resp.results[0].topics] == [("ld", [1])]

    resp = send(admin, ElectLeadersRequest(election_type=0, topic_partitions=[("ld", [0, 1, 7])], timeout_ms=5000))
    [r] = resp.replica_election_results
    assert [(x.partition_id, x.error_code) for x in r.partition_result] == [(0, 84), (1, 84), (7, 3)]
    resp = send(admin, ElectLeadersRequest(election_type=1, topic_partitions=None, timeout_ms=5000))
    assert resp.replica_election_results == []
