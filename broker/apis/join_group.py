"""JoinGroup (key 11), versions 0-9.

The first phase of a classic rebalance: a member announces itself and the protocols
(assignors) it supports; the coordinator holds the response until every known member has
rejoined (or ``rebalance.timeout.ms`` passes; ``group.initial.rebalance.delay.ms`` for a group
that was Empty), then answers everyone with the new generation, the chosen protocol and the
leader -- and the leader alone with every member's metadata, so it can compute the assignment.
All state logic lives in :class:`groupcoord.coordinator.GroupCoordinator`.

Version notes: v1 adds ``rebalance_timeout_ms`` (KIP-62; v0 uses the session timeout);
v2 ``throttle_time_ms``; v4 answers a member with no id MEMBER_ID_REQUIRED plus its new id,
to be sent back in a second JoinGroup (KIP-394); v5 ``group_instance_id`` for static
membership (KIP-345); v6 flexible (KIP-511); v7 ``protocol_type`` and a nullable
``protocol_name`` in the response (KIP-559); v8 ``reason`` (KIP-800); v9 ``skip_assignment``
for a restarted static leader (KIP-814).
"""

from __future__ import annotations

from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import GROUP, GROUP_DENIED, READ, Requires
from . import RequestContext, api


@api(ApiKey.JOIN_GROUP, versions=(0, 9), authz=(Requires(READ, GROUP, GROUP_DENIED, "group_id"),))
async def handle_join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    if not ctx.authorize(READ, GROUP, req.group_id):
        return ctx.error_response(GROUP_DENIED)
    R = ctx.response_class
    v = ctx.version
    coord = ctx.broker.group_coordinator
    if coord is None:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                 generation_id=-1, protocol_type=None, protocol_name=None if v >= 7 else "",
                 leader="", skip_assignment=False, member_id=req.member_id, members=[])
    result = await coord.join_group(
        req.group_id, req.member_id, req.protocol_type,
        [(p.name, bytes(p.metadata)) for p in req.protocols],
        req.session_timeout_ms,
        req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        group_instance_id=req.group_instance_id if v >= 5 else None,
        client_id=ctx.header.client_id or "", client_host=f"/{ctx.client_host}",
        require_known_member_id=v >= 4, reason=req.reason if v >= 8 else None,
        supports_skip_assignment=v >= 9)
    protocol_name = result.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""  # non-nullable before v7
    return R(throttle_time_ms=0, error_code=int(result.error), generation_id=result.generation_id,
             protocol_type=result.protocol_type, protocol_name=protocol_name,
             leader=result.leader_id, skip_assignment=result.skip_assignment,
             member_id=result.member_id,
             members=[R.JoinGroupResponseMember(member_id=m.member_id,
                                                group_instance_id=m.group_instance_id,
                                                metadata=m.metadata) for m in result.members])
