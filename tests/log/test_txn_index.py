"""The aborted-transaction index: Kafka's 34-byte entries, collection bounds, recovery."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from log.txn_index import AbortedTxn, LogTransactionIndex, TransactionIndex, index_path


@dataclass
class Completed:
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class PS:
    def __init__(self, fu: int | None = None) -> None:
        self.fu = fu

    def first_unstable_offset(self) -> int | None:
        return self.fu


def test_entry_layout(tmp_path: Path) -> None:
    idx = TransactionIndex(index_path(tmp_path, 0), 0)
    idx.append(AbortedTxn(7, 10, 20, 21))
    data = (tmp_path / "00000000000000000000.txnindex").read_bytes()
    assert data == struct.pack(">hqqqq", 0, 7, 10, 20, 21) and len(data) == 34


def test_collect_bounds_and_completion(tmp_path: Path) -> None:
    idx = TransactionIndex(index_path(tmp_path, 0), 0)
    idx.append(AbortedTxn(1, 0, 5, 6))
    idx.append(AbortedTxn(2, 3, 10, 11))
    idx.append(AbortedTxn(3, 12, 15, 16))
    got, complete = idx.collect(6, 12)
    assert [e.producer_id for e in got] == [2] and complete  # entry 3 has lso 16 >= 12
    got, complete = idx.collect(0, 100)
    assert [e.producer_id for e in got] == [1, 2, 3] and not complete
    got, _ = idx.collect(16, 100)
    assert got == []
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(4, 0, 15, 16))


def test_reload_truncate_and_torn_tail(tmp_path: Path) -> None:
    p = index_path(tmp_path, 100)
    idx = TransactionIndex(p, 100)
    for i in range(4):
        idx.append(AbortedTxn(i, 100 + 10 * i, 105 + 10 * i, 106 + 10 * i))
    idx.close()
    with open(p, "ab") as f:
        f.write(b"\x00" * 10)  # torn write
    again = TransactionIndex(p, 100)
    assert len(again.entries) == 4 and p.stat().st_size == 4 * 34
    again.truncate_to(125)
    assert [e.last_offset for e in again.entries] == [105, 115]
    assert len(TransactionIndex(p, 100).entries) == 2


def test_log_index_across_segments(tmp_path: Path) -> None:
    li = LogTransactionIndex(tmp_path)
    (tmp_path / f"{999:020d}.txnindex").write_bytes(b"")  # orphan: no such segment
    li.load([0, 50])
    assert not (tmp_path / f"{999:020d}.txnindex").exists()
    # producer 1 aborts at 20 while producer 2's transaction (from 15) is still open
    li.on_completed([Completed(1, 10, 20, True)], PS(fu=15), 0)
    li.on_completed([Completed(9, 21, 22, False)], PS(), 0)  # commits are not indexed
    li.on_completed([Completed(2, 15, 60, True)], PS(), 50)
    assert li.indexes[0].entries == [AbortedTxn(1, 10, 20, 15)]
    assert li.indexes[50].entries == [AbortedTxn(2, 15, 60, 61)]
    assert li.collect_aborted_transactions(0, 30) == [(1, 10), (2, 15)]
    assert li.collect_aborted_transactions(21, 70) == [(2, 15)]
    assert li.collect_aborted_transactions(61, 70) == []
    # replaying the same completion after a crash does not duplicate it
    li.on_completed([Completed(2, 15, 60, True)], PS(), 50)
    assert len(li.indexes[50].entries) == 1
    li.truncate_to(55)
    assert li.indexes[50].entries == [] and li.collect_aborted_transactions(0, 100) == [(1, 10)]
    li.delete_segment(0)
    assert not index_path(tmp_path, 0).exists()
    li.close()
