"""Produce (key 0), versions 3-13.

Hot path. Each partition's records are treated as opaque v2 batches: the 61-byte headers are
read, CRCs checked, compressed payloads verified as Kafka's LogValidator does, then the log
patches base offsets and appends the bytes as sent. Records are never decoded one by one
unless the topic's ``compression.type`` asks for a codec the producer did not use.

* acks: 0 (no response), 1 (answered once the leader has appended) and -1/all: answered when
  every in-sync replica has the batch, i.e. when the high watermark passes it (on a single broker
  at once; in a cluster a delayed produce completed by follower fetches, bounded by the request's
  ``timeout_ms`` -> REQUEST_TIMED_OUT; the handler returns a ``DelayedResponse`` so that the
  connection serves the producer's next requests meanwhile). ``min.insync.replicas`` is checked before the append
  (NOT_ENOUGH_REPLICAS) and after it (NOT_ENOUGH_REPLICAS_AFTER_APPEND). Other values:
  INVALID_REQUIRED_ACKS. A partition led elsewhere gets NOT_LEADER_OR_FOLLOWER.
* Idempotence (KIP-98): the log's producer state answers a retried batch with the offset it
  got the first time (NONE), a gap with OUT_OF_ORDER_SEQUENCE_NUMBER and a stale epoch with
  INVALID_PRODUCER_EPOCH; nothing is written in those cases. With acks=all the retry's answer
  waits, as a first attempt's does, until the high watermark has passed the batch: a retry
  often follows a leader change or a timeout, when the batch may be on the leader alone.
* Transactional batches are verified against the transaction coordinator (KIP-890 part 1):
  a partition not in the producer's ongoing transaction is refused, so no late or zombie write
  can open a transaction that no marker will close. From v12 (transactions v2, KIP-890 part 2)
  the producer no longer sends AddPartitionsToTxn: the coordinator adds the partition on the
  leader's request instead (``broker/coordinators/transactions.py``), the same check with the
  add folded in.
* Authorization: WRITE on the transactional id when the request carries one (else every
  partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic (else
  TOPIC_AUTHORIZATION_FAILED, decided before the topic's existence so nothing leaks).
  Quotas: the records' bytes count against ``producer_byte_rate`` (KIP-219 throttling).
* Kafka's log validation (``log/validator.py``): one batch per partition, base offset 0,
  sequences, no control batches from clients, keys on compacted topics and KIP-937 timestamp
  bounds, with ``record_errors`` naming the failing records (KIP-467); nothing is appended.
  Topics with ``confluent.value.schema.validation`` (or the key's, or Redpanda's synonyms) also
  refuse records without a registered schema id (broker/schema_registry/validation.py).
* Errors are per partition; v8+ adds ``error_message`` (KIP-467). Clients may not write to the
  internal topics (INVALID_TOPIC_EXCEPTION); only the coordinators append there.
* v3 is the first version with v2 record batches; v9 is flexible (KIP-482); v10-11 add the
  leader-discovery tags (KIP-951): in a cluster a NOT_LEADER_OR_FOLLOWER partition carries the
  current leader and the response its endpoint; a single broker leaves them empty. v12 is v11 on
  the wire (transactions v2 above); v13 names topics by id (KIP-516): an unknown id answers
  UNKNOWN_TOPIC_ID on each of its partitions, and the response names topics by the same ids.
"""

from __future__ import annotations

import logging
from typing import Any

from kafka.protocol.data_container import DataContainer
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.produce_codec import PartitionResponse, TopicResponse, encode_produce_response
from protocol.records import BatchHeader

from ..metrics.stats import note_errors
from ..replica.replica_manager import PartitionProduceResult
from ..schema_registry.validation import prepare_schema_validation, validate_schema_ids
from ..security.acl import TOPIC, TOPIC_DENIED, TRANSACTIONAL_ID, TXN_DENIED, WRITE, Requires
from ..services import BrokerServices
from . import DelayedResponse, EncodedResponse, RequestContext, api

log = logging.getLogger("samsa.produce")


