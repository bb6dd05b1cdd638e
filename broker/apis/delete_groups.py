"""DeleteGroups (key 42), versions 0-2 (KIP-229).

Deletes Empty groups: their committed offsets and metadata get tombstones in
``__consumer_offsets``. A group with members answers NON_EMPTY_GROUP; one that does not exist
GROUP_ID_NOT_FOUND.

Version notes: v1 no change (KIP-219 throttling); v2 flexible (KIP-482).
"""

from __future__ import annotations

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import DELETE, GROUP, GROUP_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.DELETE_GROUPS, versions=(0, 2), authz=(Requires(DELETE, GROUP, GROUP_DENIED, "each group"),))
async def handle_delete_groups(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    R = ctx.response_class
    coord = ctx.broker.group_coordinator
    names = list(req.groups_names)
    denied = {g for g in names if not ctx.authorize(DELETE, GROUP, g)}
    allowed = [g for g in dict.fromkeys(names) if g not in denied]
    results: dict[str, ErrorCode] = dict.fromkeys(denied, GROUP_DENIED)
    if coord is None:
        results.update(dict.fromkeys(allowed, ErrorCode.COORDINATOR_NOT_AVAILABLE))
    elif allowed:
        results.update(await coord.delete_groups(allowed))
    return R(throttle_time_ms=0, results=[
        R.DeletableGroupResult(group_id=g, error_code=int(results[g])) for g in dict.fromkeys(names)])
