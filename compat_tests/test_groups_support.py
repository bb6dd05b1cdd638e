"""Shared machinery of the consumer-group compatibility tests (``test_groups_<client>.py``).

It holds no tests itself. Each consumer runs as its own process (so that one can be SIGKILLed,
as the issue requires): this file is also the worker program, run as
``python test_groups_support.py worker --client kafka-python ...``. A worker subscribes with a
stock client, and reports on stdout, one line per event:

* ``ASSIGN t:p,t:p`` whenever its assignment changes (checked after every poll);
* ``MSG p offset value`` for every record it consumes, then, after a synchronous commit of
  ``offset + 1``, ``COMMITTED p offset`` (or ``COMMITFAIL p offset`` if the commit was refused,
  e.g. mid-rebalance);
* ``CLOSED`` after ``close`` arrives on stdin and the consumer has closed (leaving the group).

The parent side (:class:`Worker`) collects those lines; the scenarios below check what the
issue asks for: a full and disjoint assignment, every message read exactly once, survivors
taking over from committed offsets, resumption after a broker restart, no rebalance on a static
member's restart. Waits are bounded generously; nothing here measures speed.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
PARTITIONS = 6
SESSION_TIMEOUT_MS = 6000
WAIT = 90.0  # seconds: a generous bound for rebalances that include a session expiry


# =============================================================================================
# worker side (runs in the consumer subprocess)
# =============================================================================================

def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _stdin_command() -> str | None:
    r, _, _ = select.select([sys.stdin], [], [], 0)
    if r:
        line = sys.stdin.readline()
        return line.strip() if line else "close"
    return None


def _fmt_assignment(tps: Iterable[tuple[str, int]]) -> str:
    return ",".join(f"{t}:{p}" for t, p in sorted(tps))


def _worker_kafka_python(a: Any) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.errors import KafkaError

    assignors: dict[str, Any] = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                                 "sticky": StickyPartitionAssignor}
    try:
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        assignors["cooperative-sticky"] = CooperativeStickyAssignor
    except ImportError:
        pass
    kw: dict[str, Any] = dict(bootstrap_servers=a.bootstrap, group_id=a.group, auto_offset_reset="earliest",
                              enable_auto_commit=False, session_timeout_ms=a.session_timeout,
                              heartbeat_interval_ms=1000, client_id=a.client_id,
                              partition_assignment_strategy=[assignors[a.assignor]])
    if a.instance:
        kw["group_instance_id"] = a.instance
    c = KafkaConsumer(**kw)
    c.subscribe([a.topic])
    last = None
    while True:
        cmd = _stdin_command()
        if cmd == "close":
            c.close()
            _emit("CLOSED")
            return
        # kafka-python 3.0.12 can lose a completed join when poll()'s timeout fires while its
        # on-join-complete step is still running (the member then never applies its assignment
        # and stops heartbeating); a poll timeout longer than a typical rebalance avoids that.
        batches = c.poll(timeout_ms=3000)
        cur = _fmt_assignment((tp.topic, tp.partition) for tp in c.assignment())
        if cur != last:
            _emit(f"ASSIGN {cur}")
            last = cur
        for records in batches.values():
            for r in records:
                _emit(f"MSG {r.partition} {r.offset} {r.value.decode()}")
                if a.delay_ms:
                    time.sleep(a.delay_ms / 1000)
                try:
                    c.commit({TopicPartition(r.topic, r.partition): OffsetAndMetadata(r.offset + 1, "", -1)})
                    _emit(f"COMMITTED {r.partition} {r.offset}")
                except KafkaError:
                    _emit(f"COMMITFAIL {r.partition} {r.offset}")


def _worker_confluent(a: Any) -> None:
    from confluent_kafka import Consumer, KafkaException

    conf: dict[str, Any] = {"bootstrap.servers": a.bootstrap, "group.id": a.group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "session.timeout.ms": a.session_timeout, "heartbeat.interval.ms": 1000,
                            "partition.assignment.strategy": a.assignor, "client.id": a.client_id,
                            "topic.metadata.refresh.interval.ms": 2000}
    if a.instance:
        conf["group.instance.id"] = a.instance
    c = Consumer(conf)
    c.subscribe([a.topic])
    last = None
    while True:
        cmd = _stdin_command()
        if cmd == "close":
            c.close()
            _emit("CLOSED")
            return
        m = c.poll(0.2)
        cur = _fmt_assignment((tp.topic, tp.partition) for tp in c.assignment())
        if cur != last:
            _emit(f"ASSIGN {cur}")
            last = cur
        if m is None or m.error():
            continue
        _emit(f"MSG {m.partition()} {m.offset()} {m.value().decode()}")
        if a.delay_ms:
            time.sleep(a.delay_ms / 1000)
        try:
            # A synchronous commit reports per-partition errors in its result, not by raising.
            res = c.commit(message=m, asynchronous=False)
            ok = all(tp.error is None for tp in res or [])
            _emit(f"{'COMMITTED' if ok else 'COMMITFAIL'} {m.partition()} {m.offset()}")
        except KafkaException:
            _emit(f"COMMITFAIL {m.partition()} {m.offset()}")


def _worker_confluent_consumer_protocol(a: Any) -> None:
    """librdkafka's KIP-848 consumer (``group.protocol=consumer``): the broker assigns, so
    ``--assignor`` names a server assignor (``group.remote.assignor``); the session timeout and
    heartbeat interval are the broker's (librdkafka refuses the classic settings here)."""
    from confluent_kafka import Consumer, KafkaException

    conf: dict[str, Any] = {"bootstrap.servers": a.bootstrap, "group.id": a.group,
                            "group.protocol": "consumer", "auto.offset.reset": "earliest",
                            "enable.auto.commit": False, "client.id": a.client_id,
                            "topic.metadata.refresh.interval.ms": 2000}
    if a.assignor in ("uniform", "range"):
        conf["group.remote.assignor"] = a.assignor
    if a.instance:
        conf["group.instance.id"] = a.instance
    c = Consumer(conf)
    if a.topic.startswith("^"):
        c.subscribe([a.topic])  # librdkafka sends a "^..." subscription as SubscribedTopicRegex
    else:
        c.subscribe(a.topic.split(","))
    last = None
    while True:
        cmd = _stdin_command()
        if cmd == "close":
            c.close()
            _emit("CLOSED")
            return
        m = c.poll(0.2)
        cur = _fmt_assignment((tp.topic, tp.partition) for tp in c.assignment())
        if cur != last:
            _emit(f"ASSIGN {cur}")
            last = cur
        if m is None or m.error():
            continue
        _emit(f"MSG {m.partition()} {m.offset()} {m.value().decode()}")
        if a.delay_ms:
            time.sleep(a.delay_ms / 1000)
        try:
            res = c.commit(message=m, asynchronous=False)
            ok = all(tp.error is None for tp in res or [])
            _emit(f"{'COMMITTED' if ok else 'COMMITFAIL'} {m.partition()} {m.offset()}")
        except KafkaException:
            _emit(f"COMMITFAIL {m.partition()} {m.offset()}")


