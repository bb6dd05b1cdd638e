"""DescribeTransactions (key 65), version 0 (KIP-664).

``kafka-transactions.sh describe``: for each transactional id, its state (Kafka's wire names:
``Empty``, ``Ongoing``, ``PrepareCommit`` ...), timeout, start time, producer id and epoch,
and the partitions of the open transaction. Unknown ids get TRANSACTIONAL_ID_NOT_FOUND; the
whole request COORDINATOR_LOAD_IN_PROGRESS while ``__transaction_state`` is loading. v0 is
flexible.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import DESCRIBE, TRANSACTIONAL_ID, TXN_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.DESCRIBE_TRANSACTIONS, versions=(0, 0), authz=(
    Requires(DESCRIBE, TRANSACTIONAL_ID, TXN_DENIED, "each transactional id"),))
async def handle_describe_transactions(ctx: RequestContext, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    R = ctx.response_class
    State = R.TransactionState
    coord = ctx.broker.txn_coordinator
    out = []
    for tid in req.transactional_ids:
        try:
            if not ctx.authorize(DESCRIBE, TRANSACTIONAL_ID, tid):
                raise KafkaError(TXN_DENIED)
            if coord is None:
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            m = coord.describe(tid)
        except KafkaError as e:
            out.append(State(error_code=int(e.code), transactional_id=tid, transaction_state="",
                             transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                             producer_epoch=-1, topics=[]))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(m.partitions):
            by_topic.setdefault(topic, []).append(p)
        out.append(State(error_code=0, transactional_id=tid, transaction_state=m.state.wire_name,
                         transaction_timeout_ms=m.txn_timeout_ms, transaction_start_time_ms=m.txn_start_timestamp,
                         producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                         topics=[State.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return R(throttle_time_ms=0, transaction_states=out)
