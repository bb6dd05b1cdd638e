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

A cluster in use has more partitions than the one written: ``--offsets-topic`` creates
``__consumer_offsets`` first (50 partitions, as a consumer group's first commit does) and
``--idle-partitions N`` a topic of N partitions never written. Every follower's fetch session
holds them, so each replication round also pays for the idle partitions of the session.

Usage::

    python bench/cpu_per_message.py                            # this checkout, 6 rounds x 1000
    python bench/cpu_per_message.py --compare /tmp/main-copy   # A/B: the other checkout vs this one
    python bench/cpu_per_message.py --offsets-topic --idle-partitions 300

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
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import tests.support.brokers as brokers  # noqa: E402
from tests.support.brokers import SamsaBroker  # noqa: E402
from tests.support.cluster import SamsaCluster  # noqa: E402

quiet = logging.getLogger("bench.cpu_per_message")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


class Setup:
    """A cluster (or one broker) running the code of ``code``, a topic, and a warmed-up producer."""

    def __init__(self, code: Path, size: int, workdir: Path, offsets_topic: bool = False,
                 idle_partitions: int = 0) -> None:
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
        new = [NewTopic(self.topic, 3, rf, config=cfg)]
        if idle_partitions:  # never written: each follower's fetch session holds them all the same
            new.append(NewTopic(f"{self.topic}-idle", idle_partitions, rf))
        for f in admin.create_topics(new).values():
            f.result(60)
        for t in new:
            _wait_full_isr(admin, t.topic, 120)
        if offsets_topic:
            self._create_offsets_topic(boot, admin)
        self.producer = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 0,
                                  "enable.idempotence": True, "max.in.flight.requests.per.connection": 1,
                                  "logger": quiet})
        self.send(300)  # connections, metadata, producer id, page cache

    def _create_offsets_topic(self, boot: str, admin: AdminClient) -> None:
        """A consumer group's first commit creates ``__consumer_offsets`` (50 partitions, RF 3 on a
        cluster), as on every cluster with a consumer group: each follower's fetch session then
        holds its idle partitions beside the measured topic's."""
        consumer = Consumer({"bootstrap.servers": boot, "group.id": f"cpu-{uuid.uuid4().hex[:8]}",
                             "enable.auto.commit": False, "logger": quiet})
        deadline = time.monotonic() + 60
        try:
            consumer.assign([TopicPartition(self.topic, 0, 0)])
            while True:
                try:
                    consumer.commit(offsets=[TopicPartition(self.topic, 0, 0)], asynchronous=False)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        finally:
            consumer.close()
        _wait_full_isr(admin, "__consumer_offsets", 60)

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


def _wait_full_isr(admin: AdminClient, topic: str, timeout: float) -> None:
    """Until every partition of ``topic`` has a leader and all its replicas in sync."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        t = admin.list_topics(topic, timeout=5).topics.get(topic)
        if t is not None and t.error is None and t.partitions and all(
                p.leader >= 0 and len(p.isrs) == len(p.replicas) for p in t.partitions.values()):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{topic} did not get its leaders and full ISRs within {timeout:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", type=Path, help="another checkout, measured side by side (printed first)")
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--messages", type=int, default=1000, help="messages per round")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--offsets-topic", action="store_true",
                    help="create __consumer_offsets first (a consumer group's commit), as on a cluster in use")
    ap.add_argument("--idle-partitions", type=int, default=0,
                    help="also create a topic of this many partitions that is never written")
    args = ap.parse_args()
    codes = ([args.compare.resolve()] if args.compare else []) + [REPO_ROOT]
    setups: list[Setup] = []
    with tempfile.TemporaryDirectory(prefix="samsa-cpu-") as tmp:
        try:
            for i, code in enumerate(codes):
                setups.append(Setup(code, args.brokers, Path(tmp) / str(i), args.offsets_topic,
                                    args.idle_partitions))
            costs: dict[Path, list[float]] = {s.code: [] for s in setups}
            print(f"# {args.brokers} broker(s), acks=all, one 100-byte message per Produce, closed loop"
                  f"{', __consumer_offsets present' if args.offsets_topic else ''}"
                  f"{f', {args.idle_partitions} idle partitions' if args.idle_partitions else ''}; "
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
