#!/usr/bin/env python3
"""Produce/consume throughput of stock clients against Samsa and against Tansu, in one run.

Why this exists: issue #2 asks for figures, not impressions.  Each *case* is one
(client, message size, partition count, broker) combination on a fresh topic:

1. create the topic through the Kafka AdminClient API (not timed);
2. produce N messages of the given size with realistic client settings and time
   from the first ``produce()`` until every delivery report is back (``flush``);
3. consume all N from the beginning with ``assign`` + seek to beginning (no
   consumer group, so no rebalance time is measured) and time until the N-th
   record arrived.

For each phase it records wall time, the client process's CPU time (all its
threads: librdkafka's I/O threads count) and the broker process's CPU time from
``/proc/PID/stat`` (psutil is not required).  100 % CPU means one core busy; the
machine has two, so a phase where broker% + client% approaches 200 % is
CPU-bound on the machine, one where the broker sits near 100 % is bound by the
broker's single event loop, and one where the broker is well below 100 % while
the client is near 100 % is bound by the client.

Tansu runs with in-memory storage while Samsa writes segment files to disk
(page cache, no fsync by default, like Kafka), so Tansu has a structural
advantage; the Samsa/Tansu ratio is printed per row anyway because that is the
target we track (>= 0.5x with confluent-kafka).

Usage::

    python bench/produce_consume.py                      # everything, defaults
    python bench/produce_consume.py --clients confluent --sizes 100 --partitions 1,6
    python bench/produce_consume.py --samsa-bootstrap 127.0.0.1:9092 --samsa-pid 1234
    python bench/produce_consume.py --json results.json --py-spy samsa-profile.txt
    python bench/produce_consume.py --brokers samsa,samsa-metrics --repeat 3   # metrics on vs off

It is a script, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.support.brokers import BrokerProcess, SamsaBroker, TansuBroker  # noqa: E402

CLIENTS = ("confluent", "kafka-python")
# samsa-metrics: Samsa with metrics.listener on and /metrics scraped every --scrape-interval s
# (Prometheus' default, 15 s, unless told), to show what counting and scraping cost.
BROKERS = ("samsa", "tansu", "samsa-metrics")
SIZES = (100, 1024)

# Default message counts per (client, size), chosen so that one case (produce +
# consume, one broker) takes roughly 5-10 s on the 2-core dev machine when it is
# otherwise idle, and the default run (1 partition, both brokers) about 1-2 min;
# librdkafka is about an order of magnitude faster per message than kafka-python.
# Disk: the confluent 1 KiB case writes ~1.1 GB to Samsa's temporary log dir
# (removed at exit) and holds as much in Tansu's memory.
DEFAULT_MESSAGES: dict[tuple[str, int], int] = {
    ("confluent", 100): 2_000_000,
    ("confluent", 1024): 1_000_000,
    ("kafka-python", 100): 200_000,
    ("kafka-python", 1024): 60_000,
}

CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_seconds(pid: int | None) -> float | None:
    """utime + stime of a process (all threads) in seconds, from /proc/PID/stat."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; fields after the last ')' are fixed.
    fields = raw[raw.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / CLK_TCK


def machine_busy_seconds() -> float:
    """CPU seconds spent non-idle on the whole machine (all cores), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


@dataclass
class Phase:
    """One timed phase (produce or consume) of a case."""

    messages: int = 0
    seconds: float = 0.0
    client_cpu_s: float = 0.0
    broker_cpu_s: float | None = None
    # Non-idle CPU of the whole machine minus this client and the broker: other engineers'
    # processes (and the other, idle broker). High values mean the figures are depressed.
    others_cpu_s: float | None = None
    errors: int = 0

    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def mb_per_s(self, size: int) -> float:
        return self.messages * size / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def client_pct(self) -> float:
        return 100.0 * self.client_cpu_s / self.seconds if self.seconds > 0 else 0.0

    def broker_pct(self) -> float | None:
        if self.broker_cpu_s is None or self.seconds <= 0:
            return None
        return 100.0 * self.broker_cpu_s / self.seconds

    def others_pct(self) -> float | None:
        if self.others_cpu_s is None or self.seconds <= 0:
            return None
        return 100.0 * self.others_cpu_s / self.seconds

    def broker_us_per_msg(self) -> float | None:
        """Broker CPU microseconds per message: robust to a busy machine, unlike msgs/s."""
        if self.broker_cpu_s is None or self.messages <= 0:
            return None
        return 1e6 * self.broker_cpu_s / self.messages


@dataclass
class CaseResult:
    client: str
    size: int
    partitions: int
    broker: str
    messages: int
    topic: str
    produce: Phase = field(default_factory=Phase)
    consume: Phase = field(default_factory=Phase)
    error: str | None = None


class Meter:
    """Measures wall time, this process's CPU time and the broker's CPU time across a block."""

    def __init__(self, broker_pid: int | None):
        self.broker_pid = broker_pid

    def start(self) -> None:
        self._t0 = time.perf_counter()
        self._c0 = time.process_time()
        self._b0 = proc_cpu_seconds(self.broker_pid)
        self._m0 = machine_busy_seconds()

    def stop(self, phase: Phase) -> None:
        phase.seconds = time.perf_counter() - self._t0
        phase.client_cpu_s = time.process_time() - self._c0
        b1 = proc_cpu_seconds(self.broker_pid)
        phase.broker_cpu_s = None if b1 is None or self._b0 is None else b1 - self._b0
        others = machine_busy_seconds() - self._m0 - phase.client_cpu_s - (phase.broker_cpu_s or 0.0)
        phase.others_cpu_s = max(0.0, others)


class PhaseTimeout(RuntimeError):
    pass


# --------------------------------------------------------------------------- topics


def create_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    """CreateTopics via confluent's AdminClient, then wait until every partition has a leader."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout, request_timeout=timeout)
    futures[topic].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5)
        t = md.topics.get(topic)
        if t is not None and t.error is None and len(t.partitions) == partitions and all(
            p.leader >= 0 for p in t.partitions.values()
        ):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} not ready after {timeout}s")


