#!/usr/bin/env python3
"""Consumer-group latency: subscribe -> first message, and a 10-member rebalance after a leave.

Samsa and Tansu in the same run (issue #3, point 4). Consumers are confluent-kafka
(librdkafka), each polled by its own thread, with ``heartbeat.interval.ms=1000`` and
``session.timeout.ms=10000`` and the eager ``range`` assignor.

1. **subscribe -> first message**: a topic of 6 partitions holds one message per partition; a
   fresh consumer in a fresh group subscribes, and the clock runs from ``subscribe()`` until
   ``poll()`` returns the first message. That includes FindCoordinator, JoinGroup (twice, with
   KIP-394's MEMBER_ID_REQUIRED), the coordinator's ``group.initial.rebalance.delay.ms`` for a
   new group, SyncGroup, OffsetFetch, ListOffsets and the first Fetch.
2. **10-member rebalance after a leave**: ten consumers share a 10-partition topic (one each).
   When every one owns its partition, one member closes (LeaveGroup); the clock runs from just
   before ``close()`` until every survivor's ``on_assign`` of the new generation has fired and
   the survivors together own all 10 partitions again. Survivors learn of the rebalance from a
   heartbeat answered REBALANCE_IN_PROGRESS, so up to one heartbeat interval is inherent.

Samsa runs with each ``--initial-delays`` value (Kafka's default 3000 ms, and 0); Tansu takes
no such setting (its column says ``n/a``). Medians of ``--repeat`` runs.

Usage::

    python bench/rebalance.py                          # Samsa (delay 0 and 3000) and Tansu, 3 runs
    python bench/rebalance.py --brokers samsa --initial-delays 0 --repeat 5 --json out.json

A script, not a test: nothing here asserts a speed.

One run (2026-11-22, shared 2-core machine, ``--repeat 2``), medians in ms::

    broker    initial delay ms   subscribe->1st msg ms   rebalance (10, 1 leaves) ms
    samsa                    0                   130.3                         475.0
    samsa                 3000                  3205.9                         492.7
    tansu                  n/a                  5179.9                        5998.2

i.e. Samsa's first message comes within the initial delay plus one heartbeat interval, and a
leave is absorbed within one heartbeat interval (the survivors' next heartbeat).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.brokers import BrokerProcess, SamsaBroker, TansuBroker  # noqa: E402

HEARTBEAT_MS = 1000
SESSION_MS = 10000
MEMBERS = 10


@dataclass
class Row:
    broker: str
    initial_delay_ms: str
    first_message_ms: float
    rebalance_ms: float
    first_message_runs: list[float]
    rebalance_runs: list[float]


def consumer_conf(bootstrap: str, group: str, client_id: str) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": SESSION_MS,
            "partition.assignment.strategy": "range", "fetch.wait.max.ms": 50,
            "topic.metadata.refresh.interval.ms": 2000}


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and \
                all(p.leader >= 0 for p in t.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} has no leaders")


def produce_one_per_partition(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for part in range(partitions):
        p.produce(topic, b"x", partition=part)
    p.flush(30)


def time_to_first_message(bootstrap: str) -> float:
    from confluent_kafka import Consumer

    topic = f"rb-first-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 6)
    produce_one_per_partition(bootstrap, topic, 6)
    c = Consumer(consumer_conf(bootstrap, f"rb-g-{uuid.uuid4().hex[:8]}", "first"))
    try:
        t0 = time.perf_counter()
        c.subscribe([topic])
        deadline = t0 + 120
        while time.perf_counter() < deadline:
            m = c.poll(0.01)
            if m is not None and not m.error():
                return (time.perf_counter() - t0) * 1000
        raise RuntimeError("no message within 120 s")
    finally:
        c.close()


class Member:
    """A consumer polled by its own thread; records when each assignment arrived."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str) -> None:
        from confluent_kafka import Consumer

        conf = consumer_conf(bootstrap, group, name)
        self.consumer = Consumer(conf)
        cooperative = conf["partition.assignment.strategy"] == "cooperative-sticky"
        self.assigned: set[int] = set()
        self.assign_times: list[float] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.closed = threading.Event()

        # Eager callbacks carry the whole new assignment / the whole revoked set; cooperative
        # ones (KIP-429) carry deltas: the assignment is then assigned minus revoked.
        def on_assign(c: Any, parts: list[Any]) -> None:
            with self.lock:
                if cooperative:
                    self.assigned |= {p.partition for p in parts}
                else:
                    self.assigned = {p.partition for p in parts}
                self.assign_times.append(time.perf_counter())

        def on_revoke(c: Any, parts: list[Any]) -> None:
            with self.lock:
                if cooperative:
                    self.assigned -= {p.partition for p in parts}
                else:
                    self.assigned = set()

        self.consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.05)
        self.consumer.close()
        self.closed.set()

    def close(self) -> None:
        self.stop.set()
        self.closed.wait(60)


