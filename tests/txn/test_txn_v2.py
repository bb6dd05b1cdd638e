"""Transactions v2 (KIP-890 part 2) in the coordinator: the epoch bumped by every EndTxn v5.

Pure state-machine tests on the coordinator with in-memory storage (the scaffolding of
test_txn_coordinator.py). The wire-level counterpart, with Produce v12 and TxnOffsetCommit v5
against a live broker, is test_txn_v2_broker.py.
"""

from __future__ import annotations

from pathlib import Path

from protocol.errors import ErrorCode
from tests.txn.test_txn_coordinator import P0, P1, TID, Ctx, S, expect, run, set_state
from txn import transaction_log as tlog
from txn.markers import TxnMarker
from txn.metadata import SHORT_MAX


def test_end_txn_v5_bumps_the_epoch_and_marks_with_it(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        pid = r.producer_id
        await c.coord.add_partitions(TID, pid, 0, [P0, P1], transaction_version=2)
        assert c.m().client_transaction_version == 2
        done = await c.coord.end_txn(TID, pid, 0, True, transaction_version=2)
        assert (done.producer_id, done.producer_epoch) == (pid, 1)
        assert c.states() == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
        prepare = c.records()[2]
        assert prepare is not None and prepare.producer_epoch == 1  # the bump is durable with the decision
        assert {m for _, _, m in c.storage.markers} == {TxnMarker(pid, 1, 0, True)}  # markers carry the new epoch
        # the v2 records are TransactionLogValue v1, with ClientTransactionVersion 2
        raw = c.storage.partitions[tlog.partition_for(TID)][-1][1]
        assert raw is not None and tlog.decode_value(raw).version == 1
        assert tlog.decode_value(raw).client_transaction_version == 2
        # the old epoch is fenced; the next transaction runs at epoch 1 and bumps to 2
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.add_partitions(TID, pid, 0, [P0], transaction_version=2))
        await c.coord.add_partitions(TID, pid, 1, [P1], transaction_version=2)
        aborted = await c.coord.end_txn(TID, pid, 1, False, transaction_version=2)
        assert (aborted.producer_id, aborted.producer_epoch) == (pid, 2)
        assert c.m().state is S.COMPLETE_ABORT and c.m().producer_epoch == 2
    run(t, tmp_path)


def test_end_txn_v5_retry_and_invalid_outcomes(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        pid = (await c.coord.init_producer_id(TID, 60000)).producer_id
        await c.coord.add_partitions(TID, pid, 0, [P0], transaction_version=2)
        await c.coord.end_txn(TID, pid, 0, True, transaction_version=2)
        # the answer was lost: the retry carries epoch 0 and gets the current epoch back
        again = await c.coord.end_txn(TID, pid, 0, True, transaction_version=2)
        assert (again.producer_id, again.producer_epoch) == (pid, 1)
        assert c.states()[-1] == "CompleteCommit" and len(c.states()) == 4  # nothing written
        # the retry may not change the outcome; a stale epoch two behind is fenced
        await expect(ErrorCode.INVALID_TXN_STATE, c.coord.end_txn(TID, pid, 0, False, transaction_version=2))
        # committing with no open transaction is invalid; aborting one is allowed in v2 and bumps the epoch
        await expect(ErrorCode.INVALID_TXN_STATE, c.coord.end_txn(TID, pid, 1, True, transaction_version=2))
        empty = await c.coord.end_txn(TID, pid, 1, False, transaction_version=2)
        assert (empty.producer_id, empty.producer_epoch) == (pid, 2)
        assert c.states()[-2:] == ["PrepareAbort", "CompleteAbort"]
        assert len(c.storage.markers) == 1  # an empty abort writes no marker
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.end_txn(TID, pid, 0, False, transaction_version=2))
        # a v1 client (EndTxn v4) still ends without a bump
        await c.coord.add_partitions(TID, pid, 2, [P1])
        v1 = await c.coord.end_txn(TID, pid, 2, True)
        assert (v1.producer_id, v1.producer_epoch) == (pid, 2) and c.m().producer_epoch == 2
    run(t, tmp_path)