def _worker_aiokafka(a: Any) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from aiokafka.errors import KafkaError

    assignors: dict[str, Any] = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                                 "sticky": StickyPartitionAssignor}

    async def run() -> None:
        kw: dict[str, Any] = dict(bootstrap_servers=a.bootstrap, group_id=a.group, auto_offset_reset="earliest",
                                  enable_auto_commit=False, session_timeout_ms=a.session_timeout,
                                  heartbeat_interval_ms=1000, client_id=a.client_id,
                                  partition_assignment_strategy=[assignors[a.assignor]])
        if a.instance:
            kw["group_instance_id"] = a.instance
        c = AIOKafkaConsumer(a.topic, **kw)
        await c.start()
        last = None
        while True:
            cmd = _stdin_command()
            if cmd == "close":
                await c.stop()
                _emit("CLOSED")
                return
            batches = await c.getmany(timeout_ms=200)
            cur = _fmt_assignment((tp.topic, tp.partition) for tp in c.assignment())
            if cur != last:
                _emit(f"ASSIGN {cur}")
                last = cur
            for records in batches.values():
                for r in records:
                    _emit(f"MSG {r.partition} {r.offset} {r.value.decode()}")
                    if a.delay_ms:
                        await asyncio.sleep(a.delay_ms / 1000)
                    try:
                        await c.commit({TopicPartition(r.topic, r.partition): r.offset + 1})
                        _emit(f"COMMITTED {r.partition} {r.offset}")
                    except KafkaError:
                        _emit(f"COMMITFAIL {r.partition} {r.offset}")

    asyncio.run(run())


