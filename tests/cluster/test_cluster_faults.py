"""Faults a cluster must ride out: rolling restarts by controlled shutdown, a broker frozen past
its ZooKeeper session, ZooKeeper itself going away for a while, an offline partition with
unclean election off and on, topic deletion on every replica, and a whole-cluster restart."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.support.cluster import SamsaCluster
from tests.support.replicas import (
    assert_replicas_identical,
    create_topic,
    partitions,
    wait_for,
    wait_full_isr,
)

quiet = logging.getLogger("samsa.tests.faults")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


class Writer:
    """A confluent-kafka producer with the client's default retries, writing until stopped."""

    def __init__(self, bootstrap: str, topic: str, **conf: Any) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": quiet, **conf})
        self.topic = topic
        self.acked: list[tuple[bytes, int, int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _cb(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.append((msg.value(), msg.partition(), msg.offset()))
        else:
            self.errors.append(f"{msg.value()!r}: {err}")

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, value=b"w-%d" % i, on_delivery=self._cb)
                i += 1
            except BufferError:
                self.producer.poll(0.1)
                continue
            self.producer.poll(0)
            if i % 50 == 0:
                time.sleep(0.02)
        self.producer.flush(120)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(180)


def read_all(bootstrap: str, topic: str, parts: int) -> dict[bytes, list[tuple[int, int]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "logger": quiet})
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    where: dict[bytes, list[tuple[int, int]]] = {}
    idle = time.monotonic()
    while time.monotonic() - idle < 6:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        idle = time.monotonic()
        where.setdefault(m.value(), []).append((m.partition(), m.offset()))
    c.close()
    return where


def assert_all_acked_present(w: Writer, where: dict[bytes, list[tuple[int, int]]]) -> None:
    missing = [(v, p, o) for v, p, o in w.acked if (p, o) not in where.get(v, [])]
    assert not missing, f"{len(missing)} acknowledged messages missing, e.g. {missing[:5]}"


def test_rolling_restart_by_controlled_shutdown_shows_clients_no_error(cluster3: SamsaCluster) -> None:
    topic = f"roll-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 3, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster3, topic, 3)
    with Writer(cluster3.bootstrap, topic, acks="all", **{"enable.idempotence": True}) as w:
        for b in range(3):
            time.sleep(1)
            cluster3.stop(b)  # SIGTERM: ControlledShutdown moves its leaderships first
            assert not w.errors, w.errors[:5]
            cluster3.restart(b)
            wait_full_isr(cluster3, topic, 3, timeout=90)
        time.sleep(1)
    assert not w.errors, w.errors[:5]
    assert len(w.acked) > 500
    assert_all_acked_present(w, read_all(cluster3.bootstrap, topic, 3))


def test_broker_frozen_past_its_session_leaves_the_isr_and_rejoins(cluster3: SamsaCluster) -> None:
    topic = f"frz-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 1, 3, {"min.insync.replicas": "2"})
    ps = wait_full_isr(cluster3, topic, 3)
    victim = ps[0].leader
    # a frozen broker never answers: the client's request.timeout.ms (librdkafka: 30 s) bounds how
    # long an in-flight batch waits before it is retried on the new leader
    with Writer(cluster3.bootstrap, topic, acks="all", **{"enable.idempotence": True,
                                                          "message.timeout.ms": 120000,
                                                          "request.timeout.ms": 10000}) as w:
        time.sleep(1)
        cluster3.pause(victim)  # SIGSTOP: its ZooKeeper session expires (6 s) while it is frozen
        wait_for(lambda: (lambda p: p if p.leader not in (victim, -1) and victim not in p.isrs else None)(
            partitions(cluster3, topic)[0]), 60, "leadership and ISR to move off the frozen broker")
        n = len(w.acked)
        wait_for(lambda: len(w.acked) > n + 100, 90, "producing to continue on the new leader")
        cluster3.resume(victim)
        wait_full_isr(cluster3, topic, 3, timeout=90)
    assert not w.errors, w.errors[:5]
    assert_all_acked_present(w, read_all(cluster3.bootstrap, topic, 1))
    assert_replicas_identical(cluster3, topic, 1, {0: list(partitions(cluster3, topic)[0].replicas)}, timeout=60)


def test_zookeeper_outage_loses_nothing(cluster_factory: Callable[..., SamsaCluster]) -> None:
    cluster = cluster_factory(3, own_zookeeper=True)
    cluster.wait_for_brokers(3)
    topic = f"zko-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, 3, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster, topic, 3)
    with Writer(cluster.bootstrap, topic, acks="all") as w:
        time.sleep(1)
        cluster.zookeeper.stop()
        n = len(w.acked)
        wait_for(lambda: len(w.acked) > n + 200, 30, "brokers to keep serving without ZooKeeper")
        time.sleep(2)
        cluster.zookeeper.start()
        time.sleep(3)
        n = len(w.acked)
        wait_for(lambda: len(w.acked) > n + 200, 60, "producing to go on once ZooKeeper is back")
    assert not w.errors, w.errors[:5]
    assert_all_acked_present(w, read_all(cluster.bootstrap, topic, 3))
    wait_full_isr(cluster, topic, 3, timeout=60)
    assert cluster.metadata(0, []).controller_id in (0, 1, 2)


def _samsa(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=120)


def _create_assigned(cluster: SamsaCluster, topic: str, assignment: str, config: str) -> None:
    r = _samsa("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic,
               "--replica-assignment", assignment, "--config", config)
    assert r.returncode == 0, r.stdout + r.stderr


def test_offline_partition_with_unclean_election_off_then_elected_unclean(cluster3: SamsaCluster) -> None:
    topic = f"uncl-{uuid.uuid4().hex[:6]}"
    _create_assigned(cluster3, topic, "0:1", "min.insync.replicas=1")
    wait_full_isr(cluster3, topic, 2)
    cluster3.kill(1)  # the follower goes; the leader writes on alone (ISR [0])
    wait_for(lambda: list(partitions(cluster3, topic)[0].isrs) == [0], 60, "ISR to shrink to the leader")
    p = Producer({"bootstrap.servers": cluster3.bootstrap, "acks": "all", "logger": quiet})
    p.produce(topic, b"only-on-0")
    assert p.flush(30) == 0
    cluster3.kill(0)
    cluster3.restart(1)
    wait_for(lambda: sorted(b.node_id for b in cluster3.metadata(1, []).brokers) == [1, 2], 60,
             "broker 1 to know the live brokers")
    # no in-sync replica alive: offline (leader -1), clients get LEADER_NOT_AVAILABLE
    pm = wait_for(lambda: (lambda x: x if x.leader == -1 else None)(partitions(cluster3, topic)[0]), 60,
                  "the partition to be reported offline")
    assert pm.leader == -1
    out = _samsa("topics", "--bootstrap-server", cluster3[1].bootstrap, "--describe", "--topic", topic,
                 "--unavailable-partitions")
    assert topic in out.stdout, out.stdout + out.stderr
    # an operator accepts the loss: UNCLEAN election brings the out-of-sync replica in
    r = _samsa("leader-election", "--bootstrap-server", cluster3[1].bootstrap, "--election-type", "UNCLEAN",
               "--topic", topic, "--partition", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    pm = wait_for(lambda: (lambda x: x if x.leader == 1 else None)(partitions(cluster3, topic)[0]), 60,
                  "broker 1 to lead after the unclean election")
    p.produce(topic, b"after-unclean")
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": cluster3.bootstrap, "group.id": "u", "logger": quiet})
    c.assign([TopicPartition(topic, 0, 0)])
    got = [m.value() for m in (c.poll(2) for _ in range(3)) if m is not None and not m.error()]
    c.close()
    # what only broker 0 had is gone, as Kafka warns an unclean election may do
    assert got == [b"after-unclean"], got
    cluster3.restart(0)  # it truncates to the new leader's log and follows again
    wait_full_isr(cluster3, topic, 2, timeout=90)
    assert_replicas_identical(cluster3, topic, 1, {0: [0, 1]}, timeout=60)


def test_unclean_election_enabled_brings_an_out_of_sync_replica_back(cluster3: SamsaCluster) -> None:
    topic = f"unon-{uuid.uuid4().hex[:6]}"
    _create_assigned(cluster3, topic, "2:0", "unclean.leader.election.enable=true")
    wait_full_isr(cluster3, topic, 2)
    cluster3.kill(0)
    wait_for(lambda: list(partitions(cluster3, topic)[0].isrs) == [2], 60, "ISR to shrink to the leader")
    cluster3.kill(2)
    cluster3.restart(0)
    wait_for(lambda: partitions(cluster3, topic)[0].leader == 0, 60, "the unclean election of broker 0")


def test_topic_deletion_removes_every_replica(cluster3: SamsaCluster) -> None:
    topic = f"del-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 3, 3)
    wait_full_isr(cluster3, topic, 3)
    p = Producer({"bootstrap.servers": cluster3.bootstrap, "logger": quiet})
    for i in range(30):
        p.produce(topic, b"x%d" % i, partition=i % 3)
    p.flush(30)
    dirs = [cluster3[b].data_dir / f"{topic}-{i}" for b in range(3) for i in range(3)]
    assert all(d.exists() for d in dirs)
    a = AdminClient({"bootstrap.servers": cluster3.bootstrap, "logger": quiet})
    [f.result(30) for f in a.delete_topics([topic]).values()]
    wait_for(lambda: not any(d.exists() for d in dirs), 60, "every replica's directory to go")
    wait_for(lambda: all(topic not in {t.name for t in cluster3.metadata(i).topics} for i in range(3)), 30,
             "the topic to leave every broker's Metadata")


def test_whole_cluster_restart_keeps_everything(cluster_factory: Callable[..., SamsaCluster], tmp_path: Path) -> None:
    cluster = cluster_factory(3)
    cluster.wait_for_brokers(3)
    topic = f"all-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, 3, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster, topic, 3)
    with Writer(cluster.bootstrap, topic, acks="all", **{"enable.idempotence": True}) as w:
        wait_for(lambda: len(w.acked) > 300, 30, "some writes")
    for i in range(3):
        cluster.stop(i)
    for i in range(3):
        cluster.restart(i)
    cluster.wait_for_brokers(3)
    wait_full_isr(cluster, topic, 3, timeout=90)
    assert_all_acked_present(w, read_all(cluster.bootstrap, topic, 3))


def test_isr_change_with_zookeeper_hung_does_not_stall_the_leader(
        cluster_factory: Callable[..., SamsaCluster]) -> None:
    """A leader's ISR write goes to ZooKeeper off the event loop: with ZooKeeper hung (SIGSTOP,
    sockets open, so the write neither succeeds nor fails until the session's read timeout, 20 s
    here) the leader still answers produce requests while its ISR shrink is in flight."""
    cluster = cluster_factory(3, own_zookeeper=True, overrides={"zookeeper.session.timeout.ms": 30000,
                                                                 "replica.lag.time.max.ms": 2000})
    cluster.wait_for_brokers(3)
    topic = f"zkh-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, 1, 3)
    p0 = wait_full_isr(cluster, topic, 3)[0]
    leader = p0.leader
    follower = next(r for r in p0.replicas if r != leader)
    lb = cluster.brokers[leader]
    producer = Producer({"bootstrap.servers": lb.bootstrap, "acks": "1", "linger.ms": 0, "logger": quiet,
                         "message.timeout.ms": 60000})
    producer.produce(topic, b"before")
    assert producer.flush(30) == 0
    cluster.zookeeper.pause()
    try:
        cluster.pause(follower)
        wait_for(lambda: f"[Partition {topic}-0 broker={leader}] Shrinking ISR" in lb.log_text(), 30,
                 "the leader to start shrinking the ISR")
        acked: list[Any] = []
        producer.produce(topic, b"during", on_delivery=lambda err, m: acked.append(err))
        deadline = time.monotonic() + 10  # half the hung write's read timeout
        while not acked and time.monotonic() < deadline:
            producer.poll(0.1)
        assert acked == [None], "the leader did not answer a produce while its ISR write to ZooKeeper hung"
    finally:
        cluster.zookeeper.resume()
        cluster.resume(follower)
    wait_full_isr(cluster, topic, 3, timeout=90)
