"""DeleteRecords (key 21), versions 0-2: move a partition's log start offset forward on demand.

Records below the requested offset become unreadable at once (the log start offset moves,
so Fetch and ListOffsets(EARLIEST) see the new start and a consumer positioned before it
gets OFFSET_OUT_OF_RANGE and resets); whole segments below it are deleted by the log
(``Log.delete_records``), the rest of a straddling segment stays on disk until retention
removes it, exactly as Kafka does. ``offset = -1`` means "up to the high watermark"
(Kafka's ``DeleteRecordsRequest.HIGH_WATERMARK``). An offset above the high watermark or
below -1 is OFFSET_OUT_OF_RANGE; an offset below the current log start is a no-op. The
answer's ``low_watermark`` is the partition's log start offset afterwards. Unknown
partitions get UNKNOWN_TOPIC_OR_PARTITION. Single broker: no replica to wait for, so
``timeout_ms`` is not used. v2 is flexible.
"""

from __future__ import annotations

import logging

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import DELETE, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api

log = logging.getLogger("samsa.admin")
HIGH_WATERMARK = -1


@api(ApiKey.DELETE_RECORDS, versions=(0, 2), authz=(Requires(DELETE, TOPIC, TOPIC_DENIED, "each topic"),))
async def handle_delete_records(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    rm = ctx.broker.replica_manager
    R = ctx.response_class
    TopicResult = R.DeleteRecordsTopicResult
    PartResult = TopicResult.DeleteRecordsPartitionResult
    topics = []
    for t in req.topics:
        parts = []
        topic_ok = ctx.authorize(DELETE, TOPIC, t.name)
        for p in t.partitions:
            code, low = ErrorCode.NONE, -1
            try:
                if not topic_ok:
                    raise KafkaError(TOPIC_DENIED)
                part = rm.get_partition(t.name, p.partition_index)
                target = part.high_watermark if p.offset == HIGH_WATERMARK else p.offset
                if target < 0 or target > part.high_watermark:
                    raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                     f"Cannot increment the log start offset to {p.offset} of partition "
                                     f"{t.name}-{p.partition_index} since it is larger than the high "
                                     f"watermark {part.high_watermark}")
                low = part.log.delete_records(target)
                part.wake_waiters()
            except KafkaError as e:
                code = e.code
            except Exception:
                log.exception("DeleteRecords failed for %s-%d", t.name, p.partition_index)
                code = ErrorCode.UNKNOWN_SERVER_ERROR
            parts.append(PartResult(partition_index=p.partition_index, low_watermark=low, error_code=int(code)))
        topics.append(TopicResult(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
