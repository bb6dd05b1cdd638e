"""The coordinators' write path (log/coordinator_runtime.py): a record is applied once, when it is
written, made visible to readers when it is committed, and never replayed after its replication
completes -- the coordinator may have moved on by then (issue 30 item 2: a classic group's
generation went backwards when a generation-1 record was replayed over generation 2).

``MemoryOffsetsStorage.commit_gate`` holds a write's replication, as a follower that has not
fetched it yet would, while the test moves the group on.
"""

from __future__ import annotations

import asyncio

import pytest

from groupcoord.group import OffsetAndMetadata
from groupcoord.records import partition_for
from groupcoord.state import GroupState
from log.coordinator_runtime import SnapshotRegistry, TimelineDict
from protocol.errors import KafkaError
from tests.groupcoord.harness import E, Harness, async_test
from tests.groupcoord.test_consumer_groups import Harness as ConsumerHarness
from txn.coordinator import TransactionConfig, TransactionCoordinator
from txn.metadata import TransactionState
from txn.storage import MemoryTransactionStorage


async def spin(h: Harness) -> None:
    """Run what is runnable (zero-delay timers included) without waiting for held writes."""
    for _ in range(3):
        h.sched.advance(0)
        for _ in range(10):
            await asyncio.sleep(0)


@async_test
async def test_generation_record_committed_late_does_not_take_the_group_back() -> None:
    h = await Harness().start()
    held = asyncio.Event()
    h.storage.commit_gate = held
    a = h.join(client_id="a")
    await spin(h)
    ra = await a
    assert ra.generation_id == 1 and ra.leader_id == ra.member_id
    sync_a = h.sync("g", 1, ra.member_id, {ra.member_id: b"gen1"})
    await spin(h)
    assert not sync_a.done(), "the generation-1 record must be waiting for its replication"
    h.storage.commit_gate = None  # later writes replicate at once

    b = h.join(client_id="b")  # the group moves on while generation 1 is not yet committed
    await spin(h)
    assert (await sync_a).error == E.REBALANCE_IN_PROGRESS
    a2 = h.join(member_id=ra.member_id, client_id="a")
    await spin(h)
    ra2, rb = await a2, await b
    assert ra2.generation_id == rb.generation_id == 2

    held.set()  # generation 1's record is committed now
    await spin(h)
    g = h.group()
    assert (g.generation_id, g.state, sorted(g.members)) == \
        (2, GroupState.COMPLETING_REBALANCE, sorted([ra.member_id, rb.member_id]))

    sa = h.sync("g", 2, ra.member_id, {ra.member_id: b"a2", rb.member_id: b"b2"})
    sb = h.sync("g", 2, rb.member_id)
    await h.settle()
    assert ((await sa).error, (await sb).error, (await sb).assignment) == (E.NONE, E.NONE, b"b2")
    om = {("t", 0): OffsetAndMetadata(5)}
    assert await h.coord.commit_offsets("g", ra.member_id, 1, om) == {("t", 0): E.ILLEGAL_GENERATION}
    assert await h.coord.commit_offsets("g", ra.member_id, 2, om) == {("t", 0): E.NONE}

    # The log replays to the same group.
    h2 = await Harness(h.storage).start()
    g2 = h2.group()
    assert (g2.generation_id, sorted(g2.members)) == (2, sorted([ra.member_id, rb.member_id]))


@async_test
async def test_offset_commit_is_visible_once_committed_and_never_replayed_after_a_reload() -> None:
    h = await Harness().start()
    part = partition_for("g", h.config.offsets_topic_num_partitions)
    held = asyncio.Event()
    h.storage.commit_gate = held
    first = asyncio.ensure_future(h.coord.commit_offsets("g", "", -1, {("t", 0): OffsetAndMetadata(5)}))
    await spin(h)
    h.storage.commit_gate = None
    assert not first.done()
    # Applied (the log has it) but not visible to readers before it is committed.
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == -1

    # The partition's leadership moves away and back: the new load replays the record.
    h.coord.unload_partition(part)
    await h.coord.on_election(part)
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 5
    assert await h.coord.commit_offsets("g", "", -1, {("t", 0): OffsetAndMetadata(9)}) == \
        {("t", 0): E.NONE}
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 9

    held.set()  # the old write's replication completes late: it must not replay offset 5
    assert await first == {("t", 0): E.NONE}
    await spin(h)
    assert h.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 9


@async_test
async def test_write_to_a_partition_no_longer_owned_changes_nothing() -> None:
    h = await Harness().start()
    part = partition_for("g", h.config.offsets_topic_num_partitions)
    held = asyncio.Event()
    h.storage.commit_gate = held
    commit = asyncio.ensure_future(h.coord.commit_offsets("g", "", -1, {("t", 0): OffsetAndMetadata(5)}))
    await spin(h)
    h.coord.unload_partition(part)
    held.set()
    await commit
    assert "g" not in h.coord.groups, "an unloaded partition's group came back"