WORKERS: dict[str, Callable[[Any], None]] = {
    "kafka-python": _worker_kafka_python,
    "confluent-kafka": _worker_confluent,
    "aiokafka": _worker_aiokafka,
    "confluent-kafka-consumer-protocol": _worker_confluent_consumer_protocol,
}


def worker_main(argv: list[str]) -> None:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True, choices=sorted(WORKERS))
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--assignor", default="range")
    ap.add_argument("--instance", default="")
    ap.add_argument("--client-id", default="groups-compat")
    ap.add_argument("--session-timeout", type=int, default=SESSION_TIMEOUT_MS)
    ap.add_argument("--delay-ms", type=int, default=0)
    a = ap.parse_args(argv)
    if os.environ.get("GROUPS_WORKER_LOG"):
        import logging
        logging.basicConfig(level=os.environ["GROUPS_WORKER_LOG"], stream=sys.stderr,
                            format="%(asctime)s %(name)s %(levelname)s %(message)s")
        for name in filter(None, os.environ.get("GROUPS_WORKER_DEBUG", "").split(",")):
            logging.getLogger(name).setLevel(logging.DEBUG)
    WORKERS[a.client](a)


# =============================================================================================
# parent side
# =============================================================================================

class Worker:
    """One consumer process and the events it reported."""

    def __init__(self, argv: list[str], name: str,
                 translate: Callable[[str], str | None] | None = None) -> None:
        """``translate`` turns a line of a program that does not speak the worker protocol
        (kcat) into a protocol line, or None to keep it only as diagnostics."""
        self.name = name
        self.lines: list[str] = []
        self.translate = translate
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT if translate else subprocess.PIPE,
                                     text=True, bufsize=1, env={**os.environ, "PYTHONPATH": str(ROOT)})
        self._cond = threading.Condition()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()
        if translate is None:
            threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if not raw.endswith("\n"):
                # The last words of a killed process: kcat's stdout is block-buffered into the pipe,
                # so a SIGKILL can leave half a "MSG p o v" line. Not a record it reported.
                self._stderr.append(f"(partial last line at exit: {raw!r})\n")
                continue
            line: str | None = raw.rstrip("\n")
            if self.translate is not None:
                self._stderr.append(raw)
                line = self.translate(raw.rstrip("\n"))
            if line is None:
                continue
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)
            del self._stderr[:-400000]

    @property
    def stderr(self) -> str:
        return "".join(self._stderr[-60:])

    def wait_for(self, pred: Callable[[Worker], bool], timeout: float = WAIT, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.name}: timed out waiting for {what or pred}; last lines "
                                         f"{self.lines[-8:]}; stderr:\n{self.stderr}")
                if self.proc.poll() is not None and not pred(self):
                    self._cond.wait(0.2)
                    if pred(self):
                        return
                    raise AssertionError(f"{self.name} exited ({self.proc.returncode}) while waiting for "
                                         f"{what}; stderr:\n{self.stderr}")
                self._cond.wait(min(left, 0.5))

    # --- views of the event stream ---------------------------------------------------------------

    def assignments(self) -> list[set[int]]:
        with self._cond:
            out = []
            for line in self.lines:
                if line.startswith("ASSIGN"):
                    rest = line[7:].strip()
                    out.append({int(x.split(":")[1]) for x in rest.split(",") if x})
            return out

    @property
    def assignment(self) -> set[int]:
        a = self.assignments()
        return a[-1] if a else set()

    def messages(self) -> list[tuple[int, int, str]]:
        with self._cond:
            return [(int(p), int(o), v) for _, p, o, v in
                    (line.split(" ", 3) for line in self.lines if line.startswith("MSG "))]

    def committed(self) -> set[tuple[int, int]]:
        with self._cond:
            return {(int(p), int(o)) for _, p, o in
                    (line.split(" ") for line in self.lines if line.startswith("COMMITTED "))}

    def uncommitted_values(self) -> set[str]:
        done = self.committed()
        return {v for p, o, v in self.messages() if (p, o) not in done}

    def values_read_while_reassigned(self) -> set[str]:
        """The record whose commit a rebalance refused, and those this consumer read after it
        and before it saw its new assignment. The client already held them (a batch fetched under the old generation)
        and commits them under the new one, but its positions for the new assignment were taken
        from the committed offsets when the assignment arrived, i.e. before those commits: it
        reads them again. That is the client's at-least-once contract (aiokafka's getmany batch
        outliving a rebalance), not a commit the coordinator lost."""
        out: set[str] = set()
        refused, last = False, None
        with self._cond:
            for line in self.lines:
                if line.startswith("COMMITFAIL"):
                    refused = True
                    if last is not None:  # the record whose commit was refused
                        out.add(last)
                elif line.startswith("ASSIGN"):
                    refused = False
                elif line.startswith("MSG "):
                    last = line.split(" ", 3)[3]
                    if refused:
                        out.add(last)
        return out

    # --- control ------------------------------------------------------------------------------------

    def close(self, timeout: float = 60) -> None:
        if self.translate is not None:  # kcat: SIGTERM makes it close its consumer and leave
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout)
            return
        assert self.proc.stdin is not None
        self.proc.stdin.write("close\n")
        self.proc.stdin.flush()
        self.wait_for(lambda w: "CLOSED" in w.lines, timeout, "CLOSED")
        self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)


