"""The contract under faults, in CI's short form: a 3-broker cluster (RF 3, min.insync.replicas=2,
unclean election off) in network namespaces, idempotent and transactional producers, assign and
group consumers (classic and KIP-848) at both isolation levels, seven nemesis kinds in a seeded
schedule; the checker must find nothing (no lost, duplicated or reordered acknowledged write, no
aborted read, torn transaction or inconsistent offset, no committed offset going backwards, no
stale-generation commit) and writes must resume within the ZooKeeper session timeout + 5 s of
every heal.

About three minutes. ``SAMSA_JEPSEN_SCALE=N`` makes the run N times longer with every
nemesis kind (``SAMSA_JEPSEN_BROKERS=5`` for five brokers); operators run longer ones with
``python -m tests.jepsen``. A failing run keeps its folder (history, report, broker logs) and
names it in the failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.jepsen.runner import DEFAULT_NEMESES, Options, run, unavailable_reason

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

SCALE = float(os.environ.get("SAMSA_JEPSEN_SCALE", "1"))
BROKERS = int(os.environ.get("SAMSA_JEPSEN_BROKERS", "3"))
CI_NEMESES = ["partition-leader", "partition-zk", "partition-bridge", "pause", "kill", "zk-restart", "disk-full"]


def test_contract_under_faults(tmp_path: Path) -> None:
    # quiet spells longer than the recovery bound (session timeout + 5 s = 11 s), so every heal's
    # recovery is measured before the next fault starts
    opts = Options(out=tmp_path / "run", nemeses=CI_NEMESES if SCALE <= 1 else list(DEFAULT_NEMESES),
                   time=150.0 * SCALE, brokers=BROKERS, seed=27, quiet=(11.5, 12.5), hold=(9.0, 11.0),
                   recovery=12.0)
    res, meta = run(opts)
    where = f"(history, report.html and broker logs in {opts.out})\n{(opts.out / 'verdict.txt').read_text()}"
    assert meta["nemesis_error"] is None, where
    assert meta["disk_full_crashes"] == 0, where
    assert len(set(meta["nemeses_run"])) >= 4, f"only {meta['nemeses_run']} ran {where}"
    c = res.counts
    assert c["send-ok"] >= 200 and c["txn-committed"] >= 5 and c["txn-aborted"] >= 1, where
    assert c["records-read"] >= c["send-ok"] and c["commits-ok"] >= 1, where
    assert meta["final_read_uncommitted_reached_end"] and meta["final_read_committed_reached_end"], where
    assert res.valid, where