# --------------------------------------------------------------------------- confluent-kafka


def confluent_produce(bootstrap: str, topic: str, n: int, size: int, meter: Meter, phase: Phase,
                      timeout: float) -> None:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "acks": "all",
        "enable.idempotence": True,
        "queue.buffering.max.messages": 1_000_000,
        "queue.buffering.max.kbytes": 1_048_576,
    })
    producer.list_topics(topic, timeout=10)  # connect and learn leaders before the clock starts
    value = os.urandom(size)
    failed = 0
    delivered = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal failed, delivered
        if err is not None:
            failed += 1
        else:
            delivered += 1

    meter.start()
    deadline = time.monotonic() + timeout
    produce = producer.produce
    poll = producer.poll
    for i in range(n):
        while True:
            try:
                produce(topic, value, on_delivery=on_delivery)
                break
            except BufferError:
                poll(0.05)
                if time.monotonic() > deadline:
                    raise PhaseTimeout(f"produce stuck after {i} messages") from None
        if i & 1023 == 0:
            poll(0)
    remaining = producer.flush(max(1.0, deadline - time.monotonic()))
    meter.stop(phase)
    phase.messages = delivered
    phase.errors = failed
    if remaining:
        raise PhaseTimeout(f"{remaining} messages still undelivered at flush timeout")


def confluent_consume(bootstrap: str, topic: str, partitions: int, n: int, meter: Meter, phase: Phase,
                      timeout: float) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        # librdkafka insists on a group.id even for assign(); nothing is committed.
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        # librdkafka stops fetching once queued.min.messages (100k) sit in its local queue and
        # then waits fetch.queue.backoff.ms (default 1000 ms) before fetching again: with 100-byte
        # messages that measured librdkafka's pause (600k msgs took 3.4 s, 0.46 s with this).
        "fetch.queue.backoff.ms": 10,
    })
    try:
        consumer.list_topics(topic, timeout=10)
        got = 0
        errors = 0
        meter.start()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while got < n:
            if time.monotonic() > deadline:
                raise PhaseTimeout(f"consumed only {got} of {n}")
            # consume() blocks until num_messages arrived or the timeout passed, so never ask for
            # more than remain: otherwise the last call always sits out the whole timeout.
            for msg in consumer.consume(num_messages=min(10_000, n - got), timeout=0.5):
                if msg.error() is None:
                    got += 1
                else:
                    errors += 1
        meter.stop(phase)
        phase.messages = got
        phase.errors = errors
    finally:
        consumer.close()


