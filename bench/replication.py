#!/usr/bin/env python3
"""Replication: what a 3-broker Samsa cluster (real ZooKeeper) costs and how fast it heals.

Figures, each in a fresh cluster on this machine (three broker processes and one ZooKeeper):

1. produce throughput, 1 KiB messages, one confluent-kafka (librdkafka) producer with its
   default settings plus linger.ms 5, 3 partitions: RF 1 acks=1, RF 3 acks=1 and RF 3 acks=all
   (min.insync.replicas 2), with the ratio of RF 3 acks=all to RF 1 acks=1 (the issue's aim:
   >= 0.5x) and the load average after each case (the machine may be shared). The cases run
   in rounds: an unmeasured warm-up round, then ``--repeat`` measured rounds in alternating
   order (forward, reverse, ...); each case writes a new topic that is deleted after it, and the
   figures are the medians. Why: on a VM whose memory the host backs on first touch (this
   machine's), the first write to a page the guest has never used costs ~2.5 ms per MB of
   kernel time (``copy_folio_from_iter_atomic`` under ``perf``), and the page cache of every
   case stays until its topic is deleted, so without the warm-up and the deletes whichever
   case ran last paid for fresh memory (RF 3 writes three times the bytes): the old single
   pass measured RF 3 acks=all at 0.15-0.2x, the same code measures 0.5-0.6x once the cases
   start from the same memory. Followers keep only the tail of their logs in the page cache
   (``replica.page.cache.retain.bytes``, 16 MiB), so RF 3 faults in fresh pages for the
   leaders' copy only, as RF 1 does, instead of for all three (with -1, Kafka's behaviour,
   RF 3 acks=all measured 0.38-0.42x here);
2. failover: a partition leader is SIGKILLed while an acks=all producer sends one message at a
   time; the time from the kill to the next acknowledged message (aim: within the ZooKeeper
   session timeout plus 2 s; ``zookeeper.session.timeout.ms`` is --session-ms);
3. catch-up: a follower is stopped, ``--lag-mb`` of data is written without it, then it is
   started again; the time from its start to its return to the ISR (the issue names 1 GB:
   ``--lag-mb 1024``; the default is smaller to keep a run short), and the MB/s that implies.

Usage::

    python bench/replication.py                     # ~3 minutes
    python bench/replication.py --lag-mb 1024 --seconds 20 --repeat 3 --json out.json
    python bench/replication.py --broker-cpus 1     # the brokers on CPU 1 (cpu.affinity)

It is a script, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.support.cluster import SamsaCluster  # noqa: E402

quiet = logging.getLogger("bench.replication")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


def admin(c: SamsaCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.bootstrap, "logger": quiet})


def delete(c: SamsaCluster, topic: str) -> None:
    """Delete ``topic`` and wait until no broker lists it (its files are gone with it)."""
    a = admin(c)
    for f in a.delete_topics([topic]).values():
        f.result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and topic in a.list_topics(timeout=5).topics:
        time.sleep(0.1)


def create(c: SamsaCluster, topic: str, rf: int, parts: int = 3) -> None:
    a = admin(c)
    for f in a.create_topics([NewTopic(topic, parts, rf, config={"min.insync.replicas": str(min(2, rf))})]).values():
        f.result(30)
    wait_isr(c, topic, rf)


def wait_isr(c: SamsaCluster, topic: str, n: int, timeout: float = 600) -> float:
    t0 = time.monotonic()
    a = admin(c)
    while time.monotonic() - t0 < timeout:
        try:
            t = a.list_topics(topic, timeout=5).topics[topic]
            if t.error is None and t.partitions and all(len(p.isrs) == n and p.leader >= 0
                                                        for p in t.partitions.values()):
                return time.monotonic() - t0
        except Exception:
            pass
        time.sleep(0.05)
    raise SystemExit(f"{topic}: ISR never reached {n}")


# The same producer for the three cases: librdkafka's defaults (batch.size 1000000,
# max.in.flight 1000000, no compression) with linger.ms 5, as a confluent-kafka application
# that tunes nothing sees them; --batch-size overrides batch.size for all three alike.
PRODUCER = {"linger.ms": 5, "queue.buffering.max.kbytes": 262144}


def throughput(c: SamsaCluster, topic: str, acks: str, seconds: float) -> dict[str, float]:
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": acks, **PRODUCER, "logger": quiet})
    value = os.urandom(1024)
    acked = [0]

    def cb(err: Any, _m: Any) -> None:
        if err is None:
            acked[0] += 1
    end = time.monotonic() + 1.0  # warm-up, not counted
    while time.monotonic() < end:
        try:
            p.produce(topic, value, on_delivery=cb)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(60)
    acked[0] = 0
    t0 = time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        try:
            p.produce(topic, value, on_delivery=cb)
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    p.flush(120)
    dt = time.monotonic() - t0
    return {"msgs_per_s": acked[0] / dt, "mb_per_s": acked[0] * 1024 / dt / 1e6}


def failover(c: SamsaCluster, topic: str) -> float:
    md = admin(c).list_topics(topic, timeout=10).topics[topic].partitions
    leader = md[0].leader
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 0, "logger": quiet,
                  "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 200,
                  "retry.backoff.ms": 20, "retry.backoff.max.ms": 100})
    for _ in range(20):  # connections and metadata in place
        p.produce(topic, b"warm", partition=0)
    p.flush(30)
    c.kill(leader)
    t0 = time.monotonic()
    done: list[float] = []
    p.produce(topic, b"after-kill", partition=0, on_delivery=lambda err, m: done.append(time.monotonic())
              if err is None else None)
    p.flush(120)
    took = (done[0] - t0) if done else float("nan")
    c.restart(leader)
    return took


def catch_up(c: SamsaCluster, topic: str, lag_mb: int) -> dict[str, float]:
    md = admin(c).list_topics(topic, timeout=10).topics[topic].partitions
    follower = next(r for r in md[0].replicas if r != md[0].leader)
    c.kill(follower)
    a = admin(c)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the ISR has to shrink first, or acks=all would wait for it
        if follower not in a.list_topics(topic, timeout=5).topics[topic].partitions[0].isrs:
            break
        time.sleep(0.2)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "linger.ms": 20, "batch.size": 1048576,
                  "compression.type": "none", "queue.buffering.max.kbytes": 524288, "logger": quiet})
    value = os.urandom(1024)
    n = lag_mb * 1024
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    p.flush(600)
    t0 = time.monotonic()
    c.restart(follower, timeout=120)
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        if follower in a.list_topics(topic, timeout=5).topics[topic].partitions[0].isrs:
            break
        time.sleep(0.1)
    took = time.monotonic() - t0
    return {"seconds": took, "mb_per_s": lag_mb * 1.048576 / took}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0, help="each throughput case (default 10)")
    ap.add_argument("--lag-mb", type=int, default=200, help="data written while a follower is down (default 200)")
    ap.add_argument("--session-ms", type=int, default=6000, help="zookeeper.session.timeout.ms (default 6000)")
    ap.add_argument("--batch-size", type=int, help="the producer's batch.size (default: librdkafka's, 1000000)")
    ap.add_argument("--repeat", type=int, default=2, help="measured rounds of the three throughput cases (default 2)")
    ap.add_argument("--warmup-seconds", type=float, default=4.0, help="each case of the unmeasured first round")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--broker-cpus", metavar="LIST",
                    help="the brokers run on these CPUs (cpu.affinity, as samsa cluster up --cpus LIST)")
    args = ap.parse_args()
    if args.batch_size:
        PRODUCER["batch.size"] = args.batch_size
    out: dict[str, Any] = {"session_ms": args.session_ms, "producer": dict(PRODUCER), "load": {}}
    print(f"producer: 1 KiB messages, 3 partitions, {PRODUCER}; load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="samsa-bench-repl-") as tmp:
        overrides = {"zookeeper.session.timeout.ms": args.session_ms, "log.segment.bytes": 268435456,
                     "replica.lag.time.max.ms": 10000}
        if args.broker_cpus:
            overrides["cpu.affinity"] = args.broker_cpus
            print(f"brokers on CPUs {args.broker_cpus} (cpu.affinity)", flush=True)
        with SamsaCluster(Path(tmp), 3, overrides=overrides) as c:
            c.wait_for_brokers(3)
            cases = [("rf1_acks1", 1, "1"), ("rf3_acks1", 3, "1"), ("rf3_acksall", 3, "all")]
            runs: dict[str, list[dict[str, float]]] = {name: [] for name, _rf, _acks in cases}
            for rnd in range(args.repeat + 1):
                order = cases if rnd % 2 == 0 else cases[::-1]
                for name, rf, acks in order:
                    topic = f"{name.replace('_', '-')}-{rnd}"
                    create(c, topic, rf)
                    r = throughput(c, topic, acks, args.warmup_seconds if rnd == 0 else args.seconds)
                    r["load"] = os.getloadavg()[0]  # other work on the machine shows here
                    delete(c, topic)
                    label = "warm-up" if rnd == 0 else f"round {rnd}"
                    print(f"{label:8s} {name:12s} {r['msgs_per_s']:10,.0f} msgs/s  {r['mb_per_s']:7.1f} MB/s"
                          f"  (load average {r['load']:.2f})", flush=True)
                    if rnd:
                        runs[name].append(r)
            for name, _rf, _acks in cases:
                out[name] = {"msgs_per_s": statistics.median(r["msgs_per_s"] for r in runs[name]),
                             "mb_per_s": statistics.median(r["mb_per_s"] for r in runs[name]), "runs": runs[name]}
                out["load"][name] = [r["load"] for r in runs[name]]
                print(f"median   {name:12s} {out[name]['msgs_per_s']:10,.0f} msgs/s  {out[name]['mb_per_s']:7.1f} MB/s",
                      flush=True)
            out["ratio_rf3_acksall_to_rf1_acks1"] = out["rf3_acksall"]["msgs_per_s"] / out["rf1_acks1"]["msgs_per_s"]
            per_round = [a["msgs_per_s"] / b["msgs_per_s"] for a, b in zip(runs["rf3_acksall"], runs["rf1_acks1"],
                                                                          strict=True)]
            print(f"RF 3 acks=all / RF 1 acks=1: {out['ratio_rf3_acksall_to_rf1_acks1']:.2f}x (medians; per round "
                  f"{', '.join(f'{x:.2f}x' for x in per_round)})", flush=True)
            create(c, "failover", 3, parts=1)
            out["failover_s"] = failover(c, "failover")
            print(f"failover: leader SIGKILL -> next acks=all ack {out['failover_s']:.2f} s "
                  f"(session timeout {args.session_ms / 1000:.0f} s)", flush=True)
            wait_isr(c, "failover", 3)
            create(c, "catchup", 3, parts=1)
            out["catch_up"] = cu = catch_up(c, "catchup", args.lag_mb)
            print(f"catch-up: {args.lag_mb} MB of lag, back in the ISR after {cu['seconds']:.1f} s "
                  f"({cu['mb_per_s']:.0f} MB/s)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
