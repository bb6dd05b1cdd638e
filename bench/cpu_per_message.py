#!/usr/bin/env python3
"""Broker CPU per acknowledged acks=all message, and an A/B of two checkouts that holds on a busy machine.

Latency at a fixed rate (``latency.py``) is what users feel, but on a shared 2-core machine its
tail is mostly the machine's load. What the broker code controls is the CPU each replicated
message costs, which sets how much rate fits on the cores. This script measures that:

* a 3-broker cluster with a real ZooKeeper (``--brokers 1``: one broker), a 3-partition topic,
  replication factor 3, ``min.insync.replicas=2``;
* one confluent-kafka producer, ``acks=all``, idempotent, ``linger.ms`` 0 and one request in
  flight, sending each 100-byte message as its own Produce request and waiting for its
  acknowledgement (closed loop: every message costs one Produce and, per follower, the fetch
  that carries it and the fetch that proves it, the shape of a low-rate producer);
* the CPU (user + system) the broker processes used, divided by the messages: ms per message.

With ``--compare DIR`` a second cluster runs the code of another checkout (``git worktree`` or
``git archive | tar -x``) side by side, and the rounds alternate between the two, so both see the
same load; the medians and minima of the rounds are printed for each.

Usage::

    python bench/cpu_per_message.py                            # this checkout, 6 rounds x 1000
    python bench/cpu_per_message.py --compare /tmp/main-copy   # A/B: the other checkout vs this one

It is a script, not a test: nothing here asserts a cost.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import psutil  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import tests.support.brokers as brokers  # noqa: E402
from tests.support.brokers import SamsaBroker  # noqa: E402
from tests.support.cluster import SamsaCluster  # noqa: E402

quiet = logging.getLogger("bench.cpu_per_message")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


class Setup:
    """A cluster (or one broker) running the code of ``code``, a topic, and a warmed-up producer."""

    def __init__(self, code: Path, size: int, workdir: Path) -> None:
        self.code = code
        brokers.REPO_ROOT = code  # the broker subprocesses run from this checkout
        self.cluster: SamsaCluster | None = None
        self.broker: SamsaBroker | None = None
        if size == 1:
            self.broker = SamsaBroker(workdir / "data", workdir / "broker.log")
            self.broker.start(timeout=60)
            boot, pids, rf = self.broker.bootstrap, [self.broker.proc.pid if self.broker.proc else 0], 1
        else:
            self.cluster = SamsaCluster(workdir / "cluster", size).start()
            self.cluster.wait_for_brokers(size)
            boot, rf = self.cluster.bootstrap, min(size, 3)
            pids = [b.proc.pid for b in self.cluster.brokers if b.proc is not None]
        self.procs = [psutil.Process(p) for p in pids]
        admin = AdminClient({"bootstrap.servers": boot, "logger": quiet})
        self.topic = f"cpu-{uuid.uuid4().hex[:8]}"
        cfg = {"min.insync.replicas": "2"} if rf == 3 else {}
        for f in admin.create_topics([NewTopic(self.topic, 3, rf, config=cfg)]).values():
            f.result(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            t = admin.list_topics(self.topic, timeout=5).topics[self.topic]
            if t.error is None and len(t.partitions) == 3 and all(
                    p.leader >= 0 and len(p.isrs) == rf for p in t.partitions.values()):
                break
            time.sleep(0.05)
        self.producer = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 0,
                                  "enable.idempotence": True, "max.in.flight.requests.per.connection": 1,
                                  "logger": quiet})
        self.send(300)  # connections, metadata, producer id, page cache

    def send(self, n: int) -> None:
        for i in range(n):
            self.producer.produce(self.topic, b"x" * 100, partition=i % 3)
            self.producer.flush(30)

    def cpu_seconds(self) -> float:
        total = 0.0
        for p in self.procs:
            t = p.cpu_times()
            total += t.user + t.system
        return total

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        if self.broker is not None:
            self.broker.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", type=Path, help="another checkout, measured side by side (printed first)")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--messages", type=int, default=1000, help="messages per round")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    codes = ([args.compare.resolve()] if args.compare else []) + [REPO_ROOT]
    setups: list[Setup] = []
    with tempfile.TemporaryDirectory(prefix="samsa-cpu-") as tmp:
        try:
            for i, code in enumerate(codes):
                setups.append(Setup(code, args.brokers, Path(tmp) / str(i)))
            costs: dict[Path, list[float]] = {s.code: [] for s in setups}
            print(f"# {args.brokers} broker(s), acks=all, one 100-byte message per Produce, closed loop; "
                  f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
            for r in range(args.rounds):
                for s in setups:
                    c0, t0 = s.cpu_seconds(), time.monotonic()
                    s.send(args.messages)
                    dc, dt = s.cpu_seconds() - c0, time.monotonic() - t0
                    costs[s.code].append(1000 * dc / args.messages)
                    print(f"round {r} {s.code}: {1000 * dc / args.messages:.3f} ms CPU/msg, "
                          f"{args.messages / dt:.0f} msg/s, load {os.getloadavg()[0]:.1f}", flush=True)
            for code, v in costs.items():
                print(f"{code}: median {statistics.median(v):.3f}, min {min(v):.3f} ms broker CPU per message "
                      f"({len(v)} rounds of {args.messages})")
        finally:
            for s in setups:
                s.close()


if __name__ == "__main__":
    main()
