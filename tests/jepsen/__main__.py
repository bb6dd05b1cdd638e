"""``python -m tests.jepsen --nemesis partition-leader,kill --time 600 --brokers 5 --out DIR``

Runs the cluster in network namespaces under faults, checks the history, prints the verdict and
writes history.jsonl, result.json, verdict.txt and report.html into DIR. Exit status 0 when the
history is valid, 1 when the checker found an anomaly, 2 when the rig cannot run here.
``--check DIR`` re-checks a recorded history; ``--cleanup`` removes every namespace a run left.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .nemesis import KINDS
from .net import cleanup_stale
from .rig import ZK_SESSION_TIMEOUT_MS
from .runner import DEFAULT_NEMESES, Options, analyse, run, unavailable_reason


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.jepsen", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nemesis", default="all",
                    help=f"comma-separated kinds, or 'all' (default): {', '.join(sorted(KINDS))}")
    ap.add_argument("--time", type=float, default=120.0, help="seconds of faults (default 120)")
    ap.add_argument("--brokers", type=int, default=3, choices=(3, 5))
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--hold", default="8,14", help="min,max seconds a fault lasts (default 8,14)")
    ap.add_argument("--quiet", default="4,8", help="min,max seconds between faults (default 4,8)")
    ap.add_argument("--recovery", type=float, default=20.0, help="seconds of workload after the last heal")
    ap.add_argument("--acks", choices=("all", "1"), default="all",
                    help="the senders' acks (1: Kafka allows losing acknowledged writes on a leader change)")
    ap.add_argument("--out", type=Path, default=None, help="output folder (default jepsen-<time>)")
    ap.add_argument("--check", type=Path, default=None, help="only re-check the history in this folder")
    ap.add_argument("--cleanup", action="store_true", help="remove every namespace and bridge runs left, and exit")
    a = ap.parse_args(argv)

    if a.cleanup:
        print("removed:", ", ".join(cleanup_stale(owner_alive=False)) or "nothing")
        return 0
    if a.check is not None:
        prev = a.check / "result.json"
        meta = json.loads(prev.read_text()).get("meta", {}) if prev.exists() else {}
        res, _ = analyse(a.check, {**meta, "rechecked": True}, ZK_SESSION_TIMEOUT_MS / 1000 + 5)
        print((a.check / "verdict.txt").read_text(), end="")
        return 0 if res.valid else 1
    reason = unavailable_reason()
    if reason:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    kinds = DEFAULT_NEMESES if a.nemesis == "all" else [k.strip() for k in a.nemesis.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        ap.error(f"unknown nemesis {unknown}; known: {sorted(KINDS)}")
    out = a.out or Path(f"jepsen-{time.strftime('%Y%m%d-%H%M%S')}")
    hold = tuple(float(x) for x in a.hold.split(","))
    quiet = tuple(float(x) for x in a.quiet.split(","))
    opts = Options(out=out, nemeses=kinds, time=a.time, brokers=a.brokers, partitions=a.partitions, seed=a.seed,
                   hold=hold, quiet=quiet, recovery=a.recovery, acks=a.acks)  # type: ignore[arg-type]
    print(f"seed {a.seed}; writing to {out}", flush=True)
    res, meta = run(opts)
    print((out / "verdict.txt").read_text(), end="")
    print(f"report: {out / 'report.html'} (wall {meta['wall_s']} s)")
    return 0 if res.valid else 1


if __name__ == "__main__":
    sys.exit(main())
