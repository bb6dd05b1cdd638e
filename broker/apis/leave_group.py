"""LeaveGroup (key 13), versions 0-5.

A member leaving (consumer close, unsubscribe) is removed at once and the group rebalances
without waiting for its session to expire. Removing a member parked in JoinGroup answers that
JoinGroup with UNKNOWN_MEMBER_ID.

Version notes: v1 ``throttle_time_ms``; v2 no change (KIP-219); v3 batches ``members``, each
with an optional ``group_instance_id`` -- an empty member id with an instance id removes that
static member, which is how admin tools evict static members (KIP-345), with a per-member error;
v4 flexible; v5 a per-member ``reason`` (KIP-800). Before v3 the single member's error is the
top-level error.
"""

from __future__ import annotations

from kafka.protocol.consumer import LeaveGroupRequest, LeaveGroupResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import GROUP, GROUP_DENIED, READ, Requires
from . import RequestContext, api


@api(ApiKey.LEAVE_GROUP, versions=(0, 5), authz=(Requires(READ, GROUP, GROUP_DENIED, "group_id"),))
async def handle_leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    if not ctx.authorize(READ, GROUP, req.group_id):
        return ctx.error_response(GROUP_DENIED)
    R = ctx.response_class
    v = ctx.version
    coord = ctx.broker.group_coordinator
    if v >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in req.members]
        reasons = [m.reason for m in req.members if v >= 5 and m.reason]
        reason = "; ".join(reasons) if reasons else None
    else:
        leaving = [(req.member_id, None)]
        reason = None
    if coord is None:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), members=[])
    code, results = coord.leave_group(req.group_id, leaving, reason)
    if v < 3:
        if code is ErrorCode.NONE and results:
            code = results[0].error
        return R(throttle_time_ms=0, error_code=int(code))
    return R(throttle_time_ms=0, error_code=int(code), members=[
        R.MemberResponse(member_id=r.member_id, group_instance_id=r.group_instance_id,
                         error_code=int(r.error)) for r in results])
