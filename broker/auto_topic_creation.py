"""Topics the broker creates by itself: Kafka's ``AutoTopicCreationManager``.

Two kinds of request make a broker create a topic nobody asked CreateTopics for:

* **FindCoordinator** needs the coordinator's internal topic: ``__consumer_offsets`` for a
  group key, ``__transaction_state`` for a transactional id. As in Kafka they do not exist until
  the first such request; then they are created with ``offsets.topic.num.partitions`` /
  ``transaction.state.log.num.partitions`` partitions, compacted, with their own segment size
  (``offsets.topic.segment.bytes`` / ``transaction.state.log.segment.bytes``). A broker that
  never sees a group or a transaction never creates them.
* **Metadata** with auto-creation allowed (``allow_auto_topic_creation`` and
  ``auto.create.topics.enable``) creates an unknown topic; an internal topic's name gets the
  internal topic's spec, never ``num.partitions`` (a 1-partition ``__consumer_offsets`` would
  strand every group hashed beyond partition 0).

Every topic this module creates goes through :func:`create_topic`, the broker's one path for
creating a topic by itself: configs validated as CreateTopics validates them, then the topic
registry (which persists it, logs one line for the whole topic and has the replica manager
create the partitions). In cluster mode that function is where creation is routed to the
controller instead; callers must not assume the partitions exist when it returns.

After an internal topic is created, the coordinator that owns it is told which of its partitions
this broker now leads (``on_election``, Kafka's ``GroupCoordinator.onElection``), so it loads
them and starts answering for their keys. An internal topic that already exists at start-up is
loaded by the coordinators themselves (``broker/coordinators/``): groups and
transactions recovered from existing logs do not wait for a FindCoordinator.

Invariant: an internal topic is created at most once; concurrent FindCoordinators for the same
missing topic share one creation.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass

from protocol.errors import ErrorCode, KafkaError

from .cluster.metadata import TopicInfo
from .config.resolution import validate_topic_configs
from .replica.partition import Partition
from .services import BrokerServices

log = logging.getLogger("samsa.topics")

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"


@dataclass(frozen=True, slots=True)
class InternalTopicSpec:
    """How an internal topic is created: the Kafka property for its segment size and its fixed
    configs. Its partition count is its coordinator's (``offsets.topic.num.partitions`` &c., read
    when the coordinator was built), since the coordinator hashes its keys onto that count."""

    segment_bytes_property: str
    configs: tuple[tuple[str, str], ...]


INTERNAL_TOPIC_SPECS: dict[str, InternalTopicSpec] = {
    GROUP_METADATA_TOPIC_NAME: InternalTopicSpec(
        "offsets.topic.segment.bytes",
        (("cleanup.policy", "compact"), ("compression.type", "producer"))),
    TRANSACTION_STATE_TOPIC_NAME: InternalTopicSpec(
        "transaction.state.log.segment.bytes",
        (("cleanup.policy", "compact"), ("compression.type", "uncompressed"))),
    # Kafka's share coordinator keeps its topic with cleanup.policy=delete and no retention: a
    # snapshot supersedes the records before it (groupcoord/share/state.py).
    SHARE_GROUP_STATE_TOPIC_NAME: InternalTopicSpec(
        "share.coordinator.state.topic.segment.bytes",
        (("cleanup.policy", "delete"), ("retention.ms", "-1"), ("compression.type", "producer"))),
}
DEFAULT_INTERNAL_SEGMENT_BYTES = 104857600  # Kafka's default for both *.segment.bytes

# One in-flight creation per (broker, internal topic); internal topics whose coordinator has
# been told about its local partitions (on_election is idempotent: this only saves the walk).
_inflight: weakref.WeakKeyDictionary[BrokerServices, dict[str, asyncio.Future[TopicInfo | None]]] = \
    weakref.WeakKeyDictionary()
_elected: weakref.WeakKeyDictionary[BrokerServices, set[str]] = weakref.WeakKeyDictionary()


async def create_topic(broker: BrokerServices, name: str, num_partitions: int,
                       configs: dict[str, str] | None = None) -> TopicInfo:
    """Create ``name`` through the broker's normal topic-creation path; KafkaError if refused.

    The one function the broker uses to create a topic by itself (internal topics, Metadata
    auto-creation). Configs are validated like CreateTopics' (INVALID_CONFIG with the reason).
    """
    checked = validate_topic_configs(dict(configs or {}), broker.config)
    return await broker.metadata_support.create_topic(name, num_partitions, checked)


async def auto_create_topic(broker: BrokerServices, name: str) -> TopicInfo | None:
    """Metadata's auto-creation of the unknown topic ``name``: an internal topic with its own spec,
    any other with ``num.partitions``. KafkaError for an invalid name; None if not created yet.

    In a cluster another broker may have created the topic a moment ago, before this broker's
    ZooKeeper watch told it. Never TOPIC_ALREADY_EXISTS then (clients take it as fatal in a
    Metadata answer; Kafka's ``KafkaApis.createTopic`` lets TopicExistsException go): the topic
    is read from ZooKeeper now and listed like any other, its partitions LEADER_NOT_AVAILABLE
    until the controller's UpdateMetadata arrives, or, if it is already gone again,
    LEADER_NOT_AVAILABLE for the topic as Kafka answers. Both are retriable; a topic-level error
    makes aiokafka's consumer start() fail when it asked the broker that lagged."""
    if name in INTERNAL_TOPIC_SPECS:
        return await ensure_internal_topic(broker, name)
    try:
        return await create_topic(broker, name, broker.config.int("num.partitions"))
    except KafkaError as e:
        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise
        info = await broker.metadata_support.refresh_topic(name)
        if info is None:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"Topic {name} is being created") from None
        return info