def time_to_rebalance(bootstrap: str) -> float:
    topic = f"rb-ten-{uuid.uuid4().hex[:8]}"
    group = f"rb-g-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, MEMBERS)
    members = [Member(bootstrap, group, topic, f"m{i}") for i in range(MEMBERS)]
    try:
        deadline = time.monotonic() + 180
        while True:
            with_parts = [m.assigned for m in members]
            if all(len(s) == 1 for s in with_parts) and set().union(*with_parts) == set(range(MEMBERS)):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"10 members never balanced: {with_parts}")
            time.sleep(0.05)
        time.sleep(0.5)
        leaver, survivors = members[0], members[1:]
        before = [len(m.assign_times) for m in survivors]
        t0 = time.perf_counter()
        leaver.close()
        deadline = time.monotonic() + 180
        while True:
            done = all(len(m.assign_times) > n for m, n in zip(survivors, before, strict=True))
            owned = [m.assigned for m in survivors]
            if done and set().union(*owned) == set(range(MEMBERS)) and sum(map(len, owned)) == MEMBERS:
                return (max(m.assign_times[-1] for m in survivors) - t0) * 1000
            if time.monotonic() > deadline:
                raise RuntimeError(f"survivors never rebalanced: {owned}")
            time.sleep(0.01)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.closed.wait(60)


def start_broker(kind: str, delay: int | None, base: Path) -> BrokerProcess:
    d = Path(tempfile.mkdtemp(dir=base))
    if kind == "samsa":
        b: BrokerProcess = SamsaBroker(d / "data", d / "broker.log",
                                       overrides={"group.initial.rebalance.delay.ms": delay,
                                                  "num.partitions": 1})
    else:
        b = TansuBroker(d / "data", d / "broker.log")
    b.start(timeout=60)
    return b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="samsa,tansu")
    ap.add_argument("--initial-delays", default="0,3000",
                    help="Samsa's group.initial.rebalance.delay.ms values to run (comma-separated)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="samsa-rebalance-bench-") as tmp:
        base = Path(tmp)
        cases: list[tuple[str, int | None]] = []
        for kind in args.brokers.split(","):
            if kind == "samsa":
                cases += [("samsa", int(x)) for x in args.initial_delays.split(",")]
            elif kind == "tansu":
                cases.append(("tansu", None))
            else:
                raise SystemExit(f"unknown broker {kind}")
        for kind, delay in cases:
            b = start_broker(kind, delay, base)
            try:
                firsts = [time_to_first_message(b.bootstrap) for _ in range(args.repeat)]
                rebalances = [time_to_rebalance(b.bootstrap) for _ in range(args.repeat)]
            finally:
                b.kill()
            row = Row(kind, "n/a" if delay is None else str(delay), statistics.median(firsts),
                      statistics.median(rebalances), [round(x, 1) for x in firsts],
                      [round(x, 1) for x in rebalances])
            rows.append(row)
            print(f"{row.broker:6} delay={row.initial_delay_ms:>5}  subscribe->first message "
                  f"{row.first_message_ms:8.1f} ms {row.first_message_runs}  10-member rebalance "
                  f"{row.rebalance_ms:8.1f} ms {row.rebalance_runs}", flush=True)
    print()
    print(f"{'broker':8}{'initial delay ms':>18}{'subscribe->1st msg ms':>24}{'rebalance (10, 1 leaves) ms':>30}")
    for r in rows:
        print(f"{r.broker:8}{r.initial_delay_ms:>18}{r.first_message_ms:>24.1f}{r.rebalance_ms:>30.1f}")
    print(f"\n(heartbeat.interval.ms={HEARTBEAT_MS}, session.timeout.ms={SESSION_MS}, "
          f"medians of {args.repeat} runs)")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in rows], indent=2))


if __name__ == "__main__":
    main()
