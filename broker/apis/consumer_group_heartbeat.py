"""ConsumerGroupHeartbeat (key 68), versions 0-1: the KIP-848 consumer group protocol.

One request does what JoinGroup, SyncGroup, Heartbeat and LeaveGroup do in the classic
protocol: the member sends its subscription (topic names or a regex), its owned partitions and
its member epoch; the coordinator answers with its epoch, the heartbeat interval and, when it
changed (or the request was a full one), the partitions it may own now. Epoch 0 joins, -1
leaves, -2 leaves temporarily (a static member). The coordinator computes the assignment with a
server-side assignor (``group.consumer.assignors``; the client's ``group.remote.assignor``) and
moves members incrementally (:mod:`groupcoord.consumer`).

Errors: NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS,
INVALID_REQUEST (malformed fields, with a message), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR, GROUP_MAX_SIZE_REACHED,
GROUP_ID_NOT_FOUND (the id is a classic group in use), INVALID_REGULAR_EXPRESSION.

Version notes: v0 (Kafka 3.7, KIP-848): the coordinator generates member ids. v1 (Kafka 4.0):
``SubscribedTopicRegex``, and the client generates its member id (KIP-1082).
"""

from __future__ import annotations

from groupcoord.consumer.messages import ConsumerGroupHeartbeatRequest as HeartbeatArgs
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.kip848 import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

from ..security.acl import GROUP, GROUP_DENIED, READ, Requires
from . import RequestContext, api


@api(ApiKey.CONSUMER_GROUP_HEARTBEAT, versions=(0, 1), authz=(Requires(READ, GROUP, GROUP_DENIED, "group_id"),))
async def handle_consumer_group_heartbeat(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
    R = ctx.response_class
    coord = ctx.broker.group_coordinator
    if not ctx.authorize(READ, GROUP, req.group_id):
        return R(throttle_time_ms=0, error_code=int(GROUP_DENIED), error_message="Group authorization failed.",
                 member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    if coord is None:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                 error_message=None, member_id=None, member_epoch=-1, heartbeat_interval_ms=0,
                 assignment=None)
    owned = None if req.topic_partitions is None else \
        [(tp.topic_id, list(tp.partitions or [])) for tp in req.topic_partitions]
    r = await coord.consumer_group_heartbeat(HeartbeatArgs(
        req.group_id, req.member_id, req.member_epoch, req.instance_id, req.rack_id,
        req.rebalance_timeout_ms, req.subscribed_topic_names,
        req.subscribed_topic_regex if ctx.version >= 1 else None, req.server_assignor, owned),
        api_version=ctx.version, client_id=ctx.header.client_id or "",
        client_host="/" + ctx.client_host)
    if r.error:
        return R(throttle_time_ms=0, error_code=int(r.error), error_message=r.error_message,
                 member_id=None, member_epoch=-1, heartbeat_interval_ms=0, assignment=None)
    assignment = None
    if r.assignment is not None:
        A = R.Assignment
        assignment = A(topic_partitions=[
            A.TopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(r.assignment.items(), key=lambda kv: str(kv[0]))])
    return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=r.member_id,
             member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
             assignment=assignment)
