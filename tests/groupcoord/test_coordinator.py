"""State-machine tests of the group coordinator: no sockets, virtual time, in-memory log.

Each test drives the coordinator through its public methods the way the request handlers do,
moves a :class:`ManualScheduler` by hand to fire session, rebalance and delay timers, and
checks the results, the group state, and the records written to ``__consumer_offsets``.
"""

from __future__ import annotations

import asyncio
import functools
import struct
from collections.abc import Callable, Coroutine
from typing import Any

from groupcoord.coordinator import GroupConfig, GroupCoordinator, JoinGroupResult
from groupcoord.group import OffsetAndMetadata
from groupcoord.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    partition_for,
)
from groupcoord.state import GroupState
from groupcoord.storage import (
    BatchOffsetsStorage,
    MemoryOffsetsStorage,
    build_batch,
    iter_batch_records,
)
from groupcoord.timer import ManualScheduler
from protocol.errors import ErrorCode, KafkaError

E = ErrorCode
SESSION = 10_000
REBALANCE = 30_000


def async_test(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))
    return wrapper


def subscription(*topics: str) -> bytes:
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def protos(*names: str, topics: tuple[str, ...] = ("t",)) -> list[tuple[str, bytes]]:
    return [(n, subscription(*topics)) for n in names]


class Harness:
    def __init__(self, storage: MemoryOffsetsStorage | None = None, **cfg: Any) -> None:
        cfg.setdefault("group_initial_rebalance_delay_ms", 0)
        self.sched = ManualScheduler()
        self.storage = storage or MemoryOffsetsStorage()
        self.config = GroupConfig(**cfg)
        self.coord = GroupCoordinator(self.storage, self.config, self.sched)

    async def start(self) -> Harness:
        await self.coord.startup()
        return self

    async def settle(self) -> None:
        for _ in range(3):
            self.sched.advance(0)  # timers due now (e.g. a zero initial delay)
            for _ in range(5):
                await asyncio.sleep(0)
            await self.coord.idle()

    async def advance(self, ms: int) -> None:
        await self.settle()  # let requests issued so far reach the coordinator at the current time
        self.sched.advance(ms)
        await self.settle()

    def join(self, group: str = "g", member_id: str = "", *, names: tuple[str, ...] = ("range",),
             protocols: list[tuple[str, bytes]] | None = None, session: int = SESSION,
             rebalance: int = REBALANCE, instance: str | None = None, require_known: bool = False,
             client_id: str = "c", protocol_type: str = "consumer",
             skip_assignment_ok: bool = False) -> asyncio.Task[JoinGroupResult]:
        return asyncio.ensure_future(self.coord.join_group(
            group, member_id, protocol_type, protocols if protocols is not None else protos(*names),
            session, rebalance, group_instance_id=instance, client_id=client_id,
            client_host="/127.0.0.1", require_known_member_id=require_known,
            supports_skip_assignment=skip_assignment_ok))

    def sync(self, group: str, gen: int, member_id: str, assignment: dict[str, bytes] | None = None,
             instance: str | None = None, **kw: Any) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self.coord.sync_group(
            group, gen, member_id, assignment or {}, group_instance_id=instance, **kw))

    def group(self, gid: str = "g") -> Any:
        return self.coord.groups[gid]

    def records(self, gid: str = "g") -> list[tuple[Any, bytes | None]]:
        log = self.storage.partitions.get(partition_for(gid, self.config.offsets_topic_num_partitions), [])
        return [(decode_key(k), v) for k, v in log]

    async def stable_group(self, n: int, gid: str = "g", **kw: Any) -> list[str]:
        """Form a Stable group of ``n`` dynamic members; returns member ids (leader first)."""
        tasks = [self.join(gid, **kw) for _ in range(n)]
        await self.settle()
        results = [await t for t in tasks]
        leader = results[0].leader_id
        gen = results[0].generation_id
        ids = [r.member_id for r in results]
        assignment = {m: f"a-{m}".encode() for m in ids}
        syncs = [self.sync(gid, gen, m, assignment if m == leader else None) for m in ids]
        await self.settle()
        for s in syncs:
            assert (await s).error == E.NONE
        assert self.group(gid).state is GroupState.STABLE
        return [leader] + [m for m in ids if m != leader]


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
    h.coord._loading.add(partition_for("g"))
    h.coord.active = True
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

async def _static_group(h: Harness) -> tuple[str, str]:
    t1 = h.join(instance="i1", client_id="c1")
    t2 = h.join(instance="i2", client_id="c2")
    await h.settle()
    r1, r2 = await t1, await t2
    leader = r1.leader_id
    s1 = h.sync("g", 1, r1.member_id, {r1.member_id: b"A1", r2.member_id: b"A2"}, instance="i1")
    s2 = h.sync("g", 1, r2.member_id, instance="i2")
    await h.settle()
    assert (await s1).error == (await s2).error == E.NONE
    assert leader == r1.member_id and r1.member_id.startswith("i1-")
    return r1.member_id, r2.member_id


@async_test
async def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    h = await Harness().start()
    m1, m2 = await _static_group(h)
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
    m1, m2 = await _static_group(h)
    r = await h.join(instance="i1", client_id="c1", skip_assignment_ok=True)
    assert r.error == E.NONE and r.skip_assignment and r.leader_id == r.member_id
    assert len(r.members) == 2 and h.group().state is GroupState.STABLE
    # before v9 the old leader id is returned so the client does not assign
    r2 = await h.join(instance="i1", client_id="c1")
    assert r2.leader_id == r.member_id and r2.leader_id != r2.member_id and not r2.skip_assignment


@async_test
async def test_static_member_with_changed_protocols_triggers_rebalance() -> None:
    h = await Harness().start()
    m1, m2 = await _static_group(h)
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
    m1, m2 = await _static_group(h)
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
    m1, m2 = await _static_group(h)
    err, res = h.coord.leave_group("g", [("", "i2"), ("", "nope")])
    assert [r.error for r in res] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert not h.group().has(m2) and h.group().state is GroupState.PREPARING_REBALANCE


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
    m1, m2 = await _static_group(h)
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
