"""The checker on small hand-written histories: each anomaly is found where it is, and a clean
history of the same shape passes (so a check that can never fire, or always fires, fails here)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jepsen.checker import check, format_verdict
from tests.jepsen.history import History, Op


class H:
    """Builds a history with increasing times; ``send``/``txn``/``poll`` add invoke + completion."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.t = 0.0

    def _add(self, type_: str, process: Any, f: str, value: Any, dt: float = 0.1) -> None:
        self.t += dt
        self.ops.append({"index": len(self.ops), "type": type_, "process": process, "f": f, "value": value,
                         "time": round(self.t, 3)})

    def send(self, proc: Any, p: int, v: int, o: int | None, type_: str = "ok") -> H:
        self._add("invoke", proc, "send", {"partition": p, "value": v})
        val = {"partition": p, "value": v}
        if o is not None:
            val["offset"] = o
        self._add(type_, proc, "send", val)
        return self

    def txn(self, proc: Any, writes: list[tuple[int, int, int]], commit: bool = True, type_: str = "ok") -> H:
        self._add("invoke", proc, "txn", {"writes": [[p, v] for p, v, _ in writes], "commit": commit})
        self._add(type_, proc, "txn", {"writes": [list(w) for w in writes], "commit": commit})
        return self

    def poll(self, proc: Any, records: list[tuple[int, int, int]], iso: str = "read_uncommitted",
             group: str | None = None) -> H:
        self._add("invoke", proc, "poll", {"isolation": iso, "group": group})
        self._add("ok", proc, "poll", {"isolation": iso, "group": group, "records": [list(r) for r in records]})
        return self

    def commit(self, proc: Any, group: str, offsets: list[tuple[int, int]], type_: str = "ok",
               f: str = "commit") -> H:
        self._add("invoke", proc, f, {"group": group, "offsets": [list(o) for o in offsets]})
        self._add(type_, proc, f, {"group": group, "offsets": [list(o) for o in offsets]})
        return self

    def event(self, proc: Any, f: str, group: str, partitions: list[int]) -> H:
        self._add("info", proc, f, {"group": group, "partitions": partitions})
        return self

    def nemesis(self, f: str, kind: str = "kill", dt: float = 0.1) -> H:
        self._add("info", "nemesis", f, {"kind": kind}, dt)
        return self

    def wait(self, dt: float) -> H:
        self.t += dt
        return self


def kinds(res: Any) -> set[str]:
    return {k for k, v in res.anomalies.items() if v}


def base() -> H:
    """Two producers, three partitions, a reader that reads everything: valid."""
    return (H().send(0, 0, 1, 0).send(0, 0, 2, 1).send(1, 1, 3, 0).send(1, 1, 4, 1)
            .poll("c", [(0, 0, 1), (0, 1, 2), (1, 0, 3), (1, 1, 4)]))


def test_clean_history_is_valid() -> None:
    res = check(base().ops)
    assert res.valid, res.summary()
    assert res.counts["send-ok"] == 4 and res.counts["records-read"] == 4
    assert "VALID" in format_verdict(res)


def test_lost_write_read_past() -> None:
    h = H().send(0, 0, 1, 0).send(0, 0, 2, 1).send(0, 0, 3, 2).poll("c", [(0, 0, 1), (0, 2, 3)])
    res = check(h.ops)
    assert kinds(res) == {"lost"}
    assert res.anomalies["lost"][0]["value"] == 2


def test_allowed_anomalies_are_reported_but_valid() -> None:
    h = H().send(0, 0, 1, 0).send(0, 0, 2, 1).send(0, 0, 3, 2).poll("c", [(0, 0, 1), (0, 2, 3)])
    res = check(h.ops, allowed=("lost", "duplicate"))
    assert res.valid and len(res.anomalies["lost"]) == 1
    assert "allowed by this run's contract" in format_verdict(res)
    # anything else still fails the run
    h2 = H().send(0, 0, 1, 0).send(0, 0, 2, 1).poll("c", [(0, 1, 2), (0, 0, 1)])
    assert not check(h2.ops, allowed=("lost", "duplicate")).valid


