"""EndTxn (key 26), versions 0-5.

Commit or abort the producer's open transaction (KIP-98). The coordinator writes
PrepareCommit/PrepareAbort to ``__transaction_state`` -- from then on the outcome is decided
and survives a crash -- then writes a COMMIT/ABORT marker to every partition of the
transaction and finally CompleteCommit/CompleteAbort. We answer once the markers are written
(bounded wait; Kafka answers right after Prepare*), which spares clients a round of
CONCURRENT_TRANSACTIONS retries on their next AddPartitionsToTxn.

Errors: INVALID_PRODUCER_ID_MAPPING (unknown id or producer id), PRODUCER_FENCED (v2+;
INVALID_PRODUCER_EPOCH for v0-1, KIP-588), CONCURRENT_TRANSACTIONS (retriable: a previous
commit/abort is still completing), INVALID_TXN_STATE (e.g. commit after abort). A retried
EndTxn whose outcome already completed gets NONE. v3+ is flexible.

v5 is transactions v2 (KIP-890 part 2): the coordinator bumps the producer epoch with every
EndTxn and writes the markers with the new epoch; the response carries the producer id and epoch
the producer continues with (a new producer id at epoch 0 once the epoch is exhausted). A v5
retry carrying the previous epoch is answered with the current one; an abort with no open
transaction is allowed (it only bumps the epoch). See ``txn/coordinator.py``.
"""

from __future__ import annotations

from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import TRANSACTIONAL_ID, TXN_DENIED, WRITE, Requires
from . import RequestContext, api


@api(ApiKey.END_TXN, versions=(0, 5), authz=(Requires(WRITE, TRANSACTIONAL_ID, TXN_DENIED, "transactional_id"),))
async def handle_end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    coord = ctx.broker.txn_coordinator
    code = ErrorCode.NONE
    producer_id, producer_epoch = -1, -1
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        code = TXN_DENIED
    elif coord is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    else:
        try:
            result = await coord.end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                         bool(req.committed), transaction_version=2 if ctx.version >= 5 else 1)
            producer_id, producer_epoch = result.producer_id, result.producer_epoch
        except KafkaError as e:
            code = e.code
    if code is ErrorCode.PRODUCER_FENCED and ctx.version < 2:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return ctx.response(throttle_time_ms=0, error_code=int(code), producer_id=producer_id,
                        producer_epoch=producer_epoch)
