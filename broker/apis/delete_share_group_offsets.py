"""DeleteShareGroupOffsets (key 92), version 0: forget an empty share group's state for whole
topics (KIP-932; ``kafka-share-groups --delete-offsets``).

The share-partitions of each listed topic lose their state (tombstones in
``__share_group_state``); the group's next fetch starts them again from
``share.auto.offset.reset``. The group must be a share group (GROUP_ID_NOT_FOUND) without members
(NON_EMPTY_GROUP), both top-level. Authorization: DELETE on the group (top-level
GROUP_AUTHORIZATION_FAILED), READ on each topic (TOPIC_AUTHORIZATION_FAILED); an unknown topic is
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid

from kafka.protocol.api_message import ApiMessage

from broker.share.manager import SharePartitionManager
from groupcoord.coordinator import GroupCoordinator
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.kip932 import DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse

from ..security.acl import DELETE, GROUP, GROUP_DENIED, READ, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.DELETE_SHARE_GROUP_OFFSETS, versions=(0, 0), authz=(
    Requires(DELETE, GROUP, GROUP_DENIED, "group_id"),
    Requires(READ, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_delete_share_group_offsets(ctx: RequestContext, req: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    R = ctx.response_class
    T = R.DeleteShareGroupOffsetsResponseTopic
    coord: GroupCoordinator | None = ctx.broker.group_coordinator
    manager: SharePartitionManager | None = ctx.broker.share_partition_manager

    def top(code: ErrorCode, message: str | None) -> ApiMessage:
        return R(throttle_time_ms=0, error_code=int(code), error_message=message, responses=[])

    if not ctx.authorize(DELETE, GROUP, req.group_id):
        return top(GROUP_DENIED, "Group authorization failed.")
    if coord is None or manager is None:
        return top(ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
    d = coord.share_group_describe(req.group_id)
    if d.error:
        return top(d.error, d.error_message)
    if d.members:
        return top(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    keys = manager.keys_of(req.group_id)
    out = []
    for t in req.topics or []:
        info = ctx.broker.topics.get(t.topic_name)
        code = TOPIC_DENIED if not ctx.authorize(READ, TOPIC, t.topic_name) else \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None else ErrorCode.NONE
        if code == ErrorCode.NONE and info is not None:
            try:
                # Every partition of the topic: in a cluster its states may be kept elsewhere.
                mine = {k for k in keys if k[1] == info.topic_id}
                mine |= {(req.group_id, info.topic_id, p) for p in range(info.num_partitions)
                         if await manager.read_start_offset((req.group_id, info.topic_id, p)) is not None}
                await manager.delete_state(sorted(mine, key=lambda k: k[2]))
            except KafkaError as e:
                code = e.code
        out.append(T(topic_name=t.topic_name, topic_id=info.topic_id if info else uuid.UUID(int=0),
                     error_code=int(code), error_message=None))
    return R(throttle_time_ms=0, error_code=0, error_message=None, responses=out)
