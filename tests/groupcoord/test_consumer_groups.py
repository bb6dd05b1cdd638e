"""State-machine tests of KIP-848 consumer groups: no sockets, virtual time, in-memory log.

Each test drives :meth:`GroupCoordinator.consumer_group_heartbeat` as the ConsumerGroupHeartbeat
handler does, reports owned partitions the way a client does after reconciling, moves a
:class:`ManualScheduler` to fire session and rebalance timeouts, and checks responses, group
state, and that a fresh coordinator replaying the written records ends in the same state.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from groupcoord.config import GroupConfig
from groupcoord.consumer.assignors import MemberSpec, range_assign, uniform_assign
from groupcoord.consumer.group import ConsumerGroupState, MemberState
from groupcoord.consumer.messages import ConsumerGroupHeartbeatRequest as HB
from groupcoord.consumer.records import decode_consumer_key
from groupcoord.consumer.regex import InvalidRegularExpression, compile_topic_regex
from groupcoord.coordinator import GroupCoordinator
from groupcoord.group import OffsetAndMetadata
from groupcoord.records import partition_for
from groupcoord.storage import MemoryOffsetsStorage
from groupcoord.timer import ManualScheduler
from protocol.errors import ErrorCode

E = ErrorCode
T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def async_test(fn: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        asyncio.run(fn(*args, **kwargs))
    return wrapper


class Harness:
    def __init__(self, storage: MemoryOffsetsStorage | None = None, **cfg: Any) -> None:
        self.sched = ManualScheduler()
        self.storage = storage or MemoryOffsetsStorage()
        self.config = GroupConfig(**cfg)
        self.topics: dict[str, tuple[uuid.UUID, int, bool]] = {"t1": (T1, 6, False),
                                                                "t2": (T2, 2, False)}
        self.coord = GroupCoordinator(self.storage, self.config, self.sched,
                                      topics=lambda: self.topics)
        self.owned: dict[str, list[tuple[uuid.UUID, list[int]]]] = {}
        self.epochs: dict[str, int] = {}

    async def start(self) -> Harness:
        await self.coord.startup()
        return self

    async def hb(self, member: str, epoch: int | None = None, *, gid: str = "g",
                 topics: list[str] | None = None, regex: str | None = None,
                 instance: str | None = None, assignor: str | None = None,
                 owned: Any = "auto", rebalance_timeout: int = 60_000, version: int = 1) -> Any:
        """One heartbeat. ``epoch`` None: the member's last epoch (0 to join); ``owned`` "auto":
        what the member was last given (a client that reconciles at once)."""
        e = self.epochs.get(member, 0) if epoch is None else epoch
        join = e == 0
        req = HB(gid, member, e, instance, None, rebalance_timeout if join else -1,
                 (topics or ["t1"]) if join else topics, regex, assignor,
                 [] if join else (self.owned.get(member, []) if owned == "auto" else owned))
        r = await self.coord.consumer_group_heartbeat(req, api_version=version, client_id="c",
                                                      client_host="/127.0.0.1")
        if r.error == E.NONE:
            self.epochs[member] = r.member_epoch
            if r.assignment is not None:
                self.owned[member] = sorted((t, sorted(ps)) for t, ps in r.assignment.items())
        return r

    def group(self, gid: str = "g") -> Any:
        return self.coord.consumer_groups[gid]

    def partitions(self, member: str) -> set[tuple[uuid.UUID, int]]:
        return {(t, p) for t, ps in self.owned.get(member, []) for p in ps}

    async def converge(self, members: list[str], rounds: int = 6) -> None:
        for _ in range(rounds):
            for m in members:
                r = await self.hb(m)
                assert r.error == E.NONE, r
        await self.coord.idle()

    async def replayed(self) -> GroupCoordinator:
        fresh = GroupCoordinator(self.storage, self.config, ManualScheduler(),
                                 topics=lambda: self.topics)
        await fresh.startup()
        return fresh


def snapshot(coord: GroupCoordinator, gid: str = "g") -> Any:
    g = coord.consumer_groups[gid]
    return (g.group_epoch, g.assignment_epoch, dict(g.subscription_metadata),
            {m: (x.member_epoch, x.previous_member_epoch, x.state, x.assigned,
                 x.pending_revocation, x.subscribed_topic_names, x.instance_id)
             for m, x in g.members.items()},
            dict(g.target_assignment), dict(g.partition_epochs), dict(g.offsets))


# --- joining and assignment -----------------------------------------------------------------------

@async_test
async def test_first_member_gets_every_partition_and_group_is_stable() -> None:
    h = await Harness().start()
    r = await h.hb("m1")
    assert r.error == E.NONE and r.member_epoch == 1 and r.heartbeat_interval_ms == 5000
    assert r.assignment == {T1: set(range(6))}
    assert h.group().state is ConsumerGroupState.STABLE
    kinds = [decode_consumer_key(k).type for k, _ in h.storage.partitions[partition_for("g", 50)]]
    assert kinds == [5, 4, 3, 7, 6, 8]  # member, partitions, epoch, target, target epoch, current


@async_test
async def test_second_member_revoke_before_assign() -> None:
    h = await Harness().start()
    await h.hb("m1")
    r2 = await h.hb("m2")
    assert r2.member_epoch == 2
    # m2's target partitions are still owned by m1 (epoch 1): unreleased, nothing yet.
    assert r2.assignment == {} and h.group().members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    assert h.group().state is ConsumerGroupState.RECONCILING
    # m1 still reports all six: it must revoke three and stays at epoch 1.
    r1 = await h.hb("m1")
    assert r1.member_epoch == 1 and r1.assignment is not None and len(r1.assignment[T1]) == 3
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    # Another heartbeat still owning the revoked partitions does not progress.
    r1 = await h.hb("m1", owned=[(T1, list(range(6)))])
    assert r1.member_epoch == 1
    # Once m1 reports only its three, it moves to epoch 2 and m2 gets the rest.
    await h.converge(["m1", "m2"])
    assert h.partitions("m1").isdisjoint(h.partitions("m2"))
    assert h.partitions("m1") | h.partitions("m2") == {(T1, p) for p in range(6)}
    assert len(h.partitions("m1")) == len(h.partitions("m2")) == 3
    assert h.group().state is ConsumerGroupState.STABLE
    assert snapshot(await h.replayed()) == snapshot(h.coord)


@async_test
async def test_range_assignor_and_uniform_balance() -> None:
    members = {m: MemberSpec({T1, T2}, {}) for m in ("a", "b", "c")}
    r = range_assign(members, {T1: 7, T2: 2})
    assert r["a"][T1] == {0, 1, 2} and r["b"][T1] == {3, 4} and r["c"][T1] == {5, 6}
    assert r["a"][T2] == {0} and r["b"][T2] == {1} and T2 not in r["c"]
    u = uniform_assign(members, {T1: 7, T2: 2})
    sizes = sorted(sum(len(ps) for ps in a.values()) for a in u.values())
    assert sizes == [3, 3, 3]
    # Sticky: a member keeps what it had, within its share.
    sticky = uniform_assign({"a": MemberSpec({T1}, {T1: {0, 1, 2}}), "b": MemberSpec({T1}, {}),
                             "c": MemberSpec({T1}, {})}, {T1: 6})
    assert {0, 1} <= sticky["a"][T1] or sticky["a"][T1] <= {0, 1, 2}
    assert all(len(a[T1]) == 2 for a in sticky.values())
    # Heterogeneous: only subscribers get a topic's partitions.
    het = uniform_assign({"a": MemberSpec({T1}, {}), "b": MemberSpec({T1, T2}, {})}, {T1: 2, T2: 2})
    assert T2 not in het["a"] and het["b"][T2] == {0, 1}


@async_test
async def test_server_assignor_chosen_by_member_and_unknown_rejected() -> None:
    h = await Harness().start()
    r = await h.hb("m1", assignor="nope")
    assert r.error == E.UNSUPPORTED_ASSIGNOR
    await h.hb("m1", assignor="range", topics=["t1", "t2"])
    await h.hb("m2", assignor="range", topics=["t1", "t2"])
    await h.converge(["m1", "m2"])
    assert h.partitions("m1") == {(T1, 0), (T1, 1), (T1, 2), (T2, 0)}
    assert h.coord.describe_consumer_groups(["g"])[0].assignor_name == "range"


# --- epochs and fencing ---------------------------------------------------------------------------

@async_test
async def test_fenced_member_epoch_and_unknown_member() -> None:
    h = await Harness().start()
    await h.hb("m1")
    assert (await h.hb("m1", 5)).error == E.FENCED_MEMBER_EPOCH
    assert (await h.hb("zz", 1)).error == E.UNKNOWN_MEMBER_ID
    assert (await h.hb("m1", 1, gid="other")).error == E.UNKNOWN_MEMBER_ID
    await h.hb("m2")
    await h.converge(["m1", "m2"])
    e = h.epochs["m1"]
    prev = h.group().members["m1"].previous_member_epoch
    # The previous epoch with a subset of the assignment is a lost response: accepted.
    assert (await h.hb("m1", prev, owned=h.owned["m1"])).error == E.NONE
    # ... but not when it claims partitions it no longer has.
    assert (await h.hb("m1", prev, owned=[(T1, list(range(6)))])).error == E.FENCED_MEMBER_EPOCH
    assert e > prev
    # A fenced member rejoins with epoch 0 and its partitions are released at once.
    r = await h.hb("m1", 0)
    assert r.error == E.NONE and r.member_epoch == h.group().assignment_epoch


@async_test
async def test_invalid_requests() -> None:
    h = await Harness().start()
    bad = [HB("", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=["t1"], topic_partitions=[]),
           HB("g", "m", 0, subscribed_topic_names=["t1"], topic_partitions=[]),  # no timeout
           HB("g", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=["t1"]),  # no owned
           HB("g", "m", 0, rebalance_timeout_ms=1, topic_partitions=[]),  # no subscription
           HB("g", "m", -7),
           HB("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=["t1"], topic_partitions=[]),
           HB("g", "m", 0, instance_id="", rebalance_timeout_ms=1, subscribed_topic_names=["t1"],
              topic_partitions=[])]
    for req in bad:
        r = await h.coord.consumer_group_heartbeat(req, api_version=1)
        assert r.error == E.INVALID_REQUEST and r.error_message, req
    # v0: the coordinator makes the member id.
    r = await h.coord.consumer_group_heartbeat(bad[5], api_version=0)
    assert r.error == E.NONE and len(r.member_id) == 22


@async_test
async def test_group_configs_override_heartbeat_interval_and_session_timeout() -> None:
    """Dynamic group configs (broker/group_configs.py shares this dict): a group's own
    consumer.heartbeat.interval.ms / consumer.session.timeout.ms, read at each heartbeat; other
    groups keep the broker's."""
    h = await Harness().start()
    h.config.group_overrides["g"] = {"consumer.heartbeat.interval.ms": "7000",
                                     "consumer.session.timeout.ms": "50000"}
    assert (await h.hb("m1")).heartbeat_interval_ms == 7000
    assert (await h.hb("o1", gid="other")).heartbeat_interval_ms == 5000
    h.sched.advance(46_000)  # past the broker's 45 s, within the group's 50 s
    await asyncio.sleep(0)
    await h.coord.idle()
    assert "m1" in h.group().members and not h.group("other").members
    h.sched.advance(5_000)
    await asyncio.sleep(0)
    await h.coord.idle()
    assert not h.group().members
    h.config.group_overrides["g"] = {"consumer.heartbeat.interval.ms": "9000"}  # altered: next heartbeat
    assert (await h.hb("m2")).heartbeat_interval_ms == 9000

