"""The newest API versions and the APIs kafka-python has no classes for, on the wire.

One broker per module; each test talks to it with the wire-level RawClient at the version under
test and checks the answer against what Kafka gives.

KIP-714 telemetry: GetTelemetrySubscriptions assigns a client instance id to a client that sends
the zero id and echoes the id of one that has it; the subscription is empty (no metrics) with
Kafka's 5-minute push interval. PushTelemetry answers each of Kafka's validation errors.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.kip714 import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from tests.support.brokers import BrokerProcess, make_broker
from tests.support.rawclient import RawClient, build_batch

ZERO = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("newest-apis")
    b = make_broker(tmp, overrides={"telemetry.max.bytes": 1000, "num.partitions": 2})
    b.start()
    try:
        yield b
    finally:
        b.kill()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(broker.host, broker.port) as c:
        yield c


def _subscribe(c: RawClient, instance: uuid.UUID) -> Any:
    return c.roundtrip(GetTelemetrySubscriptionsRequest[0](client_instance_id=instance), 0,
                       GetTelemetrySubscriptionsResponse)


def test_telemetry_apis_are_advertised(client: RawClient) -> None:
    assert client.versions[ApiKey.GET_TELEMETRY_SUBSCRIPTIONS] == (0, 0)
    assert client.versions[ApiKey.PUSH_TELEMETRY] == (0, 0)


def test_get_telemetry_subscriptions_assigns_an_id_once(client: RawClient) -> None:
    first = _subscribe(client, ZERO)
    assert first.error_code == 0
    assert first.client_instance_id not in (None, ZERO)
    assert first.requested_metrics == []  # the empty subscription
    assert first.push_interval_ms == 300_000
    assert first.telemetry_max_bytes == 1000
    assert set(first.accepted_compression_types) == {1, 2, 3, 4}
    again = _subscribe(client, first.client_instance_id)
    assert again.error_code == 0
    assert again.client_instance_id == first.client_instance_id  # Kafka echoes a known id
    assert again.subscription_id == first.subscription_id
    other = _subscribe(client, ZERO)
    assert other.client_instance_id not in (ZERO, first.client_instance_id)


@pytest.mark.parametrize(("change", "code"), [
    ({}, 0),
    ({"terminating": True}, 0),
    ({"client_instance_id": ZERO}, 42),  # INVALID_REQUEST
    ({"subscription_id": "other"}, 117),  # UNKNOWN_SUBSCRIPTION_ID
    ({"compression_type": 9}, 76),  # UNSUPPORTED_COMPRESSION_TYPE
    ({"metrics": b"x" * 1001}, 118),  # TELEMETRY_TOO_LARGE (telemetry.max.bytes is 1000)
])
def test_push_telemetry_validation(client: RawClient, change: dict[str, Any], code: int) -> None:
    sub = _subscribe(client, ZERO)
    fields: dict[str, Any] = {"client_instance_id": sub.client_instance_id, "subscription_id": sub.subscription_id,
                              "terminating": False, "compression_type": 0, "metrics": b"\x00" * 1000}
    fields.update(change)
    if fields["subscription_id"] == "other":
        fields["subscription_id"] = sub.subscription_id ^ 1
    resp = client.roundtrip(PushTelemetryRequest[0](**fields), 0, PushTelemetryResponse)
    assert resp.error_code == code


# -- the newest versions of the classic APIs ------------------------------------------------

TOPIC = "newest"


@pytest.fixture(scope="module")
def topic_id(broker: BrokerProcess) -> uuid.UUID:
    """TOPIC, created by auto-creation (2 partitions) with one record in partition 0; its id."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    with RawClient(broker.host, broker.port) as c:
        resp = c.roundtrip(MetadataRequest[13](topics=[MetadataRequest[13].MetadataRequestTopic(name=TOPIC)],
                                               allow_auto_topic_creation=True,
                                               include_topic_authorized_operations=False), 13, MetadataResponse)
        assert c.produce(TOPIC, 0, build_batch([(b"k", b"v", [])]))[0] == 0
        c.find_coordinator("g10")  # loads the group coordinator
    assert resp.error_code == 0
    (t,) = resp.topics
    assert t.error_code == 0 and len(t.partitions) == 2
    return t.topic_id


