"""Fetch's KIP-320 leader-epoch check after a real leader change (issue 14 item 1).

A consumer that still believes in the old leader epoch gets FENCED_LEADER_EPOCH from the new
leader, one from the future gets UNKNOWN_LEADER_EPOCH; both partitions carry empty (never
null) records, so librdkafka can parse the response and refresh its metadata."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from kafka.protocol.consumer import FetchRequest, FetchResponse

from tests.support.cluster import SamsaCluster
from tests.support.rawclient import RawClient
from tests.support.replicas import create_topic, partitions, wait_for, wait_full_isr

FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75


def _fetch(raw: RawClient, topic: str, epoch: int) -> tuple[int, bytes | None]:
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(topic=topic, partitions=[T.FetchPartition(
                           partition=0, current_leader_epoch=epoch, fetch_offset=0, last_fetched_epoch=-1,
                           log_start_offset=-1, partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    resp = raw.roundtrip(req, 12, FetchResponse)
    p = resp.responses[0].partitions[0]
    return p.error_code, p.records


def test_stale_and_future_leader_epochs_after_failover(cluster3: SamsaCluster) -> None:
    topic = f"epoch-{uuid.uuid4().hex[:8]}"
    create_topic(cluster3, topic, 1, 3)
    old_leader = wait_full_isr(cluster3, topic, 3)[0].leader
    p = Producer({"bootstrap.servers": cluster3.bootstrap, "acks": "all"})
    p.produce(topic, b"v", partition=0)
    assert p.flush(30) == 0
    cluster3.kill(old_leader)
    # (a tuple: broker 0 is a valid leader but a falsy value for wait_for)
    (new_leader,) = wait_for(lambda: (lambda ps: (ps[0].leader,) if ps and ps[0].leader not in (-1, old_leader)
                                      else None)(partitions(cluster3, topic)), 60, "a new leader")
    b = cluster3[new_leader]
    with RawClient(b.host, b.port) as raw:
        code, records = wait_for(lambda: (lambda r: r if r[0] == FENCED_LEADER_EPOCH else None)(
            _fetch(raw, topic, 0)), 30, "the new leader to fence epoch 0")
        assert records is not None and bytes(records) == b""
        code, records = _fetch(raw, topic, 1000)
        assert code == UNKNOWN_LEADER_EPOCH and records is not None and bytes(records) == b""
        # the new leader's high watermark moves past the record once a follower fetches from it
        code, records = wait_for(lambda: (lambda r: r if r[0] == 0 and r[1] else None)(_fetch(raw, topic, -1)),
                                 30, "the record to be readable from the new leader")
        assert code == 0 and records
    cluster3.restart(old_leader)