@async_test
async def test_leave_and_session_timeout_remove_members() -> None:
    h = await Harness().start()
    await h.hb("m1")
    await h.hb("m2")
    await h.converge(["m1", "m2"])
    epoch = h.group().group_epoch
    r = await h.hb("m2", -1)
    assert r.error == E.NONE and r.member_epoch == -1
    assert "m2" not in h.group().members and h.group().group_epoch == epoch + 1
    await h.converge(["m1"])
    assert len(h.partitions("m1")) == 6
    # m1 stops heartbeating: removed after group.consumer.session.timeout.ms.
    h.sched.advance(44_000)
    await h.coord.idle()
    assert "m1" in h.group().members
    h.sched.advance(2_000)
    await asyncio.sleep(0)
    await h.coord.idle()
    assert not h.group().members and h.group().state is ConsumerGroupState.EMPTY
    assert snapshot(await h.replayed()) == snapshot(h.coord)


@async_test
async def test_rebalance_timeout_fences_member_that_does_not_revoke() -> None:
    h = await Harness().start()
    await h.hb("m1", rebalance_timeout=10_000)
    await h.hb("m2")
    await h.hb("m1", owned=[(T1, list(range(6)))])
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(3):  # m2 keeps heartbeating; m1 heartbeats but never revokes
        h.sched.advance(4_000)
        await h.hb("m2")
        await h.hb("m1", owned=[(T1, list(range(6)))])
    await h.coord.idle()
    assert "m1" not in h.group().members
    await h.converge(["m2"])
    assert len(h.partitions("m2")) == 6