# Clients whose worker is not this file: name -> argv builder
# (bootstrap, group, topic, assignor, instance, client_id, delay_ms) -> argv (the Java client).
EXTERNAL_WORKERS: dict[str, Callable[[str, str, str, str, str, str, int], list[str]]] = {}


class Group:
    """Starts workers of one or more client kinds and kills them all at the end."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.group = group
        self.workers: list[Worker] = []

    def start(self, client: str, *, assignor: str = "range", instance: str = "", delay_ms: int = 0,
              name: str | None = None, argv: list[str] | None = None) -> Worker:
        name = name or f"{client}-{len(self.workers)}"
        if client == "kcat":
            return self._start_kcat(name, assignor, instance)
        if client in EXTERNAL_WORKERS:
            argv = EXTERNAL_WORKERS[client](self.bootstrap, self.group, self.topic, assignor, instance,
                                            name, delay_ms)
        if argv is None:
            argv = [sys.executable, str(HERE), "worker", "--client", client, "--bootstrap", self.bootstrap,
                    "--group", self.group, "--topic", self.topic, "--assignor", assignor,
                    "--client-id", name, "--delay-ms", str(delay_ms)]
            if instance:
                argv += ["--instance", instance]
        w = Worker(argv, name)
        self.workers.append(w)
        return w

    def _start_kcat(self, name: str, assignor: str, instance: str) -> Worker:
        argv = ["kcat", "-b", self.bootstrap, "-G", self.group, "-u", "-f", "MSG %p %o %s\n",
                "-X", "auto.offset.reset=earliest", "-X", f"client.id={name}",
                "-X", f"session.timeout.ms={SESSION_TIMEOUT_MS}", "-X", "heartbeat.interval.ms=1000",
                "-X", "auto.commit.interval.ms=100", "-X", f"partition.assignment.strategy={assignor}"]
        if instance:
            argv += ["-X", f"group.instance.id={instance}"]
        w = Worker(argv + [self.topic], name, translate=kcat_translator())
        self.workers.append(w)
        return w

    def kill_all(self) -> None:
        for w in self.workers:
            w.kill()

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill_all()


def kcat_translator() -> Callable[[str], str | None]:
    """kcat -G's rebalance notices -> ``ASSIGN`` lines; its ``-f 'MSG %p %o %s'`` lines pass through.

    kcat prints one notice per rebalance callback (captured from kcat 1.7 / librdkafka 2.x):

    * eager protocol, the whole new assignment or the whole revoked set::

        % Group g rebalanced (memberid M): assigned: t [0], t [1]
        % Group g rebalanced (memberid M): revoked: t [0], t [1]

    * cooperative protocol (KIP-429), *deltas* against what the member already owns::

        % Group g rebalanced: incremental assignment of 2 partition(s) (memberid M, COOPERATIVE rebalance protocol): t [3], t [0]
        % Group g rebalanced: incremental revoke of 3 partition(s) (memberid M, COOPERATIVE rebalance protocol): t [0], t [1], t [2]

    so the member's assignment is the union of incremental assignments minus incremental revokes.
    A notice of an unknown shape is kept as a diagnostic only: guessing would record a revoked
    set as the assignment (the flaky ``assignment never balanced`` of issue 13).
    """
    current: set[tuple[str, int]] = set()

    def translate(line: str) -> str | None:
        if line.startswith("MSG "):
            return line
        if not (line.startswith("% Group") and "rebalanced" in line):
            return None
        head, sep, rest = line.rpartition("): ")
        if not sep:
            return None
        tps = set()
        for prefix in ("assigned: ", "revoked: "):
            if rest.startswith(prefix):
                rest = rest[len(prefix):]
        for item in rest.split(", "):
            topic, _, part = item.strip().rpartition(" [")
            if part.rstrip("]").isdigit():
                tps.add((topic, int(part.rstrip("]"))))
        incremental = "incremental " in head
        if incremental and ("incremental revoke" in head or "incremental unassignment" in head):
            current.difference_update(tps)
        elif incremental and "incremental assignment" in head:
            current.update(tps)
        elif not incremental and line[len(head) + 3:].startswith("assigned: "):
            current.clear()
            current.update(tps)
        elif not incremental and line[len(head) + 3:].startswith("revoked: "):
            current.clear()
        else:
            return None
        return f"ASSIGN {_fmt_assignment(current)}"
    return translate


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, batch: str, per_partition: int,
            partitions: int = PARTITIONS) -> list[str]:
    """Write ``per_partition`` messages to each partition; values are unique ``batch-p-i``."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    values = []
    try:
        for part in range(partitions):
            for i in range(per_partition):
                v = f"{batch}-{part}-{i}"
                p.send(topic, v.encode(), partition=part)
                values.append(v)
        p.flush(60)
    finally:
        p.close()
    return values


