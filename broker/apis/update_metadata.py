"""UpdateMetadata (key 6), version 7: the controller's full view of the cluster (live brokers and
every partition's leader, ISR, replicas and offline replicas), applied to this broker's
:class:`~broker.cluster.metadata_cache.MetadataCache`, from which Metadata, FindCoordinator and
DescribeCluster answer. Checked like LeaderAndIsr (STALE_CONTROLLER_EPOCH,
CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.inter_broker import UpdateMetadataRequest, UpdateMetadataResponse

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, Requires
from . import RequestContext, api
from .leader_and_isr import check_from_controller


@api(ApiKey.UPDATE_METADATA, versions=(7, 7), authz=(Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "from the controller / a broker"),))  # checked in check_from_controller
async def handle_update_metadata(ctx: RequestContext, req: UpdateMetadataRequest) -> UpdateMetadataResponse:
    code = await check_from_controller(ctx, req.controller_id, req.controller_epoch)
    if code == ErrorCode.NONE:
        ctx.broker.metadata_support.apply_update_metadata(req)
        for t in req.topic_states:  # a topic we have not heard of yet (the watch is behind)
            if ctx.broker.topics.get(t.topic_name) is None:
                await ctx.broker.metadata_support.refresh_topic(t.topic_name)
    return ctx.response(error_code=int(code))
