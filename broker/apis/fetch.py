"""Fetch (key 1), versions 4-18.

Reads whole batches from each partition's log, as stored, up to the high watermark
(``isolation_level`` 0) or the last stable offset (1, KIP-98) and returns them with the
partition's high watermark, last stable offset and log start offset (v5+, KIP-107).

Limits follow KIP-74: ``partition_max_bytes`` per partition and ``max_bytes`` overall, except
that the first partition with data returns at least one whole batch even when it is larger,
so a consumer can always make progress. Long poll: if fewer than ``min_bytes`` are available,
the request parks until data arrives on one of its partitions or ``max_wait_ms`` passes.

Fetch sessions (KIP-227, v7+) live in ``broker/replica/fetch_session.py``: a full fetch with
``session_epoch`` 0 opens one (its id in the response), incremental fetches read every partition
of the session and get back only the partitions with records, a changed high watermark or log
start offset, or an error (FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH at the top
level when the session is gone or the epoch is wrong). v12+ is flexible; v13+ names topics by id (KIP-516)
and an unknown id gets UNKNOWN_TOPIC_ID. Out-of-range offsets get OFFSET_OUT_OF_RANGE with the
current bounds. v9+ ``current_leader_epoch`` (KIP-320): older than the partition's leader epoch
is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH (-1 skips the check). v17 adds a follower's
tagged directory id (KIP-853) and v18 its tagged high watermark (KIP-1166), both unused here; the
response is v16's. Every error partition
carries empty records, never null (protocol/fetch_codec.py).

The reads, the long poll and follower progress are the replica manager's ``fetch_messages``
(``broker/replica/replica_manager.py``); this module decodes, authorizes and encodes.

Replication reuses this path (Kafka's ``ReplicaFetcherThread``): a Fetch whose ``replica_id``
(v15+: ``replica_state.replica_id``, KIP-903) is a broker id comes from a follower. It reads up to
the log end offset rather than the high watermark, and the offset it asks for tells the leader
how far that follower has come, which may move the ISR and the high watermark (so it is
recorded before reading: the response then carries the new high watermark). Consumers and
followers alike get NOT_LEADER_OR_FOLLOWER from a broker that does not lead the partition.
"""

from __future__ import annotations

import uuid

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.fetch_codec import PartitionData, TopicData, encode_fetch_response

from ..metrics.stats import mark_follower_fetch, note_errors
from ..replica import fetch_session
from ..replica.replica_manager import FetchPartitionData
from ..security.acl import CLUSTER, CLUSTER_ACTION, CLUSTER_NAME, READ, TOPIC, TOPIC_DENIED, Requires
from ..services import BrokerServices
from . import DelayedResponse, EncodedResponse, RequestContext, api


@api(ApiKey.FETCH, versions=(4, 18), authz=(
    Requires(READ, TOPIC, TOPIC_DENIED, "each topic (consumer fetch)"),
    Requires(CLUSTER_ACTION, CLUSTER, TOPIC_DENIED, "follower fetch (replica id >= 0): every partition")))
async def handle_fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse | EncodedResponse | DelayedResponse:
    broker = ctx.broker
    topics_by_id = ctx.version >= 13
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    if ctx.version >= 15:
        state = req.replica_state  # a tagged field: absent (None) from consumers
        replica_id = state.replica_id if state is not None else -1
    else:
        replica_id = req.replica_id
    if replica_id >= 0 and not await broker.metadata_support.is_cluster_member(replica_id):
        replica_id = -1  # inter-broker fetches only from brokers of this cluster (see is_cluster_member)

    # Resolve names once: [(topic_name or None, topic_id, [fetch partitions])]
    wanted = []
    for t in req.topics:
        if topics_by_id:
            info = broker.topics.by_id(t.topic_id)
            wanted.append((info.name if info else None, t.topic_id, t.partitions))
        else:
            wanted.append((t.topic, None, t.partitions))
    # Fetch sessions (KIP-227, broker/replica/fetch_session.py): an incremental fetch reads every
    # partition of its session; the answer is trimmed to what changed by fs.respond() below.
    fs = fetch_session.new_context(broker.fetch_sessions, ctx.version, req, wanted, broker.topics,
                                   follower=replica_id >= 0)
    wanted = fs.wanted
    denied: set[str] = set()
    if broker.authorizer is not None:
        denied = _unauthorized(ctx, req, wanted)

    rm = broker.replica_manager
    omit = fs.kind == fetch_session.INCREMENTAL  # the session's partitions with nothing to say get no row
    if replica_id >= 0:  # a follower: answered from the append that gives it data (no task waits)
        op = rm.fetch_for_follower(wanted, replica_id=replica_id, max_bytes=max_bytes, min_bytes=req.min_bytes,
                                   max_wait_ms=req.max_wait_ms, denied=denied, omit_unchanged=omit)
        if not op.done:
            return DelayedResponse(op, lambda: _respond(ctx, wanted, fs, replica_id, *op.outcome()))
        result, total = op.outcome()
    else:
        result, total = await rm.fetch_messages(
            wanted, replica_id=replica_id, isolation_level=req.isolation_level, max_bytes=max_bytes,
            min_bytes=req.min_bytes, max_wait_ms=req.max_wait_ms, denied=denied, omit_unchanged=omit)
    return _respond(ctx, wanted, fs, replica_id, result, total)


