"""State-machine tests of the group coordinator's offsets: commits and fetches, expiry,
replay of ``__consumer_offsets`` after a restart, and transactional offsets (KIP-98 / KIP-447).
No sockets, virtual time, in-memory log (tests/groupcoord/harness.py).
"""

from __future__ import annotations

import asyncio

from groupcoord.coordinator import GroupConfig, GroupCoordinator
from groupcoord.group import OffsetAndMetadata
from groupcoord.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    partition_for,
)
from groupcoord.state import GroupState
from groupcoord.storage import (
    BatchOffsetsStorage,
    build_batch,
    iter_batch_records,
)
from groupcoord.timer import ManualScheduler
from protocol.errors import KafkaError
from tests.groupcoord.harness import SESSION, E, Harness, async_test, protos, static_group, subscription

# --- offsets ----------------------------------------------------------------------------------------

@async_test
async def test_simple_consumer_commit_and_fetch() -> None:
    h = await Harness().start()
    res = await h.coord.commit_offsets("simple", "", -1, {
        ("t", 0): OffsetAndMetadata(10, 3, "meta-0"), ("t", 1): OffsetAndMetadata(20)})
    assert set(res.values()) == {E.NONE}
    err, offs = h.coord.fetch_offsets("simple", [("t", 0), ("t", 1), ("t", 2)])
    assert err == E.NONE
    assert (offs[("t", 0)].offset, offs[("t", 0)].leader_epoch, offs[("t", 0)].metadata) == (10, 3, "meta-0")
    assert offs[("t", 1)].offset == 20 and offs[("t", 2)].offset == -1
    assert sorted(h.coord.fetch_offsets("simple", None)[1]) == [("t", 0), ("t", 1)]
    assert h.group("simple").state is GroupState.EMPTY
    keys = [k for k, _ in h.records("simple")]
    assert keys == [OffsetCommitKey("simple", "t", 0), OffsetCommitKey("simple", "t", 1)]
    v = OffsetCommitValue.decode(h.records("simple")[0][1] or b"")
    assert (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp) == (10, 3, "meta-0", h.sched.now_ms())
    # an unknown group: no offsets, no error
    assert h.coord.fetch_offsets("other", [("t", 0)])[1][("t", 0)].offset == -1


@async_test
async def test_commit_error_paths() -> None:
    h = await Harness(offset_metadata_max_bytes=10).start()
    tp = ("t", 0)
    assert (await h.coord.commit_offsets("nogroup", "m", 3, {tp: OffsetAndMetadata(1)}))[tp] == \
        E.ILLEGAL_GENERATION
    tasks = [h.join(), h.join()]
    await h.settle()
    r1, r2 = [await t for t in tasks]
    # CompletingRebalance: no commits
    assert (await h.coord.commit_offsets("g", r1.member_id, 1, {tp: OffsetAndMetadata(1)}))[tp] == \
        E.REBALANCE_IN_PROGRESS
    s1 = h.sync("g", 1, r1.member_id, {})
    s2 = h.sync("g", 1, r2.member_id, {})
    await h.settle()
    await s1, await s2
    m = r1.member_id
    assert (await h.coord.commit_offsets("g", "ghost", 1, {tp: OffsetAndMetadata(1)}))[tp] == E.UNKNOWN_MEMBER_ID
    assert (await h.coord.commit_offsets("g", m, 0, {tp: OffsetAndMetadata(1)}))[tp] == E.ILLEGAL_GENERATION
    assert (await h.coord.commit_offsets("g", "", -1, {tp: OffsetAndMetadata(1)}))[tp] == E.UNKNOWN_MEMBER_ID
    res = await h.coord.commit_offsets("g", m, 1, {tp: OffsetAndMetadata(5, metadata="x" * 11),
                                                   ("t", 1): OffsetAndMetadata(6)})
    assert res == {tp: E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.NONE}
    # PreparingRebalance: members still commit (before revoking partitions)
    h.join()
    await h.settle()
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert (await h.coord.commit_offsets("g", m, 1, {tp: OffsetAndMetadata(7)}))[tp] == E.NONE
    # storage errors are remapped as Kafka does
    for raised, expected in [(E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
                             (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE),
                             (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE)]:
        h.storage.fail_with = KafkaError(raised)
        assert (await h.coord.commit_offsets("g", m, 1, {tp: OffsetAndMetadata(8)}))[tp] == expected
    h.storage.fail_with = None
    assert h.coord.fetch_offsets("g", [tp])[1][tp].offset == 7  # failed commits changed nothing


@async_test
async def test_delete_groups() -> None:
    h = await Harness().start()
    await h.coord.commit_offsets("empty", "", -1, {("t", 0): OffsetAndMetadata(1)})
    await h.stable_group(1, gid="busy")
    res = await h.coord.delete_groups(["empty", "busy", "nope"])
    assert res == {"empty": E.NONE, "busy": E.NON_EMPTY_GROUP, "nope": E.GROUP_ID_NOT_FOUND}
    assert "empty" not in h.coord.groups
    assert h.records("empty")[-2:] == [(OffsetCommitKey("empty", "t", 0), None), (GroupMetadataKey("empty"), None)]
    assert h.coord.fetch_offsets("empty", [("t", 0)])[1][("t", 0)].offset == -1


@async_test
async def test_offset_delete() -> None:
    h = await Harness().start()
    a, = await h.stable_group(1, protocols=protos("range", topics=("t",)))
    await h.coord.commit_offsets("g", a, 1, {("t", 0): OffsetAndMetadata(1), ("u", 0): OffsetAndMetadata(2)})
    err, res = await h.coord.delete_offsets("g", [("t", 0), ("u", 0)])
    assert err == E.NONE and res == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): E.NONE}
    offs = h.coord.fetch_offsets("g", None)[1]
    assert list(offs) == [("t", 0)]
    assert (await h.coord.delete_offsets("nope", [("t", 0)]))[0] == E.GROUP_ID_NOT_FOUND
    h2 = await Harness().start()
    b, = await h2.stable_group(1, protocol_type="connect")
    assert (await h2.coord.delete_offsets("g", [("t", 0)]))[0] == E.NON_EMPTY_GROUP


