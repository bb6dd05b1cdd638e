"""The share coordinator (KIP-932) on the broker's partitions of ``__share_group_state``.

``share.coordinator.state.topic.num.partitions`` partitions, created on first need, replayed at
start when the topic exists. On a single broker this broker coordinates every partition. In a
cluster the share coordinator follows that topic's partition leadership (loading a partition's
states when this broker becomes its leader, forgetting them when it moves away), and a broker
that stops leading a data partition drops its share-partitions, which the new leader rebuilds
from the persisted state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator

from groupcoord.records import Record
from groupcoord.share.state import SHARE_STATE_TOPIC, ShareCoordinator
from groupcoord.storage import build_batch, iter_batch_records
from log.coordinator_runtime import OnAppended
from protocol.errors import ErrorCode, KafkaError

from ..cluster.metadata import TopicInfo, TopicRegistry
from ..config.properties import BrokerConfig
from ..replica.replica_manager import ReplicaManager, TopicPartition
from ..share.manager import SharePartitionManager
from .partition_writer import CoordinatorLoader, CoordinatorPartitionWriter

log = logging.getLogger("samsa.share")


class ReplicaShareStateStorage:
    """:class:`groupcoord.share.state.ShareStateStorage` on ``__share_group_state``."""

    def __init__(self, writer: CoordinatorPartitionWriter, loader: CoordinatorLoader,
                 ensure_topic: Callable[[], Awaitable[TopicInfo | None]]) -> None:
        self.writer = writer
        self.loader = loader
        self.ensure_topic = ensure_topic  # the topic, created on first need

    async def ensure(self) -> None:
        if await self.ensure_topic() is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_STATE_TOPIC} is not available")

    async def append(self, partition: int, records: list[Record], *,
                     on_appended: OnAppended | None = None) -> int:
        return await self.writer.append(SHARE_STATE_TOPIC, partition, build_batch(records), on_appended)

    def read_all(self, partition: int) -> Iterator[Record]:
        for raw in self.loader.batches(SHARE_STATE_TOPIC, partition):
            for item in iter_batch_records(raw):
                if isinstance(item, tuple):
                    yield item


async def start_share_coordinator(config: BrokerConfig, replica_manager: ReplicaManager, topics: TopicRegistry,
                                  ensure_topic: Callable[[], Awaitable[TopicInfo | None]],
                                  clustered: bool) -> ShareCoordinator:
    """Build the share coordinator; on a single broker, load an existing topic's states now."""
    existing = topics.get(SHARE_STATE_TOPIC)
    n = existing.num_partitions if existing is not None else \
        int(str(config.get("share.coordinator.state.topic.num.partitions") or 50))
    per_snapshot = int(str(config.get("share.coordinator.snapshot.update.records.per.snapshot") or 500))
    storage = ReplicaShareStateStorage(CoordinatorPartitionWriter(replica_manager), CoordinatorLoader(replica_manager),
                                       ensure_topic)
    coord = ShareCoordinator(storage, n, per_snapshot)
    if existing is not None and not clustered:
        for p in range(n):
            await coord.on_election(p)
        log.info("share coordinator loaded the state of %d share-partitions", len(coord.states))
    return coord


class ShareLeadership:
    """In a cluster: the share coordinator follows ``__share_group_state``'s leadership, and the
    share-partitions of a data partition this broker stops leading are dropped."""

    def __init__(self, coordinator: ShareCoordinator, manager: SharePartitionManager) -> None:
        self.coordinator = coordinator
        self.manager = manager
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, tp: TopicPartition, is_leader: bool, _leader_epoch: int) -> None:
        if tp.topic == SHARE_STATE_TOPIC:
            if is_leader:
                task = asyncio.get_running_loop().create_task(self.coordinator.on_election(tp.partition))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                self.coordinator.unload(tp.partition)
        elif not is_leader:
            self.manager.on_leadership_lost(tp.topic, tp.partition)
