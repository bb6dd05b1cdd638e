"""Share groups without sockets: the share-partition state machine (acquire, acknowledge,
release, lock timeout, delivery count limit, SPSO), the share coordinator's records replayed
into the same state, the share-group coordinator with virtual time, and codec round trips of
the KIP-932 schemas."""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

import pytest

from broker.share.partition import RecordState, SharePartition
from broker.share.session import ShareSessionCache, next_epoch
from groupcoord.config import GroupConfig
from groupcoord.consumer.messages import ConsumerGroupHeartbeatRequest as CGHB
from groupcoord.coordinator import GroupCoordinator
from groupcoord.share.state import ShareCoordinator, overlay
from groupcoord.storage import MemoryOffsetsStorage, build_batch
from groupcoord.timer import ManualScheduler
from protocol import kip932
from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder
from protocol.messages import decode_body, encode_response, parse_header

E = ErrorCode
T = uuid.UUID(int=5)
ACCEPT, RELEASE, REJECT, GAP = 1, 2, 3, 0


class FakeLog:
    """Batches of ``sizes`` records each, from offset 0; ``read`` answers whole batches."""

    def __init__(self, *sizes: int) -> None:
        self.batches: list[tuple[int, int, bytes]] = []
        base = 0
        for n in sizes:
            raw = bytearray(build_batch([(None, b"v%d" % (base + i)) for i in range(n)], 0))
            struct.pack_into(">q", raw, 0, base)
            self.batches.append((base, base + n - 1, bytes(raw)))
            base += n
        self.end = base

    def read(self, offset: int) -> bytes | None:
        out = b"".join(raw for b, last, raw in self.batches if last >= offset)
        return out or None


def acquire(sp: SharePartition, log: FakeLog, member: str, n: int, now: int = 0,
            lock: int = 1000) -> list[tuple[int, int, int]]:
    got, records = sp.acquire(member, n, now, lock, log.end, log.read)
    bases = [struct.unpack_from(">q", r, 0)[0] for r in records]
    assert bases == sorted(set(bases)), "each batch once, in order"
    for a in got:  # every acquired offset is inside a returned batch
        for off in (a.first_offset, a.last_offset):
            assert any(b <= off <= la for b, la, _ in log.batches if b in bases)
    return [(a.first_offset, a.last_offset, a.delivery_count) for a in got]


def test_acquire_in_whole_batches_then_redeliver_released_first() -> None:
    log = FakeLog(5, 5, 5)
    sp = SharePartition("g", "t", 0, 0, delivery_count_limit=3)
    assert acquire(sp, log, "a", 3) == [(0, 4, 1)]  # MaxRecords 3, but a batch is 5 records
    assert acquire(sp, log, "b", 6) == [(5, 14, 1)]
    assert acquire(sp, log, "b", 6) == []
    assert sp.acknowledge("a", [(0, 1, [RELEASE])]) == E.NONE
    assert sp.acknowledge("a", [(2, 4, [ACCEPT, REJECT, GAP])]) == E.NONE
    assert acquire(sp, log, "b", 10) == [(0, 1, 2)]
    assert sp.start_offset == 0
    assert sp.acknowledge("b", [(0, 1, [ACCEPT]), (5, 14, [ACCEPT])]) == E.NONE
    assert (sp.start_offset, sp.end_offset, sp.spans) == (15, 15, [])


def test_acknowledge_only_what_the_member_holds() -> None:
    log = FakeLog(4)
    sp = SharePartition("g", "t", 0, 0)
    acquire(sp, log, "a", 4)
    assert sp.acknowledge("b", [(0, 3, [ACCEPT])]) == E.INVALID_RECORD_STATE
    assert sp.acknowledge("a", [(0, 1, [ACCEPT]), (2, 9, [ACCEPT])]) == E.INVALID_RECORD_STATE
    assert sp.acknowledge("a", [(0, 3, [ACCEPT, ACCEPT])]) == E.INVALID_REQUEST
    assert sp.acknowledge("a", [(0, 3, [7])]) == E.INVALID_REQUEST
    assert [s.state for s in sp.spans] == [RecordState.ACQUIRED] * len(sp.spans), "nothing applied"
    assert sp.acknowledge("a", [(0, 3, [ACCEPT])]) == E.NONE
    assert sp.acknowledge("a", [(0, 3, [ACCEPT])]) == E.INVALID_RECORD_STATE  # already done