def all_values(workers: Iterable[Worker]) -> Counter[str]:
    return Counter(v for w in workers for _, _, v in w.messages())


def wait_balanced(workers: list[Worker], partitions: int = PARTITIONS, timeout: float = WAIT) -> None:
    """Until the workers' current assignments are disjoint, cover every partition, and are even."""
    deadline = time.monotonic() + timeout
    share = partitions // len(workers)
    while True:
        sets = [w.assignment for w in workers]
        union = set().union(*sets)
        if union == set(range(partitions)) and sum(map(len, sets)) == partitions and \
                all(len(s) == share for s in sets):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"assignment never balanced: {[(w.name, w.assignments()) for w in workers]}; "
                                 f"stderr: {[w.stderr for w in workers]}")
        for w in workers:
            if w.proc.poll() is not None:
                raise AssertionError(f"{w.name} exited: {w.stderr}")
        time.sleep(0.2)


def wait_consumed(workers: list[Worker], values: Iterable[str], timeout: float = WAIT) -> None:
    wanted = set(values)
    deadline = time.monotonic() + timeout
    while not wanted <= set(all_values(workers)):
        if time.monotonic() > deadline:
            missing = sorted(wanted - set(all_values(workers)))
            raise AssertionError(f"{len(missing)} messages never consumed, e.g. {missing[:5]}; "
                                 f"assignments {[(w.name, w.assignments()) for w in workers]}")
        time.sleep(0.2)


def describe_group(bootstrap: str, group: str) -> dict[str, Any]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return dict(admin.describe_groups([group])[group])
    finally:
        admin.close()


# =============================================================================================
# scenarios, shared by the per-client test files
# =============================================================================================

