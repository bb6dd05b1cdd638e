"""Requests with nulls where Kafka's schema forbids them, Metadata by topic id, and the log
flood a garbage-sending client could cause (issue 14 item 6).

* kafka-python's encoder writes None as a null (length -1) string/array whatever the schema
  says, exactly as the mutated Java frames did. Kafka's parser refuses such a request ("non-
  nullable field ... was serialized as null"): the connection is closed, no handler runs, so
  the broker logs no ERROR traceback, and other clients are unaffected.
* Metadata v12 asks by topic id (KIP-516); a null name with no or an unknown id gets
  UNKNOWN_TOPIC_ID; v10-11 may not use ids or null names (INVALID_REQUEST).
* Hundreds of connections closed for the same cause log a handful of lines, then a count.
"""

from __future__ import annotations

import logging
import socket
import struct
import uuid
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest

from broker.repeated_warnings import RepeatedWarnings, cause_of
from tests.support.rawclient import RawClient, build_batch

pytestmark = pytest.mark.timeout(180)
UNKNOWN_TOPIC_ID = 100
INVALID_REQUEST = 42


def _closed_without_answer(host: str, port: int, frame: bytes) -> bool:
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(frame)
        try:
            data = s.recv(4)
        except ConnectionResetError:
            return True
        return data == b""


def _hostport(broker: Any) -> tuple[str, int]:
    host, port = broker.bootstrap.split(":")
    return host, int(port)


def _create(broker: Any, *names: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(n, 1, 1) for n in names])
    finally:
        admin.close()


def test_null_non_nullable_fields_close_the_connection(broker: Any) -> None:
    host, port = _hostport(broker)
    _create(broker, "nn-topic")
    with RawClient(host, port) as raw:
        assert raw.produce("nn-topic", 0, build_batch([(b"k", b"v", [])]))[0] == 0
    P = ProduceRequest.TopicProduceData
    cases = {
        "null topic_data": ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=None),
        "null partition_data": ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000,
                                              topic_data=[P(name="nn-topic", partition_data=None)]),
        "null topic name": ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
            P(name=None, partition_data=[P.PartitionProduceData(index=0, records=build_batch([(b"k", b"v", [])]))])]),
    }
    for what, req in cases.items():
        for version in (3, 7, 9, 11):
            req.with_header(correlation_id=7, client_id="nulls")
            frame = bytes(req.encode(version=version, header=True, framed=True))
            assert _closed_without_answer(host, port, frame), (what, version)
    # a nullable null is fine: records=None is answered (INVALID_RECORD-like error), not closed
    ok = ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        P(name="nn-topic", partition_data=[P.PartitionProduceData(index=0, records=None)])])
    with RawClient(host, port) as raw:
        from kafka.protocol.producer import ProduceResponse  # noqa: PLC0415

        resp = raw.roundtrip(ok, 9, ProduceResponse)
        assert resp.responses[0].partition_responses[0].error_code != 0
        # the broker is healthy and nothing was appended by the refused requests
        code, hw, records = raw.fetch("nn-topic", 0, 0)
        assert code == 0 and hw == 1 and len(records) == 1
    text = broker.log_text()
    assert "non-nullable field topic_data was serialized as null" in text
    assert "non-nullable field topic_data[0].partition_data was serialized as null" in text
    assert "Traceback" not in text and " ERROR " not in text


def _metadata(raw: RawClient, version: int, topics: list[tuple[str | None, uuid.UUID | None]]) -> Any:
    T = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(topics=[T(name=n, topic_id=t) for n, t in topics], allow_auto_topic_creation=False,
                          include_cluster_authorized_operations=False, include_topic_authorized_operations=False)
    return raw.roundtrip(req, version, MetadataResponse)


def test_metadata_topics_by_id(broker: Any) -> None:
    host, port = _hostport(broker)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("by-id", 2, 1)])
        (desc,) = admin.describe_topics(["by-id"])
        tid = desc["topic_id"]
        tid = tid if isinstance(tid, uuid.UUID) else uuid.UUID(str(tid))
        # kafka-python's own describe by id (KIP-516 path)
        (by_id,) = admin.describe_topics([tid])
        assert by_id["name"] == "by-id" and len(by_id["partitions"]) == 2
    finally:
        admin.close()
    with RawClient(host, port) as raw:
        r = _metadata(raw, 12, [(None, tid), (None, uuid.uuid4()), (None, None), ("by-id", None)])
        got = [(t.error_code, t.name, t.topic_id, len(t.partitions)) for t in r.topics]
        assert got[0] == (0, "by-id", tid, 2)
        assert got[1][0] == UNKNOWN_TOPIC_ID and got[1][1] is None
        assert got[2][0] == UNKNOWN_TOPIC_ID and got[2][1] is None
        assert got[3] == (0, "by-id", tid, 2)
        for v in (10, 11):
            r = _metadata(raw, v, [("by-id", None), (None, tid)])
            assert [t.error_code for t in r.topics] == [INVALID_REQUEST, INVALID_REQUEST], v
            r = _metadata(raw, v, [("by-id", None)])
            assert r.topics[0].error_code == 0 and r.topics[0].topic_id == tid
    assert "Traceback" not in broker.log_text()


def test_garbage_clients_do_not_flood_the_log(broker: Any) -> None:
    host, port = _hostport(broker)
    # 300 connections, each closed for a non-UTF-8 client_id
    body = struct.pack(">hhih", 18, 0, 1, 2) + b"\xff\xfe"
    frame = struct.pack(">i", len(body)) + body
    for _ in range(300):
        assert _closed_without_answer(host, port, frame)
    _create(broker, "after-flood")
    with RawClient(host, port) as raw:  # still serving
        assert raw.produce("after-flood", 0, build_batch([(None, b"v", [])]))[0] == 0
    lines = [ln for ln in broker.log_text().splitlines() if "client_id is not UTF-8" in ln]
    assert 1 <= len(lines) <= 6, len(lines)
    assert any("summarised once a minute" in ln for ln in broker.log_text().splitlines())


# --- the summariser itself, on a fake clock ------------------------------------------------------

class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_repeated_warnings_count_per_cause_per_window(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    logger = logging.getLogger("test.repeated")
    rw = RepeatedWarnings(logger, window_s=60, burst=3, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.repeated"):
        for i in range(1000):
            rw.warning("client_id is not UTF-8", f"10.0.0.{i % 7}", "Closing connection from %s: %s",
                       f"10.0.0.{i % 7}:{5000 + i}", "client_id is not UTF-8")
        for i in range(10):
            rw.warning(f"invalid frame size {i * 1000}", "10.0.0.9", "Closing: invalid frame size %d", i * 1000)
        first = [r.getMessage() for r in caplog.records]
        # 3 lines + 1 notice per cause; the frame sizes share one cause
        assert len(first) == 8, first
        clock.t += 61
        rw.flush()
        summary = [r.getMessage() for r in caplog.records][8:]
        assert "997 more warnings like 'client_id is not UTF-#' from 7 peers in the last 60 s" in summary
        assert "7 more warnings like 'invalid frame size #' from 1 peers in the last 60 s" in summary
        # a new window starts afresh
        rw.warning("client_id is not UTF-8", "x", "again")
        assert caplog.records[-1].getMessage() == "again"
    assert cause_of("Closing 'abc' from 1.2.3.4:99 size 77") == "Closing # from # size #"
