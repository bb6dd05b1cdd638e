"""kcat (librdkafka 2.0.x from Debian) against a live broker.

The topic is auto-created by the producer's metadata request (the broker runs
with ``num.partitions=3``).  ``kcat -P`` sends the workload from stdin with a
tab key delimiter, ``-Z`` (empty value means null), one ``-H`` header and the
codec under test; ``kcat -L -J`` must show the topic with 3 partitions led by
the broker; ``kcat -C -o beginning -e`` reads everything back with CRC
checking on.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.support.workload import (
    CODECS,
    N_MESSAGES,
    PARTITIONS,
    Consumed,
    check_round_trip,
    kcat_message,
    normalise_headers,
    seq_from_key,
    topic_name,
)

pytestmark = pytest.mark.slow

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat not on PATH (Debian: apt-get install kcat)")

# %K / %S print -1 for a null key / value, which tells null from empty.
CONSUME_FORMAT = r"%p\t%o\t%K\t%k\t%S\t%s\t%h\n"


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    proc = subprocess.run([KCAT, *args], input=stdin, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"kcat {' '.join(args)} exited {proc.returncode}\nstdout: {proc.stdout[-3000:]!r}\n"
        f"stderr: {proc.stderr[-5000:].decode(errors='replace')}"
    )
    return proc


def parse_headers(field: bytes) -> list[tuple[str, bytes | None]]:
    if not field:
        return []
    out: list[tuple[str, bytes | None]] = []
    for item in field.split(b","):
        k, _, v = item.partition(b"=")
        out.append((k.decode(), v))
    return out


@needs_kcat
@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(broker_factory, codec: str) -> None:
    broker = broker_factory({"num.partitions": PARTITIONS, "auto.create.topics.enable": "true"})
    topic = topic_name(f"kcat-{codec}")
    sent = [kcat_message(i) for i in range(N_MESSAGES)]
    stdin = b"".join(m.key + b"\t" + (m.value or b"") + b"\n" for m in sent)  # type: ignore[operator]
    kcat(
        "-P",
        "-b",
        broker.bootstrap,
        "-t",
        topic,
        "-K",
        "\t",
        "-Z",
        "-H",
        "src=kcat",
        "-X",
        f"compression.codec={codec}",
        "-X",
        "enable.idempotence=true",
        stdin=stdin,
    )

    meta = json.loads(kcat("-L", "-J", "-b", broker.bootstrap, "-t", topic).stdout)
    assert [b["name"] for b in meta["brokers"]] == [broker.bootstrap], meta["brokers"]
    broker_id = meta["brokers"][0]["id"]
    (t,) = meta["topics"]
    assert t["topic"] == topic and not t.get("error"), t
    assert sorted(p["partition"] for p in t["partitions"]) == list(range(PARTITIONS))
    assert all(p["leader"] == broker_id for p in t["partitions"]), t["partitions"]

    out = kcat(
        "-C",
        "-b",
        broker.bootstrap,
        "-t",
        topic,
        "-o",
        "beginning",
        "-e",
        "-q",
        "-X",
        "check.crcs=true",
        "-f",
        CONSUME_FORMAT,
    ).stdout
    consumed: list[Consumed] = []
    for line in out.splitlines():
        p, o, klen, k, vlen, v, h = line.split(b"\t")
        consumed.append(
            Consumed(
                int(p),
                int(o),
                None if int(klen) == -1 else k,
                None if int(vlen) == -1 else v,
                normalise_headers(parse_headers(h)),
            )
        )
    check_round_trip(consumed, sent, seq_of=seq_from_key)
