"""OffsetDelete (key 47), version 0 (KIP-496).

Deletes committed offsets of some partitions of a group (tombstones in ``__consumer_offsets``).
Allowed for an Empty group, and for a live consumer group only on topics none of its members
subscribes to (GROUP_SUBSCRIBED_TO_TOPIC per partition otherwise). A live group of another
protocol type answers NON_EMPTY_GROUP, an unknown group GROUP_ID_NOT_FOUND, a partition of an
unknown topic UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import DELETE, GROUP, GROUP_DENIED, READ, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.OFFSET_DELETE, versions=(0, 0), authz=(
    Requires(DELETE, GROUP, GROUP_DENIED, "group_id"), Requires(READ, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_offset_delete(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    R = ctx.response_class
    T = R.OffsetDeleteResponseTopic
    P = T.OffsetDeleteResponsePartition
    coord = ctx.broker.group_coordinator
    if not ctx.authorize(DELETE, GROUP, req.group_id):
        return R(error_code=int(GROUP_DENIED), throttle_time_ms=0, topics=[])
    if coord is None:
        return R(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), throttle_time_ms=0, topics=[])
    requested = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    results: dict[tuple[str, int], ErrorCode] = {}
    known = []
    for topic, partition in requested:
        info = ctx.broker.topics.get(topic)
        if not ctx.authorize(READ, TOPIC, topic):
            results[(topic, partition)] = TOPIC_DENIED
        elif info is None or not 0 <= partition < info.num_partitions:
            results[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            known.append((topic, partition))
    code, deleted = await coord.delete_offsets(req.group_id, known)
    if code is not ErrorCode.NONE:
        return R(error_code=int(code), throttle_time_ms=0, topics=[])
    results.update(deleted)
    by_topic: dict[str, list[DataContainer]] = {}
    for topic, partition in requested:
        by_topic.setdefault(topic, []).append(
            P(partition_index=partition, error_code=int(results[(topic, partition)])))
    return R(error_code=0, throttle_time_ms=0,
             topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])