def scenario_three_consumers_then_close_and_kill(bootstrap: str, client: str | list[str]) -> None:
    """(a) three consumers of a 6-partition topic get two partitions each and read every message
    exactly once; (b) one closes, one is SIGKILLed mid-stream: the survivor takes over from the
    committed offsets, nothing is lost, and duplicates are only records the killed consumer had
    read but not committed."""
    clients = client if isinstance(client, list) else [client] * 3
    topic, group = unique("grp-t"), unique("grp")
    create_topic(bootstrap, topic)
    with Group(bootstrap, topic, group) as g:
        ws = [g.start(c, delay_ms=30) for c in clients]
        wait_balanced(ws)
        first = produce(bootstrap, topic, "one", 10)
        wait_consumed(ws, first)
        counts = all_values(ws)
        assert {v for v, n in counts.items() if n > 1} == set(), "a message was read twice in a stable group"
        assert set(counts) == set(first)
        for w in ws:
            assert {p for p, _, _ in w.messages()} <= w.assignment

        closer, victim, survivor = ws
        second = produce(bootstrap, topic, "two", 30)
        victim.wait_for(lambda w: any(v.startswith("two-") for _, _, v in w.messages()), what="batch two")
        victim.kill()
        closer.close()
        survivor.wait_for(lambda w: w.assignment == set(range(PARTITIONS)), what="all partitions")
        wait_consumed([survivor, closer, victim], second)
        counts = all_values(ws)
        dups = {v for v, n in counts.items() if n > 1}
        # A record may come again only if whoever read it had not committed it (the killed one,
        # the closing one, or the survivor whose commit a rebalance refused), or the survivor read
        # it from a batch it held across that rebalance (see values_read_while_reassigned).
        allowed = set().union(*(w.uncommitted_values() | w.values_read_while_reassigned() for w in ws))
        if not dups <= allowed:
            bad = sorted(dups - allowed)
            trace = {w.name: [line for line in w.lines if line.startswith("ASSIGN") or
                              any(line.endswith(" " + v) for v in bad[:3]) or
                              (line.startswith(("COMMIT", "MSG")) and f" {bad[0].split('-')[1]} " in line[:12])]
                     for w in ws}
            raise AssertionError(f"duplicates of committed messages: {bad[:5]}; events: {trace}")
        assert set(counts) == set(first) | set(second)


def scenario_resume_after_broker_restart(broker: Any, client: str) -> None:
    """(c) committed offsets survive a broker restart: a consumer started afterwards reads only
    what was produced after the commits; and a consumer that stays up across the restart carries
    on (its group is reloaded from ``__consumer_offsets``)."""
    bootstrap = broker.bootstrap
    topic, group = unique("grp-r"), unique("grp")
    create_topic(bootstrap, topic)
    with Group(bootstrap, topic, group) as g:
        w = g.start(client)
        wait_balanced([w])
        first = produce(bootstrap, topic, "before", 5)
        wait_consumed([w], first)
        w.wait_for(lambda x: len(x.committed()) >= len(first), what="commits")
        broker.restart()
        second = produce(broker.bootstrap, topic, "after", 5)
        wait_consumed([w], second)
        w.close()
        third = produce(broker.bootstrap, topic, "later", 3)
        broker.restart()
        w2 = g.start(client)
        wait_consumed([w2], third)
        seen = {v for _, _, v in w2.messages()}
        assert seen.isdisjoint(first) and seen.isdisjoint(second), \
            "a restarted group re-read committed messages"


def scenario_assignor(bootstrap: str, client: str, assignor: str) -> None:
    """(d) two consumers using ``assignor`` split the 6 partitions, disjoint and complete."""
    topic, group = unique(f"grp-{assignor}"), unique("grp")
    create_topic(bootstrap, topic)
    with Group(bootstrap, topic, group) as g:
        ws = [g.start(client, assignor=assignor) for _ in range(2)]
        wait_balanced(ws)
        values = produce(bootstrap, topic, "a", 3)
        wait_consumed(ws, values)
        assert set(all_values(ws)) == set(values)
        d = describe_group(bootstrap, group)
        assert d["group_state"] == "Stable" and d["protocol_data"] == assignor, d


