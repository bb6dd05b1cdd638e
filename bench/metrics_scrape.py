#!/usr/bin/env python3
"""Scrape latency of ``/metrics`` with many partitions, and what a scrape costs the Kafka listener.

Starts Samsa with ``metrics.listener`` on, creates one topic with ``--partitions`` partitions
(10,000 by default), commits an offset for every partition in
one consumer group (so consumer-lag series exist for each), then scrapes ``/metrics``
``--scrapes`` times in a row and reports the latency (median, max) and the size of the
response. A second process sends ApiVersions requests back to back on one connection for 5 s, once with no
scrape and once while scrapes run one after another, and reports their latency: the scrape
runs on the broker's event loop, so this is how long a Kafka request can wait behind one.

Usage::

    python bench/metrics_scrape.py                       # 10,000 partitions, 10 scrapes
    python bench/metrics_scrape.py --partitions 1000 --scrapes 20
    python bench/metrics_scrape.py --hot-path            # CPU per request of the counting itself

It is a script, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.brokers import SamsaBroker  # noqa: E402
from tests.support.net import free_port  # noqa: E402


def scrape(port: int) -> tuple[float, int]:
    t0 = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=120) as r:
        n = len(r.read())
    return time.monotonic() - t0, n


PROBE = """
import json, socket, struct, sys, time
sys.path.insert(0, {root!r})
from tests.support.net import recv_frame
body = struct.pack(">hhih", 18, 0, 1, 5) + b"probe"
frame = struct.pack(">i", len(body)) + body
sock = socket.create_connection(({host!r}, {port}), timeout=30)
out, end = [], time.monotonic() + {seconds}
while time.monotonic() < end:
    t0 = time.monotonic()
    sock.sendall(frame)
    recv_frame(sock)
    out.append(time.monotonic() - t0)
print(json.dumps(out))
"""


def start_probe(host: str, port: int, seconds: float) -> subprocess.Popen[str]:
    """ApiVersions back to back on one connection, from another process (its own GIL)."""
    code = PROBE.format(root=str(REPO_ROOT), host=host, port=port, seconds=seconds)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def probe_result(proc: subprocess.Popen[str]) -> list[float]:
    out, _ = proc.communicate(timeout=300)
    return list(json.loads(out))


def hot_path_overhead(n: int = 200_000) -> None:
    """CPU per request of the request timing (RequestTimer + RequestStats.finish) and per
    partition of the Produce counter, in-process, best of 3; a handler that returns at once."""
    import asyncio  # noqa: PLC0415

    from broker.metrics.stats import BrokerTopicStats, RequestStats, RequestTimer  # noqa: PLC0415

    stats, topics = RequestStats(), BrokerTopicStats()
    frame = bytes([0, 0, 0, 9]) + bytes(100)  # Produce v9

    async def handler() -> bytes:
        return b"r"

    async def run() -> tuple[float, float, float]:
        off = on = per_partition = float("inf")
        for _ in range(3):
            t = time.process_time()
            for _ in range(n):
                await handler()
            off = min(off, time.process_time() - t)
            t = time.process_time()
            for _ in range(n):
                timer = RequestTimer(time.perf_counter())
                await timer.run(handler())
                handled = time.perf_counter()
                stats.finish(frame, timer, handled, time.perf_counter())
            on = min(on, time.process_time() - t)
            t = time.process_time()
            for _ in range(n):
                topics.produced("orders", 100, 10_000)
            per_partition = min(per_partition, time.process_time() - t)
        return off, on, per_partition

    off, on, per_partition = asyncio.run(run())
    print(f"hot path: request timing {1e6 * (on - off) / n:.2f} us CPU per request, "
          f"Produce counters {1e6 * per_partition / n:.2f} us per partition")
    error_counts_overhead(n // 4)


def error_counts_overhead(n: int) -> None:
    """CPU of the ErrorsPerSec count (response_error_counts) on a Produce v9 response of 1 and
    10 partitions, beside what encoding the same response costs anyway; best of 3."""
    from broker.metrics.stats import response_error_counts  # noqa: PLC0415
    from protocol.messages import encode_response, response_class  # noqa: PLC0415

    cls = response_class(0, 9)
    part = cls.TopicProduceResponse.PartitionProduceResponse
    for parts in (1, 10):
        resp = cls(responses=[cls.TopicProduceResponse(name="orders", partition_responses=[
            part(index=i, error_code=0, base_offset=1000 * i) for i in range(parts)])], throttle_time_ms=0)
        count = encode = float("inf")
        for _ in range(3):
            t = time.process_time()
            for _ in range(n):
                response_error_counts(resp)
            count = min(count, time.process_time() - t)
            t = time.process_time()
            for _ in range(n):
                encode_response(0, 9, 1, resp)
            encode = min(encode, time.process_time() - t)
        print(f"hot path: error counts {1e6 * count / n:.2f} us per Produce response of {parts} partition(s) "
              f"(encoding it: {1e6 * encode / n:.2f} us)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", type=int, default=10_000)
    p.add_argument("--scrapes", type=int, default=10, help="at least this many (and for at least 5 s)")
    p.add_argument("--hot-path", action="store_true",
                   help="only measure the per-request / per-partition counting cost, in-process")
    args = p.parse_args(argv)
    if args.hot_path:
        hot_path_overhead()
        return 0

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

        idle = probe_result(start_probe(b.host, b.port, 5.0))
        times, size = [], 0
        probe = start_probe(b.host, b.port, 5.0)
        # scrape for as long as the probe runs: by the clock, not probe.poll(), since the probe
        # prints its timings at the end and a fast broker's fill the pipe it writes them to
        probe_until = time.monotonic() + 5.0
        while time.monotonic() < probe_until or len(times) < args.scrapes:
            dt, size = scrape(mport)
            times.append(dt)
        busy = probe_result(probe)
        ms = sorted(1000 * x for x in times)
        print(f"partitions: {args.partitions}, response {size / 1e6:.1f} MB")
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
