"""ShareGroupDescribe (key 77), version 1: describe KIP-932 share groups.

For each group: its state (``Empty``, ``Stable``; an unknown id GROUP_ID_NOT_FOUND, as does a
classic or consumer group), group and assignment epochs, the assignor (``simple``), and each
member with its client, subscription, epoch and assignment (topic ids with their names).
``include_authorized_operations``: the group operations the principal may perform (KIP-430).
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from groupcoord.coordinator import GroupCoordinator
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.kip932 import ShareGroupDescribeRequest, ShareGroupDescribeResponse

from ..security.acl import DESCRIBE, GROUP, GROUP_DENIED, Requires
from . import RequestContext, api
from .consumer_group_describe import GROUP_OPERATIONS, OPERATIONS_OMITTED


@api(ApiKey.SHARE_GROUP_DESCRIBE, versions=(1, 1), authz=(Requires(DESCRIBE, GROUP, GROUP_DENIED, "each group"),))
async def handle_share_group_describe(ctx: RequestContext, req: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    R = ctx.response_class
    G = R.DescribedGroup
    coord: GroupCoordinator | None = ctx.broker.group_coordinator
    ops = GROUP_OPERATIONS if req.include_authorized_operations else OPERATIONS_OMITTED

    def failed(g: str, code: ErrorCode, message: str | None) -> ApiMessage:
        return G(error_code=int(code), error_message=message, group_id=g, group_state="",
                 group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                 authorized_operations=OPERATIONS_OMITTED)

    A = G.Member.Assignment
    out = []
    for g in req.group_ids:
        if not ctx.authorize(DESCRIBE, GROUP, g):
            out.append(failed(g, GROUP_DENIED, "Group authorization failed."))
            continue
        if coord is None:
            out.append(failed(g, ErrorCode.COORDINATOR_NOT_AVAILABLE, None))
            continue
        d = coord.share_group_describe(g)
        if d.error:
            out.append(failed(g, d.error, d.error_message))
            continue
        if ops != OPERATIONS_OMITTED and ctx.broker.authorizer is not None:
            ops = sum(1 << op for op in ctx.authorized_operations(GROUP, g))
        out.append(G(
            error_code=0, error_message=None, group_id=g, group_state=d.state,
            group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch,
            assignor_name=d.assignor_name, authorized_operations=ops,
            members=[G.Member(
                member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                assignment=A(topic_partitions=[A.TopicPartitions(topic_id=t, topic_name=n, partitions=ps)
                                               for t, n, ps in m.assignment]))
                for m in d.members]))
    return R(throttle_time_ms=0, groups=out)
