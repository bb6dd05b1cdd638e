"""The Java client, kafka-clients 3.9.1, against a live broker.

compat_tests/java/*.java are compiled with ``javac`` once per session against
the jars from tests/support/jars.py.  SamsaCompat runs once per codec: it
creates the topic with AdminClient, sends the workload with a default
KafkaProducer (idempotent, acks=all), lists earliest/latest offsets with
AdminClient and reads everything back with an assign/seek KafkaConsumer.
SamsaSeek seeks into zstd batches over small segments and asks
offsetsForTimes.  The programs only report; the checks are here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import jars
from tests.support.workload import (
    CODECS,
    N_MESSAGES,
    PARTITIONS,
    Consumed,
    Message,
    check_round_trip,
    messages,
    topic_name,
)

pytestmark = [pytest.mark.slow, pytest.mark.java]

JAVA_DIR = Path(__file__).resolve().parent / "java"
# Small heap, serial GC, C1 only: the JVM shares 2 cores with the broker.
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


@pytest.fixture(scope="session")
def java_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac/java not on PATH: install a JDK (Debian: apt-get install openjdk-17-jdk-headless)")
    cp = jars.classpath()
    out = tmp_path_factory.mktemp("java-classes")
    proc = subprocess.run(
        ["javac", "-Xlint:all", "-cp", cp, "-d", str(out), *sorted(str(p) for p in JAVA_DIR.glob("*.java"))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"javac failed:\n{proc.stdout}\n{proc.stderr}"
    return os.pathsep.join([str(out), cp])


def _hex(b: bytes | None) -> str:
    return "-" if b is None else b.hex()


def _unhex(s: str) -> bytes | None:
    return None if s == "-" else bytes.fromhex(s)


def encode_input(msgs: list[Message]) -> str:
    lines = []
    for m in msgs:
        headers = ",".join(f"{k}={_hex(v)}" for k, v in m.headers)
        lines.append(f"{m.seq}\t{_hex(m.key)}\t{_hex(m.value)}\t{headers}")
    return "\n".join(lines) + "\n"


def decode_headers(field: str) -> list[tuple[str, bytes | None]]:
    if not field:
        return []
    out = []
    for item in field.split(","):
        k, _, v = item.partition("=")
        out.append((k, _unhex(v)))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(broker, java_classpath: str, codec: str, tmp_path: Path) -> None:
    topic = topic_name(f"java-{codec}")
    sent = messages(N_MESSAGES)
    infile, outfile = tmp_path / "input.tsv", tmp_path / "output.tsv"
    infile.write_text(encode_input(sent))
    proc = subprocess.run(
        [
            "java",
            *JVM_FLAGS,
            "-cp",
            java_classpath,
            "SamsaCompat",
            broker.bootstrap,
            topic,
            str(PARTITIONS),
            codec,
            str(infile),
            str(outfile),
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, (
        f"java exited {proc.returncode}:\n{proc.stdout[-5000:]}\n{proc.stderr[-10000:]}"
    )

    acks: dict[int, tuple[int, int]] = {}
    earliest: dict[int, int] = {}
    latest: dict[int, int] = {}
    consumed: list[Consumed] = []
    for line in outfile.read_text().splitlines():
        kind, *f = line.split("\t")
        if kind == "ACK":
            acks[int(f[0])] = (int(f[1]), int(f[2]))
        elif kind == "EARLIEST":
            earliest[int(f[0])] = int(f[1])
        elif kind == "LATEST":
            latest[int(f[0])] = int(f[1])
        elif kind == "REC":
            consumed.append(Consumed(int(f[0]), int(f[1]), _unhex(f[2]), _unhex(f[3]), decode_headers(f[4])))
        else:
            raise AssertionError(f"unexpected output line {line!r}")

    assert len(acks) == N_MESSAGES
    assert earliest == {p: 0 for p in range(PARTITIONS)}
    assert sum(latest.values()) == N_MESSAGES, f"latest offsets {latest}"
    assert set(acks.values()) == {(c.partition, c.offset) for c in consumed}
    check_round_trip(consumed, sent)


def test_seek_and_offsets_for_times(broker_factory, java_classpath: str, tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = broker_factory({"log.segment.bytes": 8 * 1024, "log.index.interval.bytes": 256})
    topic = topic_name("java-seek")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        f.result(timeout=30)
    t0, step, n = 1_700_000_000_000, 10, N_MESSAGES
    errors: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "compression.type": "zstd",
            "linger.ms": 5,
            "batch.size": 16 * 1024,
        }
    )
    for i in range(n):
        producer.produce(
            topic,
            value=f"value-{i}".encode(),
            partition=0,
            timestamp=t0 + step * i,
            on_delivery=lambda err, msg: errors.append(str(err)) if err else None,
        )
        producer.poll(0)
    assert producer.flush(60) == 0 and not errors, errors[:5]

    offsets = [0, 1, 17, 999, 1000, 4321, n // 2, n - 2, n - 1]
    times = [t0 - 1, t0, t0 + 1, t0 + step * 1234, t0 + step * 1234 + 5, t0 + step * (n - 1), t0 + step * n]
    outfile = tmp_path / "seek.tsv"
    proc = subprocess.run(
        [
            "java",
            *JVM_FLAGS,
            "-cp",
            java_classpath,
            "SamsaSeek",
            broker.bootstrap,
            topic,
            ",".join(map(str, offsets)),
            ",".join(map(str, times)),
            str(outfile),
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, (
        f"java exited {proc.returncode}:\n{proc.stdout[-5000:]}\n{proc.stderr[-10000:]}"
    )
    lines = [line.split("\t") for line in outfile.read_text().splitlines()]
    seeks = [line[1:] for line in lines if line[0] == "SEEK"]
    assert seeks == [[str(o), str(o), f"value-{o}"] for o in offsets]

    def first_at_or_after(t: int) -> list[str]:
        i = max(0, -(-(t - t0) // step))
        return [str(t), str(i), str(t0 + step * i)] if i < n else [str(t), "-"]

    found = [line[1:] for line in lines if line[0] == "TIME"]
    assert found == [first_at_or_after(t) for t in times]
