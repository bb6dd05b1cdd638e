"""ElectLeaders (key 43), versions 0-2: preferred/unclean leader election (KIP-183, KIP-460).

A single broker is the only replica, hence always the preferred and current leader of every
partition: there is never an election to run. Named partitions answer ELECTION_NOT_NEEDED
(as Kafka does for a partition already led by its preferred replica), unknown ones
UNKNOWN_TOPIC_OR_PARTITION. With ``topic_partitions = null`` ("all partitions") Kafka
leaves ELECTION_NOT_NEEDED partitions out of the answer, so the list is empty. v1 adds
``election_type`` (0 preferred, 1 unclean; both behave the same here) and a top-level
``error_code``; v2 is flexible. Kept for the cluster to come.
"""

from __future__ import annotations

from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import ALTER, CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


@api(ApiKey.ELECT_LEADERS, versions=(0, 2), authz=(
    Requires(ALTER, CLUSTER, CLUSTER_DENIED, "every partition (and the v1+ top-level error)"),))
async def handle_elect_leaders(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    R = ctx.response_class
    Result = R.ReplicaElectionResult
    PartR = Result.PartitionResult
    results = []
    if not ctx.authorize(ALTER, CLUSTER, CLUSTER_NAME):
        results = [Result(topic=t.topic, partition_result=[
            PartR(partition_id=p, error_code=int(CLUSTER_DENIED), error_message="Cluster authorization failed.")
            for p in t.partitions]) for t in req.topic_partitions or []]
        extra_err: dict[str, Any] = {"error_code": int(CLUSTER_DENIED)} if ctx.version >= 1 else {}
        return R(throttle_time_ms=0, replica_election_results=results, **extra_err)
    for t in req.topic_partitions or []:
        info = broker.topics.get(t.topic)
        parts = []
        for p in t.partitions:
            if info is None or not 0 <= p < info.num_partitions:
                parts.append(PartR(partition_id=p, error_code=int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                   error_message=f"The partition {t.topic}-{p} does not exist."))
            else:
                parts.append(PartR(partition_id=p, error_code=int(ErrorCode.ELECTION_NOT_NEEDED),
                                   error_message="Leader election not needed for topic partition."))
        results.append(Result(topic=t.topic, partition_result=parts))
    extra: dict[str, Any] = {"error_code": 0} if ctx.version >= 1 else {}
    return R(throttle_time_ms=0, replica_election_results=results, **extra)
