"""ConsumerGroupDescribe (key 69), versions 0-1: describe KIP-848 consumer groups.

For each group: its state (``Empty``, ``Assigning``, ``Reconciling``, ``Stable``), group and
assignment epochs, the assignor in use, and each member with its subscription, epoch, current
assignment and target assignment (topic ids with their names). A classic group or an unknown id
answers GROUP_ID_NOT_FOUND, which is how the admin client knows to fall back to DescribeGroups.

Version notes: v1 (KIP-1099) adds each member's ``MemberType`` (0: a classic member of the
group during a KIP-848 migration, 1: consumer protocol).
``include_authorized_operations``: without ACLs every group operation is allowed (READ, DELETE,
DESCRIBE), as in DescribeGroups.
"""

from __future__ import annotations

import uuid

from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.kip848 import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse

from ..security.acl import DESCRIBE, GROUP, GROUP_DENIED, Requires
from . import RequestContext, api

GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE (AclOperation bits)
OPERATIONS_OMITTED = -(2**31)  # INT32_MIN: not requested
MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1


@api(ApiKey.CONSUMER_GROUP_DESCRIBE, versions=(0, 1), authz=(Requires(DESCRIBE, GROUP, GROUP_DENIED, "each group"),))
async def handle_consumer_group_describe(ctx: RequestContext, req: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    R = ctx.response_class
    G = R.DescribedGroup
    coord = ctx.broker.group_coordinator
    ops = GROUP_OPERATIONS if req.include_authorized_operations else OPERATIONS_OMITTED
    if coord is None:
        return R(throttle_time_ms=0, groups=[
            G(error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), error_message=None,
              group_id=g, group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="",
              members=[], authorized_operations=ops) for g in req.group_ids])

    A = G.Member.Assignment

    def assignment(items: list[tuple[uuid.UUID, str, list[int]]]) -> DataContainer:
        return A(topic_partitions=[
            A.TopicPartitions(topic_id=t, topic_name=name, partitions=ps) for t, name, ps in items])

    out = []
    denied = [g for g in req.group_ids if not ctx.authorize(DESCRIBE, GROUP, g)]
    for g in denied:
        out.append(G(error_code=int(GROUP_DENIED), error_message="Group authorization failed.", group_id=g,
                     group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[],
                     authorized_operations=OPERATIONS_OMITTED))
    for d in coord.describe_consumer_groups([g for g in req.group_ids if g not in denied]):
        if ops != OPERATIONS_OMITTED and ctx.broker.authorizer is not None:
            ops = sum(1 << op for op in ctx.authorized_operations(GROUP, d.group_id))
        out.append(G(
            error_code=int(d.error), error_message=d.error_message, group_id=d.group_id,
            group_state=d.state, group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch,
            assignor_name=d.assignor_name, authorized_operations=ops,
            members=[G.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                              member_epoch=m.member_epoch, client_id=m.client_id,
                              client_host=m.client_host,
                              subscribed_topic_names=m.subscribed_topic_names,
                              subscribed_topic_regex=m.subscribed_topic_regex,
                              assignment=assignment(m.assignment),
                              target_assignment=assignment(m.target_assignment),
                              **({"member_type": MEMBER_TYPE_CLASSIC if m.uses_classic_protocol
                                  else MEMBER_TYPE_CONSUMER} if ctx.version >= 1 else {}))
                     for m in d.members]))
    return R(throttle_time_ms=0, groups=out)
