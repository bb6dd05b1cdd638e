"""StopReplica (key 5), version 3: the controller tells a broker to stop following (controlled
shutdown, reassignment) or to delete (topic deletion) some of its replicas. Checked like
LeaderAndIsr; a leader epoch older than the local one is answered FENCED_LEADER_EPOCH for that
partition."""

from __future__ import annotations

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.inter_broker import StopReplicaRequest, StopReplicaResponse

from ..replica.replica_manager import TopicPartition
from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_DENIED, Requires
from . import RequestContext, api
from .leader_and_isr import check_from_controller


@api(ApiKey.STOP_REPLICA, versions=(3, 3), authz=(Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "from the controller / a broker"),))  # checked in check_from_controller
async def handle_stop_replica(ctx: RequestContext, req: StopReplicaRequest) -> StopReplicaResponse:
    R = ctx.response_class
    code = await check_from_controller(ctx, req.controller_id, req.controller_epoch)
    if code != ErrorCode.NONE:
        return R(error_code=int(code), partition_errors=[])
    rm = ctx.broker.replica_manager
    errors = []
    for t in req.topic_states:
        for p in t.partition_states:
            tp = TopicPartition(t.topic_name, p.partition_index)
            part = rm.partitions.get(tp)
            pcode = ErrorCode.NONE
            if part is not None and 0 <= p.leader_epoch < part.leader_epoch and not p.delete_partition:
                pcode = ErrorCode.FENCED_LEADER_EPOCH
            else:
                rm.remove_partitions([tp], delete=p.delete_partition)
            errors.append(R.StopReplicaPartitionError(topic_name=t.topic_name, partition_index=p.partition_index,
                                                      error_code=int(pcode)))
    return R(error_code=0, partition_errors=errors)