def test_unread_write_not_read_past_is_not_lost() -> None:
    h = H().send(0, 0, 1, 0).send(0, 0, 2, 1).poll("c", [(0, 0, 1)])
    assert check(h.ops).valid


def test_info_write_missing_is_not_lost() -> None:
    h = H().send(0, 0, 1, 0).send(0, 0, 2, None, "info").send(0, 0, 3, 1).poll("c", [(0, 0, 1), (0, 1, 3)])
    assert check(h.ops).valid


def test_duplicate() -> None:
    h = H().send(0, 0, 1, 0).send(0, 0, 2, 1).poll("c", [(0, 0, 1), (0, 1, 2), (0, 2, 2)])
    res = check(h.ops)
    assert "duplicate" in kinds(res)
    assert res.anomalies["duplicate"][0]["positions"] == [[0, 1], [0, 2]] or \
        res.anomalies["duplicate"][0]["positions"] == [(0, 1), (0, 2)]


def test_inconsistent_offset_two_values() -> None:
    h = base().poll("d", [(0, 0, 1), (0, 1, 9)])
    res = check(h.ops)
    assert "inconsistent-offset" in kinds(res)
    assert any(a.get("offset") == 1 and a.get("values") == [2, 9] for a in res.anomalies["inconsistent-offset"])


def test_value_read_at_other_offset_than_acked() -> None:
    h = H().send(0, 0, 1, 0).send(0, 0, 2, 1).poll("c", [(0, 0, 2), (0, 1, 1)])
    res = check(h.ops)
    assert kinds(res) == {"inconsistent-offset"}


def test_nonmonotonic_within_poll() -> None:
    h = H().send(0, 0, 1, 0).send(0, 0, 2, 1).poll("c", [(0, 1, 2), (0, 0, 1)])
    assert kinds(check(h.ops)) == {"nonmonotonic-poll"}


def test_nonmonotonic_across_polls_and_reset_by_rebalance() -> None:
    h = H().send(0, 0, 1, 0).send(0, 0, 2, 1).poll("c", [(0, 0, 1), (0, 1, 2)]).poll("c", [(0, 1, 2)])
    res = check(h.ops)
    assert kinds(res) == {"nonmonotonic-poll"}
    # the same re-read after the consumer was (re)assigned the partition is what at-least-once allows
    h2 = (H().send(0, 0, 1, 0).send(0, 0, 2, 1).poll("c", [(0, 0, 1), (0, 1, 2)])
          .event("c", "assign", "g", [0]).poll("c", [(0, 1, 2)]))
    assert check(h2.ops).valid


def test_producer_order() -> None:
    h = H().send(0, 0, 1, 5).send(0, 0, 2, 3).poll("c", [(0, 3, 2), (0, 5, 1)])
    assert kinds(check(h.ops)) == {"producer-order"}


def test_aborted_read_only_under_read_committed() -> None:
    h = H().txn("t", [(0, 10, 0), (1, 11, 0)], commit=False).send(0, 0, 1, 1)
    ok = h.ops + H().poll("u", [(0, 0, 10), (0, 1, 1)], iso="read_uncommitted").ops
    assert check(_renumber(ok)).valid
    bad = h.ops + H().poll("rc", [(0, 0, 10), (0, 1, 1)], iso="read_committed").ops
    res = check(_renumber(bad))
    assert kinds(res) == {"aborted-read"}
    # a transaction that failed (certainly aborted) is the same
    h3 = H().txn("t", [(0, 10, 0)], commit=True, type_="fail").poll("rc", [(0, 0, 10)], iso="read_committed")
    assert kinds(check(h3.ops)) == {"aborted-read"}


def test_torn_transaction() -> None:
    h = (H().txn("t", [(0, 10, 0), (1, 11, 0)]).send(0, 1, 1, 1)
         .poll("rc", [(0, 0, 10), (1, 1, 1)], iso="read_committed"))
    res = check(h.ops)
    assert "torn-transaction" in kinds(res)
    assert res.anomalies["torn-transaction"][0]["missing"] == [[1, 11, 0]]
    # seeing all of it, or none of it, is fine
    h2 = H().txn("t", [(0, 10, 0), (1, 11, 0)]).poll("rc", [(0, 0, 10), (1, 0, 11)], iso="read_committed")
    assert check(h2.ops).valid
    h3 = H().txn("t", [(0, 10, 0), (1, 11, 0)]).poll("rc", [(0, 0, 10)], iso="read_committed")
    assert check(h3.ops).valid   # partition 1 was not read past offset 0


