"""Kafka's ``CoordinatorPartitionWriter`` and ``CoordinatorLoader`` on the replica manager.

A coordinator writes its records as one batch to one partition of its internal topic and is
answered once every in-sync replica has them (acks=all); ``on_appended(last offset)`` runs as
soon as the batch is in the local log, so the coordinator applies the records there, once
(``log/coordinator_runtime.py``), never again when replication completes. The loader hands
back a partition's batches from its log start, for ``replay()`` when the partition is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from protocol.errors import KafkaError
from protocol.records import validate_batches

from ..replica.replica_manager import ReplicaManager


class CoordinatorPartitionWriter:
    """Appends a coordinator's batches to its internal topic through the replica manager."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    async def append(self, topic: str, partition: int, batch: bytes,
                     on_appended: Callable[[int], None] | None = None) -> int:
        """Append ``batch`` (v2 record batches) with acks=all; the first offset written."""
        info = await self.replica_manager.append_internal(topic, partition, validate_batches(batch),
                                                          on_appended=on_appended)
        return info.first_offset


class CoordinatorLoader:
    """Reads a coordinator's partition back, batch by batch, from its log start offset."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    def batches(self, topic: str, partition: int) -> Iterator[bytes]:
        """The partition's record batches as bytes; nothing when it is not hosted here."""
        try:
            part = self.replica_manager.get_partition(topic, partition)
        except KafkaError:
            return
        yield from part.log.read_batch_bytes(part.log_start_offset)
