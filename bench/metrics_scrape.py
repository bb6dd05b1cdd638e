#!/usr/bin/env python3
"""Scrape latency of ``/metrics`` with many partitions, and what a scrape costs the Kafka listener.

Starts Samsa with ``metrics.listener`` on, creates one topic with ``--partitions`` partitions
(10,000 by default; the internal topics add 100 more), commits an offset for every partition in
one consumer group (so consumer-lag series exist for each), then scrapes ``/metrics``
``--scrapes`` times in a row and reports the latency (median, max) and the size of the
response. While scraping, a second thread sends ApiVersions requests on a Kafka connection
back to back and reports their latency with and without scrapes in flight: the scrape runs on
the broker's event loop, so this is how long a Kafka request can wait behind one.

Usage::

    python bench/metrics_scrape.py                       # 10,000 partitions, 10 scrapes
    python bench/metrics_scrape.py --partitions 1000 --scrapes 20

It is a script, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.brokers import SamsaBroker  # noqa: E402
from tests.support.net import api_versions_v0, free_port  # noqa: E402


def scrape(port: int) -> tuple[float, int]:
    t0 = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=120) as r:
        n = len(r.read())
    return time.monotonic() - t0, n


def kafka_latencies(host: str, port: int, seconds: float) -> list[float]:
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        api_versions_v0(host, port, timeout=30)
        out.append(time.monotonic() - t0)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", type=int, default=10_000)
    p.add_argument("--scrapes", type=int, default=10)
    args = p.parse_args(argv)

    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition  # noqa: PLC0415
    from kafka.admin import NewTopic  # noqa: PLC0415
    from kafka.structs import OffsetAndMetadata  # noqa: PLC0415

    work = Path(tempfile.mkdtemp(prefix="samsa-scrape-"))
    mport = free_port()
    b = SamsaBroker(work / "data", work / "broker.log", overrides={"metrics.listener": f"http://127.0.0.1:{mport}"})
    try:
        b.start(timeout=60)
        t0 = time.monotonic()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=600_000)
        admin.create_topics([NewTopic("wide", args.partitions, 1)], timeout_ms=600_000)
        admin.close()
        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="wide-reader", enable_auto_commit=False,
                          request_timeout_ms=300_000, connections_max_idle_ms=600_000)
        c.commit({TopicPartition("wide", i): OffsetAndMetadata(0, "", -1) for i in range(args.partitions)})
        c.close()
        print(f"# created {args.partitions} partitions and committed their offsets in "
              f"{time.monotonic() - t0:.1f}s", file=sys.stderr)

        idle = kafka_latencies(b.host, b.port, 2.0)
        busy: list[float] = []
        stop = threading.Event()

        def probe() -> None:
            while not stop.is_set():
                busy.extend(kafka_latencies(b.host, b.port, 0.2))

        t = threading.Thread(target=probe, daemon=True)
        t.start()
        times, size = [], 0
        for _ in range(args.scrapes):
            dt, size = scrape(mport)
            times.append(dt)
        stop.set()
        t.join()
        ms = sorted(1000 * x for x in times)
        print(f"partitions: {args.partitions} (+100 internal), response {size / 1e6:.1f} MB")
        print(f"scrape latency: median {statistics.median(ms):.0f} ms, min {ms[0]:.0f} ms, max {ms[-1]:.0f} ms "
              f"over {len(ms)} scrapes")
        for name, xs in (("idle", idle), ("while scraping", busy)):
            ys = sorted(1000 * x for x in xs)
            print(f"Kafka ApiVersions round trip {name}: median {statistics.median(ys):.1f} ms, "
                  f"p99 {ys[int(0.99 * (len(ys) - 1))]:.1f} ms, max {ys[-1]:.1f} ms ({len(ys)} requests)")
    finally:
        b.stop(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