# --- static members -------------------------------------------------------------------------------

@async_test
async def test_static_member_rejoins_with_new_id_and_keeps_partitions() -> None:
    h = await Harness().start()
    await h.hb("a1", instance="ia")
    await h.hb("b1", instance="ib")
    await h.converge(["a1", "b1"])
    mine = h.partitions("a1")
    epoch = h.group().group_epoch
    # Another member id with the same instance id while a1 is live: refused.
    assert (await h.hb("a2", 0, instance="ia")).error == E.UNRELEASED_INSTANCE_ID
    r = await h.hb("a1", -2, instance="ia")
    assert r.error == E.NONE and r.member_epoch == -2
    assert h.group().members["a1"].member_epoch == -2
    r = await h.hb("a2", 0, instance="ia")
    assert r.error == E.NONE and "a1" not in h.group().members
    assert {(t, p) for t, ps in r.assignment.items() for p in ps} == mine
    assert h.group().group_epoch == epoch  # no rebalance
    assert (await h.hb("a1", 3, instance="ia")).error == E.FENCED_INSTANCE_ID
    assert snapshot(await h.replayed()) == snapshot(h.coord)


# --- regex subscriptions --------------------------------------------------------------------------

@async_test
async def test_regex_subscription_follows_new_topics() -> None:
    h = await Harness().start()
    r = await h.hb("m1", regex="t.*", topics=[])
    assert r.error == E.NONE and set(r.assignment) == {T1, T2}
    assert (await h.hb("m2", 0, regex="(?=x)", topics=[])).error == E.INVALID_REGULAR_EXPRESSION
    t3 = uuid.UUID(int=3)
    h.topics["t3"] = (t3, 1, False)
    h.topics["__internal"] = (uuid.UUID(int=4), 1, True)
    await h.converge(["m1"])
    assert h.partitions("m1") >= {(t3, 0)} and all(t != uuid.UUID(int=4) for t, _ in h.partitions("m1"))


