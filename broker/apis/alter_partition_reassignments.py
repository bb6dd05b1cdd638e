"""AlterPartitionReassignments (key 45), versions 0-1 (KIP-455).

Moves partitions to new replica sets while they keep serving, as Kafka's controller does: the
new replicas are added and follow the leader; once every one of them is in the ISR the
leadership moves into the target set (if it was outside it) and the replicas being removed are
stopped and deleted. ``replicas = null`` cancels an ongoing reassignment of that partition
(NO_REASSIGNMENT_IN_PROGRESS if there is none). Served by the active controller only
(NOT_CONTROLLER elsewhere; admin clients send it there). The single embedded broker is its own
controller: a partition "moved" to where it already is completes at once, any other broker id
is INVALID_REPLICA_ASSIGNMENT. Brokers that are not alive get
INVALID_REPLICA_ASSIGNMENT. The ongoing state lives in the topic's assignment znode
(``adding_replicas`` / ``removing_replicas``), so a new controller resumes it. v1 adds
``allow_replication_factor_change``, which we honour by refusing an RF change when false.
"""

from __future__ import annotations

from kafka.protocol.admin import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import ALTER, CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


@api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, versions=(0, 1), authz=(
    Requires(ALTER, CLUSTER, CLUSTER_DENIED, "the whole request"),))
async def handle_alter_partition_reassignments(ctx: RequestContext, req: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
    R = ctx.response_class
    TopicR = R.ReassignableTopicResponse
    PartR = TopicR.ReassignablePartitionResponse
    extra: dict[str, object] = {"allow_replication_factor_change": req.allow_replication_factor_change} \
        if ctx.version >= 1 else {}

    def top(code: ErrorCode, message: str) -> ApiMessage:
        return R(throttle_time_ms=0, error_code=int(code), error_message=message, responses=[], **extra)

    if not ctx.authorize(ALTER, CLUSTER, CLUSTER_NAME):
        return top(CLUSTER_DENIED, "Cluster authorization failed.")
    moves = {(t.name, p.partition_index): None if p.replicas is None else list(p.replicas)
             for t in req.topics for p in t.partitions}
    allow_rf_change = ctx.version < 1 or bool(req.allow_replication_factor_change)
    try:
        results = await ctx.broker.metadata_support.alter_reassignments(moves, allow_rf_change,
                                                                        max(req.timeout_ms, 1000) / 1000)
    except KafkaError as e:
        return top(e.code, e.message or e.code.name)
    by_topic: dict[str, list[DataContainer]] = {}
    for (topic, p), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(PartR(partition_index=p, error_code=int(code), error_message=message))
    return R(throttle_time_ms=0, error_code=0, error_message=None,
             responses=[TopicR(name=t, partitions=ps) for t, ps in by_topic.items()], **extra)
