"""State-machine tests of the group coordinator: no sockets, virtual time, in-memory log.

Each test drives the coordinator through its public methods the way the request handlers do,
moves a :class:`ManualScheduler` by hand to fire session, rebalance and delay timers, and
checks the results, the group state, and the records written to ``__consumer_offsets``.
"""

from __future__ import annotations

from groupcoord.group import OffsetAndMetadata
from groupcoord.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    partition_for,
)
from groupcoord.state import GroupState
from protocol.errors import KafkaError
from tests.groupcoord.harness import REBALANCE, SESSION, E, Harness, async_test, static_group

# --- joining --------------------------------------------------------------------------------------

@async_test
async def test_first_join_member_id_required_then_leader_and_stable() -> None:
    h = await Harness().start()
    r = await h.join(require_known=True)
    assert r.error == E.MEMBER_ID_REQUIRED and r.member_id.startswith("c-")
    assert h.group().state is GroupState.EMPTY and r.member_id in h.group().pending_members
    t = h.join(member_id=r.member_id, require_known=True)
    await h.settle()
    jr = await t
    assert jr.error == E.NONE and jr.member_id == r.member_id
    assert jr.generation_id == 1 and jr.leader_id == r.member_id and jr.protocol_name == "range"
    assert [m.member_id for m in jr.members] == [r.member_id]
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    s = h.sync("g", 1, jr.member_id, {jr.member_id: b"assign"})
    await h.settle()
    sr = await s
    assert (sr.error, sr.assignment, sr.protocol_name) == (E.NONE, b"assign", "range")
    assert h.group().state is GroupState.STABLE
    (key, value), = h.records()
    assert key == GroupMetadataKey("g")
    gv = GroupMetadataValue.decode(value or b"")
    assert gv.generation == 1 and gv.protocol == "range" and gv.leader == jr.member_id
    assert gv.members[0].assignment == b"assign" and gv.members[0].session_timeout == SESSION


@async_test
async def test_initial_rebalance_delay_collects_members() -> None:
    h = await Harness(group_initial_rebalance_delay_ms=3000).start()
    t1 = h.join()
    await h.advance(1000)
    assert not t1.done() and h.group().state is GroupState.PREPARING_REBALANCE
    t2 = h.join()
    await h.advance(2000)  # the first delay ends, but a member arrived: wait one more delay
    assert not t1.done()
    await h.advance(3000)
    r1, r2 = await t1, await t2
    assert r1.generation_id == r2.generation_id == 1
    assert r1.leader_id == r2.leader_id == r1.member_id
    assert len(r1.members) == 2 and r2.members == []


@async_test
async def test_initial_delay_bounded_by_rebalance_timeout() -> None:
    h = await Harness(group_initial_rebalance_delay_ms=3000).start()
    tasks = [h.join(rebalance=7000)]
    for _ in range(5):
        await h.advance(2500)
        if not tasks[0].done():
            tasks.append(h.join(rebalance=7000))
    assert tasks[0].done()
    first = await tasks[0]
    assert first.generation_id == 1
    # it completed after at most delay + remaining = 7000 ms, with the members that had arrived
    assert 2 <= len(first.members) <= 3


@async_test
async def test_zero_delay_completes_with_first_member() -> None:
    h = await Harness().start()
    t = h.join()
    await h.settle()
    assert (await t).generation_id == 1


@async_test
async def test_second_member_triggers_rebalance_and_heartbeat_says_rebalance_in_progress() -> None:
    h = await Harness().start()
    leader, = await h.stable_group(1)
    t2 = h.join()
    await h.settle()
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", leader, 1) == E.REBALANCE_IN_PROGRESS
    t1 = h.join(member_id=leader)
    await h.settle()
    r1, r2 = await t1, await t2
    assert r1.generation_id == r2.generation_id == 2 and r1.leader_id == leader
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    # heartbeats before SyncGroup are fine in CompletingRebalance
    assert h.coord.heartbeat("g", r2.member_id, 2) == E.NONE
    assert h.coord.heartbeat("g", r2.member_id, 1) == E.ILLEGAL_GENERATION


