"""One run: rig up, clients on, nemeses for ``time`` seconds, heal, recover, final reads, check.

Writes into ``out``: ``history.jsonl``, ``result.json`` (the checker's summary and the run's
settings), ``verdict.txt``, ``report.html`` and ``cluster/`` (every broker's and ZooKeeper's
log and data). The rig is torn down in ``finally``, whatever happened.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from broker.cluster.zk.server import zookeeper_available

from . import workload as wl
from .checker import Result, check, format_verdict
from .history import History, load
from .nemesis import Schedule
from .net import cleanup_stale, netns_unavailable
from .report import write_report
from .rig import ZK_SESSION_TIMEOUT_MS, Rig

DEFAULT_NEMESES = ["partition-one", "partition-controller", "partition-leader", "partition-zk",
                   "partition-majority", "partition-bridge", "slow-net", "pause", "kill", "zk-restart", "disk-full", "combined"]


@dataclass
class Options:
    out: Path
    nemeses: list[str] = field(default_factory=lambda: list(DEFAULT_NEMESES))
    time: float = 120.0              # seconds of nemesis activity
    brokers: int = 3
    partitions: int = 4
    seed: int = 1
    quiet: tuple[float, float] = (4.0, 8.0)
    hold: tuple[float, float] = (8.0, 14.0)
    recovery: float = 20.0           # seconds of workload after the final heal
    transactors: int = 1
    readers: bool = True
    groups: tuple[str, ...] = ("classic", "consumer")
    group_members: int = 2
    disk_mb: int = 256               # the log dirs' tmpfs size when disk-full is among the nemeses
    acks: str = "all"                # "1": Kafka's contract allows losing acknowledged writes on a leader change


def unavailable_reason() -> str | None:
    return netns_unavailable() or zookeeper_available()


def run(opts: Options) -> tuple[Result, dict[str, Any]]:
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    cleanup_stale()
    rng = random.Random(opts.seed)
    rig = Rig(out / "cluster", opts.brokers, disk_mb=opts.disk_mb if "disk-full" in opts.nemeses else None)
    hist = History(out / "history.jsonl")
    stop_clients = threading.Event()
    stop_nemesis = threading.Event()
    clients: list[wl.Client] = []
    meta: dict[str, Any] = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(opts).items()}
    t_start = time.monotonic()
    schedule: Schedule | None = None
    try:
        rig.start()
        meta["bootstrap"] = rig.bootstrap
        meta["rig_start_s"] = round(time.monotonic() - t_start, 1)
        wl.create_topic(rig.bootstrap, opts.partitions)
        if not rig.wait_full_isr(wl.TOPIC, 60.0):
            raise RuntimeError(f"topic {wl.TOPIC} never had a full ISR: {rig.leaders(wl.TOPIC)}")
        values = itertools.count()
        common = (hist, rig.bootstrap, stop_clients, values)
        seeds = itertools.count(opts.seed * 1000)
        for p in range(opts.partitions):
            clients.append(wl.Sender(*common, next(seeds), partition=p, acks=opts.acks))
        for k in range(opts.transactors):
            clients.append(wl.Transactor(*common, next(seeds), partitions=opts.partitions, txn_id=f"jepsen-tx-{k}"))
        if opts.readers:
            for iso in ("read_uncommitted", "read_committed"):
                clients.append(wl.Reader(*common, next(seeds), partitions=opts.partitions, isolation=iso))
        for proto in opts.groups:
            iso = "read_committed" if proto == "classic" else "read_uncommitted"
            for _ in range(opts.group_members):
                clients.append(wl.GroupReader(*common, next(seeds), group=f"jepsen-{proto}", protocol=proto,
                                              isolation=iso))
        for c in clients:
            c.start()
        schedule = Schedule(rig, hist, opts.nemeses, rng, stop_nemesis, quiet=opts.quiet, hold=opts.hold)
        schedule.start()
        stop_nemesis.wait(opts.time)
        stop_nemesis.set()
        schedule.join(180.0)
        hist.add("info", "nemesis", "healed-all", None)
        time.sleep(opts.recovery)
        stop_clients.set()
        for c in clients:
            c.join(60.0)
        meta["final_read_uncommitted_reached_end"] = wl.final_read(hist, rig.bootstrap, opts.partitions,
                                                                   "read_uncommitted")
        meta["final_read_committed_reached_end"] = wl.final_read(hist, rig.bootstrap, opts.partitions,
                                                                 "read_committed")
        meta["nemeses_run"] = schedule.done
        meta["disk_full_crashes"] = sum(1 for op in hist.ops() if op["process"] == "nemesis" and op["f"] == "stop"
                                        and isinstance(op["value"], dict) and op["value"].get("survived") is False)
        meta["nemesis_error"] = repr(schedule.error) if schedule.error else None
        meta["client_crashes"] = sum(c.errors for c in clients)
        meta["broker_tracebacks"] = {b.netns_host: len(re.findall(r"^Traceback", b.log_text(), re.M))
                                     for b in rig.brokers}
    finally:
        stop_nemesis.set()
        stop_clients.set()
        if schedule is not None:
            schedule.join(180.0)
        for c in clients:
            c.join(30.0)
        hist.close()
        rig.close()
    meta["wall_s"] = round(time.monotonic() - t_start, 1)
    bound = ZK_SESSION_TIMEOUT_MS / 1000 + 5
    meta["recovery_bound_s"] = bound
    return analyse(out, meta, bound)


# Kafka's contract for acks=1 (no idempotence): a leader change loses what only the old leader had
# (a leader cut from ZooKeeper and its peers keeps acknowledging acks=1 writes until it learns it is
# deposed), a retry may duplicate, and the truncated log hands the lost offsets out again, so one
# producer's later write can get a lower offset than its earlier, lost one.
ACKS1_ALLOWED = ("lost", "duplicate", "producer-order")


def analyse(out: Path, meta: dict[str, Any], bound: float | None) -> tuple[Result, dict[str, Any]]:
    history = load(out / "history.jsonl")
    res = check(history, recovery_bound_s=bound, allowed=ACKS1_ALLOWED if str(meta.get("acks")) == "1" else ())
    verdict = format_verdict(res)
    (out / "verdict.txt").write_text(verdict + "\n")
    (out / "result.json").write_text(json.dumps({"meta": meta, **res.summary()}, indent=2, default=str))
    write_report(out, history, res, meta)
    return res, meta