# --------------------------------------------------------------------------- kafka-python


def kafka_python_produce(bootstrap: str, topic: str, n: int, size: int, meter: Meter, phase: Phase,
                         timeout: float) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        producer.partitions_for(topic)  # metadata before the clock starts
        value = os.urandom(size)
        failed = 0

        def on_error(_exc: BaseException) -> None:
            nonlocal failed
            failed += 1

        meter.start()
        send = producer.send
        for _ in range(n):
            send(topic, value).add_errback(on_error)
        producer.flush(timeout=timeout)
        meter.stop(phase)
        # flush() returns once every batch completed (success or failure).
        phase.messages = n - failed
        phase.errors = failed
    finally:
        producer.close(timeout=5)


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, n: int, meter: Meter, phase: Phase,
                         timeout: float) -> None:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.partitions_for_topic(topic)
        got = 0
        meter.start()
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while got < n:
            if time.monotonic() > deadline:
                raise PhaseTimeout(f"consumed only {got} of {n}")
            for records in consumer.poll(timeout_ms=500, max_records=10_000).values():
                got += len(records)
        meter.stop(phase)
        phase.messages = got
    finally:
        consumer.close()


PRODUCERS = {"confluent": confluent_produce, "kafka-python": kafka_python_produce}
CONSUMERS = {"confluent": confluent_consume, "kafka-python": kafka_python_consume}


# --------------------------------------------------------------------------- running


@dataclass
class Target:
    """A broker to bench: its bootstrap and, when known, the PID whose CPU time we read."""

    name: str
    bootstrap: str
    pid: int | None
    process: BrokerProcess | None = None
    scraper: Any = None


def run_case(target: Target, client: str, size: int, partitions: int, n: int, timeout: float) -> CaseResult:
    topic = f"bench-{client}-{size}-p{partitions}-{uuid.uuid4().hex[:8]}"
    result = CaseResult(client, size, partitions, target.name, n, topic)
    meter = Meter(target.pid)
    try:
        create_topic(target.bootstrap, topic, partitions)
        PRODUCERS[client](target.bootstrap, topic, n, size, meter, result.produce, timeout)
        CONSUMERS[client](target.bootstrap, topic, partitions, result.produce.messages, meter, result.consume,
                          timeout)
    except Exception as e:  # a failed case is reported, not fatal to the run
        result.error = f"{type(e).__name__}: {e}"
    return result


def start_brokers(args: argparse.Namespace, workdir: Path) -> dict[str, Target]:
    targets: dict[str, Target] = {}
    for name in args.brokers:
        given = getattr(args, f"{name}_bootstrap", None)
        if given:
            targets[name] = Target(name, given, getattr(args, f"{name}_pid"))
            continue
        proc: BrokerProcess
        metrics_port = None
        if name == "samsa-metrics":
            from tests.support.net import free_port  # noqa: PLC0415

            metrics_port = free_port()
            proc = SamsaBroker(workdir / f"{name}-data", workdir / f"{name}.log",
                               overrides={"metrics.listener": f"http://127.0.0.1:{metrics_port}"})
        else:
            cls = SamsaBroker if name == "samsa" else TansuBroker
            proc = cls(workdir / f"{name}-data", workdir / f"{name}.log")
        proc.start(timeout=60)
        assert proc.proc is not None
        targets[name] = Target(name, proc.bootstrap, proc.proc.pid, proc)
        if metrics_port is not None and args.scrape_interval > 0:
            targets[name].scraper = Scraper(metrics_port, args.scrape_interval)
        print(f"# started {name} on {proc.bootstrap} (pid {proc.proc.pid}, log {proc.log_path})", file=sys.stderr)
    return targets


