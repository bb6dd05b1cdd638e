"""Regression for the schedule a 5-broker Jepsen run (seed 2027, all nemeses) hit on broker n4:
a transaction coordinator's completion task outliving its tenure.

What happened: n4 coordinated ``jepsen-tx-0``; it wrote PrepareAbort and the markers, then lost
leadership of ``__transaction_state-1`` before its CompleteAbort was written. The completion task
kept retrying CompleteAbort (NOT_COORDINATOR every 5 s) while broker 0 finished that abort and the
producer ran new transactions. When n4 led the partition again, ``load_partition`` replayed the
log, but the old task was still running and, re-reading the (new) metadata, tried to complete the
*new* transaction with the *old* outcome: IllegalStateTransition ``Ongoing -> CompleteAbort``.
Had the new transaction been in PrepareAbort (same outcome), the old task, its markers already
written for the old partitions, would have written CompleteAbort for the new one without a single
marker on the new one's partitions: a hanging transaction (its partitions' last stable offset stuck,
read_committed consumers stalled), while ``_start_completion`` saw a running task and started none.

The schedule, made deterministic here against the coordinator with an in-memory log whose
leadership the test takes away and gives back: a newly loaded partition's prepared transaction
must be completed with its own markers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from protocol.errors import ErrorCode, KafkaError
from txn import transaction_log as tlog
from txn.coordinator import TransactionConfig, TransactionCoordinator
from txn.markers import TxnMarker
from txn.metadata import TransactionState as TS
from txn.producer_ids import ProducerIdManager
from txn.storage import MemoryTransactionStorage, Record

TID = "jepsen-tx-0"
OLD, NEW = ("jepsen", 0), ("jepsen", 1)


class LeadershipStorage(MemoryTransactionStorage):
    """Appends fail with NOT_LEADER_OR_FOLLOWER while ``leader`` is False; the first marker write
    takes leadership away (the coordinator lost ``__transaction_state`` right after its markers)."""

    def __init__(self) -> None:
        super().__init__()
        self.leader = True
        self.refused = 0

    async def append(self, partition: int, records: Sequence[Record], **kw: object) -> None:
        if not self.leader:
            self.refused += 1
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader of __transaction_state")
        await super().append(partition, records, **kw)  # type: ignore[arg-type]

    async def write_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        code = await super().write_marker(topic, partition, marker)
        if (topic, partition) == OLD:
            self.leader = False
        return code


def test_reloaded_partition_completes_its_own_transaction(tmp_path: Path) -> None:
    async def main() -> None:
        storage = LeadershipStorage()
        coord = TransactionCoordinator(storage, ProducerIdManager(tmp_path / "pids"),
                                       TransactionConfig(marker_retry_backoff_ms=20))
        await coord.load()
        try:
            r = await coord.init_producer_id(TID, 60000)
            await coord.add_partitions(TID, r.producer_id, r.producer_epoch, [OLD])
            end = asyncio.ensure_future(coord.end_txn(TID, r.producer_id, r.producer_epoch, commit=False))
            for _ in range(500):                      # PrepareAbort and the OLD marker written, then
                if storage.refused >= 2:              # CompleteAbort refused: the task is retrying
                    break
                await asyncio.sleep(0.01)
            assert storage.refused >= 2 and coord.transactions[TID].state is TS.PREPARE_ABORT

            # Meanwhile the next coordinator completed that abort and the producer began a new
            # transaction on NEW, which is being aborted too: its log now says PrepareAbort {NEW}.
            m = coord.transactions[TID]
            done = m.prepare(TS.COMPLETE_ABORT, partitions=set())
            ongoing = done.prepare(TS.ONGOING, partitions={NEW})
            prepared = ongoing.prepare(TS.PREPARE_ABORT)
            part = tlog.partition_for(TID)
            for md in (done, ongoing, prepared):
                storage.partitions[part].append((tlog.encode_key(TID), tlog.encode_value(md)))

            storage.leader = True                     # leadership comes back: this broker loads it
            coord.load_partition(part)
            for _ in range(500):
                if coord.transactions[TID].state is TS.COMPLETE_ABORT and not coord._completions:
                    break
                await asyncio.sleep(0.01)
            assert coord.transactions[TID].state is TS.COMPLETE_ABORT
            marked = [(t, p) for t, p, _mk in storage.markers]
            assert NEW in marked, f"CompleteAbort written for the transaction on {NEW} without its marker: {marked}"
            end.cancel()
        finally:
            await coord.stop()

    asyncio.run(asyncio.wait_for(main(), 30))
