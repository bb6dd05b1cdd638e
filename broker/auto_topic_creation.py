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
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from protocol.errors import ErrorCode, KafkaError

from .cluster.metadata import TopicInfo
from .config.resolution import validate_topic_configs

log = logging.getLogger("samsa.topics")

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"


@dataclass(frozen=True, slots=True)
class InternalTopicSpec:
    """How an internal topic is created: Kafka property names for its size, its fixed configs,
    and the broker attribute holding the coordinator that owns it."""

    partitions_property: str
    segment_bytes_property: str
    configs: tuple[tuple[str, str], ...]
    coordinator_attr: str


INTERNAL_TOPIC_SPECS: dict[str, InternalTopicSpec] = {
    GROUP_METADATA_TOPIC_NAME: InternalTopicSpec(
        "offsets.topic.num.partitions", "offsets.topic.segment.bytes",
        (("cleanup.policy", "compact"), ("compression.type", "producer")), "group_coordinator"),
    TRANSACTION_STATE_TOPIC_NAME: InternalTopicSpec(
        "transaction.state.log.num.partitions", "transaction.state.log.segment.bytes",
        (("cleanup.policy", "compact"), ("compression.type", "uncompressed")), "txn_coordinator"),
    # Kafka's share coordinator keeps its topic with cleanup.policy=delete and no retention: a
    # snapshot supersedes the records before it (groupcoord/share/state.py).
    SHARE_GROUP_STATE_TOPIC_NAME: InternalTopicSpec(
        "share.coordinator.state.topic.num.partitions", "share.coordinator.state.topic.segment.bytes",
        (("cleanup.policy", "delete"), ("retention.ms", "-1"), ("compression.type", "producer")),
        "share_coordinator"),
}
DEFAULT_INTERNAL_SEGMENT_BYTES = 104857600  # Kafka's default for both *.segment.bytes

# One in-flight creation per (broker, internal topic); internal topics whose coordinator has
# been told about its local partitions (on_election is idempotent: this only saves the walk).
_inflight: weakref.WeakKeyDictionary[Any, dict[str, asyncio.Future[TopicInfo | None]]] = \
    weakref.WeakKeyDictionary()
_elected: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


async def create_topic(broker: Any, name: str, num_partitions: int,
                       configs: dict[str, str] | None = None) -> TopicInfo:
    """Create ``name`` through the broker's normal topic-creation path; KafkaError if refused.

    The one function the broker uses to create a topic by itself (internal topics, Metadata
    auto-creation). Configs are validated like CreateTopics' (INVALID_CONFIG with the reason).
    """
    checked = validate_topic_configs(dict(configs or {}), broker.config)
    return await broker.metadata_support.create_topic(name, num_partitions, checked)  # type: ignore[no-any-return]


async def auto_create_topic(broker: Any, name: str) -> TopicInfo | None:
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
        return info  # type: ignore[no-any-return]


def internal_topic_request(broker: Any, name: str) -> tuple[int, dict[str, str]]:
    """(partitions, configs) for creating the internal topic ``name`` from the broker's config."""
    spec = INTERNAL_TOPIC_SPECS[name]
    coord = getattr(broker, spec.coordinator_attr, None)
    # The coordinator hashes its keys onto the partition count it started with: use that count.
    partitions = _coordinator_partitions(coord, name)
    if partitions is None:
        partitions = int(broker.config.get(spec.partitions_property) or 50)
    seg = broker.config.get(spec.segment_bytes_property) or DEFAULT_INTERNAL_SEGMENT_BYTES
    configs = {**dict(spec.configs), "segment.bytes": str(seg)}
    if name == TRANSACTION_STATE_TOPIC_NAME and broker.metadata_support.clustered:
        # replicated like Kafka's: its writes need transaction.state.log.min.isr in-sync replicas
        configs["min.insync.replicas"] = str(broker.config.get("transaction.state.log.min.isr") or 2)
    return partitions, configs


def _coordinator_partitions(coord: Any, name: str) -> int | None:
    config = getattr(coord, "config", None)
    attr = "offsets_topic_num_partitions" if name == GROUP_METADATA_TOPIC_NAME else "num_partitions"
    n = getattr(config, attr, None)
    return n if isinstance(n, int) and n > 0 else None


async def ensure_internal_topic(broker: Any, name: str) -> TopicInfo | None:
    """The internal topic ``name``, created on first need; None while it cannot be had yet
    (creation refused or still under way elsewhere: the caller answers COORDINATOR_NOT_AVAILABLE)."""
    info = broker.topics.get(name)
    if info is not None:
        elected = _elected.setdefault(broker, set())
        if name not in elected:  # created some other way (CreateTopics, an older Samsa): once
            elected.add(name)
            await elect_local_partitions(broker, name)
        return info  # type: ignore[no-any-return]
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


async def _create_internal_topic(broker: Any, name: str) -> TopicInfo | None:
    partitions, configs = internal_topic_request(broker, name)
    try:
        info = await create_topic(broker, name, partitions, configs)
    except KafkaError as e:
        if e.code is ErrorCode.TOPIC_ALREADY_EXISTS:
            return broker.topics.get(name)  # type: ignore[no-any-return]
        log.warning("Could not create internal topic %s: %s", name, e)
        return None
    _elected.setdefault(broker, set()).add(name)
    await elect_local_partitions(broker, name)
    return info


async def elect_local_partitions(broker: Any, name: str) -> None:
    """Tell the coordinator owning internal topic ``name`` about the partitions led here."""
    coord = getattr(broker, INTERNAL_TOPIC_SPECS[name].coordinator_attr, None)
    on_election = getattr(coord, "on_election", None)
    info = broker.topics.get(name)
    if on_election is None or info is None:
        return
    for p in range(info.num_partitions):
        part = _local_partition(broker, name, p)
        if part is not None and getattr(part, "leader_id", -1) == broker.broker_id:
            r = on_election(p)
            if isinstance(r, Awaitable):
                await r
    log.debug("Coordinator of %s elected for its local partitions", name)


def _local_partition(broker: Any, topic: str, partition: int) -> Any:
    try:
        return broker.replica_manager.get_partition(topic, partition)
    except KafkaError:
        return None