@async_test
async def test_protocol_selection_by_votes() -> None:
    h = await Harness(group_initial_rebalance_delay_ms=100).start()
    tasks = [h.join(names=("range", "roundrobin")), h.join(names=("roundrobin", "range")),
             h.join(names=("roundrobin", "sticky", "range"))]
    await h.advance(1000)
    rs = [await t for t in tasks]
    assert {r.protocol_name for r in rs} == {"roundrobin"}
    # a new member must support one of the protocols every member supports
    bad = await h.join(names=("sticky",))
    assert bad.error == E.INCONSISTENT_GROUP_PROTOCOL
    wrong_type = await h.join(names=("range",), protocol_type="connect")
    assert wrong_type.error == E.INCONSISTENT_GROUP_PROTOCOL


@async_test
async def test_join_validation_errors() -> None:
    h = await Harness().start()
    assert (await h.join("")).error == E.INVALID_GROUP_ID
    assert (await h.join(session=1000)).error == E.INVALID_SESSION_TIMEOUT
    assert (await h.join(session=2_000_000)).error == E.INVALID_SESSION_TIMEOUT
    assert (await h.join(member_id="ghost")).error == E.UNKNOWN_MEMBER_ID
    assert (await h.join(names=())).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await h.join(protocol_type="")).error == E.INCONSISTENT_GROUP_PROTOCOL
    await h.stable_group(1)
    assert (await h.join(member_id="ghost")).error == E.UNKNOWN_MEMBER_ID


@async_test
async def test_group_max_size() -> None:
    h = await Harness(group_max_size=1).start()
    await h.stable_group(1)
    assert (await h.join()).error == E.GROUP_MAX_SIZE_REACHED