def scenario_fetch_sessions(broker_factory: Callable[..., Any], client: str) -> None:
    """A consumer that uses fetch sessions (KIP-227) opens one with its first full fetch and then
    sends incremental fetches, whose answers leave out partitions with nothing new; everything
    produced in several rounds is read exactly once all the same. The broker's DEBUG log says
    what the sessions did (the client cannot see it)."""
    import re

    b = broker_factory({"log.level": "DEBUG"})
    topic, group = unique("grp-sessions"), unique("grp")
    create_topic(b.bootstrap, topic)
    with Group(b.bootstrap, topic, group) as g:
        w = g.start(client)
        wait_balanced([w])
        values: list[str] = []
        for r in range(3):
            values += produce(b.bootstrap, topic, f"s{r}", 2)
            wait_consumed([w], values)
        got = [v for _, _, v in w.messages()]
        assert sorted(got) == sorted(values) and len(got) == len(set(got))

        def answered() -> list[tuple[int, int]]:
            return [(int(a), int(n)) for a, n in
                    re.findall(r"incremental fetch answered (\d+) of (\d+)", b.log_text())]
        # Idle now: its next incremental fetches get answers without the unchanged partitions.
        deadline = time.monotonic() + 30
        while not any(a < n for a, n in answered()) and time.monotonic() < deadline:
            time.sleep(0.2)
    log = b.log_text()
    assert "Created fetch session" in log and "(consumer)" in log, f"{client} opened no fetch session"
    assert any(a < n for a, n in answered()), answered()[:20]


def scenario_cooperative_join(bootstrap: str, client: str) -> None:
    """KIP-429 as the client drives it: with cooperative-sticky, a third member joining a group
    of two takes partitions in two rebalances; the first two keep (never lose all of) their
    partitions meanwhile, and everything produced during the change is read exactly once."""
    topic, group = unique("grp-coop"), unique("grp")
    create_topic(bootstrap, topic)
    with Group(bootstrap, topic, group) as g:
        a = g.start(client, assignor="cooperative-sticky")
        b = g.start(client, assignor="cooperative-sticky")
        wait_balanced([a, b])
        before = {w.name: w.assignment for w in (a, b)}
        first = produce(bootstrap, topic, "c1", 2)
        c = g.start(client, assignor="cooperative-sticky")
        wait_balanced([a, b, c])
        for w in (a, b):
            history = w.assignments()
            start = history.index(before[w.name])
            assert all(history[start:]), f"{w.name} lost all its partitions: {history}"
            assert w.assignment <= before[w.name], f"{w.name} gained partitions: {history}"
        second = produce(bootstrap, topic, "c2", 2)
        wait_consumed([a, b, c], first + second)
        counts = all_values([a, b, c])
        dups = {v for v, n in counts.items() if n > 1}
        assert dups <= set().union(*(w.uncommitted_values() for w in (a, b, c)))


def scenario_static_member_restart(bootstrap: str, client: str) -> None:
    """(e) a static member (``group.instance.id``) that is killed and restarts within its session
    timeout gets its partitions back without a rebalance: the other member's assignment never
    changes and the restarted one owns what it owned before."""
    topic, group = unique("grp-s"), unique("grp")
    create_topic(bootstrap, topic)
    with Group(bootstrap, topic, group) as g:
        a = g.start(client, instance="static-a")
        b = g.start(client, instance="static-b")
        wait_balanced([a, b])
        b_before = b.assignment
        a_history = a.assignments()
        b.kill()
        b2 = g.start(client, instance="static-b", name="static-b-restarted")
        b2.wait_for(lambda w: bool(w.assignment), what="assignment after restart")
        assert b2.assignment == b_before
        values = produce(bootstrap, topic, "s", 2)
        wait_consumed([a, b2], values)
        assert a.assignments() == a_history, "the other member saw a rebalance"
        assert {p for p, _, _ in b2.messages()} == b_before
        members = describe_group(bootstrap, group)["members"]
        assert sorted(m["group_instance_id"] for m in members) == ["static-a", "static-b"]


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "worker":
    worker_main(sys.argv[2:])