@async_test
async def test_retention_of_empty_group_offsets() -> None:
    h = await Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000).start()
    await h.coord.commit_offsets("simple", "", -1, {("t", 0): OffsetAndMetadata(1)})
    await h.coord.commit_offsets("simple", "", -1, {("t", 1): OffsetAndMetadata(1)}, retention_ms=5_000)
    await h.advance(10_000)  # the explicit expire timestamp passed; the default retention did not
    assert list(h.coord.fetch_offsets("simple", None)[1]) == [("t", 0)]
    v1 = [v for k, v in h.records("simple") if k == OffsetCommitKey("simple", "t", 1)][0]
    assert v1 is not None and v1[:2] == b"\x00\x01"  # written as OffsetCommitValue v1
    await h.advance(60_000)
    assert "simple" not in h.coord.groups  # Empty with no offsets: deleted
    assert h.records("simple")[-1] == (GroupMetadataKey("simple"), None)


@async_test
async def test_retention_keeps_subscribed_topics_of_live_group() -> None:
    h = await Harness(offsets_retention_minutes=1).start()
    a, = await h.stable_group(1, protocols=protos("range", topics=("t",)))
    await h.coord.commit_offsets("g", a, 1, {("t", 0): OffsetAndMetadata(1), ("old", 0): OffsetAndMetadata(2)})
    for _ in range(8):
        h.coord.heartbeat("g", a, 1)
        await h.advance(9_000)
    removed = await h.coord.expire_offsets()
    assert removed == 1 and list(h.coord.fetch_offsets("g", None)[1]) == [("t", 0)]


# --- describe / list ----------------------------------------------------------------------------------

@async_test
async def test_describe_and_list() -> None:
    h = await Harness().start()
    a, b = await h.stable_group(2)
    await h.coord.commit_offsets("simple", "", -1, {("t", 0): OffsetAndMetadata(1)})
    d = h.coord.describe_group("g")
    assert (d.error, d.state, d.protocol_type, d.protocol) == (E.NONE, "Stable", "consumer", "range")
    assert {m.member_id: m.assignment for m in d.members} == {a: f"a-{a}".encode(), b: f"a-{b}".encode()}
    assert d.members[0].client_host == "/127.0.0.1" and d.members[0].metadata == subscription("t")
    assert h.coord.describe_group("nope").state == "Dead"
    err, groups = h.coord.list_groups()
    assert err == E.NONE and {(g.group_id, g.state) for g in groups} == {("g", "Stable"), ("simple", "Empty")}
    assert [g.group_id for g in h.coord.list_groups(["empty"])[1]] == ["simple"]
    # while rebalancing, members are described without metadata
    h.join()
    await h.settle()
    d = h.coord.describe_group("g")
    assert d.state == "PreparingRebalance" and d.protocol == "" and d.members[0].assignment == b""


