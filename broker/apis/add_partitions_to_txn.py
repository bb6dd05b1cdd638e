"""AddPartitionsToTxn (key 24), versions 0-5.

A transactional producer names every partition before it first writes to it in a transaction
(KIP-98); the coordinator records them in ``__transaction_state`` (Empty/Complete* -> Ongoing)
so that EndTxn knows where to write markers.

* v0-3: one transaction per request (``v3_and_below_*`` fields); per-partition errors. If any
  partition is unknown, that partition gets UNKNOWN_TOPIC_OR_PARTITION and every other one
  OPERATION_NOT_ATTEMPTED, and nothing is added (as Kafka). Coordinator errors apply to all.
* v2+: PRODUCER_FENCED is sent as is; v0-1 clients get INVALID_PRODUCER_EPOCH instead (KIP-588).
* v4+ (KIP-890 part 1): the batched broker-to-broker form, several transactions per request,
  each with ``verify_only``: verification answers whether the partitions are already in the
  open transaction (NONE / INVALID_TXN_STATE) without adding them. v5 is what a partition
  leader sends for transactions v2 (KIP-890 part 2, Produce v12 / TxnOffsetCommit v5): with
  ``verify_only`` false it adds the partitions, starting a v2 transaction if none is open.
* v3+ is flexible (KIP-482).
"""

from __future__ import annotations

from kafka.protocol.data_container import DataContainer
from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import (
    CLUSTER,
    CLUSTER_ACTION,
    CLUSTER_DENIED,
    CLUSTER_NAME,
    TOPIC,
    TOPIC_DENIED,
    TRANSACTIONAL_ID,
    TXN_DENIED,
    WRITE,
    Requires,
)
from . import RequestContext, api


def _fenced(code: ErrorCode, version: int) -> ErrorCode:
    return ErrorCode.INVALID_PRODUCER_EPOCH if code is ErrorCode.PRODUCER_FENCED and version < 2 else code


async def _add(ctx: RequestContext, tid: str, pid: int, epoch: int, topics: list[DataContainer],
               verify_only: bool, transaction_version: int = 0) -> dict[tuple[str, int], ErrorCode]:
    parts = [(t.name, p) for t in topics for p in t.partitions]
    if ctx.broker.authorizer is not None:
        if not ctx.authorize(WRITE, TRANSACTIONAL_ID, tid):
            return dict.fromkeys(parts, TXN_DENIED)
        denied = {t.name for t in topics if not ctx.authorize(WRITE, TOPIC, t.name)}
        if denied:
            return {tp: TOPIC_DENIED if tp[0] in denied else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in parts}
    coord = ctx.broker.txn_coordinator
    if coord is None:
        return dict.fromkeys(parts, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    rm = ctx.broker.replica_manager
    unknown = {tp for tp in parts if not rm.partition_exists(*tp)}
    if unknown:
        return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in parts}
    if verify_only:
        return coord.verify_partitions(tid, pid, epoch, parts)
    try:
        await coord.add_partitions(tid, pid, epoch, parts, transaction_version)
        code = ErrorCode.NONE
    except KafkaError as e:
        code = e.code
    return dict.fromkeys(parts, code)


def _topic_results(R: type[DataContainer], results: dict[tuple[str, int], ErrorCode], version: int) -> list[DataContainer]:
    TopicResult = R.AddPartitionsToTxnTopicResult
    PartResult = TopicResult.AddPartitionsToTxnPartitionResult
    by_topic: dict[str, list[DataContainer]] = {}
    for (topic, p), code in results.items():
        by_topic.setdefault(topic, []).append(
            PartResult(partition_index=p, partition_error_code=int(_fenced(code, version))))
    return [TopicResult(name=t, results_by_partition=rs) for t, rs in by_topic.items()]


@api(ApiKey.ADD_PARTITIONS_TO_TXN, versions=(0, 5), authz=(
    Requires(WRITE, TRANSACTIONAL_ID, TXN_DENIED, "transactional_id (v0-3): every partition"),
    Requires(WRITE, TOPIC, TOPIC_DENIED, "each topic (v0-3); the others OPERATION_NOT_ATTEMPTED"),
    Requires(CLUSTER_ACTION, CLUSTER, CLUSTER_DENIED, "v4+ (broker to broker): top-level error")))
async def handle_add_partitions_to_txn(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    R = ctx.response_class
    if ctx.version <= 3:
        results = await _add(ctx, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                             req.v3_and_below_producer_epoch, req.v3_and_below_topics, False)
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(R, results, ctx.version))
    if not ctx.authorize(CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        return R(throttle_time_ms=0, error_code=int(CLUSTER_DENIED), results_by_transaction=[])
    out = []
    for txn in req.transactions:
        results = await _add(ctx, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                             txn.verify_only, 2 if ctx.version >= 5 else 0)
        out.append(R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                              topic_results=_topic_results(R, results, ctx.version)))
    return R(throttle_time_ms=0, error_code=0, results_by_transaction=out)
