"""ListPartitionReassignments (key 46), version 0 (KIP-455).

The ongoing reassignments the active controller knows (NOT_CONTROLLER elsewhere): for each
partition its full replica set during the move, the replicas being added and those being
removed. ``topics = null`` lists all of them; named partitions without a reassignment are left
out, as Kafka does. The single embedded broker never has one in progress.
"""

from __future__ import annotations

from kafka.protocol.admin import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import KafkaError

from ..security.acl import CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, DESCRIBE, Requires
from . import RequestContext, api


@api(ApiKey.LIST_PARTITION_REASSIGNMENTS, versions=(0, 0), authz=(
    Requires(DESCRIBE, CLUSTER, CLUSTER_DENIED, "the whole request"),))
async def handle_list_partition_reassignments(ctx: RequestContext, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    R = ctx.response_class
    TopicR = R.OngoingTopicReassignment
    PartR = TopicR.OngoingPartitionReassignment
    if not ctx.authorize(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=int(CLUSTER_DENIED), error_message="Cluster authorization failed.",
                 topics=[])
    try:
        ongoing = ctx.broker.metadata_support.list_reassignments()
    except KafkaError as e:
        return R(throttle_time_ms=0, error_code=int(e.code), error_message=e.message, topics=[])
    wanted = None if req.topics is None else {(t.name, p) for t in req.topics for p in t.partition_indexes}
    by_topic: dict[str, list[DataContainer]] = {}
    for (topic, p), (replicas, adding, removing) in sorted(ongoing.items()):
        if wanted is not None and (topic, p) not in wanted:
            continue
        by_topic.setdefault(topic, []).append(PartR(partition_index=p, replicas=replicas, adding_replicas=adding,
                                                    removing_replicas=removing))
    return R(throttle_time_ms=0, error_code=0, error_message=None,
             topics=[TopicR(name=t, partitions=ps) for t, ps in by_topic.items()])
