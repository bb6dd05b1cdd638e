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
import logging
from collections.abc import Iterator
from typing import Any

from groupcoord.records import Record
from groupcoord.share.state import SHARE_STATE_TOPIC, ShareCoordinator
from groupcoord.storage import build_batch, iter_batch_records
from log.coordinator_runtime import OnAppended
from protocol.errors import KafkaError
from protocol.records import validate_batches

from .manager import ShareConfig, SharePartitionManager

log = logging.getLogger("samsa.share")


class BrokerShareStateStorage:
    """``__share_group_state`` on the broker's replica manager."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    async def ensure(self) -> None:
        from ..auto_topic_creation import ensure_internal_topic  # noqa: PLC0415

        if await ensure_internal_topic(self.broker, SHARE_STATE_TOPIC) is None:
            raise KafkaError(_coordinator_not_available(), f"{SHARE_STATE_TOPIC} is not available")

    async def append(self, partition: int, records: list[Record], *,
                     on_appended: OnAppended | None = None) -> int:
        batch = build_batch(records)
        info = await self.broker.replica_manager.append_internal(
            SHARE_STATE_TOPIC, partition, validate_batches(batch), on_appended=on_appended)
        return int(getattr(info, "first_offset", -1))

    def read_all(self, partition: int) -> Iterator[Record]:
        try:
            part = self.broker.replica_manager.get_partition(SHARE_STATE_TOPIC, partition)
        except KafkaError:
            return
        for raw in part.log.read_batch_bytes(part.log_start_offset):
            for item in iter_batch_records(raw):
                if isinstance(item, tuple):
                    yield item


def _coordinator_not_available() -> Any:
    from protocol.errors import ErrorCode  # noqa: PLC0415

    return ErrorCode.COORDINATOR_NOT_AVAILABLE


async def start(broker: Any) -> None:
    existing = broker.topics.get(SHARE_STATE_TOPIC)
    n = existing.num_partitions if existing is not None else \
        int(broker.config.get("share.coordinator.state.topic.num.partitions") or 50)
    per_snapshot = int(broker.config.get("share.coordinator.snapshot.update.records.per.snapshot") or 500)
    coord = ShareCoordinator(BrokerShareStateStorage(broker), n, per_snapshot)
    broker.share_coordinator = coord
    if existing is not None and not broker.metadata_support.clustered:
        for p in range(n):
            await coord.on_election(p)
        log.info("share coordinator loaded the state of %d share-partitions", len(coord.states))
    share_config = ShareConfig.from_broker(broker.config)
    store = getattr(broker, "group_configs", None)  # broker/group_configs.py: dynamic group configs
    if store is not None:
        share_config.group_overrides = store.overrides
    manager = SharePartitionManager(broker, coord, share_config)
    manager.start()
    broker.share_partition_manager = manager
    if broker.metadata_support.clustered:
        broker.replica_manager.leadership_listeners.append(
            lambda tp, is_leader, _epoch: _on_leadership(coord, manager, tp.topic, tp.partition, is_leader))
    gc = getattr(broker, "group_coordinator", None)
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


async def stop(broker: Any) -> None:
    manager = getattr(broker, "share_partition_manager", None)
    if manager is not None:
        await manager.stop()
