"""LeaderAndIsr (key 4), version 5: the controller tells a broker which of its replicas lead and
which follow (Kafka's ZooKeeper mode).

For each partition: a leader epoch older than the one applied is ignored; a partition this
broker leads now starts accepting produces and tracking its followers; one it follows is handed
to the replica fetcher for its leader (after truncating a divergent tail, KIP-101). A request
from a controller with an epoch older than the latest seen gets STALE_CONTROLLER_EPOCH; one from
anything that is not a broker of this cluster (or to a broker not in a cluster) gets
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.inter_broker import LeaderAndIsrRequest, LeaderAndIsrResponse

from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


async def check_from_controller(ctx: RequestContext, controller_id: int, controller_epoch: int) -> ErrorCode:
    """The checks every controller request passes before it is applied."""
    broker = ctx.broker
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return CLUSTER_DENIED
    if not await broker.metadata_support.is_cluster_member(controller_id):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    try:
        broker.replica_manager.check_controller_epoch(controller_epoch)
    except KafkaError as e:
        return e.code
    return ErrorCode.NONE


@api(ApiKey.LEADER_AND_ISR, versions=(5, 5), authz=(Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "from the controller / a broker"),))
async def handle_leader_and_isr(ctx: RequestContext, req: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    R = ctx.response_class
    PE = R.LeaderAndIsrPartitionError
    code = await check_from_controller(ctx, req.controller_id, req.controller_epoch)
    if code != ErrorCode.NONE:
        return R(error_code=int(code), partition_errors=[])
    broker = ctx.broker
    rm = broker.replica_manager
    errors = []
    for t in req.topic_states:
        if broker.topics.get(t.topic_name) is None:
            await broker.metadata_support.refresh_topic(t.topic_name)  # the watch has not fired yet
        for p in t.partition_states:
            pcode = rm.become_leader_or_follower(t.topic_name, p.partition_index, p.leader, p.leader_epoch,
                                                 list(p.isr), list(p.replicas), p.zk_version, p.controller_epoch)
            errors.append(PE(topic_name=t.topic_name, partition_index=p.partition_index, error_code=int(pcode)))
    return R(error_code=0, partition_errors=errors)
