"""Pipelined acks=all Produce requests on one connection (broker/network/connection.py, DelayedResponse).

While an acks=all Produce waits for the ISR, the leader serves the connection's next requests;
the responses must still leave in request order, each acks=all answer must come only once the
ISR has its records, and the records of the pipelined requests must be appended in request
order. One raw connection sends 23 requests back to back (acks=all and acks=1 Produce,
Metadata) before reading anything.
"""

from __future__ import annotations

import struct
import uuid

from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceResponse

from tests.support.cluster import SamsaCluster
from tests.support.rawclient import RawClient, build_batch, produce_request
from tests.support.replicas import assert_replicas_identical, create_topic, wait_full_isr

PRODUCE_VERSION = 9


def test_pipelined_acks_all_produces_answer_in_order_after_replication(cluster3: SamsaCluster) -> None:
    topic = f"pipe-{uuid.uuid4().hex[:8]}"
    create_topic(cluster3, topic, 1, 3, {"min.insync.replicas": "2"})
    ps = wait_full_isr(cluster3, topic, 3)
    leader = cluster3[ps[0].leader]
    plan: list[tuple[str, object, int, object]] = []  # (kind, request, version, response class)
    for i in range(20):
        acks = 1 if i % 7 == 3 else -1
        batch = build_batch([(b"k%d" % i, b"v%d-%d" % (i, j), []) for j in range(3)])
        plan.append(("produce", produce_request(topic, 0, batch, acks=acks), PRODUCE_VERSION, ProduceResponse))
        if i % 6 == 2:
            md = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
            plan.append(("metadata", md, 1, MetadataResponse))
    with RawClient(leader.host, leader.port, timeout=30) as c:
        wire = b""
        for corr, (_kind, req, version, _cls) in enumerate(plan, start=1):
            req.with_header(correlation_id=corr, client_id="pipelining-test")  # type: ignore[attr-defined]
            wire += req.encode(version=version, header=True, framed=True)  # type: ignore[attr-defined]
        c.send_frame(wire)  # everything in flight before the first response is read
        answers = []
        for _ in plan:
            payload = c.recv_frame()
            answers.append((struct.unpack_from(">i", payload, 0)[0], payload))
        # acks=all was answered only once the ISR had the records: the high watermark is already past them
        _err, hw, records = c.fetch(topic, 0, 0)
    assert hw == 60 and len(records) == 60
    assert [corr for corr, _ in answers] == list(range(1, len(plan) + 1)), "responses left out of request order"
    offsets = []
    for (kind, _req, version, cls), (_corr, payload) in zip(plan, answers, strict=True):
        resp = cls.decode(payload, version=version, header=True)  # type: ignore[attr-defined]
        if kind == "produce":
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == 0, part
            offsets.append(part.base_offset)
        else:
            assert [t.name for t in resp.topics] == [topic]
    assert offsets == [3 * i for i in range(20)], "pipelined batches appended out of order"
    # every acknowledged record is on every replica, in the same order
    assert_replicas_identical(cluster3, topic, 1, {0: list(ps[0].replicas)})
