"""ShareFetch (key 78), version 1: records for a share group's member, with acquisition locks
(KIP-932).

A share consumer fetches through a share session (:mod:`broker.share.session`): epoch 0 opens it
with the partitions it names (acknowledgements are not allowed then: INVALID_REQUEST), later
requests carry the next epoch and may add partitions (``Topics``) or drop them
(``ForgottenTopicsData``), epoch -1 closes it. Acknowledgements of records fetched before ride
along (``AcknowledgementBatches``: ranges with one type each or one per offset -- 0 GAP,
1 ACCEPT, 2 RELEASE, 3 REJECT) and are applied first; their outcome per partition is
``AcknowledgeErrorCode`` (INVALID_RECORD_STATE for records the member does not hold).

Then up to ``MaxRecords`` records are acquired across the session's partitions
(:mod:`broker.share.partition`): each partition answers the log's batches as stored plus
``AcquiredRecords`` ranges with their delivery counts; the client delivers only the acquired
offsets and must acknowledge them within ``AcquisitionLockTimeoutMs``
(``group.share.record.lock.duration.ms``). With nothing to acquire the request parks up to
``MaxWaitMs`` for new data or released records. ``MaxRecords`` 0 only acknowledges.

Authorization (Kafka's): READ on the group (else the top-level GROUP_AUTHORIZATION_FAILED) and
READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions). Other errors: top-level
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH, INVALID_REQUEST; per partition
UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER.

Version notes: v0 was Kafka 4.0's early access (removed in 4.1); v1 (Kafka 4.1) adds MaxRecords,
BatchSize and AcquisitionLockTimeoutMs.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer

from broker.share.manager import ShareFetchResult, SharePartitionManager
from broker.share.session import FINAL_EPOCH, INITIAL_EPOCH, ShareSession
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError
from protocol.kip932 import ShareFetchRequest, ShareFetchResponse

from ..security.acl import GROUP, GROUP_DENIED, READ, TOPIC, TOPIC_DENIED, Requires
from . import RequestContext, api

TopicIdPartition = tuple[uuid.UUID, int]
STATE_UNAVAILABLE = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                     ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT)


@dataclass(slots=True)
class PartitionOutcome:
    """What a ShareFetch / ShareAcknowledge answers for one partition."""

    error: ErrorCode = ErrorCode.NONE
    ack_error: ErrorCode | None = None  # None: no acknowledgements for it
    fetched: ShareFetchResult | None = None
    leader: tuple[int, int] = (-1, -1)
    messages: dict[str, str] = field(default_factory=dict)


def resolve(ctx: RequestContext, tips: list[TopicIdPartition],
            outcomes: dict[TopicIdPartition, PartitionOutcome]) -> dict[TopicIdPartition, str]:
    """Topic names of the partitions this request may touch; the others get their error."""
    names: dict[TopicIdPartition, str] = {}
    for tip in tips:
        info = ctx.broker.topics.by_id(tip[0])
        out = outcomes.setdefault(tip, PartitionOutcome())
        if info is None:
            out.error = ErrorCode.UNKNOWN_TOPIC_ID
        elif not ctx.authorize(READ, TOPIC, info.name):
            out.error = TOPIC_DENIED
        elif not 0 <= tip[1] < info.num_partitions:
            out.error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            names[tip] = info.name
    return names


def ack_batches(partition: DataContainer) -> list[tuple[int, int, list[int]]]:
    """(first offset, last offset, acknowledge types) of a ShareFetch or ShareAcknowledge
    partition entry's AcknowledgementBatches."""
    return [(b.first_offset, b.last_offset, list(b.acknowledge_types or []))
            for b in partition.acknowledgement_batches or []]


async def apply_acks(ctx: RequestContext, manager: SharePartitionManager, group_id: str, member_id: str,
                     acks: dict[TopicIdPartition, list[tuple[int, int, list[int]]]],
                     names: dict[TopicIdPartition, str],
                     outcomes: dict[TopicIdPartition, PartitionOutcome]) -> None:
    for tip, batches in acks.items():
        out = outcomes[tip]
        if tip not in names:
            out.ack_error = out.error
            continue
        out.ack_error = await manager.acknowledge((group_id, tip[0], tip[1]), member_id, batches)


def leader_of(ctx: RequestContext, topic: str, partition: int) -> tuple[int, int]:
    try:
        p = ctx.broker.replica_manager.get_partition(topic, partition, require_leader=False)
    except KafkaError:
        return -1, -1
    return p.leader_id, p.leader_epoch