def internal_topic_request(broker: BrokerServices, name: str) -> tuple[int, dict[str, str]]:
    """(partitions, configs) for creating the internal topic ``name`` from the broker's config."""
    spec = INTERNAL_TOPIC_SPECS[name]
    partitions = _coordinator_partitions(broker, name)
    seg = broker.config.get(spec.segment_bytes_property) or DEFAULT_INTERNAL_SEGMENT_BYTES
    configs = {**dict(spec.configs), "segment.bytes": str(seg)}
    if name == TRANSACTION_STATE_TOPIC_NAME and broker.metadata_support.clustered:
        # replicated like Kafka's: its writes need transaction.state.log.min.isr in-sync replicas
        configs["min.insync.replicas"] = str(broker.config.get("transaction.state.log.min.isr") or 2)
    return partitions, configs


def _coordinator_partitions(broker: BrokerServices, name: str) -> int:
    """The partition count the coordinator hashes its keys onto (it started with it)."""
    if name == GROUP_METADATA_TOPIC_NAME:
        return broker.group_coordinator.config.offsets_topic_num_partitions
    if name == TRANSACTION_STATE_TOPIC_NAME:
        return broker.txn_coordinator.config.num_partitions
    return broker.share_coordinator.num_partitions


async def ensure_internal_topic(broker: BrokerServices, name: str) -> TopicInfo | None:
    """The internal topic ``name``, created on first need; None while it cannot be had yet
    (creation refused or still under way elsewhere: the caller answers COORDINATOR_NOT_AVAILABLE)."""
    info = broker.topics.get(name)
    if info is not None:
        elected = _elected.setdefault(broker, set())
        if name not in elected:  # created some other way (CreateTopics, an older Samsa): once
            elected.add(name)
            await elect_local_partitions(broker, name)
        return info
    pending = _inflight.setdefault(broker, {})
    fut = pending.get(name)
    if fut is not None:
        return await asyncio.shield(fut)
    fut = asyncio.get_running_loop().create_future()
    pending[name] = fut
    created: TopicInfo | None = None
    try:
        created = await _create_internal_topic(broker, name)
    finally:
        pending.pop(name, None)
        fut.set_result(created)  # waiters retry through the registry if this creation failed
    return created


async def _create_internal_topic(broker: BrokerServices, name: str) -> TopicInfo | None:
    partitions, configs = internal_topic_request(broker, name)
    try:
        info = await create_topic(broker, name, partitions, configs)
    except KafkaError as e:
        if e.code is ErrorCode.TOPIC_ALREADY_EXISTS:
            return broker.topics.get(name)
        log.warning("Could not create internal topic %s: %s", name, e)
        return None
    _elected.setdefault(broker, set()).add(name)
    await elect_local_partitions(broker, name)
    return info


async def elect_local_partitions(broker: BrokerServices, name: str) -> None:
    """Tell the coordinator owning internal topic ``name`` about the partitions led here (the
    transaction coordinator loads its partitions itself)."""
    if name == GROUP_METADATA_TOPIC_NAME:
        on_election = broker.group_coordinator.on_election
    elif name == SHARE_GROUP_STATE_TOPIC_NAME:
        on_election = broker.share_coordinator.on_election
    else:
        return
    info = broker.topics.get(name)
    if info is None:
        return
    for p in range(info.num_partitions):
        part = _local_partition(broker, name, p)
        if part is not None and part.leader_id == broker.broker_id:
            await on_election(p)
    log.debug("Coordinator of %s elected for its local partitions", name)


def _local_partition(broker: BrokerServices, topic: str, partition: int) -> Partition | None:
    try:
        return broker.replica_manager.get_partition(topic, partition)
    except KafkaError:
        return None
