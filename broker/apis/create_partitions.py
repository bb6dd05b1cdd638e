"""CreatePartitions (key 37), versions 0-3: grow a topic's partition count, never shrink it.

A partition count can only grow: shrinking would drop data and, worse, change the
partition that ``hash(key) % partitions`` picks for existing keys, breaking per-key order
for every producer and consumer (the seeds' point; Kafka answers INVALID_PARTITIONS
"Topic currently has N partitions, which is higher than the requested M."). The same
count is also INVALID_PARTITIONS. Explicit ``assignments`` must list one replica set per
new partition, each naming this broker only (INVALID_REPLICA_ASSIGNMENT otherwise).
Unknown topics answer UNKNOWN_TOPIC_OR_PARTITION, a topic named twice INVALID_REQUEST.
``validate_only`` checks everything and creates nothing. New partitions start empty, with
the topic's current config. v2 is flexible; v3 is identical (KIP-599's throttling version).
"""

from __future__ import annotations

from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import ALTER, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.CREATE_PARTITIONS, versions=(0, 3), authz=(Requires(ALTER, TOPIC, TOPIC_DENIED, "each topic"),))
async def handle_create_partitions(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    R = ctx.response_class
    Result = R.CreatePartitionsTopicResult
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    out = []
    for t in req.topics:
        code, message = ErrorCode.NONE, None
        try:
            if counts[t.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {t.name} in the request")
            if not ctx.authorize(ALTER, TOPIC, t.name):
                raise KafkaError(TOPIC_DENIED, "Topic authorization failed.")
            info = broker.topics.get(t.name)
            if info is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{t.name}' does not exist.")
            current = info.num_partitions
            if t.count < current:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic currently has {current} partitions, which is higher than the "
                                 f"requested {t.count}.")
            if t.count == current:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
            if t.assignments is not None:
                if len(t.assignments) != t.count - current:
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Attempted to add {t.count - current} additional partition(s), but only "
                                     f"{len(t.assignments)} assignment(s) were specified.")
                for a in t.assignments:
                    if not a.broker_ids or any(b != broker.broker_id for b in a.broker_ids):
                        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                         f"Replica assignment {list(a.broker_ids)} names brokers that are not "
                                         f"registered; only broker {broker.broker_id} exists")
                    if len(set(a.broker_ids)) != len(a.broker_ids):
                        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                         f"Duplicate brokers in replica assignment {list(a.broker_ids)}")
            if not req.validate_only:
                broker.topics.add_partitions(t.name, t.count)
        except KafkaError as e:
            code, message = e.code, e.message
        out.append(Result(name=t.name, error_code=int(code), error_message=message))
    return R(throttle_time_ms=0, results=out)
