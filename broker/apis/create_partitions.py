"""CreatePartitions (key 37), versions 0-3: grow a topic's partition count, never shrink it.

A partition count can only grow: shrinking would drop data and, worse, change the
partition that ``hash(key) % partitions`` picks for existing keys, breaking per-key order
for every producer and consumer (Kafka answers INVALID_PARTITIONS "The topic T currently has N
partition(s); M would not be an increase."); the same count is INVALID_PARTITIONS "Topic
already has N partition(s).". Unknown topics answer UNKNOWN_TOPIC_OR_PARTITION, a topic named
twice INVALID_REQUEST. ``validate_only`` checks everything and creates nothing. New partitions
start empty, with the topic's current config. v2 is flexible; v3 is identical (KIP-599's
throttling version).

Explicit ``assignments`` (one replica list per new partition, the first replica the preferred
leader) are validated as Kafka's ReplicationControlManager validates them, against the brokers
registered in the cluster (only this one on a single broker), with its INVALID_REPLICA_ASSIGNMENT
messages: one list per new partition ("Attempted to add 2 additional partition(s), but only 1
assignment(s) were specified."), no empty list, no unknown broker ("... includes broker 7, but no
such broker is registered."), no broker twice, and as many replicas as the topic's existing
partitions have. In a cluster the assignment is written to ZooKeeper as given and the answer
waits, up to ``timeout_ms``, until the controller has elected a leader for every new partition
(as CreateTopics does), so a client can use them as soon as it has the answer.
"""

from __future__ import annotations

from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import ALTER, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api
from .create_topics import wait_for_metadata


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)


def validate_manual_assignment(replicas: list[int], registered: set[int], replication_factor: int) -> None:
    """Kafka's ReplicationControlManager.validateManualPartitionAssignment, with its messages."""
    if not replicas:
        raise _invalid("The manual partition assignment includes an empty replica list.")
    previous = None
    for b in sorted(replicas):
        if b not in registered:
            raise _invalid(f"The manual partition assignment includes broker {b}, but no such broker is registered.")
        if b == previous:
            raise _invalid(f"The manual partition assignment includes the broker {b} more than once.")
        previous = b
    if len(replicas) != replication_factor:
        raise _invalid(f"The manual partition assignment includes a partition with {len(replicas)} replica(s), "
                       f"but this is not consistent with previous partitions, which have {replication_factor} "
                       "replica(s).")


@api(ApiKey.CREATE_PARTITIONS, versions=(0, 3), authz=(Requires(ALTER, TOPIC, TOPIC_DENIED, "each topic"),))
async def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    broker = ctx.broker
    R = ctx.response_class
    Result = R.CreatePartitionsTopicResult
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    unavailable: KafkaError | None = None  # ZooKeeper did not answer: every topic gets its error
    registered: set[int] = set()
    try:
        registered = set(await broker.metadata_support.registered_broker_ids())
    except KafkaError as e:
        unavailable = e
    grown: dict[str, int] = {}   # topic -> its partition count once grown
    out = []
    for t in req.topics:
        code, message = ErrorCode.NONE, None
        try:
            if unavailable is not None:
                raise unavailable
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
                                 f"The topic {t.name} currently has {current} partition(s); {t.count} would not "
                                 "be an increase.")
            if t.count == current:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partition(s).")
            assignment = None
            if t.assignments is not None:
                if len(t.assignments) != t.count - current:
                    raise _invalid(f"Attempted to add {t.count - current} additional partition(s), but only "
                                   f"{len(t.assignments)} assignment(s) were specified.")
                rf = broker.topics.replication_factor(t.name)
                for a in t.assignments:
                    validate_manual_assignment(list(a.broker_ids), registered, rf)
                assignment = {current + i: list(a.broker_ids) for i, a in enumerate(t.assignments)}
            if not req.validate_only:
                await broker.metadata_support.add_partitions(t.name, t.count, assignment)
                grown[t.name] = t.count
        except KafkaError as e:
            code, message = e.code, e.message
        out.append(Result(name=t.name, error_code=int(code), error_message=message))
    if grown:
        await wait_for_metadata(broker.metadata_support, grown, req.timeout_ms / 1000)
    return R(throttle_time_ms=0, results=out)