@async_test
async def test_coordinator_load_in_progress_and_not_active() -> None:
    h = Harness()
    assert (await h.join()).error == E.COORDINATOR_NOT_AVAILABLE
    h.coord.ownership.loading.add(partition_for("g"))
    h.coord.ownership.active = True
    assert (await h.join()).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.heartbeat("g", "m", 1) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.fetch_offsets("g", None)[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    other = next(g for g in (f"x{i}" for i in range(100)) if partition_for(g) != partition_for("g"))
    assert (await h.join(other)).error == E.NOT_COORDINATOR  # partition not ours


@async_test
async def test_stable_rejoin_rules() -> None:
    h = await Harness().start()
    leader, follower = await h.stable_group(2)
    # a follower rejoining with identical metadata gets the current generation, no rebalance
    r = await h.join(member_id=follower)
    assert (r.error, r.generation_id, r.leader_id, r.members) == (E.NONE, 1, leader, [])
    assert h.group().state is GroupState.STABLE
    # the leader rejoining triggers a rebalance (it may have seen metadata change)
    t = h.join(member_id=leader)
    await h.settle()
    assert h.group().state is GroupState.PREPARING_REBALANCE
    t2 = h.join(member_id=follower, names=("range", "roundrobin"))  # new metadata
    await h.settle()
    assert (await t).generation_id == 2 and (await t2).generation_id == 2


@async_test
async def test_completing_rebalance_retried_join_and_new_member() -> None:
    h = await Harness().start()
    tasks = [h.join(), h.join()]
    await h.settle()
    r1, r2 = [await t for t in tasks]
    leader = r1.leader_id
    follower = r2.member_id if r2.member_id != leader else r1.member_id
    # a follower that retries its JoinGroup with the same metadata gets the same answer
    again = await h.join(member_id=follower)
    assert again.generation_id == 1 and again.leader_id == leader and again.members == []
    again_leader = await h.join(member_id=leader)
    assert len(again_leader.members) == 2
    # the follower parks in SyncGroup; a new member joins: the follower must rejoin
    s = h.sync("g", 1, follower)
    await h.settle()
    assert not s.done()
    t3 = h.join()
    await h.settle()
    assert (await s).error == E.REBALANCE_IN_PROGRESS
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert (await h.coord.sync_group("g", 1, follower, {})).error == E.REBALANCE_IN_PROGRESS
    t1, t2 = h.join(member_id=leader), h.join(member_id=follower)
    await h.settle()
    assert {(await t).generation_id for t in (t1, t2, t3)} == {2}


# --- sync -------------------------------------------------------------------------------------------

@async_test
async def test_sync_errors_and_follower_waits_for_leader() -> None:
    h = await Harness().start()
    assert (await h.coord.sync_group("nogroup", 1, "m", {})).error == E.UNKNOWN_MEMBER_ID
    tasks = [h.join(), h.join()]
    await h.settle()
    r1, r2 = [await t for t in tasks]
    leader = r1.leader_id
    follower = r2.member_id if r2.member_id != leader else r1.member_id
    assert (await h.coord.sync_group("g", 1, "ghost", {})).error == E.UNKNOWN_MEMBER_ID
    assert (await h.coord.sync_group("g", 7, follower, {})).error == E.ILLEGAL_GENERATION
    assert (await h.coord.sync_group("g", 1, follower, {}, protocol_type="connect")).error == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert (await h.coord.sync_group("g", 1, follower, {}, protocol_name="sticky")).error == \
        E.INCONSISTENT_GROUP_PROTOCOL
    fs = h.sync("g", 1, follower)
    await h.settle()
    assert not fs.done()
    # the leader forgets the follower: it gets an empty assignment
    ls = h.sync("g", 1, leader, {leader: b"L"}, protocol_type="consumer", protocol_name="range")
    await h.settle()
    assert (await ls).assignment == b"L"
    assert (await fs).error == E.NONE and (await fs).assignment == b""
    # Stable: a late SyncGroup gets the stored assignment
    assert (await h.coord.sync_group("g", 1, leader, {})).assignment == b"L"


@async_test
async def test_member_that_never_syncs_is_removed() -> None:
    h = await Harness().start()
    tasks = [h.join(), h.join()]
    await h.settle()
    r1, r2 = [await t for t in tasks]
    leader = r1.leader_id
    follower = r2.member_id if r2.member_id != leader else r1.member_id
    s = h.sync("g", 1, leader, {leader: b"L", follower: b"F"})
    await h.settle()
    assert (await s).error == E.NONE and h.group().state is GroupState.STABLE
    for _ in range(6):  # both heartbeat, but the follower never sends SyncGroup
        assert h.coord.heartbeat("g", leader, 1) == E.NONE
        assert h.coord.heartbeat("g", follower, 1) == E.NONE
        await h.advance(REBALANCE // 6)
    assert not h.group().has(follower)
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", follower, 1) == E.UNKNOWN_MEMBER_ID


@async_test
async def test_sync_store_failure_resets_assignment() -> None:
    h = await Harness().start()
    t = h.join()
    await h.settle()
    r = await t
    h.storage.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
    s = h.sync("g", 1, r.member_id, {r.member_id: b"x"})
    await h.settle()
    assert (await s).error == E.NOT_COORDINATOR
    assert h.group().state is GroupState.PREPARING_REBALANCE


@async_test
async def test_sync_in_empty_group_is_unknown_member() -> None:
    h = await Harness().start()
    leader, = await h.stable_group(1)
    err, _ = h.coord.leave_group("g", [(leader, None)])
    await h.settle()
    assert h.group().state is GroupState.EMPTY
    assert (await h.coord.sync_group("g", 2, leader, {})).error == E.UNKNOWN_MEMBER_ID


# --- heartbeats, expiry, rebalance timeout ------------------------------------------------------

@async_test
async def test_heartbeat_errors() -> None:
    h = await Harness().start()
    assert h.coord.heartbeat("g", "m", 1) == E.UNKNOWN_MEMBER_ID
    assert h.coord.heartbeat("", "m", 1) == E.INVALID_GROUP_ID
    leader, = await h.stable_group(1)
    assert h.coord.heartbeat("g", leader, 1) == E.NONE
    assert h.coord.heartbeat("g", leader, 0) == E.ILLEGAL_GENERATION
    assert h.coord.heartbeat("g", "ghost", 1) == E.UNKNOWN_MEMBER_ID


@async_test
async def test_session_timeout_evicts_member_and_rebalances() -> None:
    h = await Harness().start()
    a, b = await h.stable_group(2)
    for _ in range(3):
        await h.advance(SESSION - 1000)
        h.coord.heartbeat("g", a, 1)  # only a heartbeats
    assert not h.group().has(b)
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.coord.heartbeat("g", a, 1) == E.REBALANCE_IN_PROGRESS
    t = h.join(member_id=a)
    await h.settle()
    r = await t
    assert r.generation_id == 2 and [m.member_id for m in r.members] == [a]


@async_test
async def test_last_member_expiry_leaves_group_empty_with_record() -> None:
    h = await Harness().start()
    await h.stable_group(1)
    await h.advance(SESSION)
    g = h.group()
    assert g.state is GroupState.EMPTY and g.generation_id == 2 and not g.members
    key, value = h.records()[-1]
    gv = GroupMetadataValue.decode(value or b"")
    assert key == GroupMetadataKey("g") and gv.generation == 2 and gv.protocol is None and gv.members == []


@async_test
async def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    h = await Harness().start()
    a, b = await h.stable_group(2)
    t = h.join(member_id=a, names=("range", "roundrobin"))  # triggers a rebalance
    await h.settle()
    for _ in range(REBALANCE // 5000 - 1):
        # b keeps heartbeating but never rejoins
        assert h.coord.heartbeat("g", b, 1) == E.REBALANCE_IN_PROGRESS
        await h.advance(5000)
    await h.advance(4999)
    assert not t.done()
    await h.advance(1)
    r = await t
    assert r.generation_id == 2 and [m.member_id for m in r.members] == [a]
    assert not h.group().has(b)


@async_test
async def test_parked_member_is_not_expired_while_joining() -> None:
    h = await Harness().start()
    a, b = await h.stable_group(2)
    ta = h.join(member_id=a)  # the leader rejoins and waits for b (rebalance timeout 30 s)
    await h.settle()
    for _ in range(3):  # a sends no heartbeats while parked; it must survive. b heartbeats.
        assert h.coord.heartbeat("g", b, 1) == E.REBALANCE_IN_PROGRESS
        await h.advance(SESSION // 2)
    assert h.group().has(a) and not ta.done()
    tb = h.join(member_id=b)
    await h.settle()
    assert (await ta).error == E.NONE and (await tb).error == E.NONE


@async_test
async def test_pending_member_expires() -> None:
    h = await Harness().start()
    r = await h.join(require_known=True)
    assert r.member_id in h.group().pending_members
    await h.advance(SESSION)
    assert r.member_id not in h.group().pending_members
    assert (await h.join(member_id=r.member_id)).error == E.UNKNOWN_MEMBER_ID


@async_test
async def test_new_member_uses_new_member_timeout() -> None:
    h = await Harness(group_initial_rebalance_delay_ms=0).start()
    a, = await h.stable_group(1)
    # the new member joins; a never rejoins, so the join completes at the rebalance timeout
    t = h.join()
    await h.settle()
    await h.advance(REBALANCE)
    r = await t
    assert r.generation_id == 2 and r.leader_id == r.member_id


# --- leave ------------------------------------------------------------------------------------------

@async_test
async def test_leave_group_single_and_batched() -> None:
    h = await Harness().start()
    err, res = h.coord.leave_group("nogroup", [("m", None)])
    assert err == E.NONE and res[0].error == E.UNKNOWN_MEMBER_ID
    a, b, c = await h.stable_group(3)
    pending = await h.join(require_known=True)
    err, res = h.coord.leave_group("g", [(b, None), ("ghost", None), (pending.member_id, None)])
    assert err == E.NONE and [r.error for r in res] == [E.NONE, E.UNKNOWN_MEMBER_ID, E.NONE]
    assert h.group().state is GroupState.PREPARING_REBALANCE and not h.group().has(b)
    ta, tc = h.join(member_id=a), h.join(member_id=c)
    await h.settle()
    assert (await ta).generation_id == (await tc).generation_id == 2 and len((await ta).members) == 2
    # a member parked in JoinGroup that leaves gets UNKNOWN_MEMBER_ID on its join
    tc2 = h.join(member_id=c, names=("range", "sticky"))
    await h.settle()
    err, _ = h.coord.leave_group("g", [(c, None)])
    await h.settle()
    assert (await tc2).error == E.UNKNOWN_MEMBER_ID


@async_test
async def test_leader_leaving_hands_leadership_over() -> None:
    h = await Harness().start()
    a, b = await h.stable_group(2)
    h.coord.leave_group("g", [(a, None)])
    t = h.join(member_id=b)
    await h.settle()
    r = await t
    assert r.leader_id == b and r.generation_id == 2


# --- static membership (KIP-345) --------------------------------------------------------------------

@async_test
async def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    h = await Harness().start()
    m1, m2 = await static_group(h)
    # i2 restarts: it joins with no member id and its instance id
    r = await h.join(instance="i2", client_id="c2")
    assert r.error == E.NONE and r.member_id != m2
    assert r.generation_id == 1 and r.leader_id == m1 and r.members == []
    assert h.group().state is GroupState.STABLE
    sr = await h.coord.sync_group("g", 1, r.member_id, {}, group_instance_id="i2")
    assert sr.error == E.NONE and sr.assignment == b"A2"
    # the old incarnation is fenced everywhere
    assert h.coord.heartbeat("g", m2, 1, "i2") == E.FENCED_INSTANCE_ID
    assert (await h.coord.sync_group("g", 1, m2, {}, group_instance_id="i2")).error == E.FENCED_INSTANCE_ID
    assert (await h.join(member_id=m2, instance="i2")).error == E.FENCED_INSTANCE_ID
    res = await h.coord.commit_offsets("g", m2, 1, {("t", 0): OffsetAndMetadata(1)}, group_instance_id="i2")
    assert res[("t", 0)] == E.FENCED_INSTANCE_ID
    assert h.coord.leave_group("g", [(m2, "i2")])[1][0].error == E.FENCED_INSTANCE_ID
    # the replacement was persisted with the new member id
    gv = GroupMetadataValue.decode(h.records()[-1][1] or b"")
    assert {m.member_id for m in gv.members} == {m1, r.member_id} and gv.generation == 1


@async_test
async def test_static_leader_restart_v9_skip_assignment() -> None:
    h = await Harness().start()
    m1, m2 = await static_group(h)
    r = await h.join(instance="i1", client_id="c1", skip_assignment_ok=True)
    assert r.error == E.NONE and r.skip_assignment and r.leader_id == r.member_id
    assert len(r.members) == 2 and h.group().state is GroupState.STABLE
    # before v9 the old leader id is returned so the client does not assign
    r2 = await h.join(instance="i1", client_id="c1")
    assert r2.leader_id == r.member_id and r2.leader_id != r2.member_id and not r2.skip_assignment


@async_test
async def test_static_member_with_changed_protocols_triggers_rebalance() -> None:
    h = await Harness().start()
    m1, m2 = await static_group(h)
    t = h.join(instance="i2", client_id="c2", names=("roundrobin", "range"))
    await h.settle()
    # i1 supports only range, so range stays the group's protocol: no rebalance needed
    assert t.done() and h.group().state is GroupState.STABLE
    t2 = h.join(instance="i2", client_id="c2", names=("sticky",))
    await h.settle()
    assert (await t2).error == E.INCONSISTENT_GROUP_PROTOCOL


@async_test
async def test_static_member_replaced_during_completing_rebalance() -> None:
    h = await Harness().start()
    t1 = h.join(instance="i1")
    t2 = h.join(instance="i2")
    await h.settle()
    r1, r2 = await t1, await t2
    assert h.group().state is GroupState.COMPLETING_REBALANCE
    t3 = h.join(instance="i2")  # i2 restarted before syncing
    await h.settle()
    assert h.group().state is GroupState.PREPARING_REBALANCE
    t4 = h.join(member_id=r1.member_id, instance="i1")
    await h.settle()
    r3, r4 = await t3, await t4
    assert r3.generation_id == r4.generation_id == 2
    assert (await h.coord.sync_group("g", 1, r2.member_id, {}, group_instance_id="i2")).error == \
        E.FENCED_INSTANCE_ID


@async_test
async def test_static_member_survives_rebalance_without_rejoining_until_session_expiry() -> None:
    h = await Harness().start()
    m1, m2 = await static_group(h)
    t = h.join(member_id=m1, instance="i1", names=("range", "sticky"))
    await h.settle()
    for _ in range(REBALANCE // 5000):
        h.coord.heartbeat("g", m2, 1, "i2")
        await h.advance(5000)
    # static i2 did not rejoin but is kept in the new generation (a dynamic member would not be)
    r = await t
    assert r.generation_id == 2 and h.group().has(m2) and len(r.members) == 2
    assert h.coord.heartbeat("g", m2, 1, "i2") == E.ILLEGAL_GENERATION  # so it rejoins


@async_test
async def test_leave_by_instance_id_admin_removal() -> None:
    h = await Harness().start()
    m1, m2 = await static_group(h)
    err, res = h.coord.leave_group("g", [("", "i2"), ("", "nope")])
    assert [r.error for r in res] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert not h.group().has(m2) and h.group().state is GroupState.PREPARING_REBALANCE