def test_lock_timeout_and_delivery_count_limit() -> None:
    log = FakeLog(2)
    sp = SharePartition("g", "t", 0, 0, delivery_count_limit=2)
    assert acquire(sp, log, "a", 2, now=0, lock=100) == [(0, 1, 1)]
    assert not sp.expire_locks(99)
    assert sp.next_deadline_ms() == 100
    assert sp.expire_locks(100)
    assert acquire(sp, log, "b", 2, now=200, lock=100) == [(0, 1, 2)]
    assert sp.release_member("b")  # second delivery done: archived, never again
    assert acquire(sp, log, "a", 2, now=300) == []
    assert (sp.start_offset, sp.spans) == (2, [])


def test_persisted_changes_rebuild_the_state() -> None:
    async def run() -> None:
        storage = MemoryOffsetsStorage()
        coord = ShareCoordinator(_Storage(storage), 3, updates_per_snapshot=3)
        key = ("g", T, 0)
        await coord.initialize(key, 0, 0)
        log = FakeLog(3, 3, 3, 3)
        sp = SharePartition("g", "t", 0, 0)
        acquire(sp, log, "a", 12)
        for batches in ([(0, 2, [ACCEPT])], [(3, 3, [RELEASE])], [(4, 4, [REJECT])],
                        [(6, 8, [RELEASE, ACCEPT, RELEASE])], [(5, 5, [ACCEPT])]):
            assert sp.acknowledge("a", batches) == E.NONE
            moved, changes = sp.take_changes()
            await coord.write(key, sp.start_offset, changes)
        state = coord.read_state(key)
        assert state is not None and state.start_offset == 3
        # A fresh coordinator replays the topic into the same state.
        again = ShareCoordinator(_Storage(storage), 3)
        for p in range(3):
            await again.on_election(p)
        st2 = again.read_state(key)
        assert st2 is not None and (st2.start_offset, st2.batches) == (state.start_offset, state.batches)
        restored = SharePartition("g", "t", 0, st2.start_offset, st2.batches)
        # 9-11 were acquired, never acknowledged: after a restart they are delivered again.
        assert [(s.first, s.last, s.state, s.delivery_count) for s in restored.spans] == [
            (3, 3, RecordState.AVAILABLE, 1), (4, 4, RecordState.ARCHIVED, 1),
            (5, 5, RecordState.ACKNOWLEDGED, 1), (6, 6, RecordState.AVAILABLE, 1),
            (7, 7, RecordState.ACKNOWLEDGED, 1), (8, 8, RecordState.AVAILABLE, 1)]
        assert restored.end_offset == 9
        assert acquire(restored, log, "b", 20) == [(3, 3, 2), (6, 6, 2), (8, 8, 2), (9, 11, 1)]
    asyncio.run(run())


class _Storage:
    def __init__(self, mem: MemoryOffsetsStorage) -> None:
        self.mem = mem

    async def ensure(self) -> None:
        pass

    async def append(self, partition: int, records: list[Any], *, on_appended: Any = None) -> int:
        return await self.mem.append(partition, records, on_appended=on_appended)

    def read_all(self, partition: int) -> Any:
        return self.mem.read_all(partition)


def test_overlay() -> None:
    base = [(0, 9, 0, 1), (10, 19, 2, 1)]
    assert overlay(base, [(5, 12, 4, 2)], 3) == [(3, 4, 0, 1), (5, 12, 4, 2), (13, 19, 2, 1)]
    assert overlay(base, [], 15) == [(15, 19, 2, 1)]


def test_share_session_epochs() -> None:
    cache = ShareSessionCache(max_entries=1)
    s, old = cache.open("g", "m", [(T, 0)])
    assert (s.epoch, old) == (1, None)
    assert cache.use("g", "m", 2) == (E.INVALID_SHARE_SESSION_EPOCH, None)
    assert cache.use("g", "m", 1)[0] == E.NONE and s.epoch == 2
    assert cache.use("g", "x", 1) == (E.SHARE_SESSION_NOT_FOUND, None)
    _s2, evicted = cache.open("g", "x", [])
    assert evicted is s
    assert next_epoch(2**31 - 1) == 1


class Harness:
    def __init__(self, storage: MemoryOffsetsStorage | None = None) -> None:
        self.sched = ManualScheduler()
        self.storage = storage or MemoryOffsetsStorage()
        self.topics = {"t": (T, 3, False)}
        self.removed: list[tuple[str, str]] = []
        self.coord = GroupCoordinator(self.storage, GroupConfig(offsets_topic_num_partitions=3),
                                      self.sched, topics=lambda: self.topics)
        self.coord.share_member_removed.append(lambda g, m: self.removed.append((g, m)))

    async def hb(self, member: str, epoch: int, topics: list[str] | None = None) -> Any:
        r = await self.coord.share_group_heartbeat("sg", member, epoch, None, topics)
        await self.coord.idle()
        return r


