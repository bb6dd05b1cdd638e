"""DeleteShareGroupState (key 86), version 0, inter-broker: forget share-partitions' state (a
DeleteShareGroupOffsets of a topic whose state this broker's share coordinator keeps), written
as tombstones to ``__share_group_state`` (KIP-932; see :mod:`broker.share.persister`,
:mod:`broker.apis.share_state_requests`).

NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state`` partition.
Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kafka.protocol.data_container import DataContainer

from broker.share.manager import SharePartitionManager
from groupcoord.share.state import ShareCoordinator, SharePartitionKey
from protocol.api_keys import ApiKey
from protocol.kip932 import DeleteShareGroupStateRequest, DeleteShareGroupStateResponse

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, Requires
from . import RequestContext, api
from .share_state_requests import serve_state_request


@api(ApiKey.DELETE_SHARE_GROUP_STATE, versions=(0, 0), authz=(
    Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "every partition"),))
async def handle_delete_share_group_state(ctx: RequestContext, req: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    manager: SharePartitionManager | None = ctx.broker.share_partition_manager

    async def delete(coord: ShareCoordinator, key: SharePartitionKey, p: DataContainer) -> dict[str, object]:
        await coord.delete([key])
        if manager is not None:
            manager.partitions.pop(key, None)
        return {}
    R = ctx.response_class
    return R(results=await serve_state_request(ctx, req, R.DeleteStateResult, delete))
