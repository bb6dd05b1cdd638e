"""OffsetFetch (key 9), versions 1-10.

Returns a group's committed offsets (offset -1 and no error for a partition with none, or for a
group that does not exist). A null topic list (v2+) asks for every partition the group has
committed.

Version notes: v2 a null ``topics`` means all, and a top-level ``error_code`` (KIP-88); v3
``throttle_time_ms``; v5 ``committed_leader_epoch`` (KIP-320); v6 flexible; v7
``require_stable`` (KIP-447): partitions with transactional offsets still awaiting their
marker answer UNSTABLE_OFFSET_COMMIT; v8 asks for several ``groups`` in one request, each with
its own error (KIP-709); v9 adds KIP-848 member id/epoch, checked for consumer groups
(UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH) and unused by classic groups; v10 names topics by id
(KIP-848/KIP-516): an id this broker does not know answers UNKNOWN_TOPIC_ID on each partition
asked for, and a fetch of every partition leaves out committed offsets of topics that no longer
exist (they have no id to name them by). Before v2 a group-level error is reported on every
partition.
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from groupcoord.offsets import PartitionOffset
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..security.acl import DESCRIBE, GROUP, GROUP_DENIED, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api

TopicPartition = tuple[str, int]


def _fetch(ctx: RequestContext, group_id: str, wanted: list[TopicPartition] | None, require_stable: bool,
           member_id: str | None = None, member_epoch: int = -1,
           ) -> tuple[ErrorCode, list[tuple[str, list[tuple[int, PartitionOffset]]]]]:
    """(group error, [(topic, [(partition, PartitionOffset)])]) in request order; ``wanted``
    None: every partition the group has offsets for."""
    coord = ctx.broker.group_coordinator
    if not ctx.authorize(DESCRIBE, GROUP, group_id):
        refused: dict[str, list[tuple[int, PartitionOffset]]] = {}
        for topic, p in wanted or ():
            refused.setdefault(topic, []).append((p, PartitionOffset(error=GROUP_DENIED)))
        return GROUP_DENIED, list(refused.items())
    if coord is None:
        code, offsets = ErrorCode.COORDINATOR_NOT_AVAILABLE, {}
    else:
        code, offsets = coord.fetch_offsets(group_id, wanted, require_stable,
                                            member_id=member_id, member_epoch=member_epoch)
    if wanted is None:
        wanted = list(offsets)
        if ctx.broker.authorizer is not None:
            wanted = [tp for tp in wanted if ctx.authorize(DESCRIBE, TOPIC, tp[0], log_denied=False)]
    elif ctx.broker.authorizer is not None:
        denied = {t for t, _ in wanted if not ctx.authorize(DESCRIBE, TOPIC, t)}
        offsets = dict(offsets)
        for tp in wanted:
            if tp[0] in denied:
                offsets[tp] = PartitionOffset(error=TOPIC_DENIED)
    by_topic: dict[str, list[tuple[int, PartitionOffset]]] = {}
    for tp in wanted:
        by_topic.setdefault(tp[0], []).append((tp[1], offsets.get(tp, PartitionOffset())))
    return code, list(by_topic.items())


@api(ApiKey.OFFSET_FETCH, versions=(1, 10), authz=(
    Requires(DESCRIBE, GROUP, GROUP_DENIED, "each group_id"),
    Requires(DESCRIBE, TOPIC, TOPIC_DENIED, "each topic; unauthorized ones left out of an all-topics fetch")))
async def handle_offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    R = ctx.response_class
    v = ctx.version
    if v >= 8:
        G = R.OffsetFetchResponseGroup
        T = G.OffsetFetchResponseTopics
        P = T.OffsetFetchResponsePartitions
        groups = []
        for g in req.groups:
            wanted: list[TopicPartition] | None = None
            unknown = []
            if g.topics is not None:
                wanted = []
                for t in g.topics:
                    if v < 10:  # v10 names topics by id (KIP-848)
                        wanted += [(t.name, p) for p in t.partition_indexes]
                        continue
                    info = ctx.broker.topics.by_id(t.topic_id)
                    if info is None:
                        unknown.append(T(topic_id=t.topic_id, partitions=[
                            P(partition_index=p, committed_offset=-1, committed_leader_epoch=-1, metadata=None,
                              error_code=int(ErrorCode.UNKNOWN_TOPIC_ID)) for p in t.partition_indexes]))
                    else:
                        wanted += [(info.name, p) for p in t.partition_indexes]
            code, topics = _fetch(ctx, g.group_id, wanted, req.require_stable,
                                  g.member_id if v >= 9 else None,
                                  g.member_epoch if v >= 9 else -1)
            out = []
            for name, parts in topics:
                ps = [P(partition_index=p, committed_offset=o.offset, committed_leader_epoch=o.leader_epoch,
                        metadata=o.metadata, error_code=int(o.error)) for p, o in parts]
                if v < 10:
                    out.append(T(name=name, partitions=ps))
                elif (info := ctx.broker.topics.get(name)) is not None:
                    out.append(T(topic_id=info.topic_id, partitions=ps))
            groups.append(G(group_id=g.group_id, error_code=int(code), topics=out + unknown))
        return R(throttle_time_ms=0, groups=groups)
    T = R.OffsetFetchResponseTopic
    P = T.OffsetFetchResponsePartition
    requested = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    code, topics = _fetch(ctx, req.group_id, requested, v >= 7 and req.require_stable)
    # v1 has no top-level error: the group's error goes on each partition.
    part_code = (lambda o: int(o.error or code)) if v < 2 else (lambda o: int(o.error))
    return R(throttle_time_ms=0, error_code=int(code), topics=[
        T(name=name, partitions=[
            P(partition_index=p, committed_offset=o.offset, committed_leader_epoch=o.leader_epoch,
              metadata=o.metadata, error_code=part_code(o)) for p, o in parts])
        for name, parts in topics])