def test_re2_subset() -> None:
    assert compile_topic_regex("orders-[[:digit:]]+").fullmatch("orders-12")
    assert compile_topic_regex("a\\z").pattern == "a\\Z"
    for bad in ("(?!x)", "(a)\\1", "a++", "\\pL", "(", "a\\Z", ""):
        with pytest.raises(InvalidRegularExpression):
            compile_topic_regex(bad)


# --- offsets, describe, list, delete --------------------------------------------------------------

@async_test
async def test_offsets_checked_against_member_epoch_and_survive_restart() -> None:
    h = await Harness().start()
    await h.hb("m1")
    e = h.epochs["m1"]
    tp = ("t1", 0)
    assert (await h.coord.commit_offsets("g", "m1", e, {tp: OffsetAndMetadata(5)}))[tp] == E.NONE
    assert (await h.coord.commit_offsets("g", "m1", e + 1, {tp: OffsetAndMetadata(6)}))[tp] == \
        E.STALE_MEMBER_EPOCH
    assert (await h.coord.commit_offsets("g", "zz", e, {tp: OffsetAndMetadata(6)}))[tp] == \
        E.UNKNOWN_MEMBER_ID
    assert (await h.coord.commit_offsets("g", "", -1, {tp: OffsetAndMetadata(6)}))[tp] == \
        E.UNKNOWN_MEMBER_ID  # not Empty
    code, out = h.coord.fetch_offsets("g", [tp], member_id="m1", member_epoch=e)
    assert code == E.NONE and out[tp].offset == 5
    assert h.coord.fetch_offsets("g", [tp], member_id="m1", member_epoch=e + 3)[0] == \
        E.STALE_MEMBER_EPOCH
    fresh = await h.replayed()
    assert fresh.fetch_offsets("g", [tp])[1][tp].offset == 5