def test_committed_offsets_backwards() -> None:
    h = H().commit("c1", "g", [(0, 10)]).commit("c2", "g", [(0, 7)])
    res = check(h.ops)
    assert kinds(res) == {"offsets-backwards"}
    h2 = H().commit("c1", "g", [(0, 10)]).commit("c2", "g", [(0, 7)], f="committed")
    assert kinds(check(h2.ops)) == {"offsets-backwards"}
    h3 = H().commit("c1", "g", [(0, 10)]).commit("c2", "g", [(0, 7)], type_="fail").commit("c1", "g", [(0, 12)])
    assert check(h3.ops).valid


def test_stale_generation_commit() -> None:
    h = (H().event("a", "assign", "g", [0, 1]).commit("a", "g", [(0, 5)])
         .event("b", "assign", "g", [0]).commit("a", "g", [(0, 6)]))
    res = check(h.ops)
    assert "stale-generation" in kinds(res)
    assert res.anomalies["stale-generation"][0]["assigned_to"] == "b"
    # a's commit rejected (ILLEGAL_GENERATION) is right; and a re-assigned a may commit again
    h2 = (H().event("a", "assign", "g", [0, 1]).commit("a", "g", [(0, 5)])
          .event("b", "assign", "g", [0]).commit("a", "g", [(0, 6)], type_="fail")
          .event("a", "assign", "g", [0]).commit("a", "g", [(0, 7)]))
    assert check(h2.ops).valid


def test_unavailability_after_heal() -> None:
    h = H().send(0, 0, 1, 0).nemesis("start", "partition-leader").wait(5).nemesis("stop", "partition-leader")
    h.wait(20).send(0, 0, 2, 1)
    res = check(h.ops, recovery_bound_s=11.0)
    assert kinds(res) == {"unavailable"}
    assert res.recoveries[0]["recovery_s"] >= 20
    assert check(h.ops, recovery_bound_s=30.0).valid
    # no write at all in the 40 s after the heal
    h2 = H().send(0, 0, 1, 0).nemesis("start").nemesis("stop").wait(40).nemesis("start", "pause")
    assert kinds(check(h2.ops, recovery_bound_s=30.0)) == {"unavailable"}
    # the next fault began 3 s after the heal, before writes resumed: unmeasured, not an anomaly
    h3 = (H().send(0, 0, 1, 0).nemesis("start").nemesis("stop").wait(3).nemesis("start", "pause")
          .wait(5).nemesis("stop", "pause").send(0, 0, 2, 1))
    res3 = check(h3.ops, recovery_bound_s=11.0)
    assert res3.valid and res3.recoveries[0].get("interrupted") and res3.recoveries[1]["recovery_s"] < 1
    # a slow recovery inside a long enough window is still one
    h4 = (H().send(0, 0, 1, 0).nemesis("start").nemesis("stop").wait(15).send(0, 0, 2, 1)
          .nemesis("start", "pause"))
    assert kinds(check(h4.ops, recovery_bound_s=11.0)) == {"unavailable"}


def test_history_file_round_trip(tmp_path: Any) -> None:
    from tests.jepsen.history import load

    hist = History(tmp_path / "history.jsonl")
    inv = hist.invoke(0, "send", {"partition": 0, "value": 1})
    hist.complete("ok", inv, {"partition": 0, "value": 1, "offset": 0})
    hist.close()
    ops = load(tmp_path / "history.jsonl")
    assert [o["type"] for o in ops] == ["invoke", "ok"] and ops[1]["value"]["offset"] == 0
    assert check(ops).counts["send-ok"] == 1


def test_completion_without_invoke_is_an_error() -> None:
    with pytest.raises(ValueError):
        check([{"index": 0, "type": "ok", "process": 0, "f": "send", "value": {}, "time": 0.0}])


def _renumber(ops: list[Op]) -> list[Op]:
    out = []
    for i, op in enumerate(ops):
        op = dict(op)
        op["index"] = i
        out.append(op)
    return out
