"""InitializeShareGroupState (key 83), version 0, inter-broker: a share-partition's first state
(the start offset ``share.auto.offset.reset`` chose, or one AlterShareGroupOffsets set), written
by the share coordinator that owns it as a ShareSnapshot (KIP-932; see
:mod:`broker.share.persister`, :mod:`broker.apis.share_state_requests`).

NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state`` partition.
Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kafka.protocol.data_container import DataContainer

from groupcoord.share.state import ShareCoordinator, SharePartitionKey
from protocol.api_keys import ApiKey
from protocol.kip932 import InitializeShareGroupStateRequest, InitializeShareGroupStateResponse

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, Requires
from . import RequestContext, api
from .share_state_requests import serve_state_request


@api(ApiKey.INITIALIZE_SHARE_GROUP_STATE, versions=(0, 0), authz=(
    Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "every partition"),))
async def handle_initialize_share_group_state(ctx: RequestContext, req: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    async def initialize(coord: ShareCoordinator, key: SharePartitionKey, p: DataContainer) -> dict[str, object]:
        await coord.initialize(key, p.start_offset, -1)
        return {}
    R = ctx.response_class
    return R(results=await serve_state_request(ctx, req, R.InitializeStateResult, initialize))
