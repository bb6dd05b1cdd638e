"""ControlledShutdown (key 7), version 3: a stopping broker asks the controller to move its
leaderships away first. Served by the active controller only (NOT_CONTROLLER elsewhere); the
answer lists the partitions that could not move (no other live in-sync replica)."""

from __future__ import annotations

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.inter_broker import ControlledShutdownRequest, ControlledShutdownResponse

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


@api(ApiKey.CONTROLLED_SHUTDOWN, versions=(3, 3), authz=(Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "from the controller / a broker"),))
async def handle_controlled_shutdown(ctx: RequestContext, req: ControlledShutdownRequest) -> ControlledShutdownResponse:
    R = ctx.response_class
    broker = ctx.broker
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return R(error_code=int(CLUSTER_DENIED), remaining_partitions=[])
    if not await broker.metadata_support.is_cluster_member(req.broker_id):
        return R(error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), remaining_partitions=[])
    try:
        remaining = await broker.metadata_support.shut_down_broker(req.broker_id, 30)
    except KafkaError as e:
        return R(error_code=int(e.code), remaining_partitions=[])
    return R(error_code=0, remaining_partitions=[R.RemainingPartition(topic_name=t, partition_index=p)
                                                 for t, p in remaining])
