"""OffsetForLeaderEpoch (key 23), versions 2-4 (KIP-101, KIP-320).

Consumers use it to validate their position after a leader change (truncation detection).
Answers, for the requested epoch, the largest epoch <= it and the end offset of that epoch:
the log end offset for the current epoch. A ``current_leader_epoch`` newer than ours gives
UNKNOWN_LEADER_EPOCH, older FENCED_LEADER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from . import RequestContext, api


@api(ApiKey.OFFSET_FOR_LEADER_EPOCH, versions=(2, 4))
async def handle_offset_for_leader_epoch(ctx: RequestContext, req: Any) -> Any:
    rm = ctx.broker.replica_manager
    R = ctx.response_class
    TopicRes = R.OffsetForLeaderTopicResult
    EpochEnd = TopicRes.EpochEndOffset
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, epoch, end = ErrorCode.NONE, -1, -1
            try:
                part = rm.get_partition(t.topic, p.partition)
                if p.current_leader_epoch > part.leader_epoch:
                    raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
                if 0 <= p.current_leader_epoch < part.leader_epoch:
                    raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
                end_for = getattr(part.log, "end_offset_for_epoch", None)
                if end_for is not None:
                    epoch, end = end_for(p.leader_epoch)
                elif p.leader_epoch >= part.leader_epoch:
                    epoch, end = part.leader_epoch, part.log_end_offset
                else:
                    epoch, end = -1, -1
            except KafkaError as e:
                code = e.code
            parts.append(EpochEnd(error_code=int(code), partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(TopicRes(topic=t.topic, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
