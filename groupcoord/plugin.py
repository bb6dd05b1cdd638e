"""Binds the group coordinator to a running broker.

The broker imports this module on start and awaits :func:`start` (and :func:`stop` on
shutdown). Here :class:`~groupcoord.storage.OffsetsStorage` is implemented on the broker's own
partitions of ``__consumer_offsets`` (``offsets.topic.num.partitions``, compacted), created by
the first FindCoordinator for a group (``broker/auto_topic_creation.py``), as in Kafka; an
existing topic is replayed at start and its partition count wins, since group ids are hashed
onto it.
Records are appended as plain v2 batches (transactional ones for TxnOffsetCommit) through the
replica manager, and read back batch by batch at start-up for ``replay()``.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from log.coordinator_runtime import OnAppended
from log.log import AppendInfo, Log
from protocol.errors import KafkaError
from protocol.records import ValidatedRecords, validate_batches

from .coordinator import GroupConfig, GroupCoordinator
from .records import OFFSETS_TOPIC, Record
from .storage import StoredRecord, build_batch, iter_batch_records

log = logging.getLogger("samsa.groups")


# --- what this module needs of the broker (which it sits below, so cannot import) -------------

class HostedPartition(Protocol):
    @property
    def log(self) -> Log: ...

    @property
    def log_start_offset(self) -> int: ...


class ReplicaManager(Protocol):
    """The broker's replica manager, as ``__consumer_offsets`` storage uses it."""

    def get_partition(self, topic: str, partition: int) -> HostedPartition: ...

    async def append_internal(self, topic: str, partition: int, records: ValidatedRecords,
                              timeout: float = 30.0,
                              on_appended: Callable[[int], None] | None = None) -> AppendInfo: ...


class TopicInfo(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def topic_id(self) -> uuid.UUID: ...

    @property
    def num_partitions(self) -> int: ...

    @property
    def is_internal(self) -> bool: ...


class TopicRegistry(Protocol):
    """The broker's topics (its metadata), as consumer and share groups subscribe to them."""

    def get(self, name: str) -> TopicInfo | None: ...

    def __iter__(self) -> Iterator[TopicInfo]: ...


class BrokerProperties(Protocol):
    def get(self, key: str, default: object = None) -> object: ...


class BrokerOffsetsStorage:
    """``__consumer_offsets`` on the broker's replica manager."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    async def append(self, partition: int, records: list[Record], *, producer_id: int = -1,
                     producer_epoch: int = -1, on_appended: OnAppended | None = None) -> int:
        batch = build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch)
        info = await self.replica_manager.append_internal(
            OFFSETS_TOPIC, partition, validate_batches(batch), on_appended=on_appended)
        return int(getattr(info, "first_offset", -1))

    def read_all(self, partition: int) -> Iterator[StoredRecord]:
        try:
            part = self.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        except KafkaError:
            return
        for raw in part.log.read_batch_bytes(part.log_start_offset):
            yield from iter_batch_records(raw)


class BrokerTopicsView(Mapping[str, tuple[uuid.UUID, int, bool]]):
    """The broker's topics as consumer groups (KIP-848) see them: ``name -> (topic id,
    partitions, internal)``. A live view: a lookup by name is one registry lookup, so a heartbeat
    does not copy the topic list; only regex subscriptions iterate it."""

    def __init__(self, topics: TopicRegistry) -> None:
        self.topics = topics

    def __getitem__(self, name: str) -> tuple[uuid.UUID, int, bool]:
        info = self.topics.get(name)
        if info is None:
            raise KeyError(name)
        return info.topic_id, info.num_partitions, info.is_internal

    def __iter__(self) -> Iterator[str]:
        return (t.name for t in self.topics)

    def __len__(self) -> int:
        return sum(1 for _ in self.topics)


def _config(properties: BrokerProperties) -> GroupConfig:
    return GroupConfig.from_properties({name: properties.get(name)
                                        for name in GroupConfig.property_names()})


# The plugin hooks: broker/server.py calls them by module name (COMPONENTS) with the broker
# itself, which this layer cannot import (it is above groupcoord/): a dynamic boundary, hence Any.
async def start(broker: Any) -> None:
    config = _config(broker.config)
    store = getattr(broker, "group_configs", None)  # broker/group_configs.py: dynamic group configs
    if store is not None:
        config.group_overrides = store.overrides
    existing = broker.topics.get(OFFSETS_TOPIC)
    if existing is not None:
        config.offsets_topic_num_partitions = existing.num_partitions

    view = BrokerTopicsView(broker.topics)
    coord = GroupCoordinator(BrokerOffsetsStorage(broker.replica_manager), config, topics=lambda: view)
    broker.group_coordinator = coord
    if broker.metadata_support.clustered:
        # In a cluster this broker coordinates the groups of the __consumer_offsets partitions it
        # leads: loaded when the controller makes it their leader, unloaded when it moves away.
        await coord.startup(())
        broker.replica_manager.leadership_listeners.append(
            lambda tp, is_leader, _epoch: _on_leadership(coord, tp.topic, tp.partition, is_leader))
        return
    # An existing topic's groups load now; a missing one is created by the first FindCoordinator
    # for a group (broker/auto_topic_creation.py), which then hands its partitions to on_election.
    await coord.startup(range(existing.num_partitions) if existing is not None else ())
    if existing is not None:
        log.info("group coordinator loaded %d groups from %d partitions of %s", len(coord.groups),
                 config.offsets_topic_num_partitions, OFFSETS_TOPIC)


def _on_leadership(coord: GroupCoordinator, topic: str, partition: int, is_leader: bool) -> None:
    if topic != OFFSETS_TOPIC:
        return
    if is_leader:
        if not coord.serves(partition):
            log.info("Loading the groups of %s-%d (this broker became its leader)", OFFSETS_TOPIC, partition)
            task = asyncio.get_running_loop().create_task(coord.on_election(partition))
            _tasks.add(task)
            task.add_done_callback(_tasks.discard)
    elif coord.serves(partition):
        coord.unload_partition(partition)
        log.info("Unloaded the groups of %s-%d (its leadership moved)", OFFSETS_TOPIC, partition)


_tasks: set[asyncio.Task[None]] = set()


async def stop(broker: object) -> None:
    coord = getattr(broker, "group_coordinator", None)
    if coord is not None:
        await coord.shutdown()
