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
  leader's request instead (``txn/plugin.py``), the same check with the add folded in.
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

import asyncio
import logging
import time
from typing import Any

from log.validator import RecordValidationError, validate_client_batches
from protocol.api_keys import ApiKey
from protocol.errors import DuplicateSequenceError, ErrorCode, KafkaError
from protocol.records import COMPRESSION_CODES, validate_batches
from txn.plugin import verify_transactional_produce_in_cluster

from ..metadata import INTERNAL_TOPICS
from ..schema_registry.validation import validate_schema_ids
from ..security.acl import TOPIC, TOPIC_DENIED, TRANSACTIONAL_ID, TXN_DENIED, WRITE, Requires
from . import DelayedResponse, RequestContext, api

log = logging.getLogger("samsa.produce")


@api(ApiKey.PRODUCE, versions=(3, 13), authz=(
    Requires(WRITE, TRANSACTIONAL_ID, TXN_DENIED, "transactional_id, when set: every partition"),
    Requires(WRITE, TOPIC, TOPIC_DENIED, "each topic")))
async def handle_produce(ctx: RequestContext, req: Any) -> Any:
    broker = ctx.broker
    rm = broker.replica_manager
    R = ctx.response_class
    TopicResp = R.TopicProduceResponse
    PartResp = TopicResp.PartitionProduceResponse
    acks = req.acks
    stats = broker.metrics.topic_stats if broker.metrics is not None else None  # BrokerTopicMetrics
    topics_out = []
    pending: list[tuple[Any, Any, int]] = []  # (partition response, partition, required offset)
    denied: dict[str, ErrorCode] = {}
    by_id = ctx.version >= 13
    names = [_topic_name(broker, t) if by_id else t.name for t in req.topic_data]
    if broker.authorizer is not None:
        denied = _unauthorized(ctx, req, names)
    for topic, name in zip(req.topic_data, names, strict=True):
        parts_out = []
        for pdata in topic.partition_data:
            base_offset, append_time, start_offset = -1, -1, -1
            code, message, record_errors = ErrorCode.NONE, None, []
            last_offset = -1  # of the records in the log: acks=all waits for the high watermark to pass it
            try:
                if name is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, f"Topic id {topic.topic_id} is unknown")
                if denied and name in denied:
                    raise KafkaError(denied[name])
                if acks not in (-1, 0, 1):
                    raise KafkaError(ErrorCode.INVALID_REQUIRED_ACKS, f"acks={acks} is not -1, 0 or 1")
                part = rm.get_partition(name, pdata.index)
                if name in INTERNAL_TOPICS:
                    raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {name}")
                if pdata.records is None:
                    raise KafkaError(ErrorCode.INVALID_RECORD, "records are null")
                cfg = part.log.config
                records = validate_batches(pdata.records, max_batch_bytes=cfg.max_message_bytes)
                validate_client_batches(records, f"{name}-{pdata.index}", cfg, api_version=ctx.version,
                                        now_ms=int(time.time() * 1000))
                validate_schema_ids(broker, name, records, cfg)  # confluent.value.schema.validation & co
                wanted = cfg.others.get("compression.type", "producer")
                if wanted != "producer":
                    from protocol.recompress import recompress_to  # noqa: PLC0415

                    records = recompress_to(records, COMPRESSION_CODES.get(wanted, 0))
                if any(h.is_transactional for h in records.batches):
                    # KIP-890 part 1: only into a partition of the producer's open transaction
                    code = await verify_transactional_produce_in_cluster(
                        broker, req.transactional_id, name, pdata.index, records.batches,
                        add=ctx.version >= 12)
                    if code:
                        raise KafkaError(code, "the partition is not part of the producer's open transaction")
                info = part.append(records, required_acks=acks)
                base_offset, append_time, start_offset = info.first_offset, info.log_append_time, \
                    info.log_start_offset
                last_offset = info.last_offset
                if stats is not None:
                    stats.produced(name, info.last_offset - info.first_offset + 1, len(pdata.records))
            except DuplicateSequenceError as d:
                assert name is not None  # only raised by an append, which needs the name
                part = rm.get_partition(name, pdata.index)
                base_offset, start_offset, last_offset = d.first_offset, part.log_start_offset, d.last_offset
                append_time = d.timestamp if part.log.config.log_append_time else -1
            except KafkaError as e:
                code, message = e.code, e.message
                if isinstance(e, RecordValidationError):  # KIP-467: which records, and why
                    record_errors = [PartResp.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                     for i, m in e.record_errors]
                if stats is not None and name is not None:
                    stats.produce_failed(name, int(code))
                if code not in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                ErrorCode.UNKNOWN_TOPIC_ID):
                    log.info("Produce to %s-%d from %r failed: %s", name, pdata.index,
                             ctx.header.client_id, e)
            presp = PartResp(index=pdata.index, error_code=int(code), base_offset=base_offset,
                             log_append_time_ms=append_time, log_start_offset=start_offset,
                             record_errors=record_errors, error_message=message)
            parts_out.append(presp)
            if acks == -1 and code == ErrorCode.NONE and last_offset >= part.high_watermark:
                pending.append((presp, part, last_offset + 1))
        topics_out.append(TopicResp(topic_id=topic.topic_id, partition_responses=parts_out) if by_id
                          else TopicResp(name=name, partition_responses=parts_out))
    quotas = broker.quotas
    if quotas is not None and quotas.enabled:
        size = sum(len(p.records or b"") for t in req.topic_data for p in t.partition_data)
        ctx.throttle_ms = quotas.record("producer_byte_rate", ctx.principal, ctx.header.client_id, size)
    if acks == 0:
        return None
    if pending:  # delayed produce: the records are in the log; the response waits for the ISR
        return DelayedResponse(_when_replicated(ctx, req, pending, topics_out, names))
    return _response(ctx, topics_out, names)


