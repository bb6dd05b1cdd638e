"""OffsetCommit (key 8), versions 2-10.

Stores a group's committed offsets as OffsetCommit records in ``__consumer_offsets``. A member
of a group commits with its member id and generation (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID /
REBALANCE_IN_PROGRESS / FENCED_INSTANCE_ID when it is out of date); a client that manages
partitions itself commits with generation -1 and an empty member id, which only an Empty group
accepts. Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; metadata longer than
``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE.

Version notes: v2 ``retention_time_ms`` (an explicit expiry, written as OffsetCommitValue v1;
ignored -- removed -- from v5, KIP-211); v3 ``throttle_time_ms``; v5 drops retention; v6
``committed_leader_epoch`` (KIP-320); v7 ``group_instance_id`` (KIP-345); v8 flexible; v9 is
KIP-848's (a classic group reads the generation field as before); v10 names topics by id
(KIP-848/KIP-516): an id this broker does not know answers UNKNOWN_TOPIC_ID on each of its
partitions, and the response names topics by the same ids. v0-1 (ZooKeeper-era) are not served.
"""

from __future__ import annotations

import uuid

from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse
from kafka.protocol.data_container import DataContainer

from groupcoord.group import OffsetAndMetadata
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import GROUP, GROUP_DENIED, READ, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.OFFSET_COMMIT, versions=(2, 10), authz=(
    Requires(READ, GROUP, GROUP_DENIED, "group_id: every partition"),
    Requires(READ, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_offset_commit(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    R = ctx.response_class
    TopicResp = R.OffsetCommitResponseTopic
    PartResp = TopicResp.OffsetCommitResponsePartition
    v = ctx.version
    coord = ctx.broker.group_coordinator
    # Topics are keyed as the request names them: by name before v10, by id from v10.
    names: dict[str | uuid.UUID, str | None] = {}
    for t in req.topics:
        if v >= 10:
            info = ctx.broker.topics.by_id(t.topic_id)
            names[t.topic_id] = info.name if info is not None else None
        else:
            names[t.name] = t.name
    requested = [(t.topic_id if v >= 10 else t.name, p.partition_index) for t in req.topics for p in t.partitions]
    results: dict[tuple[str | uuid.UUID, int], ErrorCode] = {}
    if not ctx.authorize(READ, GROUP, req.group_id):
        results = dict.fromkeys(requested, GROUP_DENIED)
    elif coord is None:
        results = dict.fromkeys(requested, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    else:
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        for t in req.topics:
            key = t.topic_id if v >= 10 else t.name
            name = names[key]
            info = ctx.broker.topics.get(name) if name is not None else None
            for p in t.partitions:
                tp = (key, p.partition_index)
                if name is None:
                    results[tp] = ErrorCode.UNKNOWN_TOPIC_ID
                    continue
                if not ctx.authorize(READ, TOPIC, name):
                    results[tp] = TOPIC_DENIED
                    continue
                if info is None or not 0 <= p.partition_index < info.num_partitions:
                    results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                offsets[(name, p.partition_index)] = OffsetAndMetadata(
                    p.committed_offset, p.committed_leader_epoch if v >= 6 else -1,
                    p.committed_metadata or "")
        if offsets:
            committed = await coord.commit_offsets(
                req.group_id, req.member_id, req.generation_id_or_member_epoch, offsets,
                group_instance_id=req.group_instance_id if v >= 7 else None,
                retention_ms=req.retention_time_ms if v <= 4 else -1)
            keys = {name: key for key, name in names.items() if name is not None}
            results.update({(keys[name], p): code for (name, p), code in committed.items()})
    by_topic: dict[str | uuid.UUID, list[DataContainer]] = {}
    for topic, partition in requested:
        by_topic.setdefault(topic, []).append(
            PartResp(partition_index=partition, error_code=int(results[(topic, partition)])))
    if v >= 10:
        return R(throttle_time_ms=0,
                 topics=[TopicResp(topic_id=t, partitions=ps) for t, ps in by_topic.items()])
    return R(throttle_time_ms=0,
             topics=[TopicResp(name=t, partitions=ps) for t, ps in by_topic.items()])
