"""Failover in a 3-broker cluster: partition leaders SIGKILLed and restarted while a
confluent-kafka (librdkafka) idempotent acks=all producer and the Java producer write.

Afterwards every acknowledged message is present exactly once, in send order within its
partition for each producer, on every replica (the replicas' log files hold identical bytes),
and the offline log checker finds every broker's logs clean. ``SAMSA_CLUSTER_SCALE`` multiplies
the number of kills (10 by default)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support import jars
from tests.support import java as java_support
from tests.support.cluster import SamsaCluster
from tests.support.logcheck import assert_log_ok
from tests.support.replicas import assert_replicas_identical, create_topic, partitions, wait_full_isr

SCALE = max(1, int(os.environ.get("SAMSA_CLUSTER_SCALE", "1")))
KILLS = 10 * SCALE
JAVA_DIR = Path(__file__).parent / "java"

quiet = logging.getLogger("samsa.tests.rdkafka")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


@pytest.fixture(scope="module")
def java_classpath(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    if shutil.which("javac") is None or shutil.which("java") is None:
        return None
    try:
        cp = jars.classpath()
    except Exception:
        return None
    out = tmp_path_factory.mktemp("cluster-java")
    java_support.compile_log_binding(out)  # the producer's own log, for the failure message
    proc = subprocess.run(["javac", "-cp", cp, "-d", str(out), *map(str, JAVA_DIR.glob("*.java"))],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return f"{out}{os.pathsep}{cp}"


def _tail(log: Path, lines: int = 150) -> str:
    """The Java producer's warnings and errors and the last of its log (why a record failed)."""
    text = log.read_text(errors="replace").splitlines()
    warn = [ln for ln in text if ln.startswith(("LOG WARN", "LOG ERROR"))]
    return "\n".join(warn[-lines:] + ["-- last lines --"] + text[-lines // 3:])


def consume_all(bootstrap: str, topic: str, parts: int) -> dict[int, list[tuple[int, bytes]]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "logger": quiet})
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(parts)}
    idle = time.monotonic()
    while time.monotonic() - idle < 6:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        idle = time.monotonic()
        out[m.partition()].append((m.offset(), m.value()))
    c.close()
    return out


def test_leaders_killed_and_restarted_lose_nothing_acknowledged(cluster3: SamsaCluster, tmp_path: Path,
                                                                  java_classpath: str | None) -> None:
    topic = f"failover-{uuid.uuid4().hex[:6]}"
    parts = 3
    create_topic(cluster3, topic, parts, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster3, topic, 3)

    acked: list[tuple[bytes, int, int]] = []
    errors: list[str] = []

    def on_delivery(err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.append((msg.value(), msg.partition(), msg.offset()))
        else:
            errors.append(f"{msg.value()!r}: {err}")

    producer = Producer({"bootstrap.servers": cluster3.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 120000, "logger": quiet})
    stop = threading.Event()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, key=b"c%d" % i, value=b"c-%d" % i, on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.1)
                continue
            producer.poll(0)
            if i % 100 == 0:
                time.sleep(0.02)
        producer.flush(120)

    java = None
    stop_file = tmp_path / "stop"
    java_out = tmp_path / "java-acks.tsv"
    java_log = tmp_path / "java-producer.log"
    if java_classpath is not None:
        with java_log.open("w") as log:
            java = subprocess.Popen(["java", *java_support.JVM_FLAGS, "-Dsamsa.log.level=INFO", "-cp", java_classpath,
                                     "ClusterProducer", cluster3.bootstrap, topic, "j", str(stop_file),
                                     str(java_out)], stdout=log, stderr=subprocess.STDOUT)
    t = threading.Thread(target=produce)
    t.start()
    try:
        for k in range(KILLS):
            ps = wait_full_isr(cluster3, topic, 3, timeout=90)
            time.sleep(0.5)
            victim = ps[k % parts].leader
            cluster3.kill(victim)
            time.sleep(1.0)
            cluster3.restart(victim, timeout=90)
        wait_full_isr(cluster3, topic, 3, timeout=90)
        time.sleep(1)
    finally:
        stop.set()
        stop_file.touch()
        t.join(180)
        if java is not None:
            try:
                java.wait(180)
            except subprocess.TimeoutExpired:
                java.kill()
    assert not errors, errors[:5]
    assert len(acked) > 1000, "the confluent producer made progress through the failovers"
    java_acked: list[tuple[bytes, int, int]] = []
    if java is not None:
        assert java.returncode == 0, _tail(java_log)
        lines = java_out.read_text().splitlines()
        java_errors = [ln for ln in lines if ln.startswith("ERR")]
        java_acked = [(f[1].encode(), int(f[2]), int(f[3])) for f in (ln.split("\t") for ln in lines)
                      if f[0] == "ACK"]
        waits: dict[int, int] = {}  # partition -> longest send-to-acknowledgement time, ms
        for f in (ln.split("\t") for ln in lines if ln.startswith("ACK")):
            waits[int(f[2])] = max(waits.get(int(f[2]), 0), int(f[4]))
        assert not java_errors, (f"{len(java_errors)} records failed, first {java_errors[:3]}; longest wait for an "
                                 f"acknowledgement by partition {waits} ms; the producer's log:\n{_tail(java_log)}")
        assert len(java_acked) > 100, "the Java producer made progress through the failovers"

    got = consume_all(cluster3.bootstrap, topic, parts)
    where: dict[bytes, list[tuple[int, int]]] = {}
    for p, recs in got.items():
        offsets = [o for o, _ in recs]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        for o, v in recs:
            where.setdefault(v, []).append((p, o))
    for value, p, o in acked + java_acked:
        assert where.get(value) == [(p, o)], f"{value!r} acknowledged at {p}/{o}, found at {where.get(value)}"
    # idempotence: nothing was written twice, acknowledged or not
    dups = {v: locs for v, locs in where.items() if len(locs) > 1}
    assert not dups, list(dups.items())[:5]
    # per producer and partition, send order is offset order
    for prefix in (b"c-", b"j-"):
        for p, recs in got.items():
            seq = [int(v[len(prefix):]) for _, v in recs if v.startswith(prefix)]
            assert seq == sorted(seq), f"{prefix!r} out of order in partition {p}"

    ps = partitions(cluster3, topic)
    assert_replicas_identical(cluster3, topic, parts, {p: list(m.replicas) for p, m in ps.items()}, timeout=60)
    for b in cluster3.brokers:
        for p in range(parts):
            assert_log_ok(b.data_dir / f"{topic}-{p}", allow_torn_tail=True)
