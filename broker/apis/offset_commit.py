"""OffsetCommit (key 8), versions 2-9.

Stores a group's committed offsets as OffsetCommit records in ``__consumer_offsets``. A member
of a group commits with its member id and generation (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
REBALANCE_IN_PROGRESS / FENCED_INSTANCE_ID when it is out of date); a client that manages
partitions itself commits with generation -1 and an empty member id, which only an Empty group
accepts. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; metadata longer than
``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE.

Version notes: v2 ``retention_time_ms`` (an explicit expiry, written as OffsetCommitValue v1;
ignored -- removed -- from v5, KIP-211); v3 ``throttle_time_ms``; v5 drops retention; v6
``committed_leader_epoch`` (KIP-320); v7 ``group_instance_id`` (KIP-345); v8 flexible; v9 is
KIP-848's (a classic group reads the generation field as before). v10 names topics by id and
is not served. v0-1 (ZooKeeper-era) are not served.
"""

from __future__ import annotations

from typing import Any

from groupcoord.group import OffsetAndMetadata
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import GROUP, GROUP_DENIED, READ, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.OFFSET_COMMIT, versions=(2, 9), authz=(
    Requires(READ, GROUP, GROUP_DENIED, "group_id: every partition"),
    Requires(READ, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_offset_commit(ctx: RequestContext, req: Any) -> Any:
    R = ctx.response_class
    TopicResp = R.OffsetCommitResponseTopic
    PartResp = TopicResp.OffsetCommitResponsePartition
    v = ctx.version
    coord = ctx.broker.group_coordinator
    requested = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    results: dict[tuple[str, int], ErrorCode] = {}
    if not ctx.authorize(READ, GROUP, req.group_id):
        results = dict.fromkeys(requested, GROUP_DENIED)
    elif coord is None:
        results = dict.fromkeys(requested, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    else:
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        for t in req.topics:
            info = ctx.broker.topics.get(t.name)
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                if not ctx.authorize(READ, TOPIC, t.name):
                    results[tp] = TOPIC_DENIED
                    continue
                if info is None or not 0 <= p.partition_index < info.num_partitions:
                    results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                offsets[tp] = OffsetAndMetadata(
                    p.committed_offset, p.committed_leader_epoch if v >= 6 else -1,
                    p.committed_metadata or "")
        if offsets:
            results.update(await coord.commit_offsets(
                req.group_id, req.member_id, req.generation_id_or_member_epoch, offsets,
                group_instance_id=req.group_instance_id if v >= 7 else None,
                retention_ms=req.retention_time_ms if v <= 4 else -1))
    by_topic: dict[str, list[Any]] = {}
    for topic, partition in requested:
        by_topic.setdefault(topic, []).append(
            PartResp(partition_index=partition, error_code=int(results[(topic, partition)])))
    return R(throttle_time_ms=0,
             topics=[TopicResp(name=t, partitions=ps) for t, ps in by_topic.items()])
