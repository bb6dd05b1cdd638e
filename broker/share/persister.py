"""Share-partition state through the share coordinator that owns it (Kafka's
``DefaultStatePersister``).

A share-partition lives on its partition's leader; its state lives with the share coordinator:
the leader of the ``__share_group_state`` partition its key hashes to
(:meth:`groupcoord.share.state.ShareCoordinator.partition_for`). When that is this broker (always
on a single broker) the persister calls the coordinator directly; otherwise it sends the
inter-broker InitializeShareGroupState / ReadShareGroupState / WriteShareGroupState requests
/ DeleteShareGroupState (keys 83-86) to the coordinator's broker, whose handlers answer them
(:mod:`broker.apis.share_state_requests`). Failures are KafkaErrors (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE) for the caller to answer; nothing is retried here.
"""

from __future__ import annotations

from typing import TypeAlias

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer

from groupcoord.share.state import (
    SHARE_STATE_TOPIC,
    ShareCoordinator,
    SharePartitionKey,
    ShareState,
    StateBatch,
)
from protocol import kip932
from protocol.errors import ErrorCode, KafkaError

from ..cluster.support import MetadataSupport
from ..replica.replica_manager import ReplicaManager

# The inter-broker requests the persister sends to a share coordinator on another broker.
StateRequest: TypeAlias = ("kip932.InitializeShareGroupStateRequest | kip932.ReadShareGroupStateRequest"
                           " | kip932.WriteShareGroupStateRequest | kip932.DeleteShareGroupStateRequest")


def owns(metadata: MetadataSupport, replicas: ReplicaManager, coordinator: ShareCoordinator,
         key: SharePartitionKey) -> bool:
    """Does this broker coordinate ``key``'s state (lead its ``__share_group_state`` partition)?"""
    if not metadata.clustered:
        return True  # a single broker leads every partition
    try:
        part = replicas.get_partition(SHARE_STATE_TOPIC, coordinator.partition_for(key), require_leader=False)
    except KafkaError:
        return False
    return part.is_leader


class SharePersister:
    """A partition leader's way to its share-partitions' state, wherever the coordinator is."""

    def __init__(self, metadata: MetadataSupport, replicas: ReplicaManager,
                 coordinator: ShareCoordinator) -> None:
        self.metadata = metadata
        self.replicas = replicas
        self.coordinator = coordinator

    def owns(self, key: SharePartitionKey) -> bool:
        return owns(self.metadata, self.replicas, self.coordinator, key)

    async def read(self, key: SharePartitionKey, leader_epoch: int = -1) -> ShareState | None:
        await self.coordinator.storage.ensure()
        if self.owns(key):
            await self.coordinator.ensure_loaded(key)
            return self.coordinator.read_state(key)
        R = kip932.ReadShareGroupStateRequest
        T = R.ReadStateData
        resp = await self._send(key, R(group_id=key[0], topics=[T(topic_id=key[1], partitions=[
            T.PartitionData(partition=key[2], leader_epoch=leader_epoch)])]))
        r = self._result(resp)
        if r.start_offset < 0:
            return None
        return ShareState(r.start_offset, [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                           for b in r.state_batches or []], r.state_epoch)

    async def initialize(self, key: SharePartitionKey, start_offset: int, leader_epoch: int) -> None:
        if self.owns(key):
            await self.coordinator.ensure_loaded(key)
            await self.coordinator.initialize(key, start_offset, leader_epoch)
            return
        R = kip932.InitializeShareGroupStateRequest
        T = R.InitializeStateData
        self._result(await self._send(key, R(group_id=key[0], topics=[T(topic_id=key[1], partitions=[
            T.PartitionData(partition=key[2], state_epoch=0, start_offset=start_offset)])])))

    async def write(self, key: SharePartitionKey, start_offset: int, batches: list[StateBatch],
                    leader_epoch: int = -1) -> None:
        if self.owns(key):
            await self.coordinator.ensure_loaded(key)
            await self.coordinator.write(key, start_offset, batches, leader_epoch)
            return
        R = kip932.WriteShareGroupStateRequest
        T = R.WriteStateData
        P = T.PartitionData
        self._result(await self._send(key, R(group_id=key[0], topics=[T(topic_id=key[1], partitions=[P(
            partition=key[2], state_epoch=0, leader_epoch=leader_epoch, start_offset=start_offset,
            state_batches=[P.StateBatch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                           for f, la, s, c in batches])])])))

    async def delete(self, keys: list[SharePartitionKey]) -> None:
        """Forget the state of ``keys`` wherever it is kept (Kafka's DeleteShareGroupState)."""
        local = [k for k in keys if self.owns(k)]
        if local:
            await self.coordinator.delete(local)
        R = kip932.DeleteShareGroupStateRequest
        T = R.DeleteStateData
        for key in keys:
            if key in local:
                continue
            self._result(await self._send(key, R(group_id=key[0], topics=[T(topic_id=key[1], partitions=[
                T.PartitionData(partition=key[2])])])))

    async def _send(self, key: SharePartitionKey, request: StateRequest) -> ApiMessage:
        leader = self.metadata.leader_of(SHARE_STATE_TOPIC, self.coordinator.partition_for(key))
        if leader < 0:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the share coordinator is not available")
        try:
            return await self.metadata.send_to_broker(leader, request, 0, timeout=15.0)
        except (ConnectionError, OSError, TimeoutError) as e:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"share coordinator {leader}: {e}") from e

    @staticmethod
    def _result(resp: ApiMessage) -> DataContainer:
        """The one partition result of a keys 83-86 response, or its error raised."""
        r = resp.results[0].partitions[0]
        if r.error_code:
            raise KafkaError(ErrorCode(r.error_code), r.error_message or "")
        return r
