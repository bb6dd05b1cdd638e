"""Client quotas with stock clients: a throttled producer and consumer are held to their byte
rates and see throttle_time_ms (KIP-219); quotas are managed with ``samsa configs``.

The brokers here run ``quota.window.num=2`` (two 1 s samples) instead of Kafka's 11: Kafka's
rate divides by at least ``num - 1`` windows, which lets a fresh client burst ~10 s worth of
quota first; with 2 samples the burst is ~1 s and the held rate shows within a short test.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

QUOTA = 1_000_000  # bytes/s
MSG = 1024
FAST_WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


def _samsa(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "broker.cli", *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_producer_held_to_its_byte_rate(broker_factory: Any) -> None:
    ck = pytest.importorskip("confluent_kafka")
    b = broker_factory(FAST_WINDOWS)
    bs = ["--bootstrap-server", b.bootstrap]
    _samsa("topics", *bs, "--create", "--topic", "q", "--partitions", "1")
    out = _samsa("configs", *bs, "--alter", "--entity-type", "clients", "--entity-name", "slow",
                 "--add-config", f"producer_byte_rate={QUOTA}")
    assert "Completed updating config for client-id 'slow'" in out
    assert f"producer_byte_rate={float(QUOTA)}" in _samsa("configs", *bs, "--describe", "--entity-type", "clients")

    throttles: list[int] = []
    acked: list[tuple[float, int]] = []

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None, err
        acked.append((time.monotonic(), len(msg.value())))

    p = ck.Producer({"bootstrap.servers": b.bootstrap, "client.id": "slow", "linger.ms": 5,
                     "batch.size": 64 * 1024, "queue.buffering.max.kbytes": 4096,
                     "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    payload = b"x" * MSG
    start = time.monotonic()
    run_for = 9.0
    while time.monotonic() - start < run_for:  # offer ~10x the quota: as fast as the queue takes it
        try:
            p.produce("q", payload, on_delivery=on_delivery)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(60)
    # The steady state, after the first window's burst: bytes acknowledged in [2 s, 9 s].
    lo, hi = start + 2.0, start + run_for
    steady = sum(n for t, n in acked if lo <= t < hi)
    rate = steady / (hi - lo)
    print(f"producer held at {rate:.0f} B/s, max throttle {max(throttles or [0]):.2f} s")
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, f"held at {rate:.0f} B/s, quota {QUOTA} B/s"
    assert throttles and max(throttles) > 0, "the producer never saw throttle_time_ms"

    # Another client id is not held: it writes far faster.
    fast = ck.Producer({"bootstrap.servers": b.bootstrap, "client.id": "fast", "linger.ms": 5})
    t0 = time.monotonic()
    for _ in range(4000):
        while True:
            try:
                fast.produce("q", payload)
                break
            except BufferError:
                fast.poll(0.01)
    fast.flush(60)
    assert 4000 * MSG / (time.monotonic() - t0) > 2 * QUOTA


def test_consumer_held_to_its_byte_rate(broker_factory: Any) -> None:
    ck = pytest.importorskip("confluent_kafka")
    b = broker_factory(FAST_WINDOWS)
    bs = ["--bootstrap-server", b.bootstrap]
    _samsa("topics", *bs, "--create", "--topic", "c", "--partitions", "1")
    total = 6_000_000
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for _ in range(total // MSG):
        while True:
            try:
                p.produce("c", b"y" * MSG)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(60)
    # A user-level default: every user (here ANONYMOUS) gets its own consumer_byte_rate.
    _samsa("configs", *bs, "--alter", "--entity-type", "users", "--entity-default",
           "--add-config", f"consumer_byte_rate={QUOTA}")
    throttles: list[int] = []
    c = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "slow-readers", "auto.offset.reset": "earliest",
                     "fetch.max.bytes": 1 << 20, "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    c.subscribe(["c"])
    got = 0
    t0 = time.monotonic()
    deadline = t0 + 60
    while got < total // MSG * MSG and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += len(m.value())
    elapsed = time.monotonic() - t0
    c.close()
    assert got >= total // MSG * MSG
    # ~1 s of burst, then QUOTA: at least (total / QUOTA - 1) s, minus 20%.
    print(f"consumer read {got} bytes in {elapsed:.1f} s")
    assert elapsed >= 0.8 * (total / QUOTA - 1), f"read {got} bytes in {elapsed:.1f} s at quota {QUOTA} B/s"
    assert throttles and max(throttles) > 0


def test_request_percentage_throttles_and_mutes(broker_factory: Any) -> None:
    """A client over its request_percentage gets throttle_time_ms in the response, and the broker
    serves nothing more on that connection until the time is up (KIP-219 muting)."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    from tests.support.rawclient import RawClient

    b = broker_factory(FAST_WINDOWS)
    _samsa("configs", "--bootstrap-server", b.bootstrap, "--alter", "--entity-type", "clients", "--entity-name",
           "busy", "--add-config", "request_percentage=0.01")
    with RawClient(b.host, b.port, client_id="busy") as rc:
        req = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        throttle, t_sent = 0, 0.0
        for _ in range(200):
            resp = rc.roundtrip(req, 9, MetadataResponse)
            if resp.throttle_time_ms > 0:
                throttle, t_sent = resp.throttle_time_ms, time.monotonic()
                break
        assert throttle > 0, "no throttle_time_ms for a client far over request_percentage"
        rc.roundtrip(req, 9, MetadataResponse)  # muted: answered only once the throttle time is over
        assert time.monotonic() - t_sent >= 0.9 * throttle / 1000
    with RawClient(b.host, b.port, client_id="other") as rc:  # another client id is not held
        assert rc.roundtrip(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9,
                            MetadataResponse).throttle_time_ms == 0
