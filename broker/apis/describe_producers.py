"""DescribeProducers (key 61), version 0 (KIP-664).

``kafka-transactions.sh describe-producers`` / ``find-hanging``: the active producers of each
partition as its producer state knows them -- producer id and epoch, last sequence and
timestamp, the coordinator epoch of the last marker, and ``current_txn_start_offset`` (first
offset of the producer's open transaction in this partition, -1 if none). Errors per
partition (UNKNOWN_TOPIC_OR_PARTITION). v0 is flexible.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

from protocol.api_keys import ApiKey
from protocol.errors import KafkaError

from ..security.acl import READ, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.DESCRIBE_PRODUCERS, versions=(0, 0), authz=(Requires(READ, TOPIC, TOPIC_DENIED, "each topic"),))
async def handle_describe_producers(ctx: RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse:
    R = ctx.response_class
    TopicResp = R.TopicResponse
    PartResp = TopicResp.PartitionResponse
    Producer = PartResp.ProducerState
    rm = ctx.broker.replica_manager
    topics = []
    for t in req.topics:
        parts = []
        topic_ok = ctx.authorize(READ, TOPIC, t.name)
        for p in t.partition_indexes:
            try:
                if not topic_ok:
                    raise KafkaError(TOPIC_DENIED, "Topic authorization failed.")
                part = rm.get_partition(t.name, p)
            except KafkaError as e:
                parts.append(PartResp(partition_index=p, error_code=int(e.code), error_message=e.message,
                                      active_producers=[]))
                continue
            producers = [Producer(producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                                  last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                                  coordinator_epoch=e.coordinator_epoch,
                                  current_txn_start_offset=e.current_txn_first_offset)
                         for e in part.log.producer_state.producers.values()]
            parts.append(PartResp(partition_index=p, error_code=0, error_message=None, active_producers=producers))
        topics.append(TopicResp(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
