"""The Java client, kafka-clients 3.9.1, against a live broker.

compat_tests/java/SamsaCompat.java is compiled with ``javac`` once per session
against the jars from tests/support/jars.py, then run once per codec: it
creates the topic with AdminClient, sends the workload with a default
KafkaProducer (idempotent, acks=all), lists earliest/latest offsets with
AdminClient and reads everything back with an assign/seek KafkaConsumer.  It
only reports; the checks are here.
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

SOURCE = Path(__file__).resolve().parent / "java" / "SamsaCompat.java"
# Small heap, serial GC, C1 only: the JVM shares 2 cores with the broker.
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


@pytest.fixture(scope="session")
def java_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("javac/java not on PATH: install a JDK (Debian: apt-get install openjdk-17-jdk-headless)")
    cp = jars.classpath()
    out = tmp_path_factory.mktemp("java-classes")
    proc = subprocess.run(
        ["javac", "-Xlint:all", "-cp", cp, "-d", str(out), str(SOURCE)],
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
