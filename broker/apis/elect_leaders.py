"""ElectLeaders (key 43), versions 0-2: preferred/unclean leader election (KIP-183, KIP-460).

A single broker is the only replica, hence always the preferred and current leader of every
partition: there is never an election to run. Named partitions answer ELECTION_NOT_NEEDED
(as Kafka does for a partition already led by its preferred replica), unknown ones
UNKNOWN_TOPIC_OR_PARTITION. With ``topic_partitions = null`` ("all partitions") Kafka
leaves ELECTION_NOT_NEEDED partitions out of the answer, so the list is empty. v1 adds
``election_type`` (0 preferred, 1 unclean; both behave the same here) and a top-level
``error_code``; v2 is flexible.

In a cluster the request is served by the active controller (others answer NOT_CONTROLLER, and
admin clients send it to the controller): PREFERRED moves each partition's leadership to its
first replica when that replica is alive and in sync (ELECTION_NOT_NEEDED if it already leads,
PREFERRED_LEADER_NOT_AVAILABLE otherwise); UNCLEAN gives a leaderless partition any live
replica (ELIGIBLE_LEADERS_NOT_AVAILABLE when none is). With ``topic_partitions = null`` every
partition is considered and the ELECTION_NOT_NEEDED ones are left out of the answer.
"""

from __future__ import annotations

from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import ALTER, CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


@api(ApiKey.ELECT_LEADERS, versions=(0, 2), authz=(
    Requires(ALTER, CLUSTER, CLUSTER_DENIED, "every partition (and the v1+ top-level error)"),))
async def handle_elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    broker = ctx.broker
    R = ctx.response_class
    Result = R.ReplicaElectionResult
    PartR = Result.PartitionResult
    results = []
    if not ctx.authorize(ALTER, CLUSTER, CLUSTER_NAME):
        results = [Result(topic=t.topic, partition_result=[
            PartR(partition_id=p, error_code=int(CLUSTER_DENIED), error_message="Cluster authorization failed.")
            for p in t.partitions]) for t in req.topic_partitions or []]
        extra_err: dict[str, object] = {"error_code": int(CLUSTER_DENIED)} if ctx.version >= 1 else {}
        return R(throttle_time_ms=0, replica_election_results=results, **extra_err)
    extra: dict[str, object] = {"error_code": 0} if ctx.version >= 1 else {}
    tps = None if req.topic_partitions is None else [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    unclean = ctx.version >= 1 and req.election_type == 1
    try:
        elected = await broker.metadata_support.elect_leaders(tps, unclean, max(req.timeout_ms, 1000) / 1000)
    except KafkaError as e:
        if ctx.version >= 1:
            return R(throttle_time_ms=0, error_code=int(e.code), replica_election_results=[])
        return R(throttle_time_ms=0, replica_election_results=[
            Result(topic=t.topic, partition_result=[PartR(partition_id=p, error_code=int(e.code), error_message=None)
                                                    for p in t.partitions])
            for t in req.topic_partitions or []])
    by_topic: dict[str, list[DataContainer]] = {}
    for (topic, p), code in elected.items():
        if tps is None and code == ErrorCode.ELECTION_NOT_NEEDED:
            continue
        message = _MESSAGES.get(code) if code else None
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            message = f"The partition {topic}-{p} does not exist."
        by_topic.setdefault(topic, []).append(PartR(partition_id=p, error_code=int(code), error_message=message))
    return R(throttle_time_ms=0, replica_election_results=[Result(topic=t, partition_result=ps)
                                                           for t, ps in by_topic.items()], **extra)


_MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "Failed to elect leader: the preferred replica is not alive or in sync.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Failed to elect leader: no live replica.",
}
