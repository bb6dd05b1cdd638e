"""The group APIs at every served version, over a real socket to a live broker.

Stock clients each pick one version of every API; these tests walk all of them with exact
frames (kafka-python's message classes as the client-side codec): FindCoordinator v0-6 with
v4's batched keys, the JoinGroup/SyncGroup/Heartbeat/LeaveGroup dance at each version
(MEMBER_ID_REQUIRED from v4), OffsetCommit v2-9 and OffsetFetch v1-9 (multi-group v8),
DescribeGroups v0-5, ListGroups v0-5 with filters, DeleteGroups, OffsetDelete.
"""

from __future__ import annotations

import struct
from typing import Any

from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from tests.support.rawclient import RawClient

NONE, UNKNOWN_TOPIC, ILLEGAL_GENERATION, UNKNOWN_MEMBER, REBALANCING = 0, 3, 22, 25, 27
MEMBER_ID_REQUIRED, INVALID_REQUEST, GROUP_SUBSCRIBED, NON_EMPTY = 79, 42, 86, 68


def subscription(topic: str) -> bytes:
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


def create_topic(broker: Any, topic: str, partitions: int = 2) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def client(broker: Any) -> RawClient:
    """A connection that has asked for the group coordinator first, as every client does: that
    first FindCoordinator is what creates ``__consumer_offsets`` (until then, NOT_COORDINATOR)."""
    host, port = broker.bootstrap.split(":")
    c = RawClient(host, int(port))
    r = c.roundtrip(FindCoordinatorRequest(key="any-group", key_type=0), 3, FindCoordinatorResponse)
    assert r.error_code == NONE, r
    return c


def join(c: RawClient, v: int, group: str, member_id: str = "", instance: str | None = None,
         topic: str = "t") -> Any:
    P = JoinGroupRequest.JoinGroupRequestProtocol
    req = JoinGroupRequest(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                           member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                           protocols=[P(name="range", metadata=subscription(topic))], reason="test")
    return c.roundtrip(req, v, JoinGroupResponse)


def test_find_coordinator_all_versions(broker: Any) -> None:
    with client(broker) as c:
        port = int(broker.bootstrap.split(":")[1])
        for v in range(0, 4):
            r = c.roundtrip(FindCoordinatorRequest(key="g", key_type=0), v, FindCoordinatorResponse)
            assert (r.error_code, r.node_id, r.port) == (NONE, 0, port)
        for v in range(4, 7):
            r = c.roundtrip(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), v,
                            FindCoordinatorResponse)
            assert [(x.key, x.error_code, x.port) for x in r.coordinators] == [("a", 0, port), ("b", 0, port)]
        r = c.roundtrip(FindCoordinatorRequest(key_type=1, coordinator_keys=["txn"]), 4, FindCoordinatorResponse)
        assert r.coordinators[0].error_code == NONE
        r = c.roundtrip(FindCoordinatorRequest(key_type=2, coordinator_keys=["share"]), 6, FindCoordinatorResponse)
        assert r.coordinators[0].error_code == INVALID_REQUEST


def test_join_sync_heartbeat_leave_every_version(broker: Any) -> None:
    versions = {  # JoinGroup v -> (SyncGroup, Heartbeat, LeaveGroup) versions to pair with it
        0: (0, 0, 0), 1: (1, 1, 1), 2: (2, 2, 2), 3: (2, 2, 2), 4: (3, 3, 3), 5: (3, 3, 3),
        6: (4, 4, 4), 7: (5, 4, 4), 8: (5, 4, 5), 9: (5, 4, 5)}
    with client(broker) as c:
        for jv, (sv, hv, lv) in versions.items():
            group = f"wire-{jv}"
            r = join(c, jv, group)
            if jv >= 4:
                assert r.error_code == MEMBER_ID_REQUIRED and r.member_id
                r = join(c, jv, group, r.member_id)
            assert r.error_code == NONE and r.generation_id == 1 and r.leader == r.member_id
            assert r.protocol_name == "range" and len(r.members) == 1
            if jv >= 7:
                assert r.protocol_type == "consumer"
            me = r.member_id
            A = SyncGroupRequest.SyncGroupRequestAssignment
            s = c.roundtrip(SyncGroupRequest(group_id=group, generation_id=1, member_id=me, group_instance_id=None,
                                             protocol_type="consumer", protocol_name="range",
                                             assignments=[A(member_id=me, assignment=b"mine")]), sv, SyncGroupResponse)
            assert (s.error_code, s.assignment) == (NONE, b"mine")
            h = c.roundtrip(HeartbeatRequest(group_id=group, generation_id=1, member_id=me, group_instance_id=None),
                            hv, HeartbeatResponse)
            assert h.error_code == NONE
            h = c.roundtrip(HeartbeatRequest(group_id=group, generation_id=9, member_id=me, group_instance_id=None),
                            hv, HeartbeatResponse)
            assert h.error_code == ILLEGAL_GENERATION
            if lv >= 3:
                M = LeaveGroupRequest.MemberIdentity
                r2 = c.roundtrip(LeaveGroupRequest(group_id=group, members=[
                    M(member_id=me, group_instance_id=None, reason="bye"),
                    M(member_id="ghost", group_instance_id=None, reason=None)]), lv, LeaveGroupResponse)
                assert r2.error_code == NONE and [m.error_code for m in r2.members] == [NONE, UNKNOWN_MEMBER]
            else:
                r2 = c.roundtrip(LeaveGroupRequest(group_id=group, member_id=me), lv, LeaveGroupResponse)
                assert r2.error_code == NONE
                r3 = c.roundtrip(LeaveGroupRequest(group_id=group, member_id=me), lv, LeaveGroupResponse)
                assert r3.error_code == UNKNOWN_MEMBER  # before v3 the member's error is top-level
            h = c.roundtrip(HeartbeatRequest(group_id=group, generation_id=1, member_id=me, group_instance_id=None),
                            hv, HeartbeatResponse)
            assert h.error_code == UNKNOWN_MEMBER


