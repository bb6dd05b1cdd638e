"""SyncGroup (key 14), versions 0-5.

The second phase of a classic rebalance: the leader sends the assignment it computed, every
member (leader included) waits for its own share. The coordinator persists the assignment as a
GroupMetadata record in ``__consumer_offsets`` first, then answers all members and the group
becomes Stable. A member of a Stable group gets its current assignment back at once.

Version notes: v1 ``throttle_time_ms``; v2 no change (throttling after response, KIP-219);
v3 ``group_instance_id`` (KIP-345: FENCED_INSTANCE_ID for a replaced static member); v4
flexible; v5 ``protocol_type``/``protocol_name`` checked against the group's
(INCONSISTENT_GROUP_PROTOCOL) and echoed back (KIP-559).
"""

from __future__ import annotations

from kafka.protocol.consumer import SyncGroupRequest, SyncGroupResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import GROUP, GROUP_DENIED, READ, Requires
from . import RequestContext, api


@api(ApiKey.SYNC_GROUP, versions=(0, 5), authz=(Requires(READ, GROUP, GROUP_DENIED, "group_id"),))
async def handle_sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    if not ctx.authorize(READ, GROUP, req.group_id):
        return ctx.error_response(GROUP_DENIED)
    R = ctx.response_class
    v = ctx.version
    coord = ctx.broker.group_coordinator
    if coord is None:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                 protocol_type=None, protocol_name=None, assignment=b"")
    result = await coord.sync_group(
        req.group_id, req.generation_id, req.member_id,
        {a.member_id: bytes(a.assignment) for a in req.assignments},
        group_instance_id=req.group_instance_id if v >= 3 else None,
        protocol_type=req.protocol_type if v >= 5 else None,
        protocol_name=req.protocol_name if v >= 5 else None)
    return R(throttle_time_ms=0, error_code=int(result.error), protocol_type=result.protocol_type,
             protocol_name=result.protocol_name, assignment=result.assignment)