class Scraper:
    """Scrapes /metrics every ``interval`` s from a thread; counts scrapes and their latency."""

    def __init__(self, port: int, interval: float) -> None:
        import threading  # noqa: PLC0415

        self.port = port
        self.interval = interval
        self.stop = threading.Event()
        self.scrapes = 0
        self.seconds: list[float] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import urllib.request  # noqa: PLC0415

        while not self.stop.wait(self.interval):
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=30) as r:
                    r.read()
            except OSError as e:
                print(f"# scrape failed: {e}", file=sys.stderr)
                continue
            self.seconds.append(time.monotonic() - t0)
            self.scrapes += 1

    def close(self) -> str:
        self.stop.set()
        self.thread.join(35)
        if not self.seconds:
            return "no scrapes"
        xs = sorted(self.seconds)
        return (f"{self.scrapes} scrapes, median {1000 * xs[len(xs) // 2]:.1f} ms, "
                f"max {1000 * xs[-1]:.1f} ms")


def fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}%"


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def best_of(results: list[CaseResult]) -> list[CaseResult]:
    """Collapse repeated runs of a case into one row: the best produce and the best consume phase.

    On a shared machine interference only ever slows a run down, so the fastest repetition is
    the best estimate of what the broker can do; every run is still in the JSON output.
    """
    groups: dict[tuple[str, int, int, str], list[CaseResult]] = {}
    for r in results:
        groups.setdefault((r.client, r.size, r.partitions, r.broker), []).append(r)
    out = []
    for runs in groups.values():
        ok = [r for r in runs if not r.error]
        if not ok:
            out.append(runs[0])
            continue
        best = CaseResult(**{**asdict(ok[0]), "produce": Phase(), "consume": Phase()})
        best.produce = max((r.produce for r in ok), key=lambda ph: ph.msgs_per_s())
        best.consume = max((r.consume for r in ok), key=lambda ph: ph.msgs_per_s())
        best.error = None
        out.append(best)
    return out


def print_metrics_ratio(results: list[CaseResult]) -> None:
    """Metrics on/off: the median over repetitions of broker CPU per message, which a busy
    machine disturbs far less than msgs/s, and of msgs/s, per case run on both."""
    import statistics  # noqa: PLC0415

    cases: dict[tuple[str, int, int], dict[str, list[CaseResult]]] = {}
    for r in results:
        if not r.error and r.broker in ("samsa", "samsa-metrics"):
            cases.setdefault((r.client, r.size, r.partitions), {}).setdefault(r.broker, []).append(r)
    for (client, size, parts), by in cases.items():
        if len(by) < 2:
            continue

        def med(runs: list[CaseResult], f: Any) -> float:
            vals = [v for v in (f(r) for r in runs) if v is not None]
            return statistics.median(vals) if vals else 0.0

        cols = []
        for label, f in (("broker us/msg produce", lambda r: r.produce.broker_us_per_msg()),
                         ("consume", lambda r: r.consume.broker_us_per_msg()),
                         ("msg/s produce", lambda r: r.produce.msgs_per_s()),
                         ("consume", lambda r: r.consume.msgs_per_s())):
            off, on = med(by["samsa"], f), med(by["samsa-metrics"], f)
            cols.append(f"{label} {off:.3g} -> {on:.3g} ({fmt_ratio(on, off)})")
        n = min(len(by["samsa"]), len(by["samsa-metrics"]))
        print(f"metrics off -> on, {client} {size}B p{parts}, medians of {n} runs each: " + ", ".join(cols))


