"""DescribeTopicPartitions (key 75), version 0 (KIP-966).

Metadata's topic and partition description without brokers, paged: the Java AdminClient (3.7+)
describes topics with it when the broker serves it. As Kafka's
``DescribeTopicPartitionsRequestHandler``:

* Topics are described in name order: the requested ones, or, for an empty list, every topic the
  principal may DESCRIBE (others left out). A named topic that does not exist answers
  UNKNOWN_TOPIC_OR_PARTITION, one the principal may not DESCRIBE TOPIC_AUTHORIZATION_FAILED
  (whether or not it exists); nothing is auto-created.
* Paging: at most ``ResponsePartitionLimit`` partitions (bounded by
  ``max.request.partition.size.limit``, 2000, and at least 1) per response. ``Cursor`` names
  the topic and partition to start at (topics before it are skipped, and its own earlier
  partitions); when the limit cuts a topic, or stops before the next one, ``NextCursor`` names
  the first partition not returned, else it is null. A cursor topic that is not among the
  requested topics, or a negative cursor partition, is INVALID_REQUEST (Kafka's
  InvalidRequestException, answered on every requested topic here).
* Each described topic carries its id, ``is_internal`` and its KIP-430 authorized operations;
  partitions come from :func:`metadata.partition_state`. Eligible leader replicas (KIP-966's
  ELR) are a KRaft feature: always empty lists.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import DESCRIBE, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api
from .metadata import ZERO_UUID, partition_state

MAX_PARTITION_LIMIT = 2000  # Kafka's max.request.partition.size.limit default


@api(ApiKey.DESCRIBE_TOPIC_PARTITIONS, versions=(0, 0), authz=(
    Requires(DESCRIBE, TOPIC, TOPIC_DENIED, "each topic: unauthorized ones left out of a listing"),))
async def handle_describe_topic_partitions(ctx: RequestContext, req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    broker = ctx.broker
    R = ctx.response_class
    Topic = R.DescribeTopicPartitionsResponseTopic
    Part = Topic.DescribeTopicPartitionsResponsePartition
    limit = max(1, min(req.response_partition_limit, MAX_PARTITION_LIMIT))
    listing = not req.topics
    names = sorted(broker.topics.names() if listing else {t.name for t in req.topics})
    cursor = req.cursor
    if cursor is not None and (cursor.partition_index < 0 or (not listing and cursor.topic_name not in names)):
        return R(throttle_time_ms=0, next_cursor=None, topics=[
            Topic(error_code=int(ErrorCode.INVALID_REQUEST), name=n, topic_id=ZERO_UUID, is_internal=False,
                  partitions=[]) for n in names])
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    topics_out: list[DataContainer] = []
    next_cursor = None
    remaining = limit
    for name in names:
        if not ctx.authorize(DESCRIBE, TOPIC, name, log_denied=not listing):
            if not listing:
                topics_out.append(Topic(error_code=int(TOPIC_DENIED), name=name, topic_id=ZERO_UUID,
                                        is_internal=False, partitions=[]))
            continue
        info = broker.topics.get(name)
        if info is None:
            if not listing:
                topics_out.append(Topic(error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), name=name,
                                        topic_id=ZERO_UUID, is_internal=False, partitions=[]))
            continue
        if remaining == 0:  # the limit fell exactly at the end of the previous topic
            next_cursor = R.Cursor(topic_name=name, partition_index=0)
            break
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        last = min(info.num_partitions, first + remaining)
        parts = []
        for p in range(first, last):
            st = partition_state(ctx, name, p)
            parts.append(Part(error_code=int(st.error), partition_index=p, leader_id=st.leader,
                              leader_epoch=st.leader_epoch, replica_nodes=st.replicas, isr_nodes=st.isr,
                              eligible_leader_replicas=[], last_known_elr=[], offline_replicas=st.offline))
        remaining -= len(parts)
        topics_out.append(Topic(error_code=0, name=name, topic_id=info.topic_id, is_internal=info.is_internal,
                                partitions=parts,
                                topic_authorized_operations=_int32_bits(ctx.authorized_operations(TOPIC, name))))
        if last < info.num_partitions:
            next_cursor = R.Cursor(topic_name=name, partition_index=last)
            break
    return R(throttle_time_ms=0, topics=topics_out, next_cursor=next_cursor)


def _int32_bits(bits: set[int]) -> int:
    """KIP-430's bit set as the int32 this schema carries (kafka-python patches Metadata's field to
    take a set, not this one's)."""
    value = sum(1 << b for b in bits)
    return value - (1 << 32) if value >= 1 << 31 else value
