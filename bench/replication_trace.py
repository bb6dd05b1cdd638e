#!/usr/bin/env python3
"""Where an acks=all produce spends its time on three brokers: the replication trace, hop by hop.

Starts three Samsa brokers (RF 3, ``min.insync.replicas=2``) with ``SAMSA_REPLICATION_TRACE`` set
(broker/replica/trace.py: every broker writes a timestamp at each hop, on the machine-wide
CLOCK_MONOTONIC), sends ``--rate`` msg/s of ``--size`` bytes from a confluent-kafka producer
paced by sleeping (acks=all, linger.ms=0, idempotent unless ``--no-idempotence``, as
bench/latency.py), then merges the brokers' traces and prints, over the measured seconds:

* **hops**: for a sample of the leaders' appends, the time from the append to each follower's
  read of it on the leader (the parked follower Fetch woken), to the follower's append, to the
  follower's next Fetch arriving at the leader, and to the high watermark passing it (the
  DelayedProduce completes there);
* **Produce on the leader**: frame in -> response out;
* **stalls**: moments when *no* broker recorded anything for 5 ms or more while records were
  waiting to be replicated, and how long each broker went silent;
* **client**: CPU of the producer's threads (librdkafka's ``rdk:broker*`` threads apart);
* **run queue** (``--perf-sched``, needs ``perf``, with either client): how long each broker's
  event-loop thread waited for a CPU once woken (``perf sched timehist``'s scheduling delay), how
  often it was preempted while running and how long it then stayed runnable off the CPU, and
  which threads ran in its place.

Usage::

    python bench/replication_trace.py --rate 10000 --seconds 5
    python bench/replication_trace.py --rate 10000 --seconds 5 --perf-sched
    python bench/replication_trace.py --rate 3000 --no-idempotence
    python bench/replication_trace.py --rate 10000 --client java   # bench/latency.py's Java producer

A measuring tool, not a test: nothing here asserts a latency.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import psutil  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from latency import Target, compile_java_producer, row, run_case  # noqa: E402

from tests.support.cluster import SamsaCluster  # noqa: E402

Event = tuple[int, int, str, list[str]]  # (ns, pid, name, fields)


def pct(values: list[float], p: float) -> float:
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def dist(name: str, values_ns: list[int]) -> str:
    if not values_ns:
        return f"{name:<42} (none)"
    v = sorted(x / 1e6 for x in values_ns)
    return (f"{name:<42} n={len(v):>6}  p50 {pct(v, 50):7.2f}  p90 {pct(v, 90):7.2f}  p99 {pct(v, 99):7.2f}  "
            f"max {v[-1]:7.2f} ms")


def load_trace(directory: Path) -> list[Event]:
    events: list[Event] = []
    for f in directory.glob("trace-*.log"):
        for line in f.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3:
                events.append((int(parts[0]), int(parts[1]), parts[2], parts[3:]))
    events.sort()
    return events


def first_at_or_after(rows: list[tuple[int, int]], t: int, at_least: int) -> int | None:
    """Time of the first (time, offset) row at or after ``t`` whose offset reaches ``at_least``."""
    i = bisect.bisect_left(rows, (t, -1))
    for ts, off in rows[i:]:
        if off >= at_least:
            return ts
    return None


def hops(events: list[Event], start: int, end: int, sample: int) -> list[str]:
    reads: dict[tuple[str, str, str], list[tuple[int, int, int]]] = defaultdict(list)
    fetches: dict[tuple[str, str, str], list[tuple[int, int]]] = defaultdict(list)
    fappends: dict[tuple[int, str, str], list[tuple[int, int]]] = defaultdict(list)
    hws: dict[tuple[int, str, str], list[tuple[int, int]]] = defaultdict(list)
    appends = []
    for t, pid, name, a in events:
        if name == "read":
            reads[(a[0], a[1], a[2])].append((t, int(a[3]), int(a[4])))
        elif name == "fetch":
            fetches[(a[0], a[1], a[2])].append((t, int(a[3])))
        elif name == "fappend":
            fappends[(pid, a[0], a[1])].append((t, int(a[2])))
        elif name == "hw":
            hws[(pid, a[0], a[1])].append((t, int(a[2])))
        elif name == "append" and start <= t <= end:
            appends.append((t, pid, a[0], a[1], int(a[2])))
    replicas = sorted({k[2] for k in fetches})
    out: dict[str, list[int]] = defaultdict(list)
    for t0, pid, topic, part, end_offset in appends[::sample]:
        hw = first_at_or_after(hws[(pid, topic, part)], t0, end_offset)
        if hw is None:
            continue
        out["append -> high watermark (acks=all done)"].append(hw - t0)
        for r in replicas:
            rows = reads[(topic, part, r)]
            i = bisect.bisect_left(rows, (t0, -1, -1))
            read = next((ts for ts, frm, leo in rows[i:] if frm < end_offset <= leo), None)
            nxt = first_at_or_after(fetches[(topic, part, r)], t0, end_offset)
            if read is not None and nxt is not None:
                out["append -> follower's read on the leader"].append(read - t0)
                out["read -> follower's next Fetch at leader"].append(nxt - read)
        for (fpid, ftopic, fpart), rows2 in fappends.items():
            if (ftopic, fpart) == (topic, part) and fpid != pid:
                fa = first_at_or_after(rows2, t0, end_offset)
                if fa is not None:
                    out["append -> follower appended"].append(fa - t0)
    order = ["append -> follower's read on the leader", "append -> follower appended",
             "read -> follower's next Fetch at leader", "append -> high watermark (acks=all done)"]
    return [dist(k, out[k]) for k in order]


def produce_times(events: list[Event], start: int, end: int) -> list[str]:
    arrived: dict[tuple[int, str, str], int] = {}
    per_pid: dict[int, list[int]] = defaultdict(list)
    for t, pid, name, a in events:
        if name in ("in", "out") and a[0] == "0":
            key = (pid, a[1], a[2])
            if name == "in":
                arrived[key] = t
            elif key in arrived and start <= t <= end:
                per_pid[pid].append(t - arrived.pop(key))
    return [dist(f"Produce in -> out, broker pid {pid}", v) for pid, v in sorted(per_pid.items())]


def pending_intervals(events: list[Event]) -> list[tuple[int, int]]:
    """(append time, high-watermark time) of every leader append: records waiting to be replicated."""
    hws: dict[tuple[int, str, str], list[tuple[int, int]]] = defaultdict(list)
    for t, pid, name, a in events:
        if name == "hw":
            hws[(pid, a[0], a[1])].append((t, int(a[2])))
    out = []
    for t, pid, name, a in events:
        if name == "append":
            hw = first_at_or_after(hws[(pid, a[0], a[1])], t, int(a[2]))
            out.append((t, hw if hw is not None else t))
    return out


def stalls(events: list[Event], start: int, end: int, pids: list[int], threshold_ms: float = 5.0) -> list[str]:
    pending = pending_intervals(events)
    starts = [a for a, _b in pending]
    longest_until = list(itertools.accumulate((b for _a, b in pending), max))  # over appends so far

    def waiting(g0: int, g1: int) -> bool:  # some record appended by g0 still unreplicated at g1
        i = bisect.bisect_right(starts, g0)
        return i > 0 and longest_until[i - 1] >= g1

    last_any = start
    silent_all: list[int] = []
    last: dict[int, int] = {}
    silent: dict[int, list[int]] = defaultdict(list)
    for t, pid, _name, _a in events:
        if t < start or t > end:
            continue
        if t - last_any >= threshold_ms * 1e6 and waiting(last_any, t):
            silent_all.append(t - last_any)
        last_any = t
        if pid in last and t - last[pid] >= threshold_ms * 1e6:
            silent[pid].append(t - last[pid])
        last[pid] = t
    lines = [f"all brokers silent >= {threshold_ms:g} ms with records waiting to be replicated: {len(silent_all)} times, "
             f"{sum(silent_all) / 1e6:.0f} ms in all over {(end - start) / 1e9:.1f} s"]
    for pid in pids:
        s = silent[pid]
        lines.append(f"broker pid {pid} silent >= {threshold_ms:g} ms: {len(s)} times, {sum(s) / 1e6:.0f} ms in all, "
                     f"longest {max(s, default=0) / 1e6:.1f} ms")
    gcs = [(int(a[0]), int(a[1])) for t, _p, n, a in events if n == "gc" and start <= t <= end]
    lines.append(f"cyclic GC in the window: {len(gcs)} collections, longest {max((us for _g, us in gcs), default=0) / 1000:.1f} ms")
    return lines


# perf sched timehist --state: time, [cpu], comm[tid/pid], wait, sched delay, run time (ms), state at switch-out
TIMEHIST = re.compile(r"^\s*([\d.]+)\s+\[(\d+)\]\s+(.*?)\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")


def perf_sched(data: Path, pids: list[int]) -> list[str]:
    """Each broker's event-loop thread over the recorded window: how long it waited for a CPU once
    woken (scheduling delay), how often it was preempted while running and how long it then
    waited to run again, and which tasks took the CPU from it (by thread name)."""
    proc = subprocess.run(["perf", "sched", "timehist", "--state", "-i", str(data)], capture_output=True, text=True)
    delays: dict[int, list[float]] = defaultdict(list)
    preempted_waits: dict[int, list[float]] = defaultdict(list)
    on_cpu: dict[int, float] = defaultdict(float)
    last_state: dict[int, str] = {}
    preemptors: dict[str, int] = defaultdict(int)
    prev_on_cpu: dict[str, tuple[int, str]] = {}  # cpu -> (tid, state) of the last slice that ended there
    first = last = 0.0
    watched = set(pids)
    for line in proc.stdout.splitlines():
        m = TIMEHIST.match(line)
        if m is None:
            continue
        t, cpu, comm, tid_s, _pid, wait, sch_delay, run, state = m.groups()
        tid = int(tid_s)
        first = first or float(t)
        last = float(t)
        before = prev_on_cpu.get(cpu)
        if before is not None and before[0] in watched and before[1] == "R" and tid not in watched:
            preemptors[comm.strip()] += 1  # the task that ran after a broker was preempted here
        prev_on_cpu[cpu] = (tid, state)
        if tid not in watched:  # (a broker's event loop is its main thread: tid == pid)
            continue
        on_cpu[tid] += float(run)
        if last_state.get(tid) == "R":  # preempted at its last switch-out: waited runnable since
            preempted_waits[tid].append(float(wait))
        else:
            delays[tid].append(float(sch_delay))
        last_state[tid] = state
    wall = (last - first) * 1000 or 1.0
    lines = []
    for pid in pids:
        v, w = sorted(delays[pid]), preempted_waits[pid]
        if not v:
            continue
        lines.append(f"broker pid {pid} event loop: on a CPU {100 * on_cpu[pid] / wall:.0f} % of the window; "
                     f"{len(v)} wake-ups, waiting p50 {pct(v, 50):.3f} p99 {pct(v, 99):.2f} max {v[-1]:.2f} ms; "
                     f"preempted {len(w) / wall * 1000:.0f} times/s, then waited {sum(w) / len(w) if w else 0:.3f} ms "
                     f"on average: {100 * sum(w) / wall:.0f} % of the window runnable and off the CPU")
    if not lines:
        return ["perf sched: no samples (is perf allowed here? try as root)"]
    total = sum(preemptors.values()) or 1
    lines.append("what ran when a broker was preempted: " + ", ".join(
        f"{name} {100 * n / total:.0f} %" for name, n in sorted(preemptors.items(), key=lambda kv: -kv[1])[:6]))
    return lines


def thread_cpu() -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for th in psutil.Process().threads():
        try:
            name = Path(f"/proc/self/task/{th.id}/comm").read_text().strip()
        except OSError:
            name = "?"
        out["rdk:broker*" if name.startswith("rdk:broker") and name != "rdk:broker-1" else name] += \
            th.user_time + th.system_time
    return out


def report(events: list[Event], start: int, end: int, pids: list[int], sample: int) -> None:
    for line in hops(events, start, end, sample):
        print(line)
    for line in produce_times(events, start, end):
        print(line)
    for line in stalls(events, start, end, pids):
        print(line)


def with_java(args: argparse.Namespace, tmp: Path, trace_dir: Path) -> None:
    """The same cluster and trace under bench/latency.py's Java producer (kafka-clients, which
    blocks where librdkafka busy-waits); the window is the appends after the warm-up."""
    java_cp = compile_java_producer(tmp)
    os.environ["SAMSA_REPLICATION_TRACE"] = str(trace_dir)  # the brokers inherit it
    target = Target("samsa3-all", tmp)
    os.environ.pop("SAMSA_REPLICATION_TRACE")
    assert target.cluster is not None
    pids = [b.proc.pid for b in target.cluster.brokers if b.proc is not None]
    perf: list[subprocess.Popen[bytes]] = []
    sched_data = tmp / "sched.data"
    if args.perf_sched and shutil.which("perf"):
        # the JVM starts, warms up for --warmup s, then measures: record inside the measured part
        def record() -> None:
            perf.append(subprocess.Popen(["perf", "sched", "record", "-a", "-o", str(sched_data), "--", "sleep",
                                          str(max(1.0, min(args.seconds - 1.0, 4.0)))],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        threading.Timer(args.warmup + 2.0, record).start()
    try:
        res = run_case(target, args.size, args.rate, args.seconds, args.warmup, args.partitions, "java", java_cp)
    finally:
        target.cluster.shutdown()  # SIGTERM: the brokers flush their traces as they exit
        target.close()
    events = load_trace(trace_dir)
    appends = [t for t, _p, name, _a in events if name == "append"]
    start = appends[0] + int(args.warmup * 1e9) if appends else 0
    end = start + int(args.seconds * 1e9)
    print(f"# {args.rate} msg/s x {args.size} B, {args.partitions} partitions, RF 3, acks=all, linger.ms=0, "
          f"Java producer (idempotent); load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("client (bench/latency.py row): " + row(res, True))
    report(events, start, end, pids, args.sample)
    for proc in perf:
        proc.wait(60)
        for line in perf_sched(sched_data, pids):
            print(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=10000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--no-idempotence", action="store_true")
    ap.add_argument("--sample", type=int, default=3, help="trace every Nth leader append")
    ap.add_argument("--perf-sched", action="store_true", help="record the scheduler with perf during the window")
    ap.add_argument("--client", choices=("confluent", "java"), default="confluent",
                    help="the producer: confluent-kafka (librdkafka) here, or bench/latency.py's Java producer")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="samsa-trace-") as tmp:
        trace_dir = Path(tmp) / "trace"
        if args.client == "java":
            with_java(args, Path(tmp), trace_dir)
            return
        os.environ["SAMSA_REPLICATION_TRACE"] = str(trace_dir)  # the brokers inherit it
        cluster = SamsaCluster(Path(tmp) / "cluster", 3).start()
        os.environ.pop("SAMSA_REPLICATION_TRACE")
        try:
            cluster.wait_for_brokers(3)
            pids = [b.proc.pid for b in cluster.brokers if b.proc is not None]
            topic = f"trace-{uuid.uuid4().hex[:6]}"
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            for f in admin.create_topics([NewTopic(topic, args.partitions, 3,
                                                   config={"min.insync.replicas": "2"})]).values():
                f.result(30)
            time.sleep(2)  # every follower fetching
            p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0,
                          "enable.idempotence": not args.no_idempotence,
                          "queue.buffering.max.messages": 1000000})
            stop = threading.Event()
            acks: list[int] = []

            def poller() -> None:
                while not stop.is_set():
                    p.poll(0.1)
            threading.Thread(target=poller, daemon=True).start()
            p.produce(topic, b"warm")
            p.flush(30)
            pad = b"x" * args.size
            interval = 1_000_000_000 // args.rate
            t_start = time.monotonic_ns()
            measure_from = t_start + int(args.warmup * 1e9)
            t_end = measure_from + int(args.seconds * 1e9)
            perf = None
            cpu0: dict[str, float] = {}
            i = 0
            measuring = False
            while True:
                due = t_start + i * interval
                if due >= t_end:
                    break
                if not measuring and due >= measure_from:
                    measuring = True
                    cpu0 = thread_cpu()
                    if args.perf_sched and shutil.which("perf"):
                        perf = subprocess.Popen(["perf", "sched", "record", "-a", "-o", str(Path(tmp) / "sched.data"),
                                                 "--", "sleep", str(args.seconds)],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                now = time.monotonic_ns()
                if due > now:
                    time.sleep((due - now) / 1e9)

                def on_delivery(err: object, _msg: object, due: int = due) -> None:
                    if err is None and due >= measure_from:
                        acks.append(time.monotonic_ns() - due)
                p.produce(topic, pad, partition=i % args.partitions, on_delivery=on_delivery)
                i += 1
            p.flush(60)
            cpu1 = thread_cpu()
            stop.set()
            if perf is not None:
                perf.wait(60)
            time.sleep(0.5)
        finally:
            cluster.shutdown()  # SIGTERM: the brokers flush their traces as they exit
        events = load_trace(trace_dir)
        idem = "off" if args.no_idempotence else "on"
        print(f"# {args.rate} msg/s x {args.size} B, {args.partitions} partitions, RF 3, acks=all, linger.ms=0, "
              f"idempotence {idem}; load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(dist("client: produce -> acknowledgement", acks))
        report(events, measure_from, t_end, pids, args.sample)
        wall = args.seconds
        print("client threads, % of a core: " + ", ".join(
            f"{k} {100 * (cpu1[k] - cpu0.get(k, 0)) / wall:.0f}" for k in sorted(cpu1)
            if (cpu1[k] - cpu0.get(k, 0)) / wall > 0.02))
        if perf is not None:
            for line in perf_sched(Path(tmp) / "sched.data", pids):
                print(line)


if __name__ == "__main__":
    main()