def _commit(c: RawClient, v: int, group: str, topic: str, offsets: dict[int, int], member: str = "",
            generation: int = -1) -> dict[tuple[str, int], int]:
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
                              group_instance_id=None, retention_time_ms=-1, topics=[
                                  T(name=topic, partitions=[P(partition_index=p, committed_offset=o,
                                                              committed_leader_epoch=3, commit_timestamp=-1,
                                                              committed_metadata=f"m{o}")
                                                            for p, o in offsets.items()])])
    r = c.roundtrip(req, v, OffsetCommitResponse)
    return {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


def test_offset_commit_and_fetch_every_version(broker: Any) -> None:
    topic = "wire-offsets"
    create_topic(broker, topic)
    with client(broker) as c:
        for v in range(2, 10):
            group = f"wire-oc-{v}"
            assert _commit(c, v, group, topic, {0: 10 + v, 1: 20 + v}) == {(topic, 0): NONE, (topic, 1): NONE}
            assert _commit(c, v, group, "no-such-topic", {0: 1}) == {("no-such-topic", 0): UNKNOWN_TOPIC}
            # the group exists (Empty, offsets only): a member id it never issued is unknown
            assert _commit(c, v, group, topic, {0: 1}, member="ghost", generation=3) == \
                {(topic, 0): UNKNOWN_MEMBER}
            assert _commit(c, v, f"wire-never-{v}", topic, {0: 1}, member="ghost", generation=3) == \
                {(topic, 0): ILLEGAL_GENERATION}
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        for v in range(1, 8):
            # committed with OffsetCommit v6, the first to carry the leader epoch
            r = c.roundtrip(OffsetFetchRequest(group_id="wire-oc-6", topics=[
                T(name=topic, partition_indexes=[0, 1, 7])], require_stable=True), v, OffsetFetchResponse)
            got = {p.partition_index: (p.committed_offset, p.metadata, p.error_code) for p in r.topics[0].partitions}
            assert got == {0: (16, "m16", NONE), 1: (26, "m26", NONE), 7: (-1, "", NONE)}
            if v >= 5:
                assert r.topics[0].partitions[0].committed_leader_epoch == 3
            if v >= 2:  # null topics: everything the group committed
                r = c.roundtrip(OffsetFetchRequest(group_id="wire-oc-6", topics=None), v, OffsetFetchResponse)
                assert sorted(p.partition_index for t in r.topics for p in t.partitions) == [0, 1]
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        GT = G.OffsetFetchRequestTopics
        for v in (8, 9):
            r = c.roundtrip(OffsetFetchRequest(groups=[
                G(group_id="wire-oc-8", member_id=None, member_epoch=-1,
                  topics=[GT(name=topic, partition_indexes=[0])]),
                G(group_id="wire-oc-9", member_id=None, member_epoch=-1, topics=None)], require_stable=False),
                v, OffsetFetchResponse)
            got = {g.group_id: {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}
                   for g in r.groups}
            assert got == {"wire-oc-8": {(topic, 0): 18}, "wire-oc-9": {(topic, 0): 19, (topic, 1): 29}}


def test_describe_list_delete_every_version(broker: Any) -> None:
    topic = "wire-admin"
    create_topic(broker, topic)
    with client(broker) as c:
        r = join(c, 3, "wire-live", topic=topic)
        me = r.member_id
        A = SyncGroupRequest.SyncGroupRequestAssignment
        c.roundtrip(SyncGroupRequest(group_id="wire-live", generation_id=1, member_id=me,
                                     assignments=[A(member_id=me, assignment=b"asg")]), 2, SyncGroupResponse)
        _commit(c, 7, "wire-live", topic, {0: 5}, member=me, generation=1)
        _commit(c, 7, "wire-empty", topic, {0: 1, 1: 2})
        for v in range(0, 6):
            r = c.roundtrip(DescribeGroupsRequest(groups=["wire-live", "wire-empty", "wire-nope"],
                                                  include_authorized_operations=True), v, DescribeGroupsResponse)
            live, empty, nope = r.groups
            assert (live.group_state, live.protocol_type, live.protocol_data) == ("Stable", "consumer", "range")
            assert live.members[0].member_id == me and live.members[0].member_assignment == b"asg"
            assert live.members[0].member_metadata == subscription(topic)
            assert (empty.group_state, empty.members) == ("Empty", [])
            assert (nope.error_code, nope.group_state) == (NONE, "Dead")
        for v in range(0, 6):
            r = c.roundtrip(ListGroupsRequest(states_filter=[], types_filter=[]), v, ListGroupsResponse)
            assert {"wire-live", "wire-empty"} <= {g.group_id for g in r.groups}
        r = c.roundtrip(ListGroupsRequest(states_filter=["Empty"]), 4, ListGroupsResponse)
        assert "wire-empty" in {g.group_id for g in r.groups} and "wire-live" not in {g.group_id for g in r.groups}
        assert {g.group_state for g in r.groups} == {"Empty"}
        r = c.roundtrip(ListGroupsRequest(states_filter=[], types_filter=["consumer"]), 5, ListGroupsResponse)
        assert r.groups == []  # every group here is a classic group
        # OffsetDelete: a live group's subscribed topic is protected; an Empty group's is not
        T = OffsetDeleteRequest.OffsetDeleteRequestTopic
        P = T.OffsetDeleteRequestPartition
        r = c.roundtrip(OffsetDeleteRequest(group_id="wire-live", topics=[T(name=topic, partitions=[
            P(partition_index=0)])]), 0, OffsetDeleteResponse)
        assert r.error_code == NONE and r.topics[0].partitions[0].error_code == GROUP_SUBSCRIBED
        r = c.roundtrip(OffsetDeleteRequest(group_id="wire-empty", topics=[T(name=topic, partitions=[
            P(partition_index=0)])]), 0, OffsetDeleteResponse)
        assert r.error_code == NONE and r.topics[0].partitions[0].error_code == NONE
        # DeleteGroups v0-2
        for v, names in [(0, ["wire-empty", "wire-live"]), (1, ["wire-empty"]), (2, ["wire-live"])]:
            r = c.roundtrip(DeleteGroupsRequest(groups_names=names), v, DeleteGroupsResponse)
            got = {x.group_id: x.error_code for x in r.results}
            if v == 0:
                assert got == {"wire-empty": NONE, "wire-live": NON_EMPTY}
            elif v == 1:
                assert got == {"wire-empty": 69}  # GROUP_ID_NOT_FOUND: already deleted
            else:
                assert got == {"wire-live": NON_EMPTY}


def test_static_member_admin_removal_over_the_wire(broker: Any) -> None:
    with client(broker) as c:
        r = join(c, 5, "wire-static", instance="inst-1")
        assert r.error_code == NONE  # static members skip MEMBER_ID_REQUIRED
        me = r.member_id
        A = SyncGroupRequest.SyncGroupRequestAssignment
        c.roundtrip(SyncGroupRequest(group_id="wire-static", generation_id=1, member_id=me, group_instance_id="inst-1",
                                     assignments=[A(member_id=me, assignment=b"x")]), 3, SyncGroupResponse)
        again = join(c, 5, "wire-static", instance="inst-1")  # restart: a new id, same generation
        assert again.error_code == NONE and again.member_id != me and again.generation_id == 1
        h = c.roundtrip(HeartbeatRequest(group_id="wire-static", generation_id=1, member_id=me,
                                         group_instance_id="inst-1"), 3, HeartbeatResponse)
        assert h.error_code == 82  # FENCED_INSTANCE_ID
        M = LeaveGroupRequest.MemberIdentity
        r = c.roundtrip(LeaveGroupRequest(group_id="wire-static", members=[
            M(member_id="", group_instance_id="inst-1")]), 3, LeaveGroupResponse)
        assert r.error_code == NONE and r.members[0].error_code == NONE
        r = c.roundtrip(DescribeGroupsRequest(groups=["wire-static"]), 4, DescribeGroupsResponse)
        assert r.groups[0].group_state == "Empty"


def test_consumer_offsets_listed_as_internal_in_metadata(broker: Any) -> None:
    """As Kafka does: once it exists, all-topics Metadata lists __consumer_offsets with
    is_internal=true (clients filter it with exclude.internal.topics); asked by name too."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    with client(broker) as c:
        _commit(c, 7, "wire-meta", "wire-meta-topic", {0: 1})  # any group activity; topic need not exist
        r = c.roundtrip(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9, MetadataResponse)
        listed = {t.name: t for t in r.topics}
        assert "__consumer_offsets" in listed and listed["__consumer_offsets"].is_internal
        assert len(listed["__consumer_offsets"].partitions) == 50
        assert not any(t.is_internal for n, t in listed.items() if not n.startswith("__"))
        T = MetadataRequest.MetadataRequestTopic
        r = c.roundtrip(MetadataRequest(topics=[T(name="__consumer_offsets", topic_id=None)],
                                        allow_auto_topic_creation=False), 9, MetadataResponse)
        (t,) = r.topics
        assert t.error_code == NONE and t.is_internal and len(t.partitions) == 50