def print_table(results: list[CaseResult]) -> None:
    rows = best_of(results)
    header = (
        f"{'client':<13}{'size':>5}{'parts':>6} {'broker':<7}"
        f"{'prod msg/s':>11}{'MB/s':>7}{'cons msg/s':>11}{'MB/s':>7}"
        f"{'S/T prod':>9}{'S/T cons':>9}"
        f"{'brk%P':>7}{'cli%P':>6}{'brk%C':>7}{'cli%C':>6}"
        f"{'brk us/msg P':>13}{'C':>6}{'oth%':>6}"
    )
    print(header)
    print("-" * len(header))
    by_key = {(r.client, r.size, r.partitions, r.broker): r for r in rows}
    for r in rows:
        if r.error:
            print(f"{r.client:<13}{r.size:>5}{r.partitions:>6} {r.broker:<7} FAILED: {r.error}")
            continue
        rp, rc = "", ""
        tansu = by_key.get((r.client, r.size, r.partitions, "tansu"))
        samsa = by_key.get((r.client, r.size, r.partitions, "samsa"))
        if r.broker == "samsa-metrics":  # compared with plain samsa: metrics on / off
            tansu, samsa = samsa, r
        if samsa and tansu and not samsa.error and not tansu.error:
            rp = fmt_ratio(samsa.produce.msgs_per_s(), tansu.produce.msgs_per_s())
            rc = fmt_ratio(samsa.consume.msgs_per_s(), tansu.consume.msgs_per_s())
        us_p, us_c = r.produce.broker_us_per_msg(), r.consume.broker_us_per_msg()
        oth = [v for v in (r.produce.others_pct(), r.consume.others_pct()) if v is not None]
        print(
            f"{r.client:<13}{r.size:>5}{r.partitions:>6} {r.broker:<7}"
            f"{r.produce.msgs_per_s():>11,.0f}{r.produce.mb_per_s(r.size):>7.1f}"
            f"{r.consume.msgs_per_s():>11,.0f}{r.consume.mb_per_s(r.size):>7.1f}"
            f"{rp:>9}{rc:>9}"
            f"{fmt_pct(r.produce.broker_pct()):>7}{fmt_pct(r.produce.client_pct()):>6}"
            f"{fmt_pct(r.consume.broker_pct()):>7}{fmt_pct(r.consume.client_pct()):>6}"
            f"{'-' if us_p is None else f'{us_p:.1f}':>13}{'-' if us_c is None else f'{us_c:.1f}':>6}"
            f"{fmt_pct(max(oth) if oth else None):>6}"
        )
    print(
        "\nMB/s counts message values only (10^6 bytes). S/T = Samsa/Tansu msgs/s for the same client, size"
        "\nand partitions. brk%/cli% = CPU time of the broker process / this bench client process over the"
        "\nphase's wall time (100% = one core; the machine has 2). P = produce, C = consume. brk us/msg ="
        "\nbroker CPU microseconds per message (insensitive to machine load). oth% = CPU used by everything"
        "\nelse on the machine during the slower phase (other engineers' jobs): high values depress msgs/s."
        "\nTansu keeps data in memory; Samsa writes segment files. With --repeat, best run per phase."
        "\nOn samsa-metrics rows S/T is samsa-metrics/samsa: metrics on / off (see --scrape-interval)."
    )