def test_metadata_v13_has_a_top_level_error_code(client: RawClient, topic_id: uuid.UUID) -> None:
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    assert client.versions[ApiKey.METADATA][1] == 13
    by_id = client.roundtrip(MetadataRequest[13](
        topics=[MetadataRequest[13].MetadataRequestTopic(topic_id=topic_id, name=None)],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False), 13, MetadataResponse)
    assert by_id.error_code == 0
    assert [(t.name, t.error_code) for t in by_id.topics] == [(TOPIC, 0)]


def test_list_offsets_v10(client: RawClient, topic_id: uuid.UUID) -> None:
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

    Req = ListOffsetsRequest[10]
    T = Req.ListOffsetsTopic
    req = Req(replica_id=-1, isolation_level=0, timeout_ms=5000, topics=[T(name=TOPIC, partitions=[
        T.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1) for p in (0, 1)])])
    resp = client.roundtrip(req, 10, ListOffsetsResponse)
    assert [(p.partition_index, p.error_code, p.offset) for p in resp.topics[0].partitions] == [(0, 0, 1), (1, 0, 0)]


def test_describe_groups_v6_unknown_group(client: RawClient) -> None:
    from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

    # As a client does: find the group's coordinator first. That creates __consumer_offsets on a
    # fresh broker; until its partition is loaded the broker is not (yet) the group's coordinator
    # and answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, as Kafka does.
    deadline = time.monotonic() + 30
    while True:
        found = client.roundtrip(FindCoordinatorRequest[3](key="no-such-group", key_type=0), 3,
                                 FindCoordinatorResponse)
        probe = client.roundtrip(DescribeGroupsRequest[6](groups=["no-such-group"],
                                                          include_authorized_operations=False),
                                 6, DescribeGroupsResponse)
        if found.error_code == 0 and probe.groups[0].error_code not in (14, 15, 16):
            break
        assert time.monotonic() < deadline, (found.error_code, probe.groups[0].error_code)
        time.sleep(0.1)
    for version, code, state in ((6, 69, ""), (5, 0, "Dead")):  # GROUP_ID_NOT_FOUND from v6 (KIP-1043)
        resp = client.roundtrip(DescribeGroupsRequest[version](groups=["no-such-group"],
                                                               include_authorized_operations=False),
                                version, DescribeGroupsResponse)
        (g,) = resp.groups
        assert (g.error_code, g.group_state) == (code, state)
        if version >= 6:
            assert g.error_message == "Group no-such-group not found."


def _commit(client: RawClient, version: int, group: str, topic: Any, offsets: dict[int, int]) -> Any:
    from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

    Req = OffsetCommitRequest[version]
    T = Req.OffsetCommitRequestTopic
    key = {"topic_id": topic} if version >= 10 else {"name": topic}
    req = Req(group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
              topics=[T(**key, partitions=[T.OffsetCommitRequestPartition(
                  partition_index=p, committed_offset=o, committed_leader_epoch=-1, committed_metadata="m")
                  for p, o in offsets.items()])])
    return client.roundtrip(req, version, OffsetCommitResponse)


def _fetch_offsets(client: RawClient, version: int, group: str, topic: Any, partitions: list[int] | None) -> Any:
    from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

    Req = OffsetFetchRequest[version]
    G = Req.OffsetFetchRequestGroup
    key = {"topic_id": topic} if version >= 10 else {"name": topic}
    topics = None if partitions is None else [G.OffsetFetchRequestTopics(**key, partition_indexes=partitions)]
    req = Req(groups=[G(group_id=group, member_id=None, member_epoch=-1, topics=topics)], require_stable=False)
    (g,) = client.roundtrip(req, version, OffsetFetchResponse).groups
    return g


def test_offset_commit_and_fetch_v10_name_topics_by_id(client: RawClient, topic_id: uuid.UUID) -> None:
    resp = _commit(client, 10, "g10", topic_id, {0: 1, 1: 0})
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == \
        [(topic_id, [(0, 0), (1, 0)])]
    g = _fetch_offsets(client, 10, "g10", topic_id, [0, 1])
    assert g.error_code == 0
    assert [(t.topic_id, [(p.partition_index, p.committed_offset, p.metadata, p.error_code) for p in t.partitions])
            for t in g.topics] == [(topic_id, [(0, 1, "m", 0), (1, 0, "m", 0)])]
    # the same offsets by name at v9, and every committed partition (null topics) by id at v10
    g9 = _fetch_offsets(client, 9, "g10", TOPIC, [0, 1])
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in g9.topics] == [(TOPIC, [1, 0])]
    every = _fetch_offsets(client, 10, "g10", None, None)
    assert [(t.topic_id, sorted(p.partition_index for p in t.partitions)) for t in every.topics] == [(topic_id, [0, 1])]
    # a v9 commit is read back by id
    _commit(client, 9, "g10", TOPIC, {1: 5})
    g = _fetch_offsets(client, 10, "g10", topic_id, [1])
    assert g.topics[0].partitions[0].committed_offset == 5


