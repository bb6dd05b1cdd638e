"""Transactions through the log: open transactions, markers, the aborted-transaction index."""

from __future__ import annotations

import os
from pathlib import Path

from log import Log, LogConfig, check_log
from tests.log.helpers import build_batch, build_marker, records

CFG = LogConfig(segment_bytes=1024, index_interval_bytes=128)


def txn_batch(pid: int, seq: int, n: int = 1) -> bytes:
    return build_batch([b"t%d" % i for i in range(n)], producer_id=pid, producer_epoch=0, base_sequence=seq,
                       transactional=True)


def test_markers_close_transactions_and_index_aborts(tmp_path: Path) -> None:
    d = tmp_path / "tx-0"
    log = Log.open(d, CFG)
    log.append(records(build_batch([b"plain"])))                       # 0
    log.append(records(txn_batch(1, 0, 2)))                            # 1-2
    log.append(records(txn_batch(2, 0)))                               # 3
    assert log.producer_state.first_unstable_offset() == 1
    info = log.append(records(build_marker(1, 0, commit=False)))       # 4: abort pid 1
    assert info.completed_txns is not None and info.completed_txns[0].is_aborted
    assert log.producer_state.first_unstable_offset() == 3
    log.append(records(build_marker(2, 0, commit=True)))               # 5: commit pid 2
    assert log.producer_state.first_unstable_offset() is None
    log.append(records(txn_batch(1, 2)))                               # 6: pid 1 again
    log.append(records(build_marker(1, 0, commit=False)))              # 7
    assert log.collect_aborted_transactions(0, 8) == [(1, 1), (1, 6)]
    assert log.collect_aborted_transactions(5, 8) == [(1, 6)]
    assert log.collect_aborted_transactions(0, 4) == [(1, 1)]
    assert check_log(d) == []
    log.close()
    # clean reopen: the index files are loaded
    log = Log.open(d, CFG, recover=False)
    assert log.collect_aborted_transactions(0, 8) == [(1, 1), (1, 6)]
    log.close()
    # unclean reopen without snapshots: producer state and the index are rebuilt from the log
    for n in os.listdir(d):
        if n.endswith((".snapshot", ".txnindex")):
            os.unlink(d / n)
    log = Log.open(d, CFG, recover=True)
    assert log.collect_aborted_transactions(0, 8) == [(1, 1), (1, 6)]
    assert log.producer_state.first_unstable_offset() is None
    assert log.producer_state.last_entry(1).last_seq == 2  # type: ignore[union-attr]
    log.close()


def test_truncation_reopens_a_transaction(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "tx-0", CFG)
    log.append(records(txn_batch(1, 0)))                               # 0
    log.append(records(build_marker(1, 0, commit=False)))              # 1
    assert log.producer_state.first_unstable_offset() is None
    log.truncate_to(1)
    assert log.producer_state.first_unstable_offset() == 0
    assert log.collect_aborted_transactions(0, 10) == []
    log.close()


def test_open_transaction_spanning_segments_survives_restart(tmp_path: Path) -> None:
    d = tmp_path / "tx-0"
    log = Log.open(d, CFG)
    log.append(records(txn_batch(1, 0)))
    for _ in range(30):
        log.append(records(build_batch([b"x" * 50])))
    assert len(log.segments) > 2
    log.close()
    log = Log.open(d, CFG, recover=False)
    assert log.producer_state.first_unstable_offset() == 0
    log.append(records(build_marker(1, 0, commit=False)))
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(1, 0)]
    log.close()


def test_marker_coordinator_epoch_fencing(tmp_path: Path) -> None:
    import pytest

    from protocol.errors import ErrorCode, KafkaError

    d = tmp_path / "tx-0"
    log = Log.open(d, CFG)
    log.append(records(txn_batch(1, 0)))
    log.append(records(build_marker(1, 0, commit=True, coordinator_epoch=4)))
    assert log.producer_state.last_entry(1).coordinator_epoch == 4  # type: ignore[union-attr]
    log.append(records(txn_batch(1, 1)))
    with pytest.raises(KafkaError) as e:
        log.append(records(build_marker(1, 0, commit=True, coordinator_epoch=3)))  # a zombie coordinator
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert log.producer_state.first_unstable_offset() == 2
    log.append(records(build_marker(1, 0, commit=False, coordinator_epoch=5)))
    log.close()
    for n in os.listdir(d):
        if n.endswith(".snapshot"):
            os.unlink(d / n)
    log = Log.open(d, CFG, recover=True)  # replay restores the coordinator epoch too
    assert log.producer_state.last_entry(1).coordinator_epoch == 5  # type: ignore[union-attr]
    assert log.collect_aborted_transactions(0, 10) == [(1, 2)]
    log.close()
