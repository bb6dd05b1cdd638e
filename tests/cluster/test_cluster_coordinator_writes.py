"""A coordinator's record that replicates late must not take its group back (issue 30 item 2).

On a 3-broker cluster a classic group's generation went backwards (librdkafka's
``0118_commit_rebalance``, about 1 run in 6): the generation-1 GroupMetadata record was written,
awaited until ``__consumer_offsets`` replicated it, and then replayed over the group, which had
meanwhile reached generation 2 -- rebuilding it at generation 1 with one member. Here the
replication is delayed deterministically: a follower of the group's ``__consumer_offsets``
partition is SIGSTOPped, so the high watermark cannot pass the generation-1 record while a
second member joins and the generation advances; then the follower resumes and the record is
committed. Clients (kafka-python's protocol classes over a socket, and its admin client's
DescribeGroups) must see generation 2 with both members, a commit at generation 1 must be
refused with ILLEGAL_GENERATION, and OffsetFetch must not show an offset before it is replicated.
"""

from __future__ import annotations

import struct
import threading
from typing import Any

from kafka.protocol.consumer import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from compat_tests.test_groups_support import describe_group, unique
from groupcoord.records import partition_for
from tests.support.cluster import SamsaCluster
from tests.support.rawclient import RawClient
from tests.support.replicas import create_topic, wait_for, wait_full_isr

OFFSETS = "__consumer_offsets"
ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 22, 27, 79
# A paused follower must stay in the ISR (and registered) for the whole scenario, however slow
# the machine: the delay ends when the test resumes it, not when a timeout fires.
OVERRIDES = {"zookeeper.session.timeout.ms": 60000, "replica.lag.time.max.ms": 120000,
             "offsets.topic.num.partitions": 5}


def _subscription(topic: str) -> bytes:
    return struct.pack(">hih", 0, 1, len(topic)) + topic.encode() + struct.pack(">i", -1)


class Member:
    """One group member on its own connection to the coordinator, speaking JoinGroup v5,
    SyncGroup v3 and OffsetCommit v7 with kafka-python's protocol classes."""

    def __init__(self, cluster: SamsaCluster, coordinator: int, group: str, topic: str) -> None:
        b = cluster[coordinator]
        self.client = RawClient(b.host, b.port, timeout=120)
        self.group, self.topic = group, topic
        self.member_id = ""
        self.generation = -1
        self._pending: tuple[threading.Thread, list[Any]] | None = None

    def close(self) -> None:
        self.client.close()

    def _join_request(self) -> Any:
        P = JoinGroupRequest[5].JoinGroupRequestProtocol
        return JoinGroupRequest[5](group_id=self.group, session_timeout_ms=60000,
                                   rebalance_timeout_ms=60000, member_id=self.member_id,
                                   group_instance_id=None, protocol_type="consumer",
                                   protocols=[P(name="range", metadata=_subscription(self.topic))])

    def join(self) -> Any:
        r = self.client.roundtrip(self._join_request(), 5, JoinGroupResponse)
        if r.error_code == MEMBER_ID_REQUIRED:
            self.member_id = r.member_id
            r = self.client.roundtrip(self._join_request(), 5, JoinGroupResponse)
        assert r.error_code == 0, r
        self.generation = r.generation_id
        return r

    def start(self, fn: Any) -> None:
        """Run a request that the coordinator parks (a join or sync) in a thread."""
        out: list[Any] = []
        t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
        t.start()
        self._pending = (t, out)

    def result(self, timeout: float = 60) -> Any:
        assert self._pending is not None
        t, out = self._pending
        t.join(timeout)
        assert not t.is_alive(), "the coordinator never answered"
        self._pending = None
        return out[0]

    def sync(self, assignments: dict[str, bytes] | None = None) -> Any:
        A = SyncGroupRequest[3].SyncGroupRequestAssignment
        req = SyncGroupRequest[3](group_id=self.group, generation_id=self.generation,
                                  member_id=self.member_id, group_instance_id=None,
                                  assignments=[A(member_id=m, assignment=a)
                                               for m, a in (assignments or {}).items()])
        return self.client.roundtrip(req, 3, SyncGroupResponse)

    def commit(self, generation: int, offset: int) -> int:
        Req = OffsetCommitRequest[7]
        T = Req.OffsetCommitRequestTopic
        req = Req(group_id=self.group, generation_id_or_member_epoch=generation,
                  member_id=self.member_id, group_instance_id=None,
                  topics=[T(name=self.topic, partitions=[T.OffsetCommitRequestPartition(
                      partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                      committed_metadata="")])])
        (t,) = self.client.roundtrip(req, 7, OffsetCommitResponse).topics
        return int(t.partitions[0].error_code)


