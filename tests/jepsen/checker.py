"""The checker: what a history of sends, transactions, polls and group commits must never show.

Pure Python over the operations of ``history.jsonl`` (see ``history.py`` for the line format),
so it is unit-tested on small hand-written histories, one per anomaly. Operation shapes:

* ``send``   invoke ``{"partition": p, "value": v}``; ok adds ``"offset": o``.
* ``txn``    invoke ``{"writes": [[p, v], ...], "commit": bool}``; ok ``{"writes": [[p, v, o], ...],
  "commit": bool}`` means the commit (or the abort asked for) completed; ``fail`` means the
  transaction certainly aborted; ``info`` that its fate is unknown (it must still be atomic).
* ``poll``   ok ``{"isolation": "read_committed"|"read_uncommitted", "group": g|None,
  "records": [[p, o, v], ...]}`` in the order the consumer returned them.
* ``commit`` invoke/ok ``{"group": g, "offsets": [[p, o], ...]}``; ``committed`` (an offset fetch)
  ok ``{"group": g, "offsets": [[p, o], ...]}``.
* ``assign``/``revoke``/``lost`` ``info`` events ``{"group": g, "partitions": [p, ...]}`` from a
  consumer's rebalance callbacks (no invoke: they happen inside a poll).
* nemesis ``info`` ``start``/``stop`` with ``{"kind": ...}``; a ``stop`` is a heal.

Anomalies (each a list of dicts saying exactly where):

* ``lost``: an acknowledged write (send ok, or a committed txn) never read, although reads of its
  partition went past its offset.
* ``duplicate``: one value at two positions.
* ``inconsistent-offset``: one (partition, offset) read with two values, or a value read at an
  offset other than the one its write was acknowledged with.
* ``nonmonotonic-poll``: offsets not strictly increasing within a poll, or between a consumer's
  consecutive polls of a partition with no rebalance between them.
* ``producer-order``: one producer's acknowledged writes to a partition at decreasing offsets.
* ``aborted-read``: a read_committed consumer saw a value of an aborted transaction.
* ``torn-transaction``: read_committed reads that covered a transaction's partitions saw some but
  not all of its writes.
* ``offsets-backwards``: a group's committed offset for a partition lower than one already
  committed (by a commit or offset fetch that started after the higher commit completed).
* ``stale-generation``: a commit that succeeded for a partition after another member of the group
  had been assigned it (the committing member's generation was already superseded).
* ``unavailable``: after a heal, some partition took longer than ``recovery_bound_s`` to take a
  write again.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .history import Op

ANOMALIES = ("lost", "duplicate", "inconsistent-offset", "nonmonotonic-poll", "producer-order", "aborted-read",
             "torn-transaction", "offsets-backwards", "stale-generation", "unavailable")
MAX_EXAMPLES = 20
EVENTS = ("assign", "revoke", "lost", "crash")   # info lines with no invocation


@dataclass
class Result:
    anomalies: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {k: [] for k in ANOMALIES})
    counts: dict[str, int] = field(default_factory=dict)
    recoveries: list[dict[str, Any]] = field(default_factory=list)
    longest_write_gap: dict[str, Any] = field(default_factory=dict)
    allowed: frozenset[str] = frozenset()   # found and reported, but within the run's contract

    @property
    def valid(self) -> bool:
        return not any(v for k, v in self.anomalies.items() if k not in self.allowed)

    def add(self, anomaly: str, **detail: Any) -> None:
        self.anomalies[anomaly].append(detail)

    def summary(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "anomaly-counts": {k: len(v) for k, v in self.anomalies.items() if v},
            "anomalies": {k: v[:MAX_EXAMPLES] for k, v in self.anomalies.items() if v},
            "allowed": sorted(self.allowed),
            "counts": self.counts,
            "recoveries": self.recoveries,
            "longest-write-gap": self.longest_write_gap,
        }


def pair(history: Iterable[Op]) -> list[tuple[Op, Op | None]]:
    """(invoke, completion) pairs; a process does one operation at a time, as in Jepsen."""
    pending: dict[Any, Op] = {}
    pairs: list[tuple[Op, Op | None]] = []
    index: dict[int, int] = {}
    for op in history:
        if op["process"] == "nemesis" or op["f"] in EVENTS:
            continue
        if op["type"] == "invoke":
            pending[op["process"]] = op
            index[id(op)] = len(pairs)
            pairs.append((op, None))
        else:
            inv = pending.pop(op["process"], None)
            if inv is None or inv["f"] != op["f"]:
                raise ValueError(f"completion without its invocation: {op}")
            pairs[index[id(inv)]] = (inv, op)
    return pairs


def check(history: list[Op], recovery_bound_s: float | None = None,
          allowed: Iterable[str] = ()) -> Result:
    """Check a history. ``allowed``: anomalies the run's contract permits (an acks=1 run: Kafka
    may lose, and without idempotence duplicate, acknowledged writes on a leader change); they
    are still counted and listed, but the verdict stays valid."""
    r = Result(allowed=frozenset(allowed))
    pairs = pair(history)
    completed = [(i, c) for i, c in pairs if c is not None]
    r.counts = {
        "operations": len(pairs),
        "send-ok": sum(1 for i, c in completed if i["f"] == "send" and c["type"] == "ok"),
        "send-info": sum(1 for i, c in completed if i["f"] == "send" and c["type"] == "info"),
        "send-fail": sum(1 for i, c in completed if i["f"] == "send" and c["type"] == "fail"),
        "txn-committed": sum(1 for i, c in completed if i["f"] == "txn" and c["type"] == "ok" and c["value"]["commit"]),
        "txn-aborted": sum(1 for i, c in completed if i["f"] == "txn" and (
            c["type"] == "fail" or (c["type"] == "ok" and not c["value"]["commit"]))),
        "txn-info": sum(1 for i, c in completed if i["f"] == "txn" and c["type"] == "info"),
        "polls": sum(1 for i, c in completed if i["f"] == "poll" and c["type"] == "ok"),
        "records-read": sum(len(c["value"]["records"]) for i, c in completed if i["f"] == "poll" and c["type"] == "ok"),
        "commits-ok": sum(1 for i, c in completed if i["f"] == "commit" and c["type"] == "ok"),
        "nemesis-events": sum(1 for op in history if op["process"] == "nemesis"),
    }
    _check_reads(r, history, completed)
    _check_groups(r, history, completed)
    _check_availability(r, history, completed, recovery_bound_s)
    return r


# -- writes and reads ---------------------------------------------------------------------------------
def _check_reads(r: Result, history: list[Op], completed: list[tuple[Op, Op]]) -> None:
    acked: dict[Any, tuple[int, int, str]] = {}          # value -> (partition, offset, how)
    aborted: set[Any] = set()
    txns: list[tuple[Op, Op]] = []                       # committed or unknown: must be atomic
    for inv, c in completed:
        if inv["f"] == "send" and c["type"] == "ok":
            v = c["value"]
            acked[v["value"]] = (v["partition"], v["offset"], f"send by {c['process']} at {c['time']}")
        elif inv["f"] == "txn":
            if c["type"] == "fail" or (c["type"] == "ok" and not c["value"]["commit"]):
                aborted.update(v for _, v in inv["value"]["writes"])
            else:
                txns.append((inv, c))
                if c["type"] == "ok":
                    for p, v, o in c["value"]["writes"]:
                        acked[v] = (p, o, f"txn by {c['process']} at {c['time']}")

    # producer order: one process's acknowledged sends to one partition at increasing offsets
    last: dict[tuple[Any, int], tuple[int, Any]] = {}
    for inv, c in completed:
        if inv["f"] == "send" and c["type"] == "ok":
            key = (c["process"], c["value"]["partition"])
            o = c["value"]["offset"]
            if key in last and o <= last[key][0]:
                r.add("producer-order", process=c["process"], partition=key[1], offset=o, value=c["value"]["value"],
                      previous_offset=last[key][0], previous_value=last[key][1])
            last[key] = (o, c["value"]["value"])

    at: dict[tuple[int, int], Any] = {}                  # (p, o) -> value
    where: dict[Any, set[tuple[int, int]]] = defaultdict(set)
    max_read: dict[int, int] = defaultdict(lambda: -1)   # partition -> highest offset any read saw
    rc_seen: set[Any] = set()
    rc_max: dict[int, int] = defaultdict(lambda: -1)
    reported_inconsistent: set[tuple[int, int]] = set()
    consumer_pos: dict[tuple[Any, int], int] = {}        # (process, p) -> last offset read
    events = sorted([(c["index"], "poll", inv, c) for inv, c in completed if inv["f"] == "poll" and c["type"] == "ok"],
                    key=lambda e: e[0])
    resets = _rebalance_indexes(history)
    for _, _, _inv, c in events:
        proc = c["process"]
        for p in resets.pop_until(proc, c["index"]):
            consumer_pos.pop((proc, p), None)
        rc = c["value"].get("isolation") == "read_committed"
        in_poll: dict[int, int] = {}
        for p, o, v in c["value"]["records"]:
            prev = at.setdefault((p, o), v)
            if prev != v and (p, o) not in reported_inconsistent:
                reported_inconsistent.add((p, o))
                r.add("inconsistent-offset", partition=p, offset=o, values=[prev, v], process=proc, time=c["time"])
            where[v].add((p, o))
            max_read[p] = max(max_read[p], o)
            if rc:
                rc_seen.add(v)
                rc_max[p] = max(rc_max[p], o)
                if v in aborted:
                    r.add("aborted-read", partition=p, offset=o, value=v, process=proc, time=c["time"])
            if p in in_poll and o <= in_poll[p]:
                r.add("nonmonotonic-poll", process=proc, partition=p, offset=o, previous=in_poll[p], within_poll=True,
                      time=c["time"])
            elif p not in in_poll and (proc, p) in consumer_pos and o <= consumer_pos[(proc, p)]:
                r.add("nonmonotonic-poll", process=proc, partition=p, offset=o, previous=consumer_pos[(proc, p)],
                      within_poll=False, time=c["time"])
            in_poll[p] = o
        for p, o in in_poll.items():
            consumer_pos[(proc, p)] = o

    for v, places in where.items():
        if len(places) > 1:
            r.add("duplicate", value=v, positions=sorted(places))
    for v, (p, o, how) in acked.items():
        places = where.get(v)
        if not places:
            if max_read[p] > o:
                r.add("lost", value=v, partition=p, offset=o, acked=how, highest_offset_read=max_read[p])
        elif (p, o) not in places:
            r.add("inconsistent-offset", value=v, partition=p, acked_offset=o, read_at=sorted(places), acked=how)

    for inv, c in txns:
        writes = c["value"]["writes"] if c["type"] == "ok" else [[p, v, None] for p, v in inv["value"]["writes"]]
        seen = [v for _, v, _ in writes if v in rc_seen]
        if not seen or len(seen) == len(writes):
            continue
        # a missing write counts only where read_committed reads went past its offset; an unacknowledged
        # txn's offset in a partition is known only from another of its writes seen there
        missing = []
        for p, v, o in writes:
            if v in rc_seen:
                continue
            pos = o if o is not None else max((oo for pp, vv, oo in _positions(writes, where) if pp == p), default=None)
            if pos is not None and rc_max[p] > pos:
                missing.append([p, v, o])
        if missing:
            r.add("torn-transaction", process=c["process"], time=c["time"], outcome=c["type"],
                  seen=seen, missing=missing)


def _positions(writes: list[list[Any]], where: dict[Any, set[tuple[int, int]]]) -> list[tuple[int, Any, int]]:
    out = []
    for _p, v, _o in writes:
        for pp, oo in where.get(v, ()):
            out.append((pp, v, oo))
    return out


class _Resets:
    """Per process, the history indexes of its rebalance events and the partitions they touched."""

    def __init__(self) -> None:
        self.events: dict[Any, list[tuple[int, list[int]]]] = defaultdict(list)

    def pop_until(self, process: Any, index: int) -> list[int]:
        evs = self.events.get(process, [])
        out: list[int] = []
        while evs and evs[0][0] < index:
            out.extend(evs.pop(0)[1])
        return out


def _rebalance_indexes(history: list[Op]) -> _Resets:
    res = _Resets()
    for op in history:
        if op["f"] in ("assign", "revoke", "lost") and op["process"] != "nemesis":
            res.events[op["process"]].append((op["index"], list(op["value"]["partitions"])))
    return res


# -- consumer groups -----------------------------------------------------------------------------------
def _check_groups(r: Result, history: list[Op], completed: list[tuple[Op, Op]]) -> None:
    # committed offsets never go backwards: an op invoked after a commit of offset o completed
    # must not commit, or read as committed, anything lower.
    per: dict[tuple[Any, int], list[tuple[float, float, int, str, Op]]] = defaultdict(list)
    for inv, c in completed:
        if inv["f"] in ("commit", "committed") and c["type"] == "ok":
            g = c["value"]["group"]
            for p, o in c["value"]["offsets"]:
                if o is not None and o >= 0:
                    per[(g, p)].append((inv["time"], c["time"], o, inv["f"], c))
    for (g, p), ops in per.items():
        done = sorted((t_ok, o, f) for _, t_ok, o, f, _ in ops if f == "commit")
        for t_inv, _, o, f, c in ops:
            prior = [(t_ok, oo) for t_ok, oo, _ in done if t_ok < t_inv]
            if prior:
                hi = max(oo for _, oo in prior)
                if o < hi:
                    r.add("offsets-backwards", group=g, partition=p, offset=o, earlier_committed=hi, op=f,
                          process=c["process"], time=c["time"])

    # stale generation: a commit by X for p succeeds though another member was assigned p after X was
    assigns: dict[tuple[Any, int], list[tuple[float, Any]]] = defaultdict(list)
    for op in history:
        if op["f"] == "assign" and op["process"] != "nemesis":
            for p in op["value"]["partitions"]:
                assigns[(op["value"]["group"], p)].append((op["time"], op["process"]))
    for inv, c in completed:
        if inv["f"] != "commit" or c["type"] != "ok":
            continue
        g, x = c["value"]["group"], c["process"]
        for p, _o in c["value"]["offsets"]:
            hist = [(t, proc) for t, proc in assigns.get((g, p), []) if t < inv["time"]]
            mine = [t for t, proc in hist if proc == x]
            if not mine:
                continue
            newer = [(t, proc) for t, proc in hist if proc != x and t > mine[-1]]
            if newer:
                r.add("stale-generation", group=g, partition=p, process=x, commit_invoked=inv["time"],
                      assigned_to=newer[-1][1], assigned_at=newer[-1][0])


# -- availability ---------------------------------------------------------------------------------------
def write_times(completed: list[tuple[Op, Op]]) -> dict[int, list[float]]:
    """partition -> completion times of acknowledged writes (sends and committed transactions)."""
    out: dict[int, list[float]] = defaultdict(list)
    for inv, c in completed:
        if c["type"] != "ok":
            continue
        if inv["f"] == "send":
            out[c["value"]["partition"]].append(c["time"])
        elif inv["f"] == "txn" and c["value"]["commit"]:
            for p, _v, _o in c["value"]["writes"]:
                out[p].append(c["time"])
    for ts in out.values():
        ts.sort()
    return out


def _check_availability(r: Result, history: list[Op], completed: list[tuple[Op, Op]],
                        bound: float | None) -> None:
    """Per heal: seconds until every partition took an acknowledged write again.

    A recovery is judged only in the quiet window before the next fault starts: when that window
    is shorter than the bound and writes had not resumed in it, the heal is ``interrupted``
    (unmeasured), not an anomaly.
    """
    wt = write_times(completed)
    end = history[-1]["time"] if history else 0.0
    nem = [op for op in history if op["process"] == "nemesis"]
    for n, h in enumerate(nem):
        if h["f"] != "stop":
            continue
        t = h["time"]
        nxt = next((o["time"] for o in nem[n + 1:] if o["f"] == "start"), end)
        window = nxt - t
        worst: tuple[float, int | None] = (0.0, None)
        never = []
        for p, ts in wt.items():
            after = [x for x in ts if t <= x <= nxt]
            if not after:
                never.append(p)
            elif after[0] - t > worst[0]:
                worst = (after[0] - t, p)
        rec: dict[str, Any] = {"heal_time": t, "kind": (h.get("value") or {}).get("kind"),
                               "recovery_s": round(worst[0], 3) if not never else None,
                               "slowest_partition": worst[1], "no_write_after": never, "window_s": round(window, 3)}
        if never and bound is not None and window < bound:
            rec["interrupted"] = True
        r.recoveries.append(rec)
        if rec.get("interrupted"):
            continue
        if never:
            r.add("unavailable", **rec, reason=f"no acknowledged write in the {window:.1f} s after the heal")
        elif bound is not None and worst[0] > bound:
            r.add("unavailable", **rec, reason=f"recovery took longer than {bound}s")
    all_ts = sorted(x for ts in wt.values() for x in ts)
    if all_ts:
        gaps = [(b - a, a) for a, b in zip(all_ts, all_ts[1:], strict=False)]
        g = max(gaps, default=(0.0, all_ts[0]))
        r.longest_write_gap = {"seconds": round(g[0], 3), "from": g[1]}


def format_verdict(res: Result) -> str:
    s = res.summary()
    lines = [f"verdict: {'VALID' if res.valid else 'INVALID'}"]
    lines.append("counts: " + ", ".join(f"{k}={v}" for k, v in s["counts"].items()))
    for k, n in s["anomaly-counts"].items():
        note = " (allowed by this run's contract)" if k in res.allowed else ""
        lines.append(f"anomaly {k}{note}: {n}; first: {s['anomalies'][k][0]}")
    measured = [x for x in res.recoveries if x["recovery_s"] is not None]
    if measured:
        worst = max(measured, key=lambda x: x["recovery_s"])
        lines.append(f"heals: {len(res.recoveries)} ({len(res.recoveries) - len(measured)} unmeasured: the next "
                     f"fault began first); longest recovery after a heal: {worst['recovery_s']} s "
                     f"(after {worst['kind']} healed at {worst['heal_time']:.1f} s)")
    if res.longest_write_gap:
        lines.append(f"longest span without an acknowledged write: {res.longest_write_gap['seconds']} s "
                     f"(from {res.longest_write_gap['from']:.1f} s)")
    return "\n".join(lines)