@async_test
async def test_transaction_record_replicated_late_does_not_overwrite_a_reloaded_id() -> None:
    storage = MemoryTransactionStorage()
    coord = TransactionCoordinator(storage, _Ids(), TransactionConfig(num_partitions=1))
    await coord.load()
    first = await coord.init_producer_id("tx", 60_000)
    held = asyncio.Event()
    storage.commit_gate = held
    add = asyncio.ensure_future(coord.add_partitions("tx", first.producer_id, first.producer_epoch,
                                                      [("t", 0)]))
    for _ in range(5):
        await asyncio.sleep(0)
    storage.commit_gate = None
    coord.load_partition(0)  # the partition is (re)loaded: it replays the Ongoing record
    assert coord.transactions["tx"].state is TransactionState.ONGOING
    with pytest.raises(KafkaError) as e:  # a new producer instance aborts the open transaction
        await coord.init_producer_id("tx", 60_000)
    assert e.value.code is E.CONCURRENT_TRANSACTIONS
    await coord.wait_for_completions()
    aborted = coord.transactions["tx"]
    assert aborted.state is TransactionState.COMPLETE_ABORT
    held.set()
    await add  # its replication completes late: the Ongoing record must not be applied again
    await asyncio.sleep(0)
    m = coord.transactions["tx"]
    assert (m.state, m.partitions, m.producer_epoch) == \
        (TransactionState.COMPLETE_ABORT, set(), aborted.producer_epoch)
    await coord.stop()


class _Ids:
    def __init__(self) -> None:
        self.n = 1000

    def generate(self) -> int:
        self.n += 1
        return self.n


def test_timeline_dict_reads_at_the_committed_offset() -> None:
    reg = SnapshotRegistry()
    d: TimelineDict[str, int] = TimelineDict(reg, {"a": 1})
    reg.write_epoch = 10
    d["a"] = 2
    d["b"] = 3
    reg.write_epoch = 11
    d["a"] = 4
    del d["b"]
    reg.write_epoch = None
    assert dict(d) == {"a": 4}
    assert d.committed_items() == {"a": 1} and d.committed_get("b") is None
    reg.commit(10)
    assert d.committed_items() == {"a": 2, "b": 3}
    reg.commit(11)
    assert d.committed_items() == {"a": 4} and d.committed_get("a") == 4


@async_test
async def test_consumer_group_records_replicated_late_do_not_resurrect_a_member() -> None:
    h = await ConsumerHarness().start()
    part = partition_for("g", h.config.offsets_topic_num_partitions)
    assert (await h.hb("m1")).error == E.NONE
    held = asyncio.Event()
    h.storage.commit_gate = held
    join = asyncio.ensure_future(h.hb("m2"))  # m2's records wait for their replication
    for _ in range(10):
        await asyncio.sleep(0)
    h.storage.commit_gate = None
    assert not join.done() and "m2" in h.group().members
    epoch = h.group().group_epoch

    h.coord.unload_partition(part)  # leadership moves away and back: the load replays m2's join
    await h.coord.on_election(part)
    assert (await h.hb("m2", h.group().members["m2"].member_epoch)).error == E.NONE
    assert (await h.hb("m2", -1)).error == E.NONE  # m2 leaves: the group epoch moves on
    assert "m2" not in h.group().members and h.group().group_epoch == epoch + 1

    held.set()  # the old write's replication completes late
    await join
    await asyncio.sleep(0)
    g = h.group()
    assert (sorted(g.members), g.group_epoch) == (["m1"], epoch + 1)


@async_test
async def test_transaction_write_not_replicated_is_reverted_and_the_retry_writes_it() -> None:
    storage = MemoryTransactionStorage()
    coord = TransactionCoordinator(storage, _Ids(), TransactionConfig(num_partitions=1))
    await coord.load()
    r = await coord.init_producer_id("tx", 60_000)
    await coord.add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 0)])
    storage.fail_replication = 1
    with pytest.raises(KafkaError) as e:
        await coord.end_txn("tx", r.producer_id, r.producer_epoch, True)
    assert e.value.code is E.COORDINATOR_NOT_AVAILABLE
    m = coord.transactions["tx"]
    assert (m.state, m.pending_state) == (TransactionState.ONGOING, None)
    await coord.end_txn("tx", r.producer_id, r.producer_epoch, True)  # the client's retry
    await coord.wait_for_completions()
    assert coord.transactions["tx"].state is TransactionState.COMPLETE_COMMIT
    await coord.stop()