def fetch_offset(cluster: SamsaCluster, coordinator: int, group: str, topic: str) -> int:
    b = cluster[coordinator]
    Req = OffsetFetchRequest[7]
    with RawClient(b.host, b.port) as c:
        r = c.roundtrip(Req(group_id=group, topics=[Req.OffsetFetchRequestTopic(
            name=topic, partition_indexes=[0])], require_stable=False), 7, OffsetFetchResponse)
    assert r.error_code == 0, r
    return int(r.topics[0].partitions[0].committed_offset)


def high_watermark(cluster: SamsaCluster, leader: int, partition: int) -> int:
    b = cluster[leader]
    with RawClient(b.host, b.port) as c:
        code, hw, _ = c.fetch_raw(OFFSETS, partition, 0, max_bytes=1)
    assert code == 0
    return int(hw)


def describe(cluster: SamsaCluster, group: str) -> tuple[str, list[str]]:
    """DescribeGroups through kafka-python's admin client: (state, member ids)."""
    d = describe_group(cluster.bootstrap, group)
    return d["group_state"], sorted(m["member_id"] for m in d["members"])


def _setup(cluster_factory: Any, overrides: dict[str, Any] | None = None,
           ) -> tuple[SamsaCluster, str, str, int, int, int]:
    cluster = cluster_factory(overrides=overrides or OVERRIDES)
    topic, group = unique("late-t"), unique("late-g")
    create_topic(cluster, topic, 1, 3)
    b = cluster[0]
    with RawClient(b.host, b.port) as c:
        coordinator = c.find_coordinator(group)
    wait_full_isr(cluster, OFFSETS, 3)
    p = partition_for(group, OVERRIDES["offsets.topic.num.partitions"])
    info = cluster.partition(OFFSETS, p)
    assert info["leader"] == coordinator, info
    controller = cluster.controller_id()
    followers = [r for r in info["replicas"] if r != coordinator]
    follower = next((r for r in followers if r != controller), followers[0])
    return cluster, topic, group, coordinator, follower, p


def test_generation_record_replicated_late_does_not_take_the_group_back(cluster_factory: Any) -> None:
    cluster, topic, group, coordinator, follower, p = _setup(cluster_factory)
    a = Member(cluster, coordinator, group, topic)
    b = Member(cluster, coordinator, group, topic)
    try:
        ra = a.join()
        assert (ra.generation_id, ra.leader) == (1, a.member_id)
        hw = high_watermark(cluster, coordinator, p)
        cluster.pause(follower)  # the generation-1 record cannot be committed while it is stopped
        try:
            a.start(lambda: a.sync({a.member_id: b"gen-1"}))
            b.start(b.join)  # B joins while generation 1's record is not replicated
            assert a.result().error_code == REBALANCE_IN_PROGRESS
            ra2 = a.join()
            rb = b.result()
            assert ra2.generation_id == rb.generation_id == 2, (ra2, rb)
            assert high_watermark(cluster, coordinator, p) == hw, \
                "the generation-1 record was committed while the follower was stopped"
        finally:
            cluster.resume(follower)
        wait_for(lambda: high_watermark(cluster, coordinator, p) > hw, 60,
                 "the generation-1 record to be replicated")
        assert describe(cluster, group) == ("CompletingRebalance", sorted([a.member_id, b.member_id]))

        b.start(b.sync)
        sa = a.sync({a.member_id: b"a-2", b.member_id: b"b-2"})
        sb = b.result()
        assert (sa.error_code, sb.error_code, bytes(sb.assignment)) == (0, 0, b"b-2")
        assert describe(cluster, group) == ("Stable", sorted([a.member_id, b.member_id]))
        assert a.commit(1, 7) == ILLEGAL_GENERATION
        assert b.commit(2, 9) == 0
        assert fetch_offset(cluster, coordinator, group, topic) == 9
    finally:
        a.close()
        b.close()


