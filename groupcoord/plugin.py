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
from collections.abc import Iterator, Mapping
from typing import Any

from log.coordinator_runtime import OnAppended
from protocol.errors import KafkaError
from protocol.records import validate_batches

from .coordinator import GroupConfig, GroupCoordinator
from .records import OFFSETS_TOPIC, Record
from .storage import StoredRecord, build_batch, iter_batch_records

log = logging.getLogger("samsa.groups")


class BrokerOffsetsStorage:
    """``__consumer_offsets`` on the broker's replica manager."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    async def append(self, partition: int, records: list[Record], *, producer_id: int = -1,
                     producer_epoch: int = -1, on_appended: OnAppended | None = None) -> int:
        batch = build_batch(records, producer_id=producer_id, producer_epoch=producer_epoch)
        info = await self.broker.replica_manager.append_internal(
            OFFSETS_TOPIC, partition, validate_batches(batch), on_appended=on_appended)
        return int(getattr(info, "first_offset", -1))

    def read_all(self, partition: int) -> Iterator[StoredRecord]:
        try:
            part = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        except KafkaError:
            return
        for raw in part.log.read_batch_bytes(part.log_start_offset):
            yield from iter_batch_records(raw)


class BrokerTopicsView(Mapping[str, tuple[uuid.UUID, int, bool]]):
    """The broker's topics as consumer groups (KIP-848) see them: ``name -> (topic id,
    partitions, internal)``. A live view: a lookup by name is one registry lookup, so a heartbeat
    does not copy the topic list; only regex subscriptions iterate it."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    def __getitem__(self, name: str) -> tuple[uuid.UUID, int, bool]:
        info = self.broker.topics.get(name)
        if info is None:
            raise KeyError(name)
        return info.topic_id, info.num_partitions, info.is_internal

    def __iter__(self) -> Iterator[str]:
        return (t.name for t in self.broker.topics)

    def __len__(self) -> int:
        return sum(1 for _ in self.broker.topics)


def _config(broker: Any) -> GroupConfig:
    return GroupConfig.from_properties({name: broker.config.get(name)
                                        for name in GroupConfig.property_names()})


async def start(broker: Any) -> None:
    config = _config(broker)
    store = getattr(broker, "group_configs", None)  # broker/group_configs.py: dynamic group configs
    if store is not None:
        config.group_overrides = store.overrides
    existing = broker.topics.get(OFFSETS_TOPIC)
    if existing is not None:
        config.offsets_topic_num_partitions = existing.num_partitions

    view = BrokerTopicsView(broker)
    coord = GroupCoordinator(BrokerOffsetsStorage(broker), config, topics=lambda: view)
    broker.group_coordinator = coord
    if getattr(broker, "cluster", None) is not None:
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


async def stop(broker: Any) -> None:
    coord = getattr(broker, "group_coordinator", None)
    if coord is not None:
        await coord.shutdown()
