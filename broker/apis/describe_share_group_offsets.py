"""DescribeShareGroupOffsets (key 90), version 0: each share-partition's start offset (KIP-932).

For each group (a share group; anything else GROUP_ID_NOT_FOUND) and each requested topic
partition -- or, with ``Topics`` null, every partition the group has state for -- the
share-partition start offset (SPSO) from the share partition or the share coordinator
(:mod:`groupcoord.share.state`), with its leader epoch; -1 for a partition the group never read.
Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic
(TOPIC_AUTHORIZATION_FAILED per partition; with ``Topics`` null, unauthorized topics are left
out). An unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import uuid

from broker.share.manager import SharePartitionManager
from groupcoord.coordinator import GroupCoordinator
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.kip932 import DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse

from ..security.acl import DESCRIBE, GROUP, GROUP_DENIED, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, versions=(0, 0), authz=(
    Requires(DESCRIBE, GROUP, GROUP_DENIED, "each group"),
    Requires(DESCRIBE, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_describe_share_group_offsets(ctx: RequestContext, req: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    R = ctx.response_class
    G = R.DescribeShareGroupOffsetsResponseGroup
    T = G.DescribeShareGroupOffsetsResponseTopic
    P = T.DescribeShareGroupOffsetsResponsePartition
    coord: GroupCoordinator | None = ctx.broker.group_coordinator
    manager: SharePartitionManager | None = ctx.broker.share_partition_manager
    topics = ctx.broker.topics
    groups = []
    for g in req.groups or []:
        gid = g.group_id
        if not ctx.authorize(DESCRIBE, GROUP, gid):
            groups.append(G(group_id=gid, topics=[], error_code=int(GROUP_DENIED),
                            error_message="Group authorization failed."))
            continue
        if coord is None or manager is None:
            groups.append(G(group_id=gid, topics=[], error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
                            error_message=None))
            continue
        d = coord.share_group_describe(gid)
        if d.error:
            groups.append(G(group_id=gid, topics=[], error_code=int(d.error), error_message=d.error_message))
            continue
        wanted: list[tuple[str, list[int] | None]]
        if g.topics is None:
            # Every partition the group has state for: those known here, and in a cluster those of
            # its members' topics whose state another broker coordinates.
            by_id: dict[uuid.UUID, set[int]] = {}
            for _g, tid, p in manager.keys_of(gid):
                by_id.setdefault(tid, set()).add(p)
            for name in {t for m in d.members for t in m.subscribed_topic_names}:
                info = topics.get(name)
                if info is not None:
                    by_id.setdefault(info.topic_id, set()).update(range(info.num_partitions))
            wanted = []
            for tid, pset in by_id.items():
                info = topics.by_id(tid)
                if info is None or not ctx.authorize(DESCRIBE, TOPIC, info.name, log_denied=False):
                    continue
                ps = [p for p in sorted(pset) if await manager.read_start_offset((gid, tid, p)) is not None]
                if ps:
                    wanted.append((info.name, ps))
        else:
            wanted = [(t.topic_name, list(t.partitions or [])) for t in g.topics]
        out = []
        for name, parts in wanted:
            info = topics.get(name)
            code = ErrorCode.NONE
            if not ctx.authorize(DESCRIBE, TOPIC, name):
                code = TOPIC_DENIED
            elif info is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            topic_id = info.topic_id if info is not None else None
            ps = []
            for p in parts or []:
                found = await manager.read_start_offset((gid, topic_id, p)) \
                    if code == ErrorCode.NONE and topic_id is not None else None
                pcode = code if code != ErrorCode.NONE else (
                    ErrorCode.NONE if info is not None and 0 <= p < info.num_partitions
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                ps.append(P(partition_index=p, start_offset=found[0] if found else -1,
                            leader_epoch=found[1] if found else -1, error_code=int(pcode), error_message=None))
            out.append(T(topic_name=name, topic_id=topic_id or uuid.UUID(int=0), partitions=ps))
        groups.append(G(group_id=gid, topics=out, error_code=0, error_message=None))
    return R(throttle_time_ms=0, groups=groups)