@async_test
async def test_list_describe_delete_and_classic_conversion() -> None:
    h = await Harness().start()
    # An Empty classic group that only holds offsets becomes a consumer group on first join.
    tp = ("t1", 1)
    await h.coord.commit_offsets("g", "", -1, {tp: OffsetAndMetadata(9)})
    assert "g" in h.coord.groups
    await h.hb("m1")
    assert "g" not in h.coord.groups and h.group().offsets[tp].offset == 9
    code, listed = h.coord.list_groups()
    assert [(x.group_id, x.group_type, x.state) for x in listed] == [("g", "consumer", "Stable")]
    assert h.coord.list_groups(types=["classic"])[1] == []
    d = h.coord.describe_consumer_groups(["g", "nope"])
    assert d[0].error == E.NONE and d[0].members[0].member_id == "m1"
    assert d[0].members[0].assignment[0][1] == "t1" and d[1].error == E.GROUP_ID_NOT_FOUND
    assert (await h.coord.delete_groups(["g"]))["g"] == E.NON_EMPTY_GROUP
    await h.hb("m1", -1)
    assert (await h.coord.delete_groups(["g"]))["g"] == E.NONE
    assert "g" not in h.coord.consumer_groups and "g" not in h.coord.groups
    fresh = await h.replayed()
    assert "g" not in fresh.consumer_groups and "g" not in fresh.groups


def test_config_bounds() -> None:
    with pytest.raises(ValueError, match="group.consumer.session.timeout.ms"):
        GroupConfig.from_properties({"group.consumer.session.timeout.ms": "1000"})
    with pytest.raises(ValueError, match="heartbeat.interval.ms"):
        GroupConfig.from_properties({"group.consumer.heartbeat.interval.ms": "20000"})
    with pytest.raises(ValueError, match="group.consumer.assignors"):
        GroupConfig.from_properties({"group.consumer.assignors": "sticky"})
    cfg = GroupConfig.from_properties({
        "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
        "group.consumer.min.session.timeout.ms": "6000", "group.consumer.session.timeout.ms": "6000",
        "group.consumer.min.heartbeat.interval.ms": "500",
        "group.consumer.heartbeat.interval.ms": "500"})
    assert cfg.group_consumer_assignors == ("range",) and cfg.group_consumer_session_timeout_ms == 6000


@async_test
async def test_classic_join_converts_an_empty_consumer_group() -> None:
    h = await Harness(group_initial_rebalance_delay_ms=0).start()
    await h.hb("m1")
    tp = ("t1", 2)
    await h.coord.commit_offsets("g", "m1", h.epochs["m1"], {tp: OffsetAndMetadata(7)})

    def classic_join() -> Any:
        sub = b"\x00\x00\x00\x00\x00\x01\x00\x02t1\xff\xff\xff\xff"
        return asyncio.ensure_future(h.coord.join_group("g", "", "consumer", [("range", sub)],
                                                        10_000, 30_000, client_id="old"))
    await h.hb("m1", -1)
    task = classic_join()
    for _ in range(5):
        h.sched.advance(0)
        await asyncio.sleep(0)
        await h.coord.idle()
    r = await task
    assert r.error == E.NONE and r.generation_id == 1
    assert "g" not in h.coord.consumer_groups and h.coord.groups["g"].offsets[tp].offset == 7
    fresh = await h.replayed()
    assert "g" not in fresh.consumer_groups and fresh.fetch_offsets("g", [tp])[1][tp].offset == 7


