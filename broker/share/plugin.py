"""Binds share groups' broker side to a running broker (a component of ``broker.server``).

Creates the share coordinator (:class:`groupcoord.share.state.ShareCoordinator`) on the broker's
partitions of ``__share_group_state`` -- created on first need with
``share.coordinator.state.topic.num.partitions`` partitions, replayed at start when it exists --
and the :class:`~broker.share.manager.SharePartitionManager`, and tells the latter when the
group coordinator removes a share member or deletes a share group.

On a single broker this broker coordinates every ``__share_group_state`` partition. In a
cluster the share coordinator follows that topic's partition leadership (loading a partition's
states when this broker becomes its leader, forgetting them when it moves away), and partition
leaders reach it through :mod:`broker.share.persister` (Initialize/Read/WriteShareGroupState);
a broker that stops leading a data partition drops its share-partitions, which the new leader
rebuilds from the persisted state.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from groupcoord.coordinator import GroupCoordinator
from groupcoord.records import Record
from groupcoord.share.state import SHARE_STATE_TOPIC, ShareCoordinator
from groupcoord.storage import build_batch, iter_batch_records
from log.coordinator_runtime import OnAppended
from protocol.errors import ErrorCode, KafkaError
from protocol.records import validate_batches

from ..auto_topic_creation import ensure_internal_topic
from ..cluster.metadata import TopicInfo, TopicRegistry
from ..cluster.support import MetadataSupport
from ..config.properties import BrokerConfig
from ..group_configs import GroupConfigStore
from ..replica.replica_manager import ReplicaManager
from .manager import ShareConfig, SharePartitionManager

log = logging.getLogger("samsa.share")


class ShareBroker(Protocol):
    """What share groups' broker side needs of the broker that starts it (``broker.server.Broker``,
    which this layer cannot import; tests/txn/test_broker_protocols.py checks that it conforms).
    The two share attributes are this module's to fill in."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def topics(self) -> TopicRegistry: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def metadata_support(self) -> MetadataSupport: ...

    @property
    def group_coordinator(self) -> GroupCoordinator | None: ...

    @property
    def group_configs(self) -> GroupConfigStore | None: ...

    share_coordinator: ShareCoordinator | None
    share_partition_manager: SharePartitionManager | None


class BrokerShareStateStorage:
    """``__share_group_state`` on the broker's replica manager; ``ensure_topic`` creates the
    topic on first need (:func:`broker.auto_topic_creation.ensure_internal_topic`)."""

    def __init__(self, replicas: ReplicaManager,
                 ensure_topic: Callable[[str], Awaitable[TopicInfo | None]]) -> None:
        self.replicas = replicas
        self.ensure_topic = ensure_topic

    async def ensure(self) -> None:
        if await self.ensure_topic(SHARE_STATE_TOPIC) is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_STATE_TOPIC} is not available")

    async def append(self, partition: int, records: list[Record], *,
                     on_appended: OnAppended | None = None) -> int:
        batch = build_batch(records)
        info = await self.replicas.append_internal(
            SHARE_STATE_TOPIC, partition, validate_batches(batch), on_appended=on_appended)
        return info.first_offset

    def read_all(self, partition: int) -> Iterator[Record]:
        try:
            part = self.replicas.get_partition(SHARE_STATE_TOPIC, partition)
        except KafkaError:
            return
        for raw in part.log.read_batch_bytes(part.log_start_offset):
            for item in iter_batch_records(raw):
                if isinstance(item, tuple):
                    yield item


async def start(broker: ShareBroker) -> None:
    existing = broker.topics.get(SHARE_STATE_TOPIC)
    n = existing.num_partitions if existing is not None else \
        int(str(broker.config.get("share.coordinator.state.topic.num.partitions") or 50))
    per_snapshot = int(str(broker.config.get("share.coordinator.snapshot.update.records.per.snapshot") or 500))
    storage = BrokerShareStateStorage(broker.replica_manager, functools.partial(ensure_internal_topic, broker))
    coord = ShareCoordinator(storage, n, per_snapshot)
    broker.share_coordinator = coord
    metadata = broker.metadata_support
    if existing is not None and not metadata.clustered:
        for p in range(n):
            await coord.on_election(p)
        log.info("share coordinator loaded the state of %d share-partitions", len(coord.states))
    share_config = ShareConfig.from_broker(broker.config)
    store = broker.group_configs
    if store is not None:
        share_config.group_overrides = store.overrides
    manager = SharePartitionManager(broker.replica_manager, metadata, coord, share_config)
    manager.start()
    broker.share_partition_manager = manager
    if metadata.clustered:
        broker.replica_manager.leadership_listeners.append(
            lambda tp, is_leader, _epoch: _on_leadership(coord, manager, tp.topic, tp.partition, is_leader))
    gc = broker.group_coordinator
    if gc is not None:
        gc.share_member_removed.append(manager.on_member_removed)
        gc.share_group_deleted.append(manager.on_group_deleted)


def _on_leadership(coord: ShareCoordinator, manager: SharePartitionManager, topic: str, partition: int,
                   is_leader: bool) -> None:
    if topic == SHARE_STATE_TOPIC:
        if is_leader:
            task = asyncio.get_running_loop().create_task(coord.on_election(partition))
            _tasks.add(task)
            task.add_done_callback(_tasks.discard)
        else:
            coord.unload(partition)
    elif not is_leader:
        manager.on_leadership_lost(topic, partition)


_tasks: set[asyncio.Task[None]] = set()


async def stop(broker: ShareBroker) -> None:
    manager = broker.share_partition_manager
    if manager is not None:
        await manager.stop()