async def _when_replicated(ctx: RequestContext, req: Any, pending: list[tuple[Any, Any, int]],
                           topics_out: list[Any], names: list[str | None]) -> Any:
    """Kafka's DelayedProduce: done when every partition's high watermark passed its records,
    or the request's timeout (REQUEST_TIMED_OUT), or the ISR fell below min.insync.replicas."""
    results = await asyncio.gather(*(p.wait_for_replication(offset, max(req.timeout_ms, 0) / 1000)
                                     for _r, p, offset in pending), return_exceptions=True)
    for (presp, _p, _o), res in zip(pending, results, strict=True):
        if isinstance(res, KafkaError):
            presp.error_code, presp.error_message = int(res.code), res.message
        elif isinstance(res, BaseException):
            raise res
    return _response(ctx, topics_out, names)


def _response(ctx: RequestContext, topics_out: list[Any], names: list[str | None]) -> Any:
    R = ctx.response_class
    extra: dict[str, Any] = {}
    if ctx.version >= 10 and ctx.broker.metadata_cache is not None:
        extra["node_endpoints"] = _leader_hints(ctx, R, topics_out, names)
    return R(responses=topics_out, throttle_time_ms=ctx.throttle_ms, **extra)


def _topic_name(broker: Any, topic: Any) -> str | None:
    """v13+: the name of the topic a request names by id; None for an unknown id."""
    info = broker.topics.by_id(topic.topic_id) if topic.topic_id is not None else None
    return info.name if info is not None else None


def _leader_hints(ctx: RequestContext, R: Any, topics_out: list[Any], names: list[str | None]) -> list[Any]:
    """KIP-951 (v10+): a partition led elsewhere names its current leader, and the response that
    leader's endpoint, so the producer retries there without a Metadata round trip."""
    cache = ctx.broker.metadata_cache
    PartResp = R.TopicProduceResponse.PartitionProduceResponse
    leaders: set[int] = set()
    for t, name in zip(topics_out, names, strict=True):
        for p in t.partition_responses:
            if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and name is not None:
                pm = cache.partition(name, p.index)
                if pm is not None and pm.leader >= 0:
                    p.current_leader = PartResp.LeaderIdAndEpoch(leader_id=pm.leader, leader_epoch=pm.leader_epoch)
                    leaders.add(pm.leader)
    out = []
    for b in sorted(leaders):
        info = cache.brokers.get(b)
        if info is not None:
            ep = info.endpoint(ctx.broker.advertised.name)
            out.append(R.NodeEndpoint(node_id=b, host=ep.host, port=ep.port, rack=info.rack))
    return out


def _unauthorized(ctx: RequestContext, req: Any, names: list[str | None]) -> dict[str, ErrorCode]:
    """Topic -> the authorization error its partitions answer (Kafka's order of checks)."""
    tid = req.transactional_id
    known = [n for n in names if n is not None]
    if tid is not None and not ctx.authorize(WRITE, TRANSACTIONAL_ID, tid):
        return dict.fromkeys(known, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return {n: ErrorCode.TOPIC_AUTHORIZATION_FAILED for n in known if not ctx.authorize(WRITE, TOPIC, n)}