def summarize_py_spy(raw_path: Path, top: int = 25) -> str:
    """Top functions by self and inclusive samples from py-spy's collapsed-stack ('raw') output."""
    self_c: Counter[str] = Counter()
    incl_c: Counter[str] = Counter()
    total = 0
    for line in raw_path.read_text(errors="replace").splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        total += count
        frames = stack.split(";")
        # A process-level root frame ("process 123:...") is not a function.
        frames = [f for f in frames if not f.startswith("process ") and not f.startswith("thread ")]
        if not frames:
            continue
        self_c[frames[-1]] += count
        for f in set(frames):
            incl_c[f] += count
    out = [f"py-spy samples: {total}", "", f"Top {top} by self time:"]
    for f, c in self_c.most_common(top):
        out.append(f"  {100 * c / total:5.1f}%  {f}")
    out += ["", f"Top {top} by inclusive time:"]
    for f, c in incl_c.most_common(top):
        out.append(f"  {100 * c / total:5.1f}%  {f}")
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    def csv(kind: type, allowed: tuple[Any, ...] | None = None):
        def parse(text: str) -> list[Any]:
            items = [kind(x.strip()) for x in text.split(",") if x.strip()]
            if allowed is not None:
                bad = [x for x in items if x not in allowed]
                if bad:
                    raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {','.join(map(str, allowed))}")
            return items

        return parse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--messages", type=int, default=None,
                   help="messages per case (default: per client/size, ~5-10 s per case)")
    p.add_argument("--clients", type=csv(str, CLIENTS), default=list(CLIENTS), help="confluent,kafka-python")
    p.add_argument("--sizes", type=csv(int), default=list(SIZES), help="message value sizes in bytes (100,1024)")
    p.add_argument("--partitions", type=csv(int), default=[1], help="partition counts per topic, e.g. 1,6")
    p.add_argument("--brokers", type=csv(str, BROKERS), default=["samsa", "tansu"],
                   help="samsa,tansu (samsa-metrics: samsa with metrics.listener on)")
    p.add_argument("--scrape-interval", type=float, default=15.0,
                   help="samsa-metrics: scrape /metrics every S seconds from the bench (0: never; default 15)")
    p.add_argument("--samsa-bootstrap", help="use an already-running Samsa at host:port")
    p.add_argument("--samsa-pid", type=int, help="its PID, to report broker CPU time")
    p.add_argument("--tansu-bootstrap", help="use an already-running Tansu at host:port")
    p.add_argument("--tansu-pid", type=int, help="its PID, to report broker CPU time")
    p.add_argument("--repeat", type=int, default=1, help="run each case R times; the table shows the best run")
    p.add_argument("--timeout", type=float, default=120.0, help="give up a phase after this many seconds")
    p.add_argument("--json", metavar="PATH", help="also write results as JSON ('-' for stdout)")
    p.add_argument("--py-spy", metavar="PATH",
                   help="record the Samsa broker with py-spy (collapsed stacks) over the whole run and print "
                        "its top functions")
    p.add_argument("--py-spy-native", action="store_true",
                   help="with --py-spy: also sample C frames (uvloop, syscalls); slower sampling")
    p.add_argument("--keep", action="store_true", help="keep the temporary data/log directory")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="samsa-bench-"))
    targets: dict[str, Target] = {}
    spy: subprocess.Popen[bytes] | None = None
    results: list[CaseResult] = []
    try:
        targets = start_brokers(args, workdir)
        if args.py_spy and "samsa" in targets and targets["samsa"].pid:
            spy = subprocess.Popen(
                ["py-spy", "record", "--pid", str(targets["samsa"].pid), "--format", "raw", "--rate", "200",
                 "--function", "--output", args.py_spy]
                # Native unwinding must stop the process for each sample; plain sampling need not.
                + (["--native"] if args.py_spy_native else ["--nonblocking"]),
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )
            time.sleep(1.0)
        with open("/proc/loadavg") as f:
            print(f"# loadavg at start: {f.read().strip()}", file=sys.stderr)
        for partitions in args.partitions:
            for client in args.clients:
                for size in args.sizes:
                    n = args.messages or DEFAULT_MESSAGES.get((client, size), 100_000)
                    # Brokers back to back for each case so both see similar background load, in
                    # ABBA order over repetitions so that neither always runs first (the page cache
                    # and the machine's load drift between back-to-back runs).
                    order = [b for r in range(args.repeat)
                             for b in (args.brokers if r % 2 == 0 else args.brokers[::-1])]
                    for name in order:
                        r = run_case(targets[name], client, size, partitions, n, args.timeout)
                        results.append(r)
                        status = r.error or (
                            f"produce {r.produce.msgs_per_s():,.0f} msg/s in {r.produce.seconds:.1f}s, "
                            f"consume {r.consume.msgs_per_s():,.0f} msg/s in {r.consume.seconds:.1f}s"
                        )
                        print(f"# {client} {size}B p{partitions} {name} n={n}: {status}", file=sys.stderr,
                              flush=True)
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()
                spy.wait()
        for t in targets.values():
            if t.scraper is not None:
                print(f"# {t.name}: {t.scraper.close()}", file=sys.stderr)
            if t.process is not None:
                t.process.stop(timeout=10)
        if args.keep:
            print(f"# kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    print_table(results)
    print_metrics_ratio(results)
    if args.py_spy and Path(args.py_spy).exists():
        print()
        print(summarize_py_spy(Path(args.py_spy)))
    elif spy is not None and spy.stderr is not None:
        print(f"# py-spy wrote no profile: {spy.stderr.read().decode(errors='replace')[-2000:]}", file=sys.stderr)
    if args.json:
        payload = {
            "results": [
                {
                    **asdict(r),
                    "produce_msgs_per_s": r.produce.msgs_per_s(),
                    "produce_mb_per_s": r.produce.mb_per_s(r.size),
                    "consume_msgs_per_s": r.consume.msgs_per_s(),
                    "consume_mb_per_s": r.consume.mb_per_s(r.size),
                    "produce_broker_us_per_msg": r.produce.broker_us_per_msg(),
                    "consume_broker_us_per_msg": r.consume.broker_us_per_msg(),
                }
                for r in results
            ],
            "python": sys.version,
            "cpus": os.cpu_count(),
        }
        text = json.dumps(payload, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
