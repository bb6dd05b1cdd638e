"""Metadata (key 3), versions 0-13.

Lists this broker and the topics asked for (all topics when the list is null; v0 uses an empty
list for "all"). Authorization: a listing shows only the topics the principal may DESCRIBE; a
topic asked for by name without DESCRIBE answers TOPIC_AUTHORIZATION_FAILED (whether or not it
exists, so nothing leaks), and auto-creation needs CREATE on the cluster or the topic
(TOPIC_AUTHORIZATION_FAILED otherwise). v8+ fills the KIP-430 authorized operations when asked.
Unknown topics are created when ``allow_auto_topic_creation`` (v4+, always
true before) and ``auto.create.topics.enable`` both allow it, with ``num.partitions``
partitions (an internal topic's name with that topic's own spec, see
``broker/auto_topic_creation.py``); otherwise UNKNOWN_TOPIC_OR_PARTITION. Invalid names get
INVALID_TOPIC_EXCEPTION. Internal topics (``__consumer_offsets``, ``__transaction_state``) are
listed like any other once they exist, with ``is_internal`` true, as Kafka does; clients drop
them with their own ``exclude.internal.topics``. v10+ carries topic ids; v12+ topics may be asked for by id
(KIP-516): an unknown id, or a null name without an id, gets UNKNOWN_TOPIC_ID; v10-11 may not use
ids or null names (INVALID_REQUEST on every topic, as Kafka answers). v7+ the leader epoch
(KIP-320). v13 adds a top-level ``error_code`` (KIP-1102, for REBOOTSTRAP_REQUIRED, which a broker
that is part of its own cluster never needs to send): always NONE here.

In a cluster the brokers, the controller and each partition's leader, replicas, ISR and offline
replicas come from the metadata cache the controller keeps current (UpdateMetadata); a partition
without a leader (yet, or because no in-sync replica is alive) gets LEADER_NOT_AVAILABLE.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..auto_topic_creation import auto_create_topic
from ..cluster.metadata import validate_topic_name
from ..security.acl import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api

ZERO_UUID = uuid.UUID(int=0)


@api(ApiKey.METADATA, versions=(0, 13), authz=(
    Requires(DESCRIBE, TOPIC, TOPIC_DENIED, "each topic: unauthorized ones left out of a listing"),
    Requires(CREATE, CLUSTER, TOPIC_DENIED, "auto-creation: CREATE on the cluster or on the topic")))
async def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    R = ctx.response_class
    Topic = R.MetadataResponseTopic
    Part = Topic.MetadataResponsePartition
    topics_out = []

    requested = req.topics
    if requested is None or (ctx.version == 0 and not requested):
        wanted: list[tuple[str | None, uuid.UUID | None]] = [
            (t.name, None) for t in broker.topics]
    else:
        wanted = [(t.name, getattr(t, "topic_id", None)) for t in requested]
    allow_create = (req.allow_auto_topic_creation if ctx.version >= 4 else True) and \
        bool(broker.config["auto.create.topics.enable"])
    secured = broker.authorizer is not None
    if secured and (requested is None or (ctx.version == 0 and not requested)):
        wanted = [(n, t) for n, t in wanted if n is not None and ctx.authorize(DESCRIBE, TOPIC, n, log_denied=False)]
    topic_ops = ctx.version >= 8 and req.include_topic_authorized_operations

    if ctx.version < 12 and any(n is None or (t and t != ZERO_UUID) for n, t in wanted):
        # Kafka serves topic ids here from v12 only; v10-11 with an id or a null name is an
        # InvalidRequestException, answered on every requested topic
        return R(throttle_time_ms=0, brokers=[], cluster_id=broker.cluster_id, controller_id=broker.broker_id,
                 topics=[Topic(error_code=ErrorCode.INVALID_REQUEST, name=n or "", topic_id=t or ZERO_UUID,
                               is_internal=False, partitions=[]) for n, t in wanted], authorized_operations=None)

    for name, tid in wanted:
        if tid and tid != ZERO_UUID or name is None:
            # KIP-516: by id when one is given; neither a known id nor a name: UNKNOWN_TOPIC_ID
            info = broker.topics.by_id(tid) if tid else None
            if info is None:
                topics_out.append(Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                                        topic_id=tid or ZERO_UUID, is_internal=False, partitions=[]))
                continue
            name = info.name
        assert name is not None
        if secured and not ctx.authorize(DESCRIBE, TOPIC, name):
            topics_out.append(Topic(error_code=TOPIC_DENIED, name=name, topic_id=ZERO_UUID, is_internal=False,
                                    partitions=[]))
            continue
        info = broker.topics.get(name)
        if info is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if allow_create and secured and not (ctx.authorize(CREATE, CLUSTER, CLUSTER_NAME, log_denied=False)
                                                 or ctx.authorize(CREATE, TOPIC, name)):
                code = TOPIC_DENIED
            elif allow_create:
                try:
                    info = await auto_create_topic(broker, name)
                except KafkaError as e:
                    code = e.code
            else:
                try:
                    validate_topic_name(name)
                except KafkaError as e:
                    code = e.code
            if info is None:
                topics_out.append(Topic(error_code=code, name=name, topic_id=ZERO_UUID,
                                        is_internal=False, partitions=[]))
                continue
        parts = [Part(error_code=int(st.error), partition_index=st.index, leader_id=st.leader,
                      leader_epoch=st.leader_epoch, replica_nodes=st.replicas, isr_nodes=st.isr,
                      offline_replicas=st.offline)
                 for st in (partition_state(ctx, name, p) for p in range(info.num_partitions))]
        topics_out.append(Topic(error_code=0, name=name, topic_id=info.topic_id, is_internal=info.is_internal,
                                partitions=parts,
                                authorized_operations=ctx.authorized_operations(TOPIC, name) if topic_ops else None))

    brokers, controller_id = cluster_brokers(ctx)
    return R(throttle_time_ms=0, error_code=0,
             brokers=[R.MetadataResponseBroker(node_id=b, host=h, port=port, rack=rack) for b, h, port, rack in brokers],
             cluster_id=broker.cluster_id, controller_id=controller_id, topics=topics_out,
             authorized_operations=ctx.authorized_operations(CLUSTER, CLUSTER_NAME)
             if 8 <= ctx.version <= 10 and req.include_cluster_authorized_operations else None)


def cluster_brokers(ctx: RequestContext) -> tuple[list[tuple[int, str, int, str | None]], int]:
    """(live brokers as (id, host, port, rack), controller id), each broker's endpoint on the
    listener the request came in on; this broker alone on a single broker."""
    support = ctx.broker.metadata_support
    out = []
    for b in support.live_brokers():
        ep = b.endpoint(ctx.listener_name)
        out.append((b.id, ep.host, ep.port, b.rack))
    return out, support.controller_id()



@dataclass(slots=True)
class PartitionState:
    """What Metadata and DescribeTopicPartitions say about one partition."""

    index: int
    error: ErrorCode
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline: list[int]


def partition_state(ctx: RequestContext, topic: str, p: int) -> PartitionState:
    """A partition's leader, epoch, replicas, ISR and offline replicas, as the metadata support
    knows them (the controller's UpdateMetadata in a cluster, the local replica on a single
    broker); LEADER_NOT_AVAILABLE without a live leader."""
    pm = ctx.broker.metadata_support.partition(topic, p)
    if pm is None or pm.leader < 0:
        return PartitionState(p, ErrorCode.LEADER_NOT_AVAILABLE, -1, pm.leader_epoch if pm else -1,
                              list(pm.replicas) if pm else [], list(pm.isr) if pm else [],
                              list(pm.offline) if pm else [])
    return PartitionState(p, ErrorCode.NONE, pm.leader, pm.leader_epoch, list(pm.replicas), list(pm.isr),
                          list(pm.offline))