def test_records_decode_for_tools() -> None:
    from groupcoord.consumer import records as cr
    from protocol import kafka_uuid

    key, value = cr.current_assignment_record("g", "m", 3, 2, MemberState.UNREVOKED_PARTITIONS,
                                              {T1: {1, 0}}, {T2: {4}})
    assert value is not None and value[:2] == b"\x00\x00"  # value version 0
    assert cr.decode_consumer_key(key) == cr.ConsumerRecordKey(8, "g", "m")
    plain = cr.value_to_plain(8, value)
    assert plain["state"] == 1 and plain["assigned_partitions"] == [
        {"topic_id": kafka_uuid.to_string(T1), "partitions": [0, 1]}]
    assert plain["partitions_pending_revocation"][0]["partitions"] == [4]



def sub(*topics: str, owned: list[tuple[str, list[int]]] | None = None) -> bytes:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as S

    return bytes(S(version=1, topics=list(topics), user_data=None, owned_partitions=[
        S.TopicPartition(topic=t, partitions=ps) for t, ps in owned or []]).encode(version=1))


def partitions_of(assignment: bytes) -> set[int]:
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as A

    return {p for tp in A.decode(assignment).assigned_partitions for p in tp.partitions}


@async_test
async def test_online_upgrade_classic_members_then_downgrade() -> None:
    """KIP-848 migration: a Stable classic group is converted when a consumer-protocol member
    joins; its classic members rejoin and are reconciled by the coordinator; when the
    consumer-protocol member leaves, the group is classic again and rebalances."""
    h = await Harness(group_initial_rebalance_delay_ms=0).start()

    async def settle() -> None:
        for _ in range(5):
            h.sched.advance(0)
            await asyncio.sleep(0)
            await h.coord.idle()

    # A classic group with two members (the leader gives each three partitions of t1).
    j = [asyncio.ensure_future(h.coord.join_group("g", "", "consumer", [("range", sub("t1"))],
                                                  10_000, 30_000, client_id=f"c{i}"))
         for i in range(2)]
    await settle()
    r1, r2 = [await t for t in j]
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as A

    def assignment(ps: list[int]) -> bytes:
        return bytes(A(version=0, user_data=None, assigned_partitions=[
            A.TopicPartition(topic="t1", partitions=ps)]).encode(version=0))
    leader = r1 if r1.leader_id == r1.member_id else r2
    plan = {r1.member_id: assignment([0, 1, 2]), r2.member_id: assignment([3, 4, 5])}
    syncs = [asyncio.ensure_future(h.coord.sync_group("g", r.generation_id, r.member_id,
                                                      plan if r is leader else {}))
             for r in (r1, r2)]
    await settle()
    for s in syncs:
        assert (await s).error == E.NONE
    gen = r1.generation_id

    # Upgrade: a consumer-protocol member joins.
    r = await h.hb("new")
    assert r.error == E.NONE and "g" not in h.coord.groups
    cg = h.group()
    assert cg.members[r1.member_id].classic is not None and cg.group_epoch == gen + 1
    assert cg.members[r1.member_id].assigned == {T1: {0, 1, 2}}
    # The classic members learn of the rebalance from their heartbeat and rejoin (eager: owning
    # nothing), then SyncGroup hands them the coordinator's assignment.
    for rr in (r1, r2):
        assert h.coord.heartbeat("g", rr.member_id, gen) == E.REBALANCE_IN_PROGRESS
    got = {}
    for _ in range(3):
        for rr in (r1, r2):
            jr = await h.coord.join_group("g", rr.member_id, "consumer", [("range", sub("t1"))],
                                          10_000, 30_000)
            assert jr.error == E.NONE and jr.leader_id == "" and jr.protocol_name == "range"
            sr = await h.coord.sync_group("g", jr.generation_id, rr.member_id, {})
            assert sr.error == E.NONE
            got[rr.member_id] = (jr.generation_id, partitions_of(sr.assignment))
        await h.converge(["new"], rounds=1)
    assert h.partitions("new") and all(ps for _, ps in got.values())
    everything = [p for _, ps in got.values() for p in ps] + [p for _, p in h.partitions("new")]
    assert sorted(everything) == list(range(6))
    assert h.coord.heartbeat("g", r1.member_id, got[r1.member_id][0]) == E.NONE
    assert h.coord.heartbeat("g", r1.member_id, 999) == E.ILLEGAL_GENERATION
    tp = ("t1", 0)
    assert (await h.coord.commit_offsets("g", r1.member_id, 999, {tp: OffsetAndMetadata(1)}))[tp] \
        == E.ILLEGAL_GENERATION
    assert snapshot(await h.replayed()) == snapshot(h.coord)

    # Downgrade: the only consumer-protocol member leaves.
    await h.hb("new", -1)
    assert "g" not in h.coord.consumer_groups
    classic = h.coord.groups["g"]
    assert set(classic.members) == {r1.member_id, r2.member_id}
    assert classic.state.value == "PreparingRebalance"
    fresh = await h.replayed()
    assert "g" in fresh.groups and "g" not in fresh.consumer_groups