@api(ApiKey.PRODUCE, versions=(3, 13), authz=(
    Requires(WRITE, TRANSACTIONAL_ID, TXN_DENIED, "transactional_id, when set: every partition"),
    Requires(WRITE, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_produce(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | DelayedResponse | None:
    broker = ctx.broker
    acks = req.acks
    stats = broker.metrics.topic_stats if broker.metrics is not None else None  # BrokerTopicMetrics
    by_id = ctx.version >= 13
    names = [_topic_name(broker, t) if by_id else t.name for t in req.topic_data]
    denied: dict[str, ErrorCode] = _unauthorized(ctx, req, names) if broker.authorizer is not None else {}
    # Refused here (unknown id, not authorized); the rest is the replica manager's appendRecords.
    refused: dict[tuple[int, int], PartitionProduceResult] = {}
    entries: list[tuple[str, int, Any]] = []
    for ti, (topic, name) in enumerate(zip(req.topic_data, names, strict=True)):
        for pi, pdata in enumerate(topic.partition_data):
            if name is None:
                refused[ti, pi] = PartitionProduceResult(ErrorCode.UNKNOWN_TOPIC_ID,
                                                         f"Topic id {topic.topic_id} is unknown")
            elif name in denied:
                refused[ti, pi] = PartitionProduceResult(denied[name])
                if stats is not None:
                    stats.produce_failed(name, int(denied[name]))
                log.info("Produce to %s-%d from %r failed: %s", name, pdata.index, ctx.header.client_id,
                         denied[name].name)
            else:
                entries.append((name, pdata.index, pdata.records))

    async def verify(topic: str, partition: int, batches: list[BatchHeader]) -> ErrorCode:
        # KIP-890: v12+ adds the partition to the transaction on the leader's request
        verifier = broker.txn_verifier
        if verifier is None:
            return ErrorCode.NONE
        return await verifier.verify_produce(req.transactional_id, topic, partition, batches, add=ctx.version >= 12)

    def validate_schemas(topic: str, records: Any, cfg: Any) -> None:  # confluent.value.schema.validation & co
        validate_schema_ids(broker, topic, records, cfg)

    await prepare_schema_validation(broker, entries)  # ids registered a moment ago are known to the check
    appended, delayed = await broker.replica_manager.append_records(
        entries, required_acks=acks, timeout_ms=req.timeout_ms, api_version=ctx.version, verify_transaction=verify,
        record_validator=validate_schemas, stats=stats, client_id=ctx.header.client_id)
    it = iter(appended)
    results = [[refused.get((ti, pi)) or next(it) for pi in range(len(t.partition_data))]
               for ti, t in enumerate(req.topic_data)]
    quotas = broker.quotas
    if quotas is not None and quotas.enabled:
        size = sum(len(p.records or b"") for t in req.topic_data for p in t.partition_data)
        ctx.throttle_ms = quotas.record("producer_byte_rate", ctx.principal, ctx.header.client_id, size)
    if acks == 0:
        return None
    if delayed is not None:  # delayed produce: the records are in the log; the response waits for the ISR
        # Kafka's DelayedProduce: done when every partition's high watermark passed its records, or
        # the request's timeout (REQUEST_TIMED_OUT), or the ISR fell below min.insync.replicas
        return DelayedResponse(delayed, lambda: _response(ctx, req, results, names))
    return _response(ctx, req, results, names)


def _response(ctx: RequestContext, req: ProduceRequest, results: list[list[PartitionProduceResult]],
              names: list[str | None]) -> Any:
    if _plain(ctx, results):
        return _encoded(ctx, req, results, names)
    R = ctx.response_class
    TopicResp = R.TopicProduceResponse
    PartResp = TopicResp.PartitionProduceResponse
    topics_out = []
    for topic, name, rows in zip(req.topic_data, names, results, strict=True):
        parts_out = [PartResp(index=pdata.index, error_code=int(r.error), base_offset=r.base_offset,
                              log_append_time_ms=r.log_append_time, log_start_offset=r.log_start_offset,
                              record_errors=[PartResp.BatchIndexAndErrorMessage(batch_index=i,
                                                                                batch_index_error_message=m)
                                             for i, m in r.record_errors],
                              error_message=r.message)
                     for pdata, r in zip(topic.partition_data, rows, strict=True)]
        topics_out.append(TopicResp(topic_id=topic.topic_id, partition_responses=parts_out) if ctx.version >= 13
                          else TopicResp(name=name, partition_responses=parts_out))
    extra: dict[str, object] = {}
    if ctx.version >= 10:
        hints = _leader_hints(ctx, R, topics_out, names)
        if hints:
            extra["node_endpoints"] = hints
    return R(responses=topics_out, throttle_time_ms=ctx.throttle_ms, **extra)


def _plain(ctx: RequestContext, results: list[list[PartitionProduceResult]]) -> bool:
    """The common shape, which :func:`protocol.produce_codec.encode_produce_response` writes: no
    KIP-951 leader hints (v10+, a partition led elsewhere), and no client quotas (whose
    request_percentage throttle the request channel patches into the response object later)."""
    quotas = ctx.broker.quotas
    if quotas is not None and quotas.enabled:
        return False
    return ctx.version < 10 or all(r.error != ErrorCode.NOT_LEADER_OR_FOLLOWER for rows in results for r in rows)


def _encoded(ctx: RequestContext, req: ProduceRequest, results: list[list[PartitionProduceResult]],
             names: list[str | None]) -> EncodedResponse:
    """The response framed here (the same bytes kafka-python's ProduceResponse encodes to, ~8 % of
    a cluster's CPU under acks=all; issue #26), with the error counts the request channel would
    have taken from the response object."""
    by_id = ctx.version >= 13  # before v13 a request's topics have no id (read as the default, slowly)
    topics_out = [TopicResponse(name, topic.topic_id if by_id else None, [
        PartitionResponse(pdata.index, int(r.error), r.base_offset, r.log_append_time, r.log_start_offset,
                          r.record_errors, r.message)
        for pdata, r in zip(topic.partition_data, rows, strict=True)])
        for topic, name, rows in zip(req.topic_data, names, results, strict=True)]
    if ctx.broker.metrics is not None:  # RequestMetrics ErrorsPerSec: each partition's code
        errors: dict[int, int] = {}
        for t in topics_out:
            for p in t.partitions:
                errors[p.error_code] = errors.get(p.error_code, 0) + 1
        note_errors(errors)
    frame = encode_produce_response(ctx.version, ctx.header.correlation_id, topics_out, ctx.throttle_ms)
    return EncodedResponse([frame], len(frame))


def _topic_name(broker: BrokerServices, topic: Any) -> str | None:
    """v13+: the name of the topic a request names by id; None for an unknown id."""
    info = broker.topics.by_id(topic.topic_id) if topic.topic_id is not None else None
    return info.name if info is not None else None


def _leader_hints(ctx: RequestContext, R: type[DataContainer], topics_out: list[DataContainer], names: list[str | None]) -> list[DataContainer]:
    """KIP-951 (v10+): a partition led elsewhere names its current leader, and the response that
    leader's endpoint, so the producer retries there without a Metadata round trip."""
    support = ctx.broker.metadata_support
    PartResp = R.TopicProduceResponse.PartitionProduceResponse
    leaders: set[int] = set()
    for t, name in zip(topics_out, names, strict=True):
        for p in t.partition_responses:
            if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and name is not None:
                pm = support.partition(name, p.index)
                if pm is not None and pm.leader >= 0:
                    p.current_leader = PartResp.LeaderIdAndEpoch(leader_id=pm.leader, leader_epoch=pm.leader_epoch)
                    leaders.add(pm.leader)
    out = []
    for b in sorted(leaders):
        info = support.live_broker(b)
        if info is not None:
            ep = info.endpoint(ctx.broker.advertised.name)
            out.append(R.NodeEndpoint(node_id=b, host=ep.host, port=ep.port, rack=info.rack))
    return out


def _unauthorized(ctx: RequestContext, req: ProduceRequest, names: list[str | None]) -> dict[str, ErrorCode]:
    """Topic -> the authorization error its partitions answer (Kafka's order of checks)."""
    tid = req.transactional_id
    known = [n for n in names if n is not None]
    if tid is not None and not ctx.authorize(WRITE, TRANSACTIONAL_ID, tid):
        return dict.fromkeys(known, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return {n: ErrorCode.TOPIC_AUTHORIZATION_FAILED for n in known if not ctx.authorize(WRITE, TOPIC, n)}
