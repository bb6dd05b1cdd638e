"""ShareAcknowledge (key 79), version 1: acknowledge records a share consumer acquired, without
fetching more (KIP-932).

Within the member's share session (the next epoch; -1 acknowledges and closes it, releasing what
the member still holds; 0 is INVALID_SHARE_SESSION_EPOCH), each partition's
``AcknowledgementBatches`` -- offset ranges with one type for all or one per offset: 0 GAP,
1 ACCEPT, 2 RELEASE, 3 REJECT -- are applied by the share partition
(:mod:`broker.share.partition`) and written to the share coordinator before the answer. A
partition's error is INVALID_RECORD_STATE when the member does not hold every record it
acknowledges (nothing is applied then), INVALID_REQUEST for a malformed batch.

Authorization: READ on the group (top-level GROUP_AUTHORIZATION_FAILED), READ on each topic
(TOPIC_AUTHORIZATION_FAILED). Other errors: SHARE_SESSION_NOT_FOUND, UNKNOWN_TOPIC_ID,
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer

from broker.share.manager import SharePartitionManager
from broker.share.session import FINAL_EPOCH, INITIAL_EPOCH
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.kip932 import ShareAcknowledgeRequest, ShareAcknowledgeResponse

from ..security.acl import GROUP, GROUP_DENIED, READ, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api
from .share_fetch import PartitionOutcome, TopicIdPartition, ack_batches, apply_acks, leader_of, resolve


@api(ApiKey.SHARE_ACKNOWLEDGE, versions=(1, 1), authz=(
    Requires(READ, GROUP, GROUP_DENIED, "group_id"),
    Requires(READ, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_share_acknowledge(ctx: RequestContext, req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    R = ctx.response_class
    manager: SharePartitionManager | None = ctx.broker.share_partition_manager

    def top(code: ErrorCode, message: str | None) -> ApiMessage:
        return R(throttle_time_ms=0, error_code=int(code), error_message=message, responses=[],
                 node_endpoints=[])

    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
    if not ctx.authorize(READ, GROUP, group_id or ""):
        return top(GROUP_DENIED, "Group authorization failed.")
    if manager is None:
        return top(ErrorCode.UNKNOWN_SERVER_ERROR, "share groups are not running")
    if not group_id or not member_id:
        return top(ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set.")
    if epoch == INITIAL_EPOCH:
        return top(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "Share session epoch 0 cannot acknowledge.")
    err, session = manager.sessions.use(group_id, member_id, epoch)
    if err:
        return top(err, None)
    assert session is not None
    acks: dict[TopicIdPartition, list[tuple[int, int, list[int]]]] = {}
    for t in req.topics or []:
        for p in t.partitions or []:
            acks.setdefault((t.topic_id, p.partition_index), []).extend(ack_batches(p))
    outcomes: dict[TopicIdPartition, PartitionOutcome] = {}
    names = resolve(ctx, list(acks), outcomes)
    await apply_acks(ctx, manager, group_id, member_id, acks, names, outcomes)
    if epoch == FINAL_EPOCH:
        manager.sessions.close(group_id, member_id)
        await manager.release(group_id, member_id, {(group_id, t, p) for t, p in session.partitions})
    by_topic: dict[uuid.UUID, list[DataContainer]] = {}
    P = R.ShareAcknowledgeTopicResponse.PartitionData
    for tip, out in outcomes.items():
        leader = leader_of(ctx, names[tip], tip[1]) if tip in names else (-1, -1)
        code = out.ack_error if out.ack_error is not None else out.error
        by_topic.setdefault(tip[0], []).append(P(
            partition_index=tip[1], error_code=int(code), error_message=None,
            current_leader=P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])))
    return R(throttle_time_ms=0, error_code=0, error_message=None,
             responses=[R.ShareAcknowledgeTopicResponse(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
             node_endpoints=[])
