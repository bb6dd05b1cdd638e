"""The transaction coordinator against an in-memory ``__transaction_state``: no sockets.

Each test drives the coordinator through Kafka's request sequences and checks three things:
the answer (or Kafka error code), the records written to the internal topic, and the markers
written to data partitions. State rebuilt by ``load()`` from the written records must equal the
live state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import ErrorCode, KafkaError
from txn import transaction_log as tlog
from txn.coordinator import TransactionConfig, TransactionCoordinator
from txn.markers import TxnMarker
from txn.metadata import SHORT_MAX, IllegalStateTransition, TransactionMetadata, TransactionState
from txn.producer_ids import ProducerIdManager
from txn.storage import MemoryTransactionStorage, Record

S = TransactionState
TID = "tx-1"
P0, P1, P2 = ("orders", 0), ("orders", 1), ("payments", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class GatedStorage(MemoryTransactionStorage):
    """Marker writes (and optionally appends) wait until the test opens a gate."""

    def __init__(self) -> None:
        super().__init__()
        self.marker_gate = asyncio.Event()
        self.marker_gate.set()
        self.append_gate = asyncio.Event()
        self.append_gate.set()

    async def append(self, partition: int, records: Sequence[Record], *, on_appended: Any = None) -> None:
        await self.append_gate.wait()
        await super().append(partition, records, on_appended=on_appended)

    async def write_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        await self.marker_gate.wait()
        return await super().write_marker(topic, partition, marker)


class Ctx:
    def __init__(self, tmp: Path, storage: MemoryTransactionStorage | None = None, **cfg: Any) -> None:
        self.tmp = tmp
        self.clock = Clock()
        self.storage = storage or GatedStorage()
        cfg.setdefault("marker_retry_backoff_ms", 1)
        self.config = TransactionConfig(**cfg)
        self.pids = ProducerIdManager(tmp / "producer-id-block")
        self.coord = TransactionCoordinator(self.storage, self.pids, self.config, self.clock)

    async def start(self) -> Ctx:
        await self.coord.load()
        return self

    def records(self, tid: str = TID) -> list[TransactionMetadata | None]:
        """Every record written for ``tid``, decoded (None for a tombstone)."""
        out: list[TransactionMetadata | None] = []
        for key, value in self.storage.partitions.get(tlog.partition_for(tid), []):
            if tlog.decode_key(key) == tid:
                out.append(None if value is None else tlog.decode_value(value).to_metadata(tid))
        return out

    def states(self, tid: str = TID) -> list[str]:
        return [r.state.wire_name if r else "tombstone" for r in self.records(tid)]

    def m(self, tid: str = TID) -> TransactionMetadata:
        return self.coord.transactions[tid]

    async def reloaded(self) -> TransactionCoordinator:
        c = TransactionCoordinator(self.storage, ProducerIdManager(self.tmp / "producer-id-block"),
                                   self.config, self.clock)
        await c.load()
        return c


def run(fn: Callable[[Ctx], Awaitable[None]], tmp: Path, storage: MemoryTransactionStorage | None = None,
        **cfg: Any) -> None:
    async def main() -> None:
        ctx = await Ctx(tmp, storage, **cfg).start()
        try:
            await asyncio.wait_for(fn(ctx), 30)
        finally:
            await ctx.coord.stop()
    asyncio.run(main())


async def expect(code: ErrorCode, aw: Awaitable[Any]) -> None:
    with pytest.raises(KafkaError) as ei:
        await aw
    assert ei.value.code is code, ei.value


def same_durable_state(a: TransactionMetadata, b: TransactionMetadata) -> bool:
    return (a.producer_id, a.producer_epoch, a.txn_timeout_ms, a.state, a.partitions, a.txn_start_timestamp,
            a.txn_last_update_timestamp) == (b.producer_id, b.producer_epoch, b.txn_timeout_ms, b.state,
                                             b.partitions, b.txn_start_timestamp, b.txn_last_update_timestamp)


# --- InitProducerId --------------------------------------------------------------------------

def test_init_new_and_existing_id(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        assert (r.producer_id, r.producer_epoch) == (0, 0)
        assert c.states() == ["Empty"]
        r2 = await c.coord.init_producer_id(TID, 30000)
        assert (r2.producer_id, r2.producer_epoch) == (0, 1)  # same id, epoch bumped: fences instance 1
        assert c.m().txn_timeout_ms == 30000 and c.m().last_producer_epoch == -1
        other = await c.coord.init_producer_id("tx-2", 60000)
        assert other.producer_id == 1
        assert c.storage.partitions[tlog.partition_for("tx-2")]  # written to its own partition
    run(t, tmp_path)


def test_init_errors(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        await expect(ErrorCode.INVALID_REQUEST, c.coord.init_producer_id("", 1000))
        await expect(ErrorCode.INVALID_TRANSACTION_TIMEOUT, c.coord.init_producer_id(TID, 0))
        await expect(ErrorCode.INVALID_TRANSACTION_TIMEOUT, c.coord.init_producer_id(TID, -5))
        await expect(ErrorCode.INVALID_TRANSACTION_TIMEOUT, c.coord.init_producer_id(TID, 5001))
        assert (await c.coord.init_producer_id(TID, 5000)).producer_epoch == 0
    run(t, tmp_path, transaction_max_timeout_ms=5000)


def test_not_loaded_is_retriable(tmp_path: Path) -> None:
    async def main() -> None:
        c = Ctx(tmp_path)
        await expect(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, c.coord.init_producer_id(TID, 1000))
        await expect(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, c.coord.add_partitions(TID, 0, 0, [P0]))
    asyncio.run(main())


def test_kip360_epoch_bump_and_retry(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        # the producer hit a retriable error and asks for a bump with its current id/epoch
        b = await c.coord.init_producer_id(TID, 60000, r.producer_id, r.producer_epoch)
        assert (b.producer_id, b.producer_epoch) == (r.producer_id, 1)
        assert c.m().last_producer_epoch == 0
        # its retry (answer lost) names the old epoch: same answer, no second bump
        again = await c.coord.init_producer_id(TID, 60000, r.producer_id, 0)
        assert (again.producer_id, again.producer_epoch) == (r.producer_id, 1)
        # a stale epoch (neither current nor previous) is fenced
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.init_producer_id(TID, 60000, r.producer_id, 5))
        # a foreign producer id is fenced
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.init_producer_id(TID, 60000, 999, 1))
        # a fresh InitProducerId (no id/epoch) forgets the previous epoch
        await c.coord.init_producer_id(TID, 60000)
        assert c.m().producer_epoch == 2 and c.m().last_producer_epoch == -1
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.init_producer_id(TID, 60000, r.producer_id, 1))
    run(t, tmp_path)


def test_kip360_unknown_id_with_expected_producer(tmp_path: Path) -> None:
    """A client recovering from UNKNOWN_PRODUCER_ID may present an id the coordinator never saw."""
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000, 12345, 3)
        assert (r.producer_id, r.producer_epoch) == (0, 0)
    run(t, tmp_path)


def set_state(c: Ctx, **fields: Any) -> None:
    """Install a metadata version through replay(), as if read from the log."""
    m = c.m().copy()
    for k, v in fields.items():
        setattr(m, k, v)
    c.coord.replay(tlog.encode_key(m.transactional_id), tlog.encode_value(m))


def test_epoch_exhaustion_rotates_producer_id(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        set_state(c, producer_epoch=SHORT_MAX - 1)
        n = await c.coord.init_producer_id(TID, 60000, r.producer_id, SHORT_MAX - 1)
        assert n.producer_id != r.producer_id and n.producer_epoch == 0
        assert c.m().last_producer_id == r.producer_id and c.m().last_producer_epoch == SHORT_MAX - 1
        # a retry of that call (answer lost) with the old id and exhausted epoch gets the same answer
        again = await c.coord.init_producer_id(TID, 60000, r.producer_id, SHORT_MAX - 1)
        assert (again.producer_id, again.producer_epoch) == (n.producer_id, 0)
        # the old id with a non-exhausted epoch is a zombie
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.init_producer_id(TID, 60000, r.producer_id, 3))
    run(t, tmp_path)


def test_epoch_exhaustion_without_expected_epoch(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        set_state(c, producer_epoch=SHORT_MAX - 1)
        n = await c.coord.init_producer_id(TID, 60000)
        assert n.producer_id != r.producer_id and n.producer_epoch == 0 and c.m().last_producer_epoch == -1
        # exhausted epoch and an expected epoch that matches nothing: fenced, not a crash
        set_state(c, producer_epoch=SHORT_MAX - 1)
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.init_producer_id(TID, 60000, n.producer_id, 4))
    run(t, tmp_path)


# --- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------

def test_add_partitions_starts_and_extends_a_transaction(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        c.clock.now += 10
        await c.coord.add_partitions(TID, r.producer_id, r.producer_epoch, [P0])
        assert c.m().state is S.ONGOING and c.m().partitions == {P0}
        start = c.m().txn_start_timestamp
        assert start == c.clock.now
        c.clock.now += 10
        await c.coord.add_partitions(TID, r.producer_id, r.producer_epoch, [P0])  # subset: no write
        assert c.states() == ["Empty", "Ongoing"]
        await c.coord.add_partitions(TID, r.producer_id, r.producer_epoch, [P1, P2])
        assert c.m().partitions == {P0, P1, P2} and c.m().txn_start_timestamp == start
        assert c.states() == ["Empty", "Ongoing", "Ongoing"]
        assert c.records()[-1].partitions == {P0, P1, P2}  # type: ignore[union-attr]
    run(t, tmp_path)


def test_add_partitions_errors(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        await expect(ErrorCode.INVALID_PRODUCER_ID_MAPPING, c.coord.add_partitions("nobody", 0, 0, [P0]))
        await expect(ErrorCode.INVALID_REQUEST, c.coord.add_partitions("", 0, 0, [P0]))
        r = await c.coord.init_producer_id(TID, 60000)
        await expect(ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                     c.coord.add_partitions(TID, r.producer_id + 1, r.producer_epoch, [P0]))
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.add_partitions(TID, r.producer_id, 1, [P0]))
        assert c.states() == ["Empty"]
    run(t, tmp_path)


def test_add_offsets_adds_the_group_partition(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        await c.coord.add_offsets(TID, r.producer_id, r.producer_epoch, "my-group")
        assert c.m().partitions == {("__consumer_offsets", tlog.partition_for("my-group", 50))}
    run(t, tmp_path)


def test_verify_partitions(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        assert c.coord.verify_partitions(TID, r.producer_id, 0, [P0]) == {P0: ErrorCode.INVALID_TXN_STATE}
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        assert c.coord.verify_partitions(TID, r.producer_id, 0, [P0, P1]) == {
            P0: ErrorCode.NONE, P1: ErrorCode.INVALID_TXN_STATE}
        assert c.coord.verify_partitions(TID, r.producer_id, 3, [P0]) == {P0: ErrorCode.PRODUCER_FENCED}
        assert c.coord.verify_partitions("x", 1, 0, [P0]) == {P0: ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        assert c.states() == ["Empty", "Ongoing"]  # verification never writes
    run(t, tmp_path)


# --- EndTxn ----------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_writes_markers_everywhere_then_completes(tmp_path: Path, commit: bool) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0, P1, P2])
        await c.coord.end_txn(TID, r.producer_id, 0, commit)
        word = "Commit" if commit else "Abort"
        assert c.states() == ["Empty", "Ongoing", f"Prepare{word}", f"Complete{word}"]
        prepare = c.records()[2]
        assert prepare is not None and prepare.partitions == {P0, P1, P2}
        assert sorted((t_, p) for t_, p, _ in c.storage.markers) == sorted([P0, P1, P2])
        assert {m for _, _, m in c.storage.markers} == {TxnMarker(r.producer_id, 0, 0, commit)}
        done = c.m()
        assert done.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        assert done.partitions == set() and done.producer_epoch == 0
        # the next transaction starts from Complete*
        await c.coord.add_partitions(TID, r.producer_id, 0, [P1])
        assert c.m().state is S.ONGOING and c.m().partitions == {P1}
    run(t, tmp_path)


def test_end_txn_retries_and_wrong_outcomes(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        pid = r.producer_id
        await expect(ErrorCode.INVALID_TXN_STATE, c.coord.end_txn(TID, pid, 0, True))  # Empty
        await expect(ErrorCode.INVALID_TXN_STATE, c.coord.end_txn(TID, pid, 0, False))
        await c.coord.add_partitions(TID, pid, 0, [P0])
        await expect(ErrorCode.INVALID_PRODUCER_ID_MAPPING, c.coord.end_txn(TID, pid + 1, 0, True))
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.end_txn(TID, pid, 1, True))
        await expect(ErrorCode.INVALID_PRODUCER_ID_MAPPING, c.coord.end_txn("nobody", pid, 0, True))
        await c.coord.end_txn(TID, pid, 0, True)
        await c.coord.end_txn(TID, pid, 0, True)  # retry after CompleteCommit: NONE
        await expect(ErrorCode.INVALID_TXN_STATE, c.coord.end_txn(TID, pid, 0, False))
        await c.coord.add_partitions(TID, pid, 0, [P0])
        await c.coord.end_txn(TID, pid, 0, False)
        await c.coord.end_txn(TID, pid, 0, False)  # retry after CompleteAbort: NONE
        await expect(ErrorCode.INVALID_TXN_STATE, c.coord.end_txn(TID, pid, 0, True))
        assert c.states().count("PrepareCommit") == 1 and c.states().count("PrepareAbort") == 1
    run(t, tmp_path)


def test_requests_during_prepare_are_concurrent_transactions(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        assert isinstance(c.storage, GatedStorage)
        r = await c.coord.init_producer_id(TID, 60000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        c.storage.marker_gate.clear()  # markers hang: the transaction stays in PrepareCommit
        await c.coord.end_txn(TID, r.producer_id, 0, True)
        assert c.m().state is S.PREPARE_COMMIT
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.end_txn(TID, r.producer_id, 0, True))
        await expect(ErrorCode.INVALID_TXN_STATE, c.coord.end_txn(TID, r.producer_id, 0, False))
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.add_partitions(TID, r.producer_id, 0, [P1]))
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.init_producer_id(TID, 60000))
        assert c.coord.verify_partitions(TID, r.producer_id, 0, [P0]) == {P0: ErrorCode.CONCURRENT_TRANSACTIONS}
        c.storage.marker_gate.set()
        await c.coord.wait_for_completions()
        assert c.m().state is S.COMPLETE_COMMIT
        assert (await c.coord.init_producer_id(TID, 60000)).producer_epoch == 1
    run(t, tmp_path, end_txn_wait_ms=0)


def test_prepare_abort_blocks_add_partitions(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        assert isinstance(c.storage, GatedStorage)
        r = await c.coord.init_producer_id(TID, 60000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        c.storage.marker_gate.clear()
        await c.coord.end_txn(TID, r.producer_id, 0, False)
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.end_txn(TID, r.producer_id, 0, False))
        await expect(ErrorCode.INVALID_TXN_STATE, c.coord.end_txn(TID, r.producer_id, 0, True))
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.add_partitions(TID, r.producer_id, 0, [P0]))
        c.storage.marker_gate.set()
        await c.coord.wait_for_completions()
        assert c.m().state is S.COMPLETE_ABORT
    run(t, tmp_path, end_txn_wait_ms=0)


def test_marker_retries_and_deleted_topics(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        c.storage.marker_errors[P0] = [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT]
        c.storage.marker_errors[P2] = [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]  # topic deleted
        r = await c.coord.init_producer_id(TID, 60000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0, P1, P2])
        await c.coord.end_txn(TID, r.producer_id, 0, True)
        await c.coord.wait_for_completions()
        assert c.m().state is S.COMPLETE_COMMIT
        assert sorted((t_, p) for t_, p, _ in c.storage.markers) == [P0, P1]  # P0 after 2 retries
    run(t, tmp_path)


# --- fencing and timeouts --------------------------------------------------------------------

def test_new_instance_fences_open_transaction(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        old = await c.coord.init_producer_id(TID, 60000)
        await c.coord.add_partitions(TID, old.producer_id, 0, [P0, P1])
        # a second instance with the same transactional id: the open transaction is aborted
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.init_producer_id(TID, 60000))
        await c.coord.wait_for_completions()
        assert c.states() == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort"]
        assert {m for _, _, m in c.storage.markers} == {TxnMarker(old.producer_id, 1, 0, False)}
        new = await c.coord.init_producer_id(TID, 60000)  # the client's retry
        assert (new.producer_id, new.producer_epoch) == (old.producer_id, 2)
        # the zombie is fenced everywhere
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.add_partitions(TID, old.producer_id, 0, [P0]))
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.end_txn(TID, old.producer_id, 0, True))
        await expect(ErrorCode.PRODUCER_FENCED,
                     c.coord.init_producer_id(TID, 60000, old.producer_id, old.producer_epoch))
    run(t, tmp_path)


def test_failed_fence_does_not_bump_twice(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        c.storage.fail_appends = 1
        await expect(ErrorCode.COORDINATOR_NOT_AVAILABLE, c.coord.init_producer_id(TID, 60000))
        assert c.m().state is S.ONGOING and c.m().pending_state is None and c.m().has_failed_epoch_fence
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.init_producer_id(TID, 60000))
        await c.coord.wait_for_completions()
        # epoch 0 -> fence at 1 (the failed attempt's bump is not applied twice)
        assert {m.producer_epoch for _, _, m in c.storage.markers} == {1}
    run(t, tmp_path)


def test_timed_out_transaction_is_aborted(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 1000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        c.clock.now += 1000
        assert await c.coord.abort_timed_out_transactions() == []  # not yet (strictly greater)
        c.clock.now += 1
        assert await c.coord.abort_timed_out_transactions() == [TID]
        await c.coord.wait_for_completions()
        assert c.m().state is S.COMPLETE_ABORT and c.m().producer_epoch == 1
        assert [m for _, _, m in c.storage.markers] == [TxnMarker(r.producer_id, 1, 0, False)]
        # the producer learns it was fenced when it tries to go on
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.end_txn(TID, r.producer_id, 0, True))
        await expect(ErrorCode.PRODUCER_FENCED, c.coord.add_partitions(TID, r.producer_id, 0, [P0]))
        assert await c.coord.abort_timed_out_transactions() == []
    run(t, tmp_path)


def test_timeout_with_exhausted_epoch_aborts_without_bump(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 1000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        set_state(c, producer_epoch=SHORT_MAX - 1)
        c.clock.now += 5000
        assert await c.coord.abort_timed_out_transactions() == [TID]
        await c.coord.wait_for_completions()
        assert c.m().producer_epoch == SHORT_MAX - 1 and c.m().state is S.COMPLETE_ABORT
    run(t, tmp_path)


def test_background_task_aborts_expired_transactions(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 1000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        c.coord.start_background()
        c.clock.now += 2000
        for _ in range(200):
            if c.m().state is S.COMPLETE_ABORT:
                break
            await asyncio.sleep(0.01)
        assert c.m().state is S.COMPLETE_ABORT
    run(t, tmp_path, abort_timed_out_interval_ms=5)


def test_transactional_id_expiration(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 1000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        c.clock.now += 10_000
        assert await c.coord.expire_transactional_ids() == []  # Ongoing never expires
        await c.coord.end_txn(TID, r.producer_id, 0, True)
        c.clock.now += 9_999
        assert await c.coord.expire_transactional_ids() == []
        c.clock.now += 1
        assert await c.coord.expire_transactional_ids() == [TID]
        assert c.states()[-1] == "tombstone" and TID not in c.coord.transactions
        await expect(ErrorCode.INVALID_PRODUCER_ID_MAPPING, c.coord.add_partitions(TID, r.producer_id, 0, [P0]))
        with pytest.raises(KafkaError) as ei:
            c.coord.describe(TID)
        assert ei.value.code is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        assert TID not in (await c.reloaded()).transactions  # the tombstone replays too
        n = await c.coord.init_producer_id(TID, 1000)
        assert n.producer_id != r.producer_id and n.producer_epoch == 0
        assert (await c.reloaded()).transactions[TID].producer_id == n.producer_id
    run(t, tmp_path, transactional_id_expiration_ms=10_000)


# --- storage failures and concurrency --------------------------------------------------------

def test_failed_append_leaves_state_unchanged(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        c.storage.fail_appends = 1
        await expect(ErrorCode.COORDINATOR_NOT_AVAILABLE, c.coord.add_partitions(TID, r.producer_id, 0, [P0]))
        assert c.m().state is S.EMPTY and c.m().partitions == set() and c.m().pending_state is None
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        c.storage.fail_appends = 1
        await expect(ErrorCode.COORDINATOR_NOT_AVAILABLE, c.coord.end_txn(TID, r.producer_id, 0, True))
        assert c.m().state is S.ONGOING and not c.storage.markers
        await c.coord.end_txn(TID, r.producer_id, 0, True)
        assert c.m().state is S.COMPLETE_COMMIT
    run(t, tmp_path)


def test_complete_write_is_retried(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        orig = c.storage.write_marker

        async def marker_then_fail(topic: str, p: int, m: TxnMarker) -> ErrorCode:
            c.storage.fail_appends = 2  # the CompleteCommit write fails twice
            return await orig(topic, p, m)
        c.storage.write_marker = marker_then_fail  # type: ignore[method-assign,assignment]
        await c.coord.end_txn(TID, r.producer_id, 0, True)
        await c.coord.wait_for_completions()
        assert c.states() == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    run(t, tmp_path)


def test_concurrent_requests_for_one_id(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        assert isinstance(c.storage, GatedStorage)
        r = await c.coord.init_producer_id(TID, 60000)
        c.storage.append_gate.clear()
        first = asyncio.ensure_future(c.coord.add_partitions(TID, r.producer_id, 0, [P0]))
        await asyncio.sleep(0)
        assert c.m().pending_state is S.ONGOING
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.add_partitions(TID, r.producer_id, 0, [P1]))
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.end_txn(TID, r.producer_id, 0, True))
        await expect(ErrorCode.CONCURRENT_TRANSACTIONS, c.coord.init_producer_id(TID, 60000))
        c.storage.append_gate.set()
        await first
        assert c.m().partitions == {P0} and c.m().pending_state is None
    run(t, tmp_path)


# --- replay and recovery ---------------------------------------------------------------------

def test_replay_rebuilds_the_live_state(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        ids = [f"tx-{i}" for i in range(6)]
        for i, tid in enumerate(ids):
            r = await c.coord.init_producer_id(tid, 60000 + i)
            if i % 3 == 0:
                continue
            await c.coord.add_partitions(tid, r.producer_id, 0, [P0, (f"t{i}", i)])
            if i % 3 == 1:
                await c.coord.end_txn(tid, r.producer_id, 0, i % 2 == 0)
        again = await c.reloaded()
        assert set(again.transactions) == set(c.coord.transactions)
        for tid in ids:
            assert same_durable_state(again.transactions[tid], c.coord.transactions[tid])
    run(t, tmp_path)


@pytest.mark.parametrize("commit", [True, False])
def test_restart_in_prepare_completes_the_outcome(tmp_path: Path, commit: bool) -> None:
    """Crash after Prepare* is durable but before any marker: the restart finishes the job."""
    storage = GatedStorage()

    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0, P1])
        storage.marker_gate.clear()
        await c.coord.end_txn(TID, r.producer_id, 0, commit)
        await c.coord.stop()  # the crash: the completion task dies with the process
        assert storage.markers == []
        storage.marker_gate.set()
        again = await c.reloaded()
        await again.wait_for_completions()
        m = again.transactions[TID]
        assert m.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        assert sorted((t_, p) for t_, p, _ in storage.markers) == [P0, P1]
        assert {mk.commit for _, _, mk in storage.markers} == {commit}
        await again.stop()
    run(t, tmp_path, storage=storage, end_txn_wait_ms=0)


def test_restart_with_ongoing_transaction_times_out(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 1000)
        await c.coord.add_partitions(TID, r.producer_id, 0, [P0])
        await c.coord.stop()
        again = await c.reloaded()
        assert again.transactions[TID].state is S.ONGOING
        c.clock.now += 1001
        assert await again.abort_timed_out_transactions() == [TID]
        await again.wait_for_completions()
        assert again.transactions[TID].state is S.COMPLETE_ABORT
        await again.stop()
    run(t, tmp_path)


def test_producer_ids_never_repeat_across_coordinator_restarts(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        a = await c.coord.init_producer_id("a", 1000)
        again = await c.reloaded()
        b = await again.init_producer_id("b", 1000)
        assert b.producer_id != a.producer_id
        assert (await again.init_producer_id("a", 1000)).producer_id == a.producer_id
    run(t, tmp_path)


# --- describe / list -------------------------------------------------------------------------

def test_describe_and_list(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        a = await c.coord.init_producer_id("a", 1000)
        b = await c.coord.init_producer_id("b", 1000)
        await c.coord.add_partitions("b", b.producer_id, 0, [P0])
        d = c.coord.describe("b")
        assert d.state is S.ONGOING and d.partitions == {P0}
        with pytest.raises(KafkaError) as ei:
            c.coord.describe("zzz")
        assert ei.value.code is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

        def ids(*args: Any, **kw: Any) -> set[str]:
            return {m.transactional_id for m in c.coord.list_transactions(*args, **kw)[0]}
        assert ids() == {"a", "b"}
        assert ids(["Ongoing"]) == {"b"}
        assert ids(["Empty", "Ongoing"]) == {"a", "b"}
        assert ids(producer_ids=[a.producer_id]) == {"a"}
        assert c.coord.list_transactions(["Bogus"]) == ([], ["Bogus"])
        c.clock.now += 500
        assert ids(duration_filter_ms=100) == {"b"}
        assert ids(duration_filter_ms=1000) == set()
    run(t, tmp_path)


def test_illegal_internal_transition_raises() -> None:
    m = TransactionMetadata("x", 1, state=S.EMPTY)
    with pytest.raises(IllegalStateTransition):
        m.prepare(S.PREPARE_COMMIT)
    with pytest.raises(IllegalStateTransition):
        m.prepare(S.COMPLETE_ABORT)


def test_config_from_properties() -> None:
    props = {"transaction.max.timeout.ms": "5000", "transaction.state.log.num.partitions": 7,
             "transaction.abort.timed.out.transaction.cleanup.interval.ms": "250"}
    cfg = TransactionConfig.from_properties(props.get)
    assert (cfg.transaction_max_timeout_ms, cfg.num_partitions, cfg.abort_timed_out_interval_ms) == (5000, 7, 250)
    assert cfg.transactional_id_expiration_ms == 604_800_000


def test_validate_txn_offset_commit(tmp_path: Path) -> None:
    async def t(c: Ctx) -> None:
        r = await c.coord.init_producer_id(TID, 60000)
        with pytest.raises(KafkaError) as ei:
            c.coord.validate_txn_offset_commit(TID, r.producer_id, 0, "g")
        assert ei.value.code is ErrorCode.INVALID_TXN_STATE  # AddOffsetsToTxn not sent
        await c.coord.add_offsets(TID, r.producer_id, 0, "g")
        c.coord.validate_txn_offset_commit(TID, r.producer_id, 0, "g")
        for args, code in [((TID, r.producer_id, 1, "g"), ErrorCode.PRODUCER_FENCED),
                           ((TID, r.producer_id + 1, 0, "g"), ErrorCode.INVALID_PRODUCER_ID_MAPPING),
                           (("nobody", r.producer_id, 0, "g"), ErrorCode.INVALID_PRODUCER_ID_MAPPING)]:
            with pytest.raises(KafkaError) as ei:
                c.coord.validate_txn_offset_commit(*args)
            assert ei.value.code is code
    run(t, tmp_path)


def test_produce_verification(tmp_path: Path) -> None:
    from broker.coordinators.transactions import TransactionVerifier
    from protocol.records import ATTR_TRANSACTIONAL, read_header
    from txn.markers import build_batch

    def batch(pid: int, epoch: int, transactional: bool = True) -> Any:
        return read_header(build_batch([(None, b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                       attributes=ATTR_TRANSACTIONAL if transactional else 0))

    async def t(c: Ctx) -> None:
        verifier = TransactionVerifier(c.coord, broker_id=0, channel=None)  # a single broker
        r = await c.coord.init_producer_id(TID, 60000)
        pid = r.producer_id

        def verify(tid: str | None, b: Any, tp: tuple[str, int] = P0) -> ErrorCode:
            return verifier.verify_local(tid, tp[0], tp[1], [b])
        assert verify(TID, batch(pid, 0)) is ErrorCode.INVALID_TXN_STATE      # partition not added
        await c.coord.add_partitions(TID, pid, 0, [P0])
        assert verify(TID, batch(pid, 0)) is ErrorCode.NONE
        assert verify(TID, batch(pid, 0), P1) is ErrorCode.INVALID_TXN_STATE  # other partition
        assert verify(None, batch(pid, 0)) is ErrorCode.INVALID_TXN_STATE      # no transactional id
        assert verify(None, batch(pid, 0, transactional=False)) is ErrorCode.NONE  # idempotent only
        assert verify(TID, batch(pid + 1, 0)) is ErrorCode.INVALID_PRODUCER_ID_MAPPING
        assert verify(TID, batch(pid, 7)) is ErrorCode.INVALID_PRODUCER_EPOCH
        assert isinstance(c.storage, GatedStorage)
        c.storage.marker_gate.clear()
        await c.coord.end_txn(TID, pid, 0, True)
        assert verify(TID, batch(pid, 0)) is ErrorCode.NOT_ENOUGH_REPLICAS   # completing: retriable
        c.storage.marker_gate.set()
        await c.coord.wait_for_completions()
        assert verify(TID, batch(pid, 0)) is ErrorCode.INVALID_TXN_STATE     # a late produce: refused
    run(t, tmp_path, end_txn_wait_ms=0)
