#!/usr/bin/env python3
"""broker.testing.SamsaBroker as a test suite uses it: startup, topic creation, and leaks.

Prints, with the load average beside the figures (the machine may be shared):

* **startup in a fresh process** (``--fresh`` runs, each a new interpreter): the time of
  ``from broker.testing import SamsaBroker`` (the broker's imports) and of the first
  ``SamsaBroker().start()``, and their sum, in wall-clock and in CPU time (CPU time moves less
  with the machine's load, wall time is what a test suite waits), p50 and max; Python's own
  start (~20-30 ms) is not included. Byte code is cached unless PYTHONDONTWRITEBYTECODE is set
  (the line says which), as it is for an installed package;
* **startup, warm**: ``--brokers`` more start/stop cycles in this process: time until
  ``start()`` returns (the broker accepts connections and answers), p50 / p99 / max, and the
  stop times;
* **create_topic**: ``--topics`` calls of ``kafka.create_topic()`` (CreateTopics over a kept
  admin connection) each followed by deleting the topic, as the plugin's ``samsa_topic`` does:
  p50 / p99 / p99.9 / max; then ``--topics`` creates that accumulate (nothing deleted): the first
  and the last tenth, since the broker's topic registry grows;
* **a session of tests**: ``--topics`` "tests" as the pytest plugin runs them (a fresh topic,
  an injected fault, a produce through the test's own kafka-python producer, closed at the end
  of the test as the ``samsa_kafka_python`` factory does, faults and requests cleared, the
  topic deleted), every ``--read-every``-th also reading the topic back with
  ``kafka.records()``; open file descriptors, threads, RSS and the broker's topics before,
  after the first 10 % and at the end. A leak shows as growth between the 10 % mark and the end.
  (A producer kept across tests would recreate each deleted topic: its metadata refresh asks
  for the topics it knows with allow_auto_topic_creation, and ``auto.create.topics.enable`` is
  true by default, as in Kafka.)

Run: ``python3 bench/embedded.py [--topics 1000] [--brokers 20]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.testing import SamsaBroker  # noqa: E402


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def ms(xs: list[float]) -> str:
    return (f"p50 {pct(xs, 50) * 1000:7.1f} ms  p99 {pct(xs, 99) * 1000:7.1f} ms  "
            f"p99.9 {pct(xs, 99.9) * 1000:7.1f} ms  max {max(xs) * 1000:7.1f} ms  (n={len(xs)})")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


FRESH = '''
import sys, time
sys.path.insert(0, sys.argv[1])
c0, t0 = time.process_time(), time.perf_counter()
from broker.testing import SamsaBroker
c1, t1 = time.process_time(), time.perf_counter()
kafka = SamsaBroker().start()
c2, t2 = time.process_time(), time.perf_counter()
kafka.stop()
print(t1 - t0, t2 - t1, c1 - c0, c2 - c1)
'''


def fresh_starts(n: int) -> None:
    """``n`` new interpreters, each importing broker.testing and starting its first broker."""
    root = str(Path(__file__).resolve().parents[1])
    subprocess.run([sys.executable, "-c", FRESH, root], check=True, capture_output=True)  # writes byte code
    rows = []
    for _ in range(n):
        out = subprocess.run([sys.executable, "-c", FRESH, root], check=True, capture_output=True, text=True)
        rows.append([float(x) for x in out.stdout.split()])
    pyc = "not cached (PYTHONDONTWRITEBYTECODE)" if sys.dont_write_bytecode else "cached"
    print(f"startup in a fresh process ({n} runs, byte code {pyc}):")
    for label, i in (("import broker.testing", 0), ("first start()", 1)):
        wall, cpu = [r[i] for r in rows], [r[i + 2] for r in rows]
        print(f"  {label:22} wall p50 {pct(wall, 50) * 1000:6.0f} ms max {max(wall) * 1000:6.0f} ms   "
              f"cpu p50 {pct(cpu, 50) * 1000:6.0f} ms max {max(cpu) * 1000:6.0f} ms")
    wall, cpu = [r[0] + r[1] for r in rows], [r[2] + r[3] for r in rows]
    print(f"  {'import + first start':22} wall p50 {pct(wall, 50) * 1000:6.0f} ms max {max(wall) * 1000:6.0f} ms   "
          f"cpu p50 {pct(cpu, 50) * 1000:6.0f} ms max {max(cpu) * 1000:6.0f} ms")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--brokers", type=int, default=20)
    ap.add_argument("--read-every", type=int, default=10)
    ap.add_argument("--fresh", type=int, default=5, help="fresh interpreters to time the first start in")
    args = ap.parse_args()
    print(f"load average before: {load()}  (python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    if args.fresh:
        fresh_starts(args.fresh)

    t0 = time.perf_counter()
    first = SamsaBroker().start()
    cold = time.perf_counter() - t0
    first.stop()
    starts, stops = [], []
    for _ in range(args.brokers):
        t0 = time.perf_counter()
        k = SamsaBroker().start()
        starts.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        k.stop()
        stops.append(time.perf_counter() - t0)
    print(f"startup, first start() in this process (after importing broker.testing): {cold * 1000:.0f} ms")
    print(f"startup, warm:  {ms(starts)}")
    print(f"stop:           {ms(stops)}")

    from kafka import KafkaProducer

    with SamsaBroker() as kafka:
        kafka.delete_topic(kafka.create_topic())  # the admin connection is made once, as the plugin's is
        creates = []
        for _ in range(args.topics):
            t0 = time.perf_counter()
            name = kafka.create_topic()
            creates.append(time.perf_counter() - t0)
            kafka.delete_topic(name)
        print(f"create_topic (each deleted after): {ms(creates)}")
        creates, names = [], []
        for _ in range(args.topics):
            t0 = time.perf_counter()
            names.append(kafka.create_topic())
            creates.append(time.perf_counter() - t0)
        tenth = max(1, args.topics // 10)
        print(f"create_topic, topics 1-{tenth} of {args.topics} accumulating: {ms(creates[:tenth])}")
        print(f"create_topic, the last {tenth} of {args.topics} accumulating:  {ms(creates[-tenth:])}")
        for n in names:
            kafka.delete_topic(n)

        def topics() -> int:
            return len(kafka.admin.client.list_topics())

        gc.collect()
        before = (fds(), threading.active_count(), rss_mib(), topics())
        marks = {}
        tests = []
        mark_at = max(1, args.topics // 10)
        for i in range(args.topics):
            t0 = time.perf_counter()
            topic = kafka.create_topic()
            rule = kafka.inject(api="Produce", error="NOT_LEADER_OR_FOLLOWER", times=1, topic=topic)
            producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, linger_ms=0, retry_backoff_ms=5)
            producer.send(topic, value=b"v%d" % i).get(timeout=30)
            producer.close()
            assert rule.fired == 1
            if i % args.read_every == 0:
                assert [r.value for r in kafka.records(topic)] == [b"v%d" % i]
            kafka.clear_faults()
            kafka.clear_requests()
            kafka.delete_topic(topic)
            tests.append(time.perf_counter() - t0)
            if i + 1 == mark_at:
                gc.collect()
                marks["10%"] = (fds(), threading.active_count(), rss_mib(), topics())
        gc.collect()
        end = (fds(), threading.active_count(), rss_mib(), topics())
    print(f"one test (topic, fault, producer, clear, delete): {ms(tests)}")
    print(f"{'':12} {'fds':>6} {'threads':>8} {'RSS MiB':>8} {'topics':>7}")
    for label, (f, t, r, n) in (("before", before), ("after 10%", marks.get("10%", before)), ("end", end)):
        print(f"{label:12} {f:6d} {t:8d} {r:8.1f} {n:7d}")
    gc.collect()
    print(f"after the broker stopped: fds {fds()}, threads {threading.active_count()}, RSS {rss_mib():.1f} MiB")
    print(f"load average after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