# --- replay: restart rebuilds state ----------------------------------------------------------------

@async_test
async def test_restart_replays_offsets_and_stable_group() -> None:
    h = await Harness().start()
    a, b = await h.stable_group(2)
    await h.coord.commit_offsets("g", a, 1, {("t", 0): OffsetAndMetadata(11, 2, "m")})
    await h.coord.commit_offsets("g", a, 1, {("t", 0): OffsetAndMetadata(12, 2, "m")})
    await h.coord.commit_offsets("gone", "", -1, {("t", 0): OffsetAndMetadata(1)})
    await h.coord.delete_groups(["gone"])
    await h.coord.shutdown()

    h2 = await Harness(storage=h.storage).start()
    g = h2.group()
    assert g.state is GroupState.STABLE and g.generation_id == 1 and g.leader_id == a
    assert {m: g.members[m].assignment for m in g.members} == {a: f"a-{a}".encode(), b: f"a-{b}".encode()}
    assert h2.coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 12
    assert "gone" not in h2.coord.groups
    # the members carry on with the same generation: no rebalance
    assert h2.coord.heartbeat("g", a, 1) == E.NONE
    sr = await h2.coord.sync_group("g", 1, b, {})
    assert sr.error == E.NONE and sr.assignment == f"a-{b}".encode()
    # a member that does not come back expires after its session timeout
    h2.coord.heartbeat("g", a, 1)
    await h2.advance(SESSION - 1)
    h2.coord.heartbeat("g", a, 1)
    await h2.advance(SESSION - 1)
    assert not h2.group().has(b) or h2.group().state is not GroupState.STABLE


@async_test
async def test_restart_replays_static_replacement_and_empty_group() -> None:
    h = await Harness().start()
    m1, m2 = await static_group(h)
    r = await h.join(instance="i2")
    await h.coord.shutdown()
    h2 = await Harness(storage=h.storage).start()
    g = h2.group()
    assert set(g.members) == {m1, r.member_id} and g.static_members["i2"] == r.member_id
    # and an Empty group comes back Empty at its last generation
    h3 = await Harness().start()
    await h3.stable_group(1)
    await h3.advance(SESSION)
    await h3.coord.shutdown()
    h4 = await Harness(storage=h3.storage).start()
    assert h4.group().state is GroupState.EMPTY and h4.group().generation_id == 2


@async_test
async def test_shutdown_answers_parked_requests_not_coordinator() -> None:
    h = await Harness(group_initial_rebalance_delay_ms=3000).start()
    t = h.join()
    await h.settle()
    await h.coord.shutdown()
    assert (await t).error == E.NOT_COORDINATOR
    assert (await h.join()).error == E.COORDINATOR_NOT_AVAILABLE


@async_test
async def test_dead_group_answers_coordinator_not_available() -> None:
    h = await Harness().start()
    await h.stable_group(1)
    h.group().transition_to(GroupState.DEAD, 0)
    assert (await h.join()).error == E.COORDINATOR_NOT_AVAILABLE
    assert h.coord.heartbeat("g", "x", 1) == E.COORDINATOR_NOT_AVAILABLE
    assert (await h.coord.sync_group("g", 1, "x", {})).error == E.COORDINATOR_NOT_AVAILABLE
    assert h.coord.leave_group("g", [("x", None)])[0] == E.COORDINATOR_NOT_AVAILABLE
    tp = ("t", 0)
    assert (await h.coord.commit_offsets("g", "x", 1, {tp: OffsetAndMetadata(1)}))[tp] == \
        E.COORDINATOR_NOT_AVAILABLE


def test_batch_storage_adapter_round_trip() -> None:
    batches: dict[int, list[bytes]] = {}

    async def append(p: int, data: bytes) -> int:
        batches.setdefault(p, []).append(data)
        return len(batches[p]) - 1

    st = BatchOffsetsStorage(append, lambda p: batches.get(p, []))
    recs = [(OffsetCommitKey("g", "t", 0).encode(), OffsetCommitValue(1, "", 5).encode()),
            (GroupMetadataKey("g").encode(), None)]
    asyncio.run(st.append(3, recs))
    assert list(st.read_all(3)) == recs
    assert list(iter_batch_records(build_batch(recs) + build_batch(recs[:1]))) == recs + recs[:1]


# --- transactional offsets (TxnOffsetCommit, KIP-98 / KIP-447) -------------------------------------