def test_offset_commit_is_fetched_only_once_replicated(cluster_factory: Any) -> None:
    """Records are now applied as they enter the leader's log: OffsetFetch must still answer
    from what is committed (the old code passed this by applying late; it guards the new one)."""
    cluster, topic, group, coordinator, follower, p = _setup(cluster_factory)
    a = Member(cluster, coordinator, group, topic)
    try:
        a.join()
        assert a.sync({a.member_id: b"x"}).error_code == 0
        assert a.commit(1, 5) == 0
        hw = high_watermark(cluster, coordinator, p)
        size = _log_bytes(cluster, coordinator, p)
        cluster.pause(follower)
        try:
            a.start(lambda: a.commit(1, 8))
            # The commit is in the leader's log, not replicated: nobody may read it yet.
            wait_for(lambda: _log_bytes(cluster, coordinator, p) > size, 30,
                     "the commit to be appended")
            assert fetch_offset(cluster, coordinator, group, topic) == 5
            assert high_watermark(cluster, coordinator, p) == hw
        finally:
            cluster.resume(follower)
        assert a.result() == 0
        assert fetch_offset(cluster, coordinator, group, topic) == 8
    finally:
        a.close()


def _log_bytes(cluster: SamsaCluster, broker: int, partition: int) -> int:
    """Bytes in ``broker``'s segment files of ``__consumer_offsets-<partition>``: they grow when
    the leader appends, before any follower has the records."""
    d = cluster[broker].data_dir / f"{OFFSETS}-{partition}"
    return sum(f.stat().st_size for f in d.glob("*.log"))


TXN_OVERRIDES = {**OVERRIDES, "transaction.state.log.replication.factor": 1,
                 "transaction.state.log.min.isr": 1}


def test_transactional_offsets_are_fetched_only_once_their_marker_is_replicated(
        cluster_factory: Any) -> None:
    """A transaction's offsets are published when its COMMIT marker enters the group's
    ``__consumer_offsets`` partition (applied once, at write time) and visible to OffsetFetch
    only once the marker is replicated. ``__transaction_state`` has one replica here, so only the
    marker's replication waits for the stopped follower."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster, topic, group, coordinator, follower, p = _setup(cluster_factory, TXN_OVERRIDES)
    b = cluster[coordinator]
    with RawClient(b.host, b.port) as c:
        tid = next(t for t in (unique("late-tx") for _ in range(50))
                   if c.find_coordinator(t, key_type=1) != follower)
    simple = Member(cluster, coordinator, group, topic)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid})
    try:
        assert simple.commit(-1, 5) == 0
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 10)],
                                             consumer.consumer_group_metadata(), 60)
        size = _log_bytes(cluster, coordinator, p)
        cluster.pause(follower)
        try:
            simple.start(lambda: producer.commit_transaction(120))
            wait_for(lambda: _log_bytes(cluster, coordinator, p) > size, 60,
                     "the COMMIT marker to be appended")
            assert fetch_offset(cluster, coordinator, group, topic) == 5
        finally:
            cluster.resume(follower)
        simple.result(120)
        wait_for(lambda: fetch_offset(cluster, coordinator, group, topic) == 10, 60,
                 "the transaction's offset once its marker is replicated")
    finally:
        simple.close()
        consumer.close()
