"""AlterShareGroupOffsets (key 91), version 0: set the start offsets of an empty share group's
share-partitions (KIP-932; ``kafka-share-groups --reset-offsets``).

Each listed partition starts afresh at ``StartOffset``: its in-flight state is dropped and a new
snapshot is written to ``__share_group_state``, so the group's next fetch delivers from there.
The group must be a share group (GROUP_ID_NOT_FOUND) without members (NON_EMPTY_GROUP).
Authorization: READ on the group (top-level GROUP_AUTHORIZATION_FAILED), READ on each topic
(TOPIC_AUTHORIZATION_FAILED). Unknown topics or partitions: UNKNOWN_TOPIC_OR_PARTITION; a
negative offset INVALID_REQUEST.
"""

from __future__ import annotations

import uuid

from kafka.protocol.api_message import ApiMessage

from broker.share.manager import SharePartitionManager
from groupcoord.coordinator import GroupCoordinator
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.kip932 import AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse

from ..security.acl import GROUP, GROUP_DENIED, READ, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.ALTER_SHARE_GROUP_OFFSETS, versions=(0, 0), authz=(
    Requires(READ, GROUP, GROUP_DENIED, "group_id"),
    Requires(READ, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_alter_share_group_offsets(ctx: RequestContext, req: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    R = ctx.response_class
    T = R.AlterShareGroupOffsetsResponseTopic
    P = T.AlterShareGroupOffsetsResponsePartition
    coord: GroupCoordinator | None = ctx.broker.group_coordinator
    manager: SharePartitionManager | None = ctx.broker.share_partition_manager

    def every(code: ErrorCode, message: str | None) -> ApiMessage:
        return R(throttle_time_ms=0, error_code=int(code), error_message=message, responses=[
            T(topic_name=t.topic_name, topic_id=uuid.UUID(int=0), partitions=[
                P(partition_index=p.partition_index, error_code=int(code), error_message=message)
                for p in t.partitions or []]) for t in req.topics or []])

    if not ctx.authorize(READ, GROUP, req.group_id):
        return every(GROUP_DENIED, "Group authorization failed.")
    if coord is None or manager is None:
        return every(ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
    d = coord.share_group_describe(req.group_id)
    if d.error:
        return every(d.error, d.error_message)
    if d.members:
        return every(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    out = []
    for t in req.topics or []:
        info = ctx.broker.topics.get(t.topic_name)
        code = TOPIC_DENIED if not ctx.authorize(READ, TOPIC, t.topic_name) else \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None else ErrorCode.NONE
        ps = []
        for p in t.partitions or []:
            pcode = code
            if info is None or (pcode == ErrorCode.NONE and not 0 <= p.partition_index < info.num_partitions):
                pcode = pcode or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif pcode == ErrorCode.NONE and p.start_offset < 0:
                pcode = ErrorCode.INVALID_REQUEST
            if pcode == ErrorCode.NONE and info is not None:
                try:
                    await manager.reset_start_offset((req.group_id, info.topic_id, p.partition_index),
                                                     p.start_offset, -1)
                except KafkaError as e:
                    pcode = e.code
            ps.append(P(partition_index=p.partition_index, error_code=int(pcode), error_message=None))
        out.append(T(topic_name=t.topic_name, topic_id=info.topic_id if info else uuid.UUID(int=0),
                     partitions=ps))
    return R(throttle_time_ms=0, error_code=0, error_message=None, responses=out)