@async_test
async def test_txn_offsets_pending_until_commit_marker() -> None:
    h = await Harness().start()
    tp = ("t", 0)
    await h.coord.commit_offsets("g", "", -1, {tp: OffsetAndMetadata(5)})
    res = await h.coord.txn_commit_offsets("g", 1000, 0, "", -1, None, {tp: OffsetAndMetadata(9)})
    assert res == {tp: E.NONE}
    assert h.coord.fetch_offsets("g", [tp])[1][tp].offset == 5  # not visible yet
    assert h.coord.fetch_offsets("g", [tp], require_stable=True)[1][tp].error == E.UNSTABLE_OFFSET_COMMIT
    part = partition_for("g")
    h.storage.write_marker(part, 1000, True)
    h.coord.complete_transaction(part, 1000, True)
    assert h.coord.fetch_offsets("g", [tp], require_stable=True)[1][tp].offset == 9
    # an aborted transaction leaves no trace
    await h.coord.txn_commit_offsets("g", 1001, 0, "", -1, None, {tp: OffsetAndMetadata(99)})
    h.storage.write_marker(part, 1001, False)
    h.coord.complete_transaction(part, 1001, False)
    assert h.coord.fetch_offsets("g", [tp])[1][tp].offset == 9
    # a transaction still open at restart stays pending; committed/aborted ones replay as above
    await h.coord.txn_commit_offsets("g", 1002, 0, "", -1, None, {tp: OffsetAndMetadata(50)})
    await h.coord.shutdown()
    h2 = await Harness(storage=h.storage).start()
    assert h2.coord.fetch_offsets("g", [tp])[1][tp].offset == 9
    assert 1002 in h2.group().pending_txn_offsets
    h2.coord.complete_transaction(part, 1002, True)
    assert h2.coord.fetch_offsets("g", [tp])[1][tp].offset == 50


@async_test
async def test_txn_offsets_fencing_and_later_plain_commit_wins() -> None:
    h = await Harness().start()
    a, = await h.stable_group(1)
    tp = ("t", 0)
    assert (await h.coord.txn_commit_offsets("g", 7, 0, "ghost", 1, None, {tp: OffsetAndMetadata(1)}))[tp] == \
        E.UNKNOWN_MEMBER_ID
    assert (await h.coord.txn_commit_offsets("g", 7, 0, a, 5, None, {tp: OffsetAndMetadata(1)}))[tp] == \
        E.ILLEGAL_GENERATION
    assert (await h.coord.txn_commit_offsets("g", 7, 0, a, 1, None, {tp: OffsetAndMetadata(3)}))[tp] == E.NONE
    await h.coord.commit_offsets("g", a, 1, {tp: OffsetAndMetadata(4)})  # written after the txn's
    h.coord.complete_transaction(partition_for("g"), 7, True)
    assert h.coord.fetch_offsets("g", [tp])[1][tp].offset == 4


def test_batch_storage_reads_transactional_batches_and_markers() -> None:
    """What the broker's log holds after TxnOffsetCommit + EndTxn: a transactional batch (our
    build_batch) and a control batch (the transaction coordinator's marker), read back as
    TxnRecord / TxnMarker so a reloading coordinator publishes only committed offsets."""
    from groupcoord.storage import TxnMarker, TxnRecord
    from txn.markers import TxnMarker as Marker
    from txn.markers import build_marker_batch

    recs = [(OffsetCommitKey("g", "t", 0).encode(), OffsetCommitValue(7, "", 5).encode())]
    data = (build_batch(recs, producer_id=42, producer_epoch=3)
            + build_marker_batch(Marker(42, 3, 0, True))
            + build_batch(recs, producer_id=43, producer_epoch=0)
            + build_marker_batch(Marker(43, 0, 0, False)))
    items = list(iter_batch_records(data))
    assert items == [TxnRecord(42, *recs[0]), TxnMarker(42, True), TxnRecord(43, *recs[0]), TxnMarker(43, False)]

    async def load() -> GroupCoordinator:
        st = BatchOffsetsStorage(lambda p, d: asyncio.sleep(0, 0),  # type: ignore[arg-type,return-value]
                                 lambda p: [data] if p == partition_for("g") else [])
        coord = GroupCoordinator(st, GroupConfig(), ManualScheduler())
        await coord.startup()
        return coord

    coord = asyncio.run(load())
    assert coord.fetch_offsets("g", [("t", 0)])[1][("t", 0)].offset == 7
    assert coord.groups["g"].pending_txn_offsets == {}