@async_test
async def test_upgrade_refused_when_policy_disabled() -> None:
    h = await Harness(group_initial_rebalance_delay_ms=0, group_consumer_migration_policy="disabled").start()
    t = asyncio.ensure_future(h.coord.join_group("g", "", "consumer", [("range", sub("t1"))],
                                                 10_000, 30_000))
    for _ in range(5):
        h.sched.advance(0)
        await asyncio.sleep(0)
    assert (await t).error == E.NONE
    assert (await h.hb("m1")).error == E.GROUP_ID_NOT_FOUND


@async_test
async def test_unload_and_reload_partition_rebuilds_consumer_groups() -> None:
    """When __consumer_offsets leadership moves away and back (cluster mode), replay() rebuilds
    the consumer group exactly, and its members get fresh session timers."""
    h = await Harness().start()
    await h.hb("m1")
    await h.hb("m2")
    await h.converge(["m1", "m2"])
    before = snapshot(h.coord)
    p = h.coord.partition_for("g")
    h.coord.unload_partition(p)
    assert "g" not in h.coord.consumer_groups
    assert (await h.hb("m1")).error == E.NOT_COORDINATOR
    await h.coord.on_election(p)
    assert snapshot(h.coord) == before
    assert all(m.session_timer is not None for m in h.group().members.values())
    assert (await h.hb("m1")).error == E.NONE


@async_test
async def test_classic_member_that_never_rejoins_is_fenced_after_its_rebalance_timeout() -> None:
    h = await Harness(group_initial_rebalance_delay_ms=0).start()
    await h.hb("m1")
    jr = await h.coord.join_group("g", "", "consumer", [("range", sub("t1"))], 40_000, 20_000)
    assert jr.error == E.NONE and jr.member_id in h.group().members
    await h.converge(["m1"], rounds=1)
    await h.hb("m3")  # the group epoch moves on: the classic member must rejoin
    gen = jr.generation_id
    for _ in range(4):  # it keeps heartbeating (its session lives) but never rejoins
        assert h.coord.heartbeat("g", jr.member_id, gen) == E.REBALANCE_IN_PROGRESS
        h.sched.advance(6_000)
        await h.converge(["m1", "m3"], rounds=1)
    await h.coord.idle()
    assert jr.member_id not in h.group().members
    assert h.coord.heartbeat("g", jr.member_id, gen) == E.UNKNOWN_MEMBER_ID
