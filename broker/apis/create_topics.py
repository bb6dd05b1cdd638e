"""CreateTopics (key 19), versions 2-7.

Creates each topic with its partition count (-1: ``num.partitions``), replication factor
(-1: ``default.replication.factor``; above the number of live brokers gives
INVALID_REPLICATION_FACTOR) or explicit replica assignments (which must name live brokers), and
config overrides validated as topic configs (bad ones: INVALID_CONFIG with the reason).
``validate_only`` (v1+) checks everything and creates nothing. Errors are per topic with a
message (v1+); v5+ (KIP-525) echoes partitions and replication factor; v7 returns topic ids.

In a cluster the assignment is written to ZooKeeper (replicas spread as Kafka spreads them, see
:mod:`broker.cluster.zk.topics`) and the answer waits, up to the request's ``timeout_ms``, until the
controller has elected a leader for every new partition and every live broker's Metadata shows
it (Kafka's DelayedCreatePartitions waits for the controller's UpdateMetadata on the broker that
was asked; see ``ZkMetadataSupport.await_topic_metadata`` for why every broker is asked here), so a
client can produce, list offsets or describe the topic on any broker as soon as it has the
answer. ``timeout_ms`` 0 answers at once, as Kafka does. A ZooKeeper that does not answer
within the ZooKeeper request bound gives REQUEST_TIMED_OUT for the topic (the write runs off the
event loop, so other clients are served meanwhile; it may still complete later, as in Kafka).
"""

from __future__ import annotations

import logging
import uuid

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..cluster.metadata import validate_topic_name
from ..cluster.support import MetadataSupport
from ..config.resolution import effective_topic_config, validate_topic_configs
from ..security.acl import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE_CONFIGS, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api

log = logging.getLogger("samsa.admin")

CONFIG_SOURCE_TOPIC = 1  # DescribeConfigs' ConfigSource.TOPIC_CONFIG
CONFIG_SOURCE_DEFAULT = 5  # ConfigSource.DEFAULT_CONFIG


@api(ApiKey.CREATE_TOPICS, versions=(2, 7), authz=(
    Requires(CREATE, TOPIC, TOPIC_DENIED, "each topic, unless CREATE on the cluster"),
    Requires(DESCRIBE_CONFIGS, TOPIC, TOPIC_DENIED, "v5+ configs in the answer: topic_config_error_code")))
async def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.broker
    R = ctx.response_class
    Result = R.CreatableTopicResult
    out = []
    seen: set[str] = set()
    support = broker.metadata_support
    unavailable: KafkaError | None = None  # ZooKeeper did not answer: every topic gets its error
    live: list[int] = []
    try:
        live = await support.registered_broker_ids()
    except KafkaError as e:
        unavailable = e
    created: dict[str, int] = {}  # topic -> partitions
    secured = broker.authorizer is not None
    cluster_create = secured and ctx.authorize(CREATE, CLUSTER, CLUSTER_NAME, log_denied=False)
    for t in req.topics:
        configs: dict[str, str] = {}
        code, message = ErrorCode.NONE, None
        tid = uuid.UUID(int=0)
        partitions, rf = t.num_partitions, t.replication_factor
        try:
            if unavailable is not None:
                raise unavailable
            if t.name in seen:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Duplicate topic name {t.name} in the request")
            seen.add(t.name)
            if secured and not cluster_create and not ctx.authorize(CREATE, TOPIC, t.name):
                raise KafkaError(TOPIC_DENIED, "Authorization failed.")
            validate_topic_name(t.name)
            if t.name in broker.topics:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
            if t.assignments:
                if partitions != -1 or rf != -1:
                    raise KafkaError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                                     "replicasAssignments were set. Both cannot be used at the same time.")
                for a in t.assignments:
                    if any(b not in live for b in a.broker_ids) or not a.broker_ids or \
                            len(set(a.broker_ids)) != len(a.broker_ids):
                        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                         f"Replica assignment {list(a.broker_ids)} names brokers that are not registered")
                indexes = sorted(a.partition_index for a in t.assignments)
                if indexes != list(range(len(indexes))):
                    raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Partitions should be consecutive and start from 0")
                partitions, rf = len(indexes), len(t.assignments[0].broker_ids)
            else:
                if partitions == -1:
                    partitions = broker.config.int("num.partitions")
                if rf == -1:
                    rf = broker.config.int("default.replication.factor")
                if partitions <= 0:
                    raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
                if rf <= 0:
                    raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                     "Replication factor must be larger than 0.")
                if rf > len(live):
                    raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                     f"Unable to replicate the partition {rf} time(s): The target replication "
                                     f"factor of {rf} cannot be reached because only {len(live)} broker(s) are "
                                     "registered.")
            for c in t.configs:
                if c.value is None:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {c.name}")
                configs[c.name] = c.value
            configs = validate_topic_configs(configs, broker.config)
            if not req.validate_only:
                assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
                info = await support.create_topic(t.name, partitions, configs, replication_factor=rf,
                                                  assignment=assignment)
                created[t.name] = partitions
                tid = info.topic_id
        except KafkaError as e:
            code, message = e.code, e.message
        described = None
        config_code = 0
        if code == ErrorCode.NONE and secured and not ctx.authorize(DESCRIBE_CONFIGS, TOPIC, t.name, log_denied=False):
            config_code = TOPIC_DENIED
        elif code == ErrorCode.NONE:
            described = [Result.CreatableTopicConfigs(name=k, value=v, read_only=False, is_sensitive=False,
                                                      config_source=CONFIG_SOURCE_TOPIC if k in configs
                                                      else CONFIG_SOURCE_DEFAULT)
                         for k, v in sorted(effective_topic_config(broker.config, configs).items())]
        out.append(Result(name=t.name, topic_id=tid, error_code=int(code), error_message=message,
                          topic_config_error_code=int(config_code),
                          num_partitions=partitions if code == 0 else -1,
                          replication_factor=rf if code == 0 else -1, configs=described))
    if created:
        await wait_for_metadata(support, created, req.timeout_ms / 1000)
    return R(throttle_time_ms=0, topics=out)


async def wait_for_metadata(support: MetadataSupport, topics: dict[str, int], timeout: float) -> None:
    """Until every live broker's metadata shows a leader for every partition of ``topics`` (or the
    timeout: the topics exist all the same, and clients retry what they find missing)."""
    if timeout <= 0:
        return
    lagging = await support.await_topic_metadata(topics, present=True, timeout=timeout)
    if lagging and timeout > 0:
        log.warning("CreateTopics: brokers %s had no leader for every partition of %s within %.0f ms",
                    lagging, sorted(topics), timeout * 1000)
