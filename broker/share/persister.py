"""Share-partition state through the share coordinator that owns it (Kafka's
``DefaultStatePersister``).

A share-partition lives on its partition's leader; its state lives with the share coordinator:
the leader of the ``__share_group_state`` partition its key hashes to
(:meth:`groupcoord.share.state.ShareCoordinator.partition_for`). When that is this broker (always
on a single broker) the persister calls the coordinator directly; otherwise it sends the
inter-broker InitializeShareGroupState / ReadShareGroupState / WriteShareGroupState requests
/ DeleteShareGroupState (keys 83-86) to the coordinator's broker. Failures are KafkaErrors (NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE) for the caller to answer; nothing is retried here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from groupcoord.share.state import (
    SHARE_STATE_TOPIC,
    ShareCoordinator,
    SharePartitionKey,
    ShareState,
    StateBatch,
)
from protocol import kip932
from protocol.errors import ErrorCode, KafkaError


def owns(broker: Any, coordinator: ShareCoordinator, key: SharePartitionKey) -> bool:
    """Does this broker coordinate ``key``'s state (lead its ``__share_group_state`` partition)?"""
    if not broker.metadata_support.clustered:
        return True
    try:
        part = broker.replica_manager.get_partition(SHARE_STATE_TOPIC, coordinator.partition_for(key),
                                                    require_leader=False)
    except KafkaError:
        return False
    return bool(part.is_leader)


async def serve_state_request(ctx: Any, req: Any, result_cls: Any,
                              op: Callable[[ShareCoordinator, SharePartitionKey, Any], Awaitable[dict[str, Any]]],
                              defaults: dict[str, Any] | None = None) -> list[Any]:
    """The coordinator side of keys 83-86: for each requested partition, CLUSTER_ACTION or
    CLUSTER_AUTHORIZATION_FAILED, NOT_COORDINATOR unless this broker owns the key's state, else
    load it and run ``op(coordinator, key, partition)``, whose dict fills the partition result
    (``defaults`` when it fails). Returns the per-topic results of ``result_cls``."""
    from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, CLUSTER_NAME  # noqa: PLC0415

    P = result_cls.PartitionResult
    allowed = ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    coord = ctx.broker.share_coordinator
    out = []
    for t in req.topics or []:
        ps = []
        for p in t.partitions or []:
            key = (req.group_id, t.topic_id, p.partition)
            code, fields = ErrorCode.NONE, dict(defaults or {})
            if not allowed:
                code = CLUSTER_DENIED
            elif coord is None or not owns(ctx.broker, coord, key):
                code = ErrorCode.NOT_COORDINATOR
            else:
                try:
                    await coord.ensure_loaded(key)
                    fields.update(await op(coord, key, p))
                except KafkaError as e:
                    code, fields = e.code, dict(defaults or {})
            ps.append(P(partition=p.partition, error_code=int(code), error_message=None, **fields))
        out.append(result_cls(topic_id=t.topic_id, partitions=ps))
    return out


class SharePersister:
    def __init__(self, broker: Any, coordinator: ShareCoordinator) -> None:
        self.broker = broker
        self.coordinator = coordinator

    async def read(self, key: SharePartitionKey, leader_epoch: int = -1) -> ShareState | None:
        await self.coordinator.storage.ensure()
        if owns(self.broker, self.coordinator, key):
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
        if owns(self.broker, self.coordinator, key):
            await self.coordinator.ensure_loaded(key)
            await self.coordinator.initialize(key, start_offset, leader_epoch)
            return
        R = kip932.InitializeShareGroupStateRequest
        T = R.InitializeStateData
        self._result(await self._send(key, R(group_id=key[0], topics=[T(topic_id=key[1], partitions=[
            T.PartitionData(partition=key[2], state_epoch=0, start_offset=start_offset)])])))

    async def write(self, key: SharePartitionKey, start_offset: int, batches: list[StateBatch],
                    leader_epoch: int = -1) -> None:
        if owns(self.broker, self.coordinator, key):
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
        local = [k for k in keys if owns(self.broker, self.coordinator, k)]
        if local:
            await self.coordinator.delete(local)
        R = kip932.DeleteShareGroupStateRequest
        T = R.DeleteStateData
        for key in keys:
            if key in local:
                continue
            self._result(await self._send(key, R(group_id=key[0], topics=[T(topic_id=key[1], partitions=[
                T.PartitionData(partition=key[2])])])))

    async def _send(self, key: SharePartitionKey, request: Any) -> Any:
        cluster = self.broker.metadata_support
        leader = cluster.leader_of(SHARE_STATE_TOPIC, self.coordinator.partition_for(key))
        if leader < 0:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the share coordinator is not available")
        try:
            return await cluster.send_to_broker(leader, request, 0, timeout=15.0)
        except (ConnectionError, OSError, TimeoutError) as e:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"share coordinator {leader}: {e}") from e

    @staticmethod
    def _result(resp: Any) -> Any:
        r = resp.results[0].partitions[0]
        if r.error_code:
            raise KafkaError(ErrorCode(r.error_code), r.error_message or "")
        return r