@api(ApiKey.SHARE_FETCH, versions=(1, 1), authz=(
    Requires(READ, GROUP, GROUP_DENIED, "group_id"),
    Requires(READ, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_share_fetch(ctx: RequestContext, req: ShareFetchRequest) -> ShareFetchResponse:
    R = ctx.response_class
    manager: SharePartitionManager | None = ctx.broker.share_partition_manager
    lock_ms = manager.config.record_lock_duration_for(req.group_id or "") if manager is not None else 0

    def top(code: ErrorCode, message: str | None) -> ApiMessage:
        return R(throttle_time_ms=0, error_code=int(code), error_message=message,
                 acquisition_lock_timeout_ms=lock_ms, responses=[], node_endpoints=[])

    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
    if not ctx.authorize(READ, GROUP, group_id or ""):
        return top(GROUP_DENIED, "Group authorization failed.")
    if manager is None:
        return top(ErrorCode.UNKNOWN_SERVER_ERROR, "share groups are not running")
    if not group_id or not member_id:
        return top(ErrorCode.INVALID_REQUEST, "GroupId and MemberId must be set.")
    requested: list[TopicIdPartition] = []
    acks: dict[TopicIdPartition, list[tuple[int, int, list[int]]]] = {}
    for t in req.topics or []:
        for p in t.partitions or []:
            tip = (t.topic_id, p.partition_index)
            requested.append(tip)
            if p.acknowledgement_batches:
                acks.setdefault(tip, []).extend(ack_batches(p))
    forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data or [] for p in t.partitions or []]
    sessions = manager.sessions
    session: ShareSession | None
    if epoch == INITIAL_EPOCH:
        if acks:
            return top(ErrorCode.INVALID_REQUEST,
                       "Acknowledge data present on initial share fetch request.")
        session, _old = sessions.open(group_id, member_id, requested, (ctx.client_host, ctx.client_port))
    else:
        err, used = sessions.use(group_id, member_id, epoch)
        if err:
            return top(err, None)
        assert used is not None
        session = used
        if epoch != FINAL_EPOCH:
            for tip in requested:
                session.partitions.setdefault(tip, None)
            for tip in forgotten:
                session.partitions.pop(tip, None)

    outcomes: dict[TopicIdPartition, PartitionOutcome] = {}
    names = resolve(ctx, list(dict.fromkeys(list(session.partitions) + requested)), outcomes)
    await apply_acks(ctx, manager, group_id, member_id, acks, names, outcomes)

    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
        await manager.release(group_id, member_id,
                              {(group_id, t, p) for t, p in session.partitions})
    elif req.max_records > 0:
        await _acquire(ctx, manager, req, group_id, member_id, session, names, outcomes)

    by_topic: dict[uuid.UUID, list[DataContainer]] = {}
    P = R.ShareFetchableTopicResponse.PartitionData
    for tip, out in outcomes.items():
        fetched = out.fetched
        if tip not in requested and out.ack_error is None and out.error == ErrorCode.NONE and \
                (fetched is None or not fetched.acquired):
            continue  # an incremental response names only what has news
        if fetched is not None and fetched.error:
            out.error = fetched.error
        leader = (fetched.leader_id, fetched.leader_epoch) if fetched is not None and \
            fetched.leader_id >= 0 else (leader_of(ctx, names[tip], tip[1]) if tip in names else (-1, -1))
        by_topic.setdefault(tip[0], []).append(P(
            partition_index=tip[1], error_code=int(out.error), error_message=None,
            acknowledge_error_code=int(out.ack_error or 0), acknowledge_error_message=None,
            current_leader=P.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1]),
            records=b"".join(fetched.records) if fetched is not None else b"",
            acquired_records=[P.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                delivery_count=a.delivery_count)
                              for a in (fetched.acquired if fetched is not None else [])]))
    return R(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=lock_ms,
             responses=[R.ShareFetchableTopicResponse(topic_id=t, partitions=ps) for t, ps in by_topic.items()],
             node_endpoints=[])


async def _acquire(ctx: RequestContext, manager: SharePartitionManager, req: ShareFetchRequest, group_id: str,
                   member_id: str, session: ShareSession, names: dict[TopicIdPartition, str],
                   outcomes: dict[TopicIdPartition, PartitionOutcome]) -> None:
    """Acquire across the session's partitions, parking up to MaxWaitMs while there is nothing."""
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    sps = []
    for tip in session.partitions:
        if tip not in names:
            continue
        try:
            sps.append((tip, await manager.share_partition(group_id, tip[0], names[tip], tip[1])))
        except KafkaError as e:
            # The share coordinator holding its state is not reachable yet (just created, moving):
            # nothing to deliver this time, as Kafka answers; the client simply fetches again.
            if e.code not in STATE_UNAVAILABLE:
                outcomes[tip].error = e.code
    if not sps:
        return
    # Start where the last request stopped, so one busy partition does not starve the others.
    shift = session.epoch % len(sps)
    sps = sps[shift:] + sps[:shift]
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    while True:
        budget, size, got = req.max_records, 0, False
        for tip, sp in sps:
            if budget <= 0 or size >= max_bytes:
                break
            r = manager.acquire(sp, member_id, budget)
            outcomes[tip].fetched = r
            if r.error:
                got = True
                continue
            n = sum(a.last_offset - a.first_offset + 1 for a in r.acquired)
            if n:
                got = True
                budget -= n
                size += sum(len(b) for b in r.records)
        remaining = deadline - time.monotonic()
        if got or remaining <= 0 or any(outcomes[t].ack_error for t, _ in sps):
            return
        await manager.wait([sp for _, sp in sps], remaining)
