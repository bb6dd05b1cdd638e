"""ListOffsets (key 2), versions 1-11.

Special timestamps: -2 earliest (log start offset), -1 latest (high watermark, or the last
stable offset under read_committed, v2+ KIP-98), -3 max timestamp (v7, KIP-734), -4 earliest
local (v8, KIP-405: no tiered storage, so the log start offset), -5 latest tiered
(v9, KIP-1005: nothing is tiered, so -1 as Kafka does without tiered storage). Any other
value finds the first offset whose timestamp is at or after it, through the time index; none
gives offset -1 and timestamp -1. v4+ returns the leader epoch (KIP-320). v10 adds the request's
``timeout_ms`` (KIP-1075), a bound on remote-storage lookups: every answer here is local, so it is
not waited on. v11 adds -6, earliest pending upload (KIP-1023): nothing is waiting for tiered
storage either, so -1 as for -5.
"""

from __future__ import annotations

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import DESCRIBE, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -2, -1, -3, -4, -5, -6


@api(ApiKey.LIST_OFFSETS, versions=(1, 11), authz=(Requires(DESCRIBE, TOPIC, TOPIC_DENIED, "each topic"),))
async def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    rm = ctx.broker.replica_manager
    R = ctx.response_class
    TopicResp = R.ListOffsetsTopicResponse
    PartResp = TopicResp.ListOffsetsPartitionResponse
    isolation = getattr(req, "isolation_level", 0) if ctx.version >= 2 else 0
    topics_out = []
    for t in req.topics:
        parts_out = []
        topic_ok = ctx.authorize(DESCRIBE, TOPIC, t.name)
        for p in t.partitions:
            code, ts, offset, epoch = ErrorCode.NONE, -1, -1, -1
            try:
                if not topic_ok:
                    raise KafkaError(TOPIC_DENIED)
                part = rm.get_partition(t.name, p.partition_index)
                epoch = part.leader_epoch
                target = p.timestamp
                if target == EARLIEST or target == EARLIEST_LOCAL:
                    offset = part.log_start_offset
                elif target == LATEST:
                    offset = part.last_stable_offset if isolation == 1 else part.high_watermark
                elif target == MAX_TIMESTAMP:
                    offset, ts = part.log.max_timestamp_offset()
                elif target == LATEST_TIERED or target == EARLIEST_PENDING_UPLOAD and ctx.version >= 11:
                    offset = -1
                elif target < 0:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {target}")
                else:
                    found = part.log.offset_for_timestamp(target)
                    if found is not None:
                        offset, ts = found
                        upper = part.last_stable_offset if isolation == 1 else part.high_watermark
                        if offset >= upper:
                            offset, ts = -1, -1
            except KafkaError as e:
                code, offset, ts, epoch = e.code, -1, -1, -1
            parts_out.append(PartResp(partition_index=p.partition_index, error_code=int(code), timestamp=ts,
                                      offset=offset, leader_epoch=epoch))
        topics_out.append(TopicResp(name=t.name, partitions=parts_out))
    return R(throttle_time_ms=0, topics=topics_out)
