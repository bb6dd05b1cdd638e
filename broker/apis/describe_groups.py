"""DescribeGroups (key 15), versions 0-6.

State, protocol type, chosen protocol and members of each group; in the Stable state each
member also carries its subscription metadata and assignment (empty otherwise, as Kafka does).
A group that does not exist (or is a consumer-protocol group, which ConsumerGroupDescribe
describes) is described as ``Dead`` with no error before v6, and from v6 as GROUP_ID_NOT_FOUND with
Kafka's message "Group <id> not found." (KIP-1043).

Version notes: v1 ``throttle_time_ms``; v2 no change (KIP-219); v3
``include_authorized_operations`` (KIP-430: without ACLs every group operation is allowed:
READ, DELETE, DESCRIBE); v4 members' ``group_instance_id`` (KIP-345); v5 flexible; v6 the
per-group ``error_message`` and GROUP_ID_NOT_FOUND (KIP-1043).
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse

from groupcoord.state import GroupState
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import DESCRIBE, GROUP, GROUP_DENIED, Requires
from . import RequestContext, api

# AclOperation codes READ (3), DELETE (6), DESCRIBE (8); kafka.protocol takes the int32 bit
# field as the set of its bit positions. INT32_MIN (bit 31 alone) means "not requested".
GROUP_OPERATIONS = {3, 6, 8}
OPERATIONS_OMITTED = {31}
DEAD = GroupState.DEAD.value


@api(ApiKey.DESCRIBE_GROUPS, versions=(0, 6), authz=(Requires(DESCRIBE, GROUP, GROUP_DENIED, "each group"),))
async def handle_describe_groups(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    R = ctx.response_class
    G = R.DescribedGroup
    M = G.DescribedGroupMember
    coord = ctx.broker.group_coordinator
    ops = GROUP_OPERATIONS if ctx.version >= 3 and req.include_authorized_operations \
        else OPERATIONS_OMITTED
    out = []
    for group_id in req.groups:
        if not ctx.authorize(DESCRIBE, GROUP, group_id):
            out.append(G(error_code=int(GROUP_DENIED), group_id=group_id, group_state="", protocol_type="",
                         protocol_data="", members=[], authorized_operations=OPERATIONS_OMITTED))
            continue
        if ops is not OPERATIONS_OMITTED and ctx.broker.authorizer is not None:
            ops = ctx.authorized_operations(GROUP, group_id)
        if coord is None:
            out.append(G(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), group_id=group_id,
                         group_state="", protocol_type="", protocol_data="", members=[],
                         authorized_operations=ops))
            continue
        d = coord.describe_group(group_id)
        if ctx.version >= 6 and d.error is ErrorCode.NONE and d.state == DEAD:
            out.append(G(error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=f"Group {group_id} not found.",
                         group_id=group_id, group_state="", protocol_type="", protocol_data="", members=[],
                         authorized_operations=ops))
            continue
        out.append(G(error_code=int(d.error), group_id=group_id,
                     group_state=d.state if d.error is ErrorCode.NONE else "",
                     protocol_type=d.protocol_type, protocol_data=d.protocol,
                     members=[M(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                client_id=m.client_id, client_host=m.client_host,
                                member_metadata=m.metadata, member_assignment=m.assignment)
                              for m in d.members],
                     authorized_operations=ops))
    return R(throttle_time_ms=0, groups=out)