def test_share_group_membership_and_replay() -> None:
    async def run() -> None:
        h = Harness()
        await h.coord.startup()
        a = await h.hb("a", 0, ["t"])
        assert (a.error, a.member_epoch, a.assignment) == (E.NONE, 1, {T: {0, 1, 2}})
        b = await h.hb("b", 0, ["t"])
        assert (b.member_epoch, b.assignment) == (2, {T: {0, 1, 2}})
        a2 = await h.hb("a", 1)  # lagging member: its epoch moves on, same assignment
        assert (a2.error, a2.member_epoch, a2.assignment) == (E.NONE, 2, {T: {0, 1, 2}})
        assert (await h.hb("a", 2)).assignment is None
        assert (await h.hb("a", 7)).error == E.FENCED_MEMBER_EPOCH
        assert (await h.hb("zz", 3)).error == E.UNKNOWN_MEMBER_ID
        assert (await h.hb("c", 0)).error == E.INVALID_REQUEST
        # The id is taken by a share group: not a classic or consumer group.
        join = await h.coord.join_group("sg", "", "consumer", [("range", b"")], 10000, 10000)
        assert join.error == E.INCONSISTENT_GROUP_PROTOCOL
        cg = await h.coord.consumer_group_heartbeat(CGHB("sg", "m1", 0, rebalance_timeout_ms=1000,
                                                         subscribed_topic_names=["t"], topic_partitions=[]))
        assert cg.error == E.GROUP_ID_NOT_FOUND
        h.topics["t"] = (T, 4, False)  # partitions added: a new epoch with them
        a3 = await h.hb("a", 2)
        assert (a3.member_epoch, a3.assignment) == (3, {T: {0, 1, 2, 3}})
        d = h.coord.share_group_describe("sg")
        assert (d.state, d.group_epoch, sorted(m.member_id for m in d.members)) == ("Stable", 3, ["a", "b"])
        # Replayed from __consumer_offsets: the same members, epochs and assignments (ShareGroup
        # MemberMetadata, TargetAssignment and CurrentMemberAssignment records).
        copy = MemoryOffsetsStorage()
        copy.partitions = {p: list(log) for p, log in h.storage.partitions.items()}
        again = Harness(copy)
        await again.coord.startup()
        d_again = again.coord.share_group_describe("sg")
        assert (d_again.group_epoch, d_again.assignment_epoch, sorted(
            (m.member_id, m.member_epoch, str(m.assignment)) for m in d_again.members)) == \
            (d.group_epoch, d.assignment_epoch, sorted((m.member_id, m.member_epoch, str(m.assignment))
                                                       for m in d.members))
        assert (await again.hb("b", 2)).error == E.NONE  # b's epoch is known after the reload
        assert (await again.hb("a", 1)).error == E.FENCED_MEMBER_EPOCH
        await again.coord.shutdown()
        _err, listing = h.coord.list_groups(types=["share"])
        assert [(g.group_id, g.group_type) for g in listing] == [("sg", "share")]
        # b stops heartbeating: removed after group.share.session.timeout.ms
        h.sched.advance(GroupConfig().group_share_session_timeout_ms - 1000)
        assert (await h.hb("a", 3)).error == E.NONE
        h.sched.advance(2000)
        await h.coord.idle()
        assert h.removed == [("sg", "b")]
        left = await h.hb("a", -1)
        assert (left.error, left.member_epoch) == (E.NONE, -1)
        assert h.coord.share_group_describe("sg").state == "Empty"
        # A fresh coordinator replaying __consumer_offsets knows the group and its epoch.
        h2 = Harness(h.storage)
        await h2.coord.startup()
        d2 = h2.coord.share_group_describe("sg")
        assert (d2.state, d2.group_epoch) == ("Empty", h.coord.share_groups["sg"].group_epoch)
        assert await h2.coord.delete_groups(["sg"]) == {"sg": E.NONE}
        assert h2.coord.share_group_describe("sg").error == E.GROUP_ID_NOT_FOUND
    asyncio.run(run())



