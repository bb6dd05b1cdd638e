"""The share coordinator's side of keys 83-86 (Initialize/Read/Write/DeleteShareGroupState), as
one loop the four handlers share. Not an API module: it registers nothing.

A partition leader sends these requests to the broker leading the key's ``__share_group_state``
partition (:mod:`broker.share.persister`); each request names partitions of one group by topic
id. For each partition: CLUSTER_AUTHORIZATION_FAILED without CLUSTER_ACTION on the cluster (as
Kafka's inter-broker APIs), NOT_COORDINATOR unless this broker owns the key's state, else the
state is loaded and the handler's operation runs; a KafkaError it raises is that partition's code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeAlias

from kafka.protocol.data_container import DataContainer

from groupcoord.share.state import ShareCoordinator, SharePartitionKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, CLUSTER_NAME
from ..share.persister import StateRequest, owns
from . import RequestContext

# What a handler does for one partition: (the coordinator, the key, the request's partition
# entry, e.g. WriteShareGroupStateRequest.WriteStateData.PartitionData) -> fields of its result.
StateOperation: TypeAlias = Callable[[ShareCoordinator, SharePartitionKey, DataContainer],
                                     Awaitable[Mapping[str, object]]]


async def serve_state_request(ctx: RequestContext, req: StateRequest, result_cls: type[DataContainer],
                              op: StateOperation,
                              defaults: Mapping[str, object] | None = None) -> list[DataContainer]:
    """Run ``op(coordinator, key, partition)`` for each requested partition this broker may and
    does coordinate; its fields fill the partition result (``defaults`` when it fails or is not
    run). Returns the per-topic results, of ``result_cls`` (the response's ``*StateResult``)."""
    P = result_cls.PartitionResult
    allowed = ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    broker = ctx.broker
    coord: ShareCoordinator | None = broker.share_coordinator
    out = []
    for t in req.topics or []:
        ps = []
        for p in t.partitions or []:
            key: SharePartitionKey = (req.group_id, t.topic_id, p.partition)
            code, fields = ErrorCode.NONE, dict(defaults or {})
            if not allowed:
                code = CLUSTER_DENIED
            elif coord is None or not owns(broker.metadata_support, broker.replica_manager, coord, key):
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
