"""ReadShareGroupState (key 84), version 0, inter-broker: a partition leader reads the persisted
state of its share-partitions from the share coordinator that owns them (KIP-932; see
:mod:`broker.share.persister`, :mod:`broker.apis.share_state_requests`).

For each (group, topic id, partition): the start offset, state epoch and state batches the
coordinator holds (:mod:`groupcoord.share.state`), StartOffset -1 when there is none.
NOT_COORDINATOR when this broker does not lead the key's ``__share_group_state`` partition.
Authorization: CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED), as Kafka's
inter-broker APIs.
"""

from __future__ import annotations

from kafka.protocol.data_container import DataContainer

from groupcoord.share.state import ShareCoordinator, SharePartitionKey
from protocol.api_keys import ApiKey
from protocol.kip932 import ReadShareGroupStateRequest, ReadShareGroupStateResponse

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, Requires
from . import RequestContext, api
from .share_state_requests import serve_state_request


@api(ApiKey.READ_SHARE_GROUP_STATE, versions=(0, 0), authz=(
    Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "every partition"),))
async def handle_read_share_group_state(ctx: RequestContext, req: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    R = ctx.response_class
    T = R.ReadStateResult
    Batch = T.PartitionResult.StateBatch

    async def read(coord: ShareCoordinator, key: SharePartitionKey, p: DataContainer) -> dict[str, object]:
        state = coord.read_state(key)
        if state is None:
            return {}
        return dict(state_epoch=state.state_epoch, start_offset=state.start_offset,
                    state_batches=[Batch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                                   for f, la, s, c in state.batches])
    return R(results=await serve_state_request(ctx, req, T, read,
                                               dict(state_epoch=0, start_offset=-1, state_batches=[])))
