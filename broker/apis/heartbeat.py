"""Heartbeat (key 12), versions 0-4.

Keeps a member's session alive (``session.timeout.ms``) and is how members learn of a
rebalance: REBALANCE_IN_PROGRESS tells them to rejoin. ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID
tell a member it has been left behind or removed; FENCED_INSTANCE_ID that its static instance
id now belongs to a newer incarnation.

Version notes: v1 ``throttle_time_ms``; v2 no change (KIP-219); v3 ``group_instance_id``
(KIP-345); v4 flexible (KIP-511).
"""

from __future__ import annotations

from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import GROUP, GROUP_DENIED, READ, Requires
from . import RequestContext, api


@api(ApiKey.HEARTBEAT, versions=(0, 4), authz=(Requires(READ, GROUP, GROUP_DENIED, "group_id"),))
async def handle_heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.authorize(READ, GROUP, req.group_id):
        return ctx.error_response(GROUP_DENIED)
    coord = ctx.broker.group_coordinator
    if coord is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        code = coord.heartbeat(req.group_id, req.member_id, req.generation_id,
                               req.group_instance_id if ctx.version >= 3 else None)
    return ctx.response(throttle_time_ms=0, error_code=int(code))
