"""ListGroups (key 16), versions 0-5.

Every group this coordinator knows (with members, or only committed offsets), with its
protocol type. COORDINATOR_LOAD_IN_PROGRESS while ``__consumer_offsets`` is being replayed.

Version notes: v1 ``throttle_time_ms``; v2 no change (KIP-219); v3 flexible; v4
``states_filter`` and each group's state (KIP-518); v5 ``types_filter`` and ``group_type``
(KIP-848): ``classic`` or ``consumer``.
"""

from __future__ import annotations

from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import CLUSTER, CLUSTER_NAME, DESCRIBE, GROUP, GROUP_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.LIST_GROUPS, versions=(0, 5), authz=(
    Requires(DESCRIBE, GROUP, GROUP_DENIED, "each group: without DESCRIBE on the cluster, only described groups"),))
async def handle_list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    R = ctx.response_class
    v = ctx.version
    coord = ctx.broker.group_coordinator
    if coord is None:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), groups=[])
    states = req.states_filter if v >= 4 else None
    types = req.types_filter if v >= 5 else None
    code, groups = coord.list_groups(states or None, types or None)
    if ctx.broker.authorizer is not None and not ctx.authorize(DESCRIBE, CLUSTER, CLUSTER_NAME, log_denied=False):
        groups = [g for g in groups if ctx.authorize(DESCRIBE, GROUP, g.group_id, log_denied=False)]
    return R(throttle_time_ms=0, error_code=int(code), groups=[
        R.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                      group_type=g.group_type) for g in groups])
