"""The group coordinator on the broker's partitions of ``__consumer_offsets``.

``offsets.topic.num.partitions`` partitions, compacted, created by the first FindCoordinator for
a group (``broker/auto_topic_creation.py``), as in Kafka; an existing topic is replayed at start
and its partition count wins, since group ids are hashed onto it. Records are appended as plain
v2 batches (transactional ones for TxnOffsetCommit) and read back batch by batch for ``replay()``.
In a cluster this broker coordinates the groups of the partitions it leads: loaded when the
controller makes it their leader, unloaded when the leadership moves away.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator, Mapping

from groupcoord.config import GroupConfig
from groupcoord.coordinator import GroupCoordinator
from groupcoord.records import OFFSETS_TOPIC, Record
from groupcoord.storage import StoredRecord, build_batch, iter_batch_records
from log.coordinator_runtime import OnAppended

from ..cluster.metadata import TopicRegistry
from ..config.properties import BrokerConfig
from ..replica.replica_manager import ReplicaManager, TopicPartition
from .partition_writer import CoordinatorLoader, CoordinatorPartitionWriter

log = logging.getLogger("samsa.groups")


class ReplicaOffsetsStorage:
    """:class:`groupcoord.storage.OffsetsStorage` on ``__consumer_offsets``."""

    def __init__(self, writer: CoordinatorPartitionWriter, loader: CoordinatorLoader) -> None:
        self.writer = writer
        self.loader = loader

    async def append(self, partition: int, records: list[Record], *, producer_id: int = -1,
                     producer_epoch: int = -1, on_appended: OnAppended | None = None) -> int:
        batch = build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch)
        return await self.writer.append(OFFSETS_TOPIC, partition, batch, on_appended)

    def read_all(self, partition: int) -> Iterator[StoredRecord]:
        for raw in self.loader.batches(OFFSETS_TOPIC, partition):
            yield from iter_batch_records(raw)


class RegistryTopicsView(Mapping[str, tuple[uuid.UUID, int, bool]]):
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


class GroupLeadership:
    """Loads and unloads the groups of ``__consumer_offsets`` partitions as this broker's
    leadership of them changes (Kafka's ``onElection``/``onResignation``)."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, tp: TopicPartition, is_leader: bool, _leader_epoch: int) -> None:
        if tp.topic != OFFSETS_TOPIC:
            return
        coord, partition = self.coordinator, tp.partition
        if is_leader:
            if not coord.serves(partition):
                log.info("Loading the groups of %s-%d (this broker became its leader)", OFFSETS_TOPIC, partition)
                task = asyncio.get_running_loop().create_task(coord.on_election(partition))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        elif coord.serves(partition):
            coord.unload_partition(partition)
            log.info("Unloaded the groups of %s-%d (its leadership moved)", OFFSETS_TOPIC, partition)


async def start_group_coordinator(config: BrokerConfig, replica_manager: ReplicaManager, topics: TopicRegistry,
                                  group_overrides: dict[str, dict[str, str]], clustered: bool) -> GroupCoordinator:
    """Build the group coordinator and load what this broker coordinates. ``group_overrides``
    is the dynamic group configs' dict (broker/group_configs.py), shared, mutated in place."""
    group_config = GroupConfig.from_properties({name: config.get(name) for name in GroupConfig.property_names()})
    group_config.group_overrides = group_overrides
    existing = topics.get(OFFSETS_TOPIC)
    if existing is not None:
        group_config.offsets_topic_num_partitions = existing.num_partitions
    view = RegistryTopicsView(topics)
    storage = ReplicaOffsetsStorage(CoordinatorPartitionWriter(replica_manager), CoordinatorLoader(replica_manager))
    coord = GroupCoordinator(storage, group_config, topics=lambda: view)
    if clustered:
        # the partitions this broker leads arrive through LeaderAndIsr
        await coord.startup(())
        replica_manager.leadership_listeners.append(GroupLeadership(coord))
        return coord
    # An existing topic's groups load now; a missing one is created by the first FindCoordinator
    # for a group (broker/auto_topic_creation.py), which then hands its partitions to on_election.
    await coord.startup(range(existing.num_partitions) if existing is not None else ())
    if existing is not None:
        log.info("group coordinator loaded %d groups from %d partitions of %s", len(coord.groups),
                 group_config.offsets_topic_num_partitions, OFFSETS_TOPIC)
    return coord
