"""The replication trace (broker/replica/trace.py) shows every hop of an acks=all produce.

Three brokers started with ``SAMSA_REPLICATION_TRACE``; one record produced with acks=all to a
partition with RF 3. The merged trace must show, for that record's offset and in causal order:
the Produce frame arriving at the leader, the leader's append, each follower's Fetch reading it
on the leader, each follower appending it, each follower's next Fetch reporting it, the high
watermark passing it, and the Produce response leaving after that.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.conftest import ClusterFactory
from tests.support.cluster import SamsaCluster


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

