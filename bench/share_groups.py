#!/usr/bin/env python3
"""Share groups (KIP-932): how fast confluent-kafka's ``ShareConsumer`` drains a topic from
Samsa, next to a classic ``Consumer`` reading the same records.

A fresh Samsa broker (``share.auto.offset.reset=earliest``) gets ``--messages`` records of
``--size`` bytes on ``--partitions`` partitions. Then, each in a fresh group: a classic consumer
(one member, auto commit), and share groups of 1 and 2 ``ShareConsumer`` members (implicit
acknowledgement: every record is acquired under a lock, delivered, and acknowledged ACCEPT --
a ShareAcknowledge piggybacked on the next ShareFetch and a ShareUpdate record written to
``__share_group_state``). Each row: wall time until every record arrived, records/s, and the
broker's CPU seconds for it (``/proc/PID/stat``).

Usage::

    python bench/share_groups.py                      # 100,000 records of 100 B, 1 partition
    python bench/share_groups.py --messages 200000 --partitions 3

A script, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.produce_consume import proc_cpu_seconds  # noqa: E402
from tests.support.brokers import make_broker  # noqa: E402


def produce(bootstrap: str, topic: str, n: int, size: int, partitions: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 262144})
    payload = b"x" * size
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.1)
    p.flush(120)


def run_classic(bootstrap: str, topic: str, n: int) -> None:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"classic-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = 0
    while got < n:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                got += 1
    c.close()


def run_share(bootstrap: str, topic: str, n: int, members: int) -> None:
    from confluent_kafka import ShareConsumer

    group = f"share-{uuid.uuid4().hex[:6]}"
    counts = [0] * members
    done = threading.Event()

    def member(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([topic])
        while not done.is_set():
            counts[i] += sum(1 for m in c.poll(0.5) if m.error() is None)
            if sum(counts) >= n:
                done.set()
        c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        b = make_broker(Path(tmp), overrides={"share.auto.offset.reset": "earliest"}, name="bench")
        b.start()
        try:
            topic = "bench-share"
            produce(b.bootstrap, topic, args.messages, args.size, args.partitions)
            pid = b.proc.pid if b.proc is not None else None
            print(f"{args.messages} records of {args.size} B on {args.partitions} partition(s)")
            print(f"{'consumer':<24}{'seconds':>10}{'records/s':>12}{'broker CPU s':>14}")
            cases: list[tuple[str, Any]] = [
                ("classic Consumer", lambda: run_classic(b.bootstrap, topic, args.messages)),
                ("ShareConsumer x1", lambda: run_share(b.bootstrap, topic, args.messages, 1)),
                ("ShareConsumer x2", lambda: run_share(b.bootstrap, topic, args.messages, 2)),
            ]
            for name, fn in cases:
                cpu0, t0 = proc_cpu_seconds(pid), time.perf_counter()
                fn()
                dt, cpu1 = time.perf_counter() - t0, proc_cpu_seconds(pid)
                cpu = f"{cpu1 - cpu0:.2f}" if cpu0 is not None and cpu1 is not None else "-"
                print(f"{name:<24}{dt:>10.2f}{args.messages / dt:>12,.0f}{cpu:>14}")
        finally:
            b.kill()


if __name__ == "__main__":
    main()
