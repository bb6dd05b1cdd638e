#!/usr/bin/env python3
"""Transactional throughput: transactions/s of 100 messages each, Samsa and Tansu in one run.

Each case starts a fresh broker, creates the topic (not timed), then one confluent-kafka
(librdkafka) transactional producer runs ``begin; 100 x produce; commit`` back to back for
``--seconds`` (after a short warm-up) and we count committed transactions. A transaction's cost
is dominated by its round trips -- AddPartitionsToTxn, Produce, EndTxn (Prepare, markers on
every partition, Complete) -- so this measures the coordinator path, not raw append speed.
With ``--partitions N`` the 100 messages are spread over N partitions, so every commit writes
N markers.

Afterwards (not timed) a read_committed consumer counts the committed messages of the topic:
the figure is printed beside the producer's count so a broker that loses or duplicates data
cannot post a good number unnoticed. Broker CPU (``/proc/PID/stat``) is reported as % of one
core. Tansu keeps its data in memory; Samsa writes segment files (page cache, no fsync).

Usage::

    python bench/transactions.py                         # both brokers, 1 and 3 partitions, 10 s each
    python bench/transactions.py --brokers samsa --partitions 3 --seconds 20 --json out.json

It is a script, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.brokers import BrokerProcess, SamsaBroker, TansuBroker  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
MESSAGES_PER_TXN = 100


def proc_cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return 0.0


@dataclass
class Result:
    broker: str
    partitions: int
    message_size: int
    seconds: float
    transactions: int
    transactions_per_s: float
    messages_per_s: float
    broker_cpu_pct: float
    committed_messages_read: int
    error: str | None = None


def start_broker(kind: str, tmp: Path) -> BrokerProcess:
    if kind == "samsa":
        b: BrokerProcess = SamsaBroker(tmp / "samsa-data", tmp / "samsa.log",
                                       overrides={"num.partitions": 1, "group.initial.rebalance.delay.ms": 0})
    else:
        b = TansuBroker(tmp / "tansu-data", tmp / "tansu.log")
    return b.start(timeout=60)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30).values():
        f.result(60)


def count_committed(bootstrap: str, topic: str, partitions: int, expect: int) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    n = 0
    quiet = time.monotonic()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        msgs = c.consume(10000, 0.5)
        n += sum(1 for m in msgs if not m.error())
        if msgs:
            quiet = time.monotonic()
        elif n >= expect and time.monotonic() - quiet > 1.0 or time.monotonic() - quiet > 10:
            break
    c.close()
    return n


def run_case(kind: str, partitions: int, size: int, seconds: float, warmup: float) -> Result:
    from confluent_kafka import Producer

    with tempfile.TemporaryDirectory(prefix=f"bench-txn-{kind}-") as d:
        b = start_broker(kind, Path(d))
        try:
            topic = f"bench-txn-{partitions}"
            create_topic(b.bootstrap, topic, partitions)
            p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": f"bench-{kind}",
                          "linger.ms": 1, "batch.num.messages": 1000})
            p.init_transactions(60)
            payload = os.urandom(size)

            def one_txn() -> None:
                p.begin_transaction()
                for i in range(MESSAGES_PER_TXN):
                    p.produce(topic, value=payload, partition=i % partitions)
                p.commit_transaction(60)

            t_end = time.monotonic() + warmup
            warm = 0
            while time.monotonic() < t_end:
                one_txn()
                warm += 1
            cpu0 = proc_cpu_seconds(b.proc.pid if b.proc else None)
            t0 = time.monotonic()
            n = 0
            while time.monotonic() - t0 < seconds:
                one_txn()
                n += 1
            wall = time.monotonic() - t0
            cpu = proc_cpu_seconds(b.proc.pid if b.proc else None) - cpu0
            total = (warm + n) * MESSAGES_PER_TXN
            read = count_committed(b.bootstrap, topic, partitions, total)
            return Result(kind, partitions, size, round(wall, 2), n, round(n / wall, 1),
                          round(n * MESSAGES_PER_TXN / wall), round(100 * cpu / wall),
                          read, None if read == total else f"read {read} committed messages, wrote {total}")
        except Exception as e:  # a broker that cannot do transactions gets a row saying so
            return Result(kind, partitions, size, 0, 0, 0, 0, 0, 0, f"{type(e).__name__}: {e}")
        finally:
            b.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="samsa,tansu")
    ap.add_argument("--partitions", default="1,3")
    ap.add_argument("--size", type=int, default=100, help="message size in bytes")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    results = []
    print(f"{'broker':8} {'parts':>5} {'txn/s':>8} {'msg/s':>9} {'broker CPU':>10} {'txns':>6} "
          f"{'read_committed':>14}  note")
    for parts in (int(x) for x in args.partitions.split(",")):
        for kind in args.brokers.split(","):
            r = run_case(kind, parts, args.size, args.seconds, args.warmup)
            results.append(r)
            print(f"{r.broker:8} {r.partitions:5d} {r.transactions_per_s:8.1f} {r.messages_per_s:9d} "
                  f"{r.broker_cpu_pct:9d}% {r.transactions:6d} {r.committed_messages_read:14d}  {r.error or ''}",
                  flush=True)
        by = {r.broker: r for r in results if r.partitions == parts}
        if "samsa" in by and "tansu" in by and by["tansu"].transactions_per_s:
            print(f"         samsa/tansu = {by['samsa'].transactions_per_s / by['tansu'].transactions_per_s:.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