def test_share_group_configs_override_heartbeat_and_session() -> None:
    """A share group's own share.heartbeat.interval.ms / share.session.timeout.ms (dynamic group
    configs, broker/group_configs.py) rather than the broker's."""
    async def run() -> None:
        h = Harness()
        await h.coord.startup()
        h.coord.config.group_overrides["sg"] = {"share.heartbeat.interval.ms": "8000",
                                                "share.session.timeout.ms": "55000"}
        assert (await h.hb("a", 0, ["t"])).heartbeat_interval_ms == 8000
        h.sched.advance(50_000)  # past the broker's 45 s
        await h.coord.idle()
        assert h.removed == []
        h.sched.advance(6_000)  # past the group's 55 s
        await h.coord.idle()
        assert h.removed == [("sg", "a")]
    asyncio.run(run())

@pytest.mark.parametrize("cls,fields", [
    (kip932.ShareGroupHeartbeatRequest, dict(group_id="g", member_id="m", member_epoch=0, rack_id=None,
                                             subscribed_topic_names=["a"])),
    (kip932.ShareFetchRequest, dict(group_id="g", member_id="m", share_session_epoch=3, max_wait_ms=500,
                                    min_bytes=1, max_bytes=100, max_records=50, batch_size=10, topics=[
        kip932.ShareFetchRequest.FetchTopic(topic_id=T, partitions=[
            kip932.ShareFetchRequest.FetchTopic.FetchPartition(partition_index=0, acknowledgement_batches=[
                kip932.ShareFetchRequest.FetchTopic.FetchPartition.AcknowledgementBatch(
                    first_offset=1, last_offset=3, acknowledge_types=[1, 2, 3])])])],
        forgotten_topics_data=[])),
    (kip932.ShareAcknowledgeRequest, dict(group_id="g", member_id="m", share_session_epoch=-1, topics=[])),
    (kip932.ShareGroupDescribeRequest, dict(group_ids=["g"], include_authorized_operations=True)),
])
def test_request_codec_round_trip(cls: Any, fields: dict[str, Any]) -> None:
    """Encoded as a client frames it, parsed by the broker's codec, encoded again: same bytes."""
    msg = cls(**fields)
    msg.with_header(correlation_id=7, client_id="c")
    raw = bytes(msg.encode(version=1, header=True, framed=True))
    [frame] = FrameDecoder().feed(raw)
    header = parse_header(frame)
    assert (header.api_key, header.api_version) == (cls.API_KEY, 1)
    back = decode_body(header, frame)
    assert back.to_dict() == msg.to_dict()
    back.with_header(correlation_id=7, client_id="c")
    assert bytes(back.encode(version=1, header=True, framed=True)) == raw


def test_response_codec_round_trip() -> None:
    R = kip932.ShareFetchResponse
    P = R.ShareFetchableTopicResponse.PartitionData
    batch = build_batch([(None, b"x")], 0)
    msg = R(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=30000,
            responses=[R.ShareFetchableTopicResponse(topic_id=T, partitions=[P(
                partition_index=0, error_code=0, error_message=None, acknowledge_error_code=121,
                acknowledge_error_message=None, current_leader=P.LeaderIdAndEpoch(leader_id=0, leader_epoch=3),
                records=batch, acquired_records=[P.AcquiredRecords(first_offset=0, last_offset=0,
                                                                   delivery_count=2)])])],
            node_endpoints=[])
    raw = encode_response(R.API_KEY, 1, 9, msg)
    back = R.decode(raw[9:], version=1)  # size, correlation id, empty tagged fields
    assert encode_response(R.API_KEY, 1, 9, back) == raw
    p = back.responses[0].partitions[0]
    assert (bytes(p.records), p.acquired_records[0].delivery_count, back.acquisition_lock_timeout_ms) == \
        (batch, 2, 30000)


def test_share_config_bounds() -> None:
    from broker.share.manager import ShareConfig

    assert ShareConfig.from_broker({}) == ShareConfig(30000, 5, 2000, "latest")
    with pytest.raises(ValueError, match="group.share.record.lock.duration.ms"):
        ShareConfig.from_broker({"group.share.record.lock.duration.ms": "2000"})
    assert ShareConfig.from_broker({"group.share.record.lock.duration.ms": "2000",
                                    "group.share.min.record.lock.duration.ms": "1000"}).record_lock_duration_ms == 2000
    with pytest.raises(ValueError, match="group.share.delivery.count.limit"):
        ShareConfig.from_broker({"group.share.delivery.count.limit": "11"})
    with pytest.raises(ValueError, match="share.auto.offset.reset"):
        ShareConfig.from_broker({"share.auto.offset.reset": "none"})
