"""DeleteShareGroupState (key 86), version 0, inter-broker: forget share-partitions' state (a
DeleteShareGroupOffsets of a topic whose state this broker's share coordinator keeps), written
as tombstones to ``__share_group_state`` (KIP-932; see :mod:`broker.share.persister`).

NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state`` partition.
Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from broker.share.persister import owns
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


@api(ApiKey.DELETE_SHARE_GROUP_STATE, versions=(0, 0), authz=(
    Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "every partition"),))
async def handle_delete_share_group_state(ctx: RequestContext, req: Any) -> Any:
    R = ctx.response_class
    T = R.DeleteStateResult
    P = T.PartitionResult
    allowed = ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME)
    coord = ctx.broker.share_coordinator
    manager = ctx.broker.share_partition_manager
    out = []
    for t in req.topics or []:
        ps = []
        for p in t.partitions or []:
            key = (req.group_id, t.topic_id, p.partition)
            code = ErrorCode.NONE
            if not allowed:
                code = CLUSTER_DENIED
            elif coord is None or not owns(ctx.broker, coord, key):
                code = ErrorCode.NOT_COORDINATOR
            else:
                try:
                    await coord.ensure_loaded(key)
                    await coord.delete([key])
                    if manager is not None:
                        manager.partitions.pop(key, None)
                except KafkaError as e:
                    code = e.code
            ps.append(P(partition=p.partition, error_code=int(code), error_message=None))
        out.append(T(topic_id=t.topic_id, partitions=ps))
    return R(results=out)