def test_end_txn_v5_with_an_exhausted_epoch_rotates_the_producer_id(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        pid = (await c.coord.init_producer_id(TID, 60000)).producer_id
        set_state(c, producer_epoch=SHORT_MAX - 1)
        await c.coord.add_partitions(TID, pid, SHORT_MAX - 1, [P0], transaction_version=2)
        new = await c.coord.end_txn(TID, pid, SHORT_MAX - 1, True, transaction_version=2)
        assert new.producer_id != pid and new.producer_epoch == 0
        # the markers still use the old producer id, at the last epoch (Short.MAX)
        assert {m for _, _, m in c.storage.markers} == {TxnMarker(pid, SHORT_MAX, 0, True)}
        m = c.m()
        assert (m.producer_id, m.producer_epoch, m.state, m.next_producer_id) == (new.producer_id, 0,
                                                                                 S.COMPLETE_COMMIT, -1)
        # a retry with the old id and exhausted epoch gets the new id back
        again = await c.coord.end_txn(TID, pid, SHORT_MAX - 1, True, transaction_version=2)
        assert (again.producer_id, again.producer_epoch) == (new.producer_id, 0)
        # the rotation survives a restart (TransactionLogValue v1 carries the ids)
        reloaded = await c.reloaded()
        r = reloaded.transactions[TID]
        assert (r.producer_id, r.producer_epoch, r.last_producer_id) == (new.producer_id, 0, pid)
    run(t, tmp_path)


def test_restart_in_prepare_of_a_v2_transaction(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        pid = (await c.coord.init_producer_id(TID, 60000)).producer_id
        await c.coord.add_partitions(TID, pid, 0, [P0], transaction_version=2)
        m = c.m().prepare(S.PREPARE_COMMIT, producer_epoch=1, last_producer_epoch=0)
        await c.storage.append(tlog.partition_for(TID), [(tlog.encode_key(TID), tlog.encode_value(m))])  # then a crash
        reloaded = await c.reloaded()
        await reloaded.wait_for_completions()
        m = reloaded.transactions[TID]
        assert (m.state, m.producer_epoch, m.client_transaction_version) == (S.COMPLETE_COMMIT, 1, 2)
        assert TxnMarker(pid, 1, 0, True) in {mk for _, _, mk in c.storage.markers}
        await reloaded.stop()
    run(t, tmp_path)


def test_v2_producer_recovers_from_a_timeout_by_aborting(tmp_path: Path) -> None:
    """The timeout abort bumps the epoch (fencing the producer's writes); a v2 producer's EndTxn(abort)
    with the epoch just below is then a retry of that abort, answered with the new epoch, so it can go
    on (Kafka's retryOnEpochBump). A commit is refused, and a v1 producer is fenced as before."""
    async def t(c: Ctx) -> None:
        pid = (await c.coord.init_producer_id(TID, 1000)).producer_id
        await c.coord.add_partitions(TID, pid, 0, [P0], transaction_version=2)
        c.clock.now += 1001
        assert await c.coord.abort_timed_out_transactions() == [TID]
        await c.coord.wait_for_completions()
        assert (c.m().state, c.m().producer_epoch) == (S.COMPLETE_ABORT, 1)
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.add_partitions(TID, pid, 0, [P1], transaction_version=2))
        await expect(ErrorCode.INVALID_TXN_STATE, c.coord.end_txn(TID, pid, 0, True, transaction_version=2))
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.end_txn(TID, pid, 0, False))  # v1: fenced
        r = await c.coord.end_txn(TID, pid, 0, False, transaction_version=2)
        assert (r.producer_id, r.producer_epoch) == (pid, 1)
        await c.coord.add_partitions(TID, pid, 1, [P1], transaction_version=2)  # and carries on
        assert c.m().state is S.ONGOING
    run(t, tmp_path)
