"""Broker properties that choose how the process serves (once environment variables).

``fetch.sendfile.enable`` sends PLAINTEXT Fetch regions with ``loop.sendfile`` (asyncio's loop;
uvloop has none, so there the broker reads the regions as it does by default): a consumer reads
back exactly what was produced either way.  ``ssl.transport``, ``ssl.read.loop`` and the crash
tests' ``transaction.fault.injection`` take only the values they name: anything else stops the broker at start with a message naming the property.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.support.net import free_port, wait_until

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["asyncio", "uvloop"])
def sendfile_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    port = free_port("127.0.0.1")
    cmd = [sys.executable, "-m", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           "--override", f"log.dirs={tmp_path / 'data'}", "--override", "fetch.sendfile.enable=true"]
    if request.param == "asyncio":
        cmd.append("--no-uvloop")
    with open(tmp_path / "broker.log", "wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        def ready() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return True
            except OSError:
                return False

        assert wait_until(ready, timeout=30), (tmp_path / "broker.log").read_text()
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(10)


def test_fetch_by_sendfile_returns_what_was_produced(sendfile_broker: str) -> None:
    values = [os.urandom(n) for n in (1, 900, 20000, 300000) for _ in range(25)]
    producer = KafkaProducer(bootstrap_servers=sendfile_broker, acks="all", max_request_size=2_000_000)
    for v in values:
        producer.send("sendfile", v)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=sendfile_broker, enable_auto_commit=False,
                             consumer_timeout_ms=10000, fetch_max_bytes=64 * 1024 * 1024,
                             max_partition_fetch_bytes=16 * 1024 * 1024)
    consumer.assign([TopicPartition("sendfile", 0)])
    consumer.seek_to_beginning()
    got = [m.value for m in consumer]
    consumer.close()
    assert got == values


@pytest.mark.parametrize(("key", "value"), [("ssl.transport", "gnutls"), ("ssl.read.loop", "rust"),
                                            ("transaction.fault.injection", "crash-sometime")])
def test_an_unknown_transport_value_stops_the_broker_with_its_name(tmp_path: Path, key: str, value: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "broker", "--override", f"log.dirs={tmp_path}",
                           "--override", "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"{key}={value}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"for configuration {key}" in proc.stderr and value in proc.stderr
