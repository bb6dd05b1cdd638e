"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) at every served version, over a
real socket to a live broker, with exact frames built from the schemas in protocol/schemas.

v0 of the heartbeat lets the coordinator name the member; v1 requires the client's own id and
carries SubscribedTopicRegex. Bad requests get INVALID_REQUEST with a message, a bad regex
INVALID_REGULAR_EXPRESSION, an unknown assignor UNSUPPORTED_ASSIGNOR; describing a classic or
unknown group GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from protocol.kip848 import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from tests.groupcoord.test_wire import client, create_topic, join

NONE, INVALID_REQUEST, GROUP_ID_NOT_FOUND, UNKNOWN_MEMBER_ID = 0, 42, 69, 25
FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION = 110, 112, 128


def heartbeat(c: Any, v: int, **kw: Any) -> Any:
    fields: dict[str, Any] = dict(group_id="wg", member_id="", member_epoch=0, instance_id=None,
                                  rack_id=None, rebalance_timeout_ms=30000,
                                  subscribed_topic_names=["wt848"], server_assignor=None,
                                  topic_partitions=[])
    if v >= 1:
        fields["subscribed_topic_regex"] = None
    fields.update(kw)
    return c.roundtrip(ConsumerGroupHeartbeatRequest(**fields), v, ConsumerGroupHeartbeatResponse)


def test_api_versions_advertise_kip848(broker: Any) -> None:
    with client(broker) as c:
        r = c.roundtrip(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3,
                        ApiVersionsResponse)
        keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
        assert keys[68] == (0, 1) and keys[69] == (0, 1)


def test_heartbeat_and_describe_every_version(broker: Any) -> None:
    create_topic(broker, "wt848", 4)
    with client(broker) as c:
        # v0: the coordinator generates the member id.
        r = heartbeat(c, 0, group_id="wg0")
        assert r.error_code == NONE and len(r.member_id) == 22 and r.member_epoch == 1
        assert r.heartbeat_interval_ms == 5000
        assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
        owned = [ConsumerGroupHeartbeatRequest.TopicPartitions(
            topic_id=r.assignment.topic_partitions[0].topic_id, partitions=[0, 1, 2, 3])]
        r2 = heartbeat(c, 0, group_id="wg0", member_id=r.member_id, member_epoch=1,
                       rebalance_timeout_ms=-1, subscribed_topic_names=None, topic_partitions=owned)
        assert r2.error_code == NONE and r2.member_epoch == 1 and r2.assignment is None
        assert heartbeat(c, 0, group_id="wg0", member_id=r.member_id, member_epoch=7).error_code \
            == FENCED_MEMBER_EPOCH
        # v1: the client's own id, and a regex subscription.
        r = heartbeat(c, 1, group_id="wg1", member_id="me-1", subscribed_topic_names=[],
                      subscribed_topic_regex="wt8.*")
        assert r.error_code == NONE and r.member_id == "me-1" and r.assignment.topic_partitions
        for v in (0, 1):
            d = c.roundtrip(ConsumerGroupDescribeRequest(group_ids=["wg1", "nope"],
                                                         include_authorized_operations=True),
                            v, ConsumerGroupDescribeResponse)
            g, missing = d.groups
            assert (g.error_code, g.group_state, g.group_epoch, g.assignor_name) == \
                (NONE, "Stable", 1, "uniform")
            (m,) = g.members
            assert m.member_id == "me-1" and m.subscribed_topic_regex == "wt8.*"
            assert m.assignment.topic_partitions[0].topic_name == "wt848"
            assert sorted(m.target_assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
            assert missing.error_code == GROUP_ID_NOT_FOUND and missing.error_message
        # Leaving.
        r = heartbeat(c, 1, group_id="wg1", member_id="me-1", member_epoch=-1,
                      rebalance_timeout_ms=-1, subscribed_topic_names=None, topic_partitions=None)
        assert (r.error_code, r.member_epoch) == (NONE, -1)
        assert heartbeat(c, 1, group_id="wg1", member_id="me-1", member_epoch=1,
                         rebalance_timeout_ms=-1).error_code == UNKNOWN_MEMBER_ID


def test_bad_heartbeats(broker: Any) -> None:
    with client(broker) as c:
        for kw in ({"member_id": ""}, {"member_epoch": -5, "member_id": "x"},
                   {"member_id": "x", "rebalance_timeout_ms": -1},
                   {"member_id": "x", "topic_partitions": None},
                   {"member_id": "x", "instance_id": ""}):
            r = heartbeat(c, 1, **kw)
            assert r.error_code == INVALID_REQUEST and r.error_message, (kw, r)
        assert heartbeat(c, 1, member_id="x", server_assignor="sticky").error_code == UNSUPPORTED_ASSIGNOR
        r = heartbeat(c, 1, member_id="x", subscribed_topic_regex="(?<=a)b")
        assert r.error_code == INVALID_REGULAR_EXPRESSION and "lookbehind" in r.error_message
        # A classic group is not described by ConsumerGroupDescribe ...
        j = join(c, 4, "classic-wg")
        j = join(c, 4, "classic-wg", j.member_id)
        assert j.error_code == NONE

        def describe() -> Any:
            return c.roundtrip(ConsumerGroupDescribeRequest(
                group_ids=["classic-wg"], include_authorized_operations=False), 1,
                ConsumerGroupDescribeResponse).groups[0]
        assert describe().error_code == GROUP_ID_NOT_FOUND
        # ... until a consumer-protocol member joins it (group.consumer.migration.policy is
        # bidirectional): the classic member stays, as a classic member of the consumer group.
        r = heartbeat(c, 1, group_id="classic-wg", member_id="x", member_epoch=0)
        assert r.error_code == NONE
        g = describe()
        assert g.error_code == NONE and {m.member_id: m.member_type for m in g.members} == \
            {j.member_id: 0, "x": 1}
