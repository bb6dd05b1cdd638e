"""OffsetForLeaderEpoch (key 23), versions 2-4 (KIP-101, KIP-320).

Consumers use it to validate their position after a leader change (truncation detection).
Answers, for the requested epoch, the largest epoch <= it and the end offset of that epoch:
the log end offset for the current epoch. A ``current_leader_epoch`` newer than ours gives
UNKNOWN_LEADER_EPOCH, older FENCED_LEADER_EPOCH.
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, DESCRIBE, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.OFFSET_FOR_LEADER_EPOCH, versions=(2, 4), authz=(
    Requires(DESCRIBE, TOPIC, TOPIC_DENIED, "each topic (consumer)"),
    Requires(CLUSTER_ACTION, CLUSTER, TOPIC_DENIED, "follower (replica id >= 0): every partition")))
async def handle_offset_for_leader_epoch(ctx: RequestContext, req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    rm = ctx.broker.replica_manager
    R = ctx.response_class
    TopicRes = R.OffsetForLeaderTopicResult
    EpochEnd = TopicRes.EpochEndOffset
    topics = []
    follower = ctx.version >= 3 and req.replica_id >= 0
    cluster_ok = follower and ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    for t in req.topics:
        parts = []
        topic_ok = cluster_ok if follower else ctx.authorize(DESCRIBE, TOPIC, t.topic)
        for p in t.partitions:
            code, epoch, end = ErrorCode.NONE, -1, -1
            try:
                if not topic_ok:
                    raise KafkaError(TOPIC_DENIED)
                part = rm.get_partition(t.topic, p.partition)
                if p.current_leader_epoch > part.leader_epoch:
                    raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
                if 0 <= p.current_leader_epoch < part.leader_epoch:
                    raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
                epoch, end = part.log.end_offset_for_epoch(p.leader_epoch)
            except KafkaError as e:
                code = e.code
            parts.append(EpochEnd(error_code=int(code), partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(TopicRes(topic=t.topic, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