def _respond(ctx: RequestContext, wanted: list[tuple[str | None, uuid.UUID | None, list[DataContainer]]],
             fs: fetch_session.FetchContext, replica_id: int, result: list[list[FetchPartitionData]],
             total: int) -> EncodedResponse:
    """Quotas, metrics and the fetch session's trim on what was read, then the frame."""
    broker = ctx.broker
    throttle_ms = 0
    quotas = broker.quotas
    if quotas is not None and quotas.enabled and total:
        # KIP-219 as Kafka does it: a fetch that would break consumer_byte_rate is answered
        # without records (its bytes not counted) and with the throttle time.
        throttle_ms = quotas.throttle_time("consumer_byte_rate", ctx.principal, ctx.header.client_id, total)
        if throttle_ms:
            result = [[row._replace(aborted=None, records=b"") for row in rows] for rows in result]
        else:
            quotas.record("consumer_byte_rate", ctx.principal, ctx.header.client_id, total)
        ctx.throttle_ms = throttle_ms

    if broker.metrics is not None:  # BrokerTopicMetrics: bytes out, failed fetches, per partition
        if replica_id >= 0:
            mark_follower_fetch()  # RequestMetrics: FetchFollower rather than FetchConsumer
        broker.metrics.topic_stats.fetched([(w[0], len(w[2]), rows) for w, rows in zip(wanted, result, strict=True)],
                                           follower=replica_id >= 0)
    topics_out = []
    for (name, tid, _parts), rows in zip(wanted, result, strict=True):
        topics_out.append(TopicData(name, tid, [
            PartitionData(p, int(code), hw, lso, start, aborted, -1, data)
            for (p, code, hw, lso, start, aborted, data) in rows]))
    error_code, session_id, topics_out = fs.respond(topics_out)
    if broker.metrics is not None:  # RequestMetrics ErrorsPerSec: the response's codes, per partition
        errors = {int(error_code): 1}
        for t in topics_out:
            for part in t.partitions:
                errors[part.error_code] = errors.get(part.error_code, 0) + 1
        note_errors(errors)
    endpoints = _leader_hints(broker, topics_out)
    # Encoded here rather than by the generic encoder so that records stay file regions (see
    # protocol.fetch_codec); the connection writes them straight from the segment files.
    return EncodedResponse(*encode_fetch_response(ctx.version, ctx.header.correlation_id, topics_out,
                                                  throttle_time_ms=throttle_ms, error_code=error_code,
                                                  session_id=session_id, node_endpoints=endpoints))


_MOVED = (int(ErrorCode.NOT_LEADER_OR_FOLLOWER), int(ErrorCode.FENCED_LEADER_EPOCH))


def _leader_hints(broker: BrokerServices, topics: list[DataContainer]) -> list[tuple[int, str, int, str | None]]:
    """KIP-951: on a partition whose leadership is elsewhere, name the current leader (and its
    endpoint, v16+) so the client goes there without a Metadata round trip."""
    support = broker.metadata_support
    leaders: set[int] = set()
    for t in topics:
        for p in t.partitions:
            if p.error_code in _MOVED and t.topic is not None:
                pm = support.partition(t.topic, p.partition_index)
                if pm is not None and pm.leader >= 0:
                    p.current_leader = (pm.leader, pm.leader_epoch)
                    leaders.add(pm.leader)
    out = []
    for b in sorted(leaders):
        info = support.live_broker(b)
        if info is not None:
            ep = info.endpoint(broker.advertised.name)
            out.append((b, ep.host, ep.port, info.rack))
    return out


def _unauthorized(ctx: RequestContext, req: FetchRequest,
                  wanted: list[tuple[str | None, uuid.UUID | None, list[DataContainer]]]) -> set[str]:
    """Names of the topics this fetch may not read (all of them for an unauthorized follower)."""
    if ctx.version >= 15:  # KIP-903: a tagged ReplicaState, absent for consumers
        state = req.replica_state
        replica_id = state.replica_id if state is not None else -1
    else:
        replica_id = req.replica_id
    if replica_id >= 0:
        if ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
            return set()
        return {name for name, _tid, _parts in wanted if name is not None}
    return {name for name, _tid, _parts in wanted if name is not None and not ctx.authorize(READ, TOPIC, name)}