def test_offset_commit_and_fetch_v10_unknown_topic_id(client: RawClient, topic_id: uuid.UUID) -> None:
    unknown = uuid.uuid4()
    resp = _commit(client, 10, "g10-unknown", unknown, {0: 1})
    assert [(t.topic_id, [p.error_code for p in t.partitions]) for t in resp.topics] == [(unknown, [100])]
    g = _fetch_offsets(client, 10, "g10-unknown", unknown, [0, 3])
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in g.topics] == \
        [(unknown, [(0, 100), (3, 100)])]  # UNKNOWN_TOPIC_ID


def test_fetch_v18(client: RawClient, topic_id: uuid.UUID) -> None:
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    assert client.versions[ApiKey.FETCH][1] == 18
    Req = FetchRequest[18]
    T = Req.FetchTopic
    req = Req(max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
              topics=[T(topic_id=topic_id, partitions=[T.FetchPartition(
                  partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
                  partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")
    resp = client.roundtrip(req, 18, FetchResponse)
    (t,) = resp.responses
    (p,) = t.partitions
    assert (t.topic_id, p.error_code, p.high_watermark) == (topic_id, 0, 1)
    assert p.records


# -- DescribeTopicPartitions (KIP-966) ------------------------------------------------------

def _describe(client: RawClient, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
    from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse

    Req = DescribeTopicPartitionsRequest[0]
    req = Req(topics=[Req.TopicRequest(name=n) for n in names], response_partition_limit=limit,
              cursor=None if cursor is None else Req.Cursor(topic_name=cursor[0], partition_index=cursor[1]))
    return client.roundtrip(req, 0, DescribeTopicPartitionsResponse)


def _pages(client: RawClient, names: list[str], limit: int) -> list[list[tuple[str, int]]]:
    pages, cursor = [], None
    while True:
        resp = _describe(client, names, limit, cursor)
        pages.append([(t.name, p.partition_index) for t in resp.topics for p in t.partitions])
        if resp.next_cursor is None:
            return pages
        cursor = (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
        assert len(pages) < 20


def test_describe_topic_partitions(client: RawClient, topic_id: uuid.UUID) -> None:
    resp = _describe(client, [TOPIC, "no-such-topic"])
    assert resp.next_cursor is None
    known, unknown = sorted(resp.topics, key=lambda t: t.name)
    assert (known.name, known.error_code, known.topic_id, known.is_internal) == (TOPIC, 0, topic_id, False)
    assert [(p.partition_index, p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) for p in known.partitions] \
        == [(0, 0, 0, [0], [0]), (1, 0, 0, [0], [0])]
    assert known.topic_authorized_operations != -2147483648  # filled (every operation, without ACLs)
    assert (unknown.name, unknown.error_code, unknown.partitions) == ("no-such-topic", 3, [])


def test_describe_topic_partitions_pages_with_a_cursor(client: RawClient, topic_id: uuid.UUID) -> None:
    from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

    Req = CreateTopicsRequest[5]
    client.roundtrip(Req(topics=[Req.CreatableTopic(name=n, num_partitions=k, replication_factor=1, assignments=[],
                                                    configs=[]) for n, k in (("paged-a", 3), ("paged-b", 2))],
                         timeout_ms=10000, validate_only=False), 5, CreateTopicsResponse)
    every = [("paged-a", 0), ("paged-a", 1), ("paged-a", 2), ("paged-b", 0), ("paged-b", 1)]
    assert _pages(client, ["paged-b", "paged-a"], 2) == [every[0:2], every[2:4], every[4:]]
    assert _pages(client, ["paged-b", "paged-a"], 3) == [every[0:3], every[3:]]  # limit at a topic's end
    assert _pages(client, ["paged-a", "paged-b"], 2000) == [every]
    # an empty list describes every topic, paged the same way
    listed = [tp for page in _pages(client, [], 4) for tp in page]
    assert [tp for tp in listed if tp[0].startswith("paged-")] == every and (TOPIC, 1) in listed
    # a cursor into the middle; a cursor naming a topic not asked for; a negative partition
    assert _pages(client, ["paged-a", "paged-b"], 10) == [every] and \
        [(t.name, [p.partition_index for p in t.partitions]) for t in
         _describe(client, ["paged-a", "paged-b"], 10, ("paged-a", 2)).topics] == [("paged-a", [2]), ("paged-b", [0, 1])]
    for cursor in (("elsewhere", 0), ("paged-a", -1)):
        resp = _describe(client, ["paged-a", "paged-b"], 10, cursor)
        assert {t.error_code for t in resp.topics} == {42}  # INVALID_REQUEST


def test_describe_cluster_v2(client: RawClient) -> None:
    from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

    resp = client.roundtrip(DescribeClusterRequest[2](include_cluster_authorized_operations=False, endpoint_type=1,
                                                      include_fenced_brokers=True), 2, DescribeClusterResponse)
    assert resp.error_code == 0
    assert [(b.broker_id, b.is_fenced) for b in resp.brokers] == [(0, False)]


def test_produce_v13_names_topics_by_id(client: RawClient, topic_id: uuid.UUID) -> None:
    from kafka.protocol.producer import ProduceRequest, ProduceResponse

    assert client.versions[ApiKey.PRODUCE][1] == 13
    R = ProduceRequest[13]
    unknown = uuid.uuid4()
    req = R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        R.TopicProduceData(topic_id=t, partition_data=[R.TopicProduceData.PartitionProduceData(
            index=1, records=build_batch([(b"k", b"v13", [])]))]) for t in (topic_id, unknown)])
    resp = client.roundtrip(req, 13, ProduceResponse)
    assert [(t.topic_id, [(p.index, p.error_code) for p in t.partition_responses]) for t in resp.responses] == \
        [(topic_id, [(1, 0)]), (unknown, [(1, 100)])]  # UNKNOWN_TOPIC_ID
    assert client.fetch(TOPIC, 1, 0)[2][-1].value == b"v13"


def test_list_config_resources(client: RawClient, topic_id: uuid.UUID) -> None:
    from kafka.protocol.admin import ListConfigResourcesRequest, ListConfigResourcesResponse

    def listed(version: int, types: list[int]) -> tuple[int, set[tuple[int, str]]]:
        req = ListConfigResourcesRequest[version](**({"resource_types": types} if version >= 1 else {}))
        r = client.roundtrip(req, version, ListConfigResourcesResponse)
        return r.error_code, {(c.resource_type, c.resource_name) for c in r.config_resources}

    assert _commit(client, 9, "g-listed", TOPIC, {0: 0}).topics[0].partitions[0].error_code == 0
    assert listed(0, []) == (0, set())  # ListClientMetricsResources: no client-metrics subscriptions
    code, every = listed(1, [])
    assert code == 0
    assert {(2, TOPIC), (4, "0"), (8, "0"), (32, "g-listed")} <= every
    assert listed(1, [4]) == (0, {(4, "0")})
    assert listed(1, [3])[0] == 35  # UNSUPPORTED_VERSION: not a config resource type


def test_list_offsets_v11_and_describe_log_dirs_v5(client: RawClient, topic_id: uuid.UUID) -> None:
    from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

    Req = ListOffsetsRequest[11]
    T = Req.ListOffsetsTopic
    answers = []
    for ts in (-5, -6, -2):
        req = Req(replica_id=-1, isolation_level=0, timeout_ms=5000, topics=[T(name=TOPIC, partitions=[
            T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=ts)])])
        (p,) = client.roundtrip(req, 11, ListOffsetsResponse).topics[0].partitions
        answers.append((p.error_code, p.offset))
    # nothing is tiered or waiting to be: -1 for both tiered-storage queries, as Kafka without remote storage
    assert answers == [(0, -1), (0, -1), (0, 0)]
    r = client.roundtrip(DescribeLogDirsRequest[5](topics=None), 5, DescribeLogDirsResponse)
    assert r.error_code == 0 and [(d.error_code, d.is_cordoned) for d in r.results] == [(0, False)]
    assert any(t.name == TOPIC for t in r.results[0].topics)
