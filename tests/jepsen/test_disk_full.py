"""A broker whose only log dir fills up, in the namespace rig (log dirs on 64 MiB tmpfs mounts).

Regression for what the disk-full nemesis found: a follower that cannot append fetched data
(ENOSPC -> KAFKA_STORAGE_ERROR) re-truncated and re-fetched in a tight loop, thousands of
times a second, each time logging a warning (7,900 lines in 20 s of full disk). It must back off
``replica.fetch.backoff.ms`` per failed partition, as Kafka's fetcher does. Also held here: the
full broker answers a producer KAFKA_STORAGE_ERROR (not a crash, not a hang), and once space
is freed it catches up and takes writes again with its log intact.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.jepsen import workload as wl
from tests.jepsen.nemesis import fill_disk
from tests.jepsen.rig import Rig
from tests.jepsen.runner import unavailable_reason
from tests.support.rawclient import RawClient, build_batch

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

KAFKA_STORAGE_ERROR = 56


def test_full_log_dir_storage_error_backoff_and_recovery(tmp_path: Path) -> None:
    rig = Rig(tmp_path / "cluster", 3, overrides={"replica.fetch.backoff.ms": 1000}, disk_mb=64)
    rig.start()
    try:
        wl.create_topic(rig.bootstrap, 3)
        assert rig.wait_full_isr(wl.TOPIC, 60.0), rig.leaders(wl.TOPIC)
        leaders = rig.leaders(wl.TOPIC)
        full = leaders[1][0]                          # the broker whose disk fills: leads partition 1 ...
        p0 = next(p for p, (ldr, _r, _i) in leaders.items() if ldr != full)   # ... and follows p0
        b = rig.brokers[full]
        filler = b.data_dir / ".filler"
        mark = len(b.log_text())
        assert fill_disk(filler) > 0

        producer = Producer({"bootstrap.servers": rig.bootstrap, **wl.COMMON, "acks": 1, "linger.ms": 0})
        for v in range(20):
            producer.produce(wl.TOPIC, value=str(v).encode(), partition=p0)
        assert producer.flush(30.0) == 0
        t0 = time.monotonic()
        time.sleep(6.0)
        seconds = time.monotonic() - t0

        with RawClient(b.host, b.port, timeout=20.0) as c:
            code, _ = c.produce(wl.TOPIC, 1, build_batch([(b"k", b"1000", [])]))
        assert code == KAFKA_STORAGE_ERROR
        assert b.is_running()
        failures = b.log_text()[mark:].count("Cannot append fetched data")
        assert 1 <= failures <= 3 * (seconds + 2), f"{failures} failed appends in {seconds:.1f} s: no backoff"

        filler.unlink()
        assert rig.wait_full_isr(wl.TOPIC, 60.0), rig.leaders(wl.TOPIC)
        with RawClient(b.host, b.port, timeout=20.0) as c:
            code, _ = c.produce(wl.TOPIC, 1, build_batch([(b"k", b"1001", [])]))
        assert code == 0
        # the full broker's copy of p0 is complete: read it from there once it leads nothing else
        c2 = Consumer({"bootstrap.servers": rig.bootstrap, **wl.COMMON, "group.id": "disk-full-check",
                       "enable.auto.commit": False})
        try:
            c2.assign([TopicPartition(wl.TOPIC, p0, 0), TopicPartition(wl.TOPIC, 1, 0)])
            got: list[int] = []
            deadline = time.monotonic() + 30
            while len(got) < 21 and time.monotonic() < deadline:
                got += [int(m.value()) for m in c2.consume(100, 1.0) if m.error() is None and m.value()]
            assert sorted(got) == list(range(20)) + [1001]
        finally:
            c2.close()
    finally:
        rig.close()
