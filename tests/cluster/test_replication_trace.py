"""The replication trace (broker/replica/trace.py) shows every hop of an acks=all produce.

Three brokers started with ``SAMSA_REPLICATION_TRACE``; one record produced with acks=all to a
partition with RF 3. The merged trace must show, for that record's offset and in causal order:
the Produce frame arriving at the leader, the leader's append, each follower's Fetch reading it
on the leader, each follower appending it, each follower's next Fetch reporting it, the high
watermark passing it, and the Produce response leaving after that.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.producer import ProduceResponse

from tests.cluster.conftest import ClusterFactory
from tests.support.cluster import SamsaCluster
from tests.support.rawclient import RawClient, build_batch, produce_request
from tests.support.replicas import create_topic, wait_full_isr


def _events(directory: Path) -> list[tuple[int, int, str, list[str]]]:
    out = []
    for f in directory.glob("trace-*.log"):
        for line in f.read_text().splitlines():
            ns, pid, name, *fields = line.split()
            out.append((int(ns), int(pid), name, fields))
    return sorted(out)


def test_an_acks_all_produce_is_traced_hop_by_hop(cluster_factory: ClusterFactory, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    trace_dir = tmp_path / "trace"
    monkeypatch.setenv("SAMSA_REPLICATION_TRACE", str(trace_dir))  # the brokers inherit it at start
    cluster: SamsaCluster = cluster_factory(3)
    monkeypatch.delenv("SAMSA_REPLICATION_TRACE")
    cluster.wait_for_brokers(3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic("traced", 1, 3, config={"min.insync.replicas": "2"})]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    delivered = []
    p.produce("traced", b"one record", partition=0, on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p.flush(30) == 0
    assert delivered and delivered[0][0] is None, delivered
    offset = delivered[0][1]
    end = offset + 1
    cluster.shutdown()  # SIGTERM: the brokers flush their traces as they exit
    events = _events(trace_dir)
    names = {e[2] for e in events}
    assert {"in", "out", "append", "read", "fetch", "fsend", "fgot", "fappend", "hw"} <= names, names

    appends = [e for e in events if e[2] == "append" and e[3][:2] == ["traced", "0"] and int(e[3][2]) >= end]
    assert appends, "the leader's append is not in the trace"
    t_append, leader_pid, _n, _f = appends[0]
    followers = {pid for _t, pid, _n, _f in events if pid != leader_pid}
    assert len(followers) == 2, followers

    # the Produce frame arrived at the leader before the append
    assert any(pid == leader_pid and n == "in" and f[0] == "0" and t <= t_append for t, pid, n, f in events)
    reads = [(t, f[2]) for t, pid, n, f in events
             if pid == leader_pid and n == "read" and f[:2] == ["traced", "0"] and int(f[3]) < end <= int(f[4])]
    assert len({r for _t, r in reads}) == 2, f"both followers read the record on the leader: {reads}"
    assert all(t >= t_append for t, _r in reads)
    t_first_read = min(t for t, _r in reads)
    for fpid in followers:
        fapp = [t for t, pid, n, f in events
                if pid == fpid and n == "fappend" and f[:2] == ["traced", "0"] and int(f[2]) >= end]
        assert fapp and fapp[0] > t_first_read, f"follower {fpid} appended it after the leader read it"
    reports = [(t, f[2]) for t, pid, n, f in events
               if pid == leader_pid and n == "fetch" and f[:2] == ["traced", "0"] and int(f[3]) >= end]
    assert len({r for _t, r in reports}) == 2, f"both followers' next Fetch reported it: {reports}"
    t_reported = max(min(t for t, r in reports if r == rid) for rid in {r for _t, r in reports})
    hws = [t for t, pid, n, f in events
           if pid == leader_pid and n == "hw" and f[:2] == ["traced", "0"] and int(f[2]) >= end]
    assert hws and hws[0] >= t_reported, "the high watermark passed the record once both followers had it"
    outs = [t for t, pid, n, f in events if pid == leader_pid and n == "out" and f[0] == "0" and t >= hws[0]]
    assert outs, "the Produce response left after the high watermark moved"



def test_appends_of_one_loop_turn_reach_each_follower_in_one_fetch_response(
        cluster_factory: ClusterFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten acks=all Produce requests written to the leader in one piece are read and appended in
    one loop turn; the followers' parked Fetches are answered at the end of that turn
    (Partition.append), so each follower reads all ten batches in its first read after them,
    not the first batch alone followed by a second round for the other nine."""
    trace_dir = tmp_path / "trace"
    monkeypatch.setenv("SAMSA_REPLICATION_TRACE", str(trace_dir))
    cluster: SamsaCluster = cluster_factory(3)
    monkeypatch.delenv("SAMSA_REPLICATION_TRACE")
    cluster.wait_for_brokers(3)
    create_topic(cluster, "burst", 1, 3, {"min.insync.replicas": "3"})
    leader = cluster[wait_full_isr(cluster, "burst", 3)[0].leader]
    with RawClient(leader.host, leader.port, timeout=30) as c:
        wire = b""
        for corr in range(1, 11):
            req = produce_request("burst", 0, build_batch([(None, b"v%d-%d" % (corr, j), []) for j in range(3)]))
            req.with_header(correlation_id=corr, client_id="burst-test")  # type: ignore[attr-defined]
            wire += req.encode(version=9, header=True, framed=True)  # type: ignore[attr-defined]
        c.send_frame(wire)  # one write: the leader reads all ten requests at once
        for corr in range(1, 11):
            payload = c.recv_frame()
            resp = ProduceResponse.decode(payload, version=9, header=True)  # type: ignore[attr-defined]
            assert struct.unpack_from(">i", payload, 0)[0] == corr
            assert resp.responses[0].partition_responses[0].error_code == 0
    cluster.shutdown()  # SIGTERM: the brokers flush their traces as they exit
    events = _events(trace_dir)
    reads: dict[str, list[tuple[int, int]]] = {}  # follower id -> [(fetch offset, leader's log end)]
    for _t, _pid, name, f in events:
        if name == "read" and f[:2] == ["burst", "0"]:
            reads.setdefault(f[2], []).append((int(f[3]), int(f[4])))
    assert len(reads) == 2, f"both followers read from the leader: {reads}"
    for follower, rows in reads.items():
        assert rows[0] == (0, 30), f"follower {follower}'s first read took {rows[0]}, not all 30 records: {rows}"
