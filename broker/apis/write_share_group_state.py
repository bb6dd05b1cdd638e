"""WriteShareGroupState (key 85), version 0, inter-broker: a partition leader records what changed
in its share-partitions (start offset, state batches) with the share coordinator that owns them
(KIP-932; see :mod:`broker.share.persister`, :mod:`broker.apis.share_state_requests`). The
coordinator writes a ShareUpdate (or every so many a ShareSnapshot) to ``__share_group_state``
before answering.

NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state`` partition.
Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from kafka.protocol.data_container import DataContainer

from groupcoord.share.state import ShareCoordinator, SharePartitionKey
from protocol.api_keys import ApiKey
from protocol.kip932 import WriteShareGroupStateRequest, WriteShareGroupStateResponse

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, Requires
from . import RequestContext, api
from .share_state_requests import serve_state_request


@api(ApiKey.WRITE_SHARE_GROUP_STATE, versions=(0, 0), authz=(
    Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "every partition"),))
async def handle_write_share_group_state(ctx: RequestContext, req: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    async def write(coord: ShareCoordinator, key: SharePartitionKey, p: DataContainer) -> dict[str, object]:
        await coord.write(key, p.start_offset, [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches or []], p.leader_epoch)
        return {}
    R = ctx.response_class
    return R(results=await serve_state_request(ctx, req, R.WriteStateResult, write))
