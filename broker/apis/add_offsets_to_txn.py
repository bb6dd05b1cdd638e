"""AddOffsetsToTxn (key 25), versions 0-4.

``sendOffsetsToTransaction`` starts with this request: the ``__consumer_offsets`` partition
of ``group_id`` (``abs(hashCode(group_id)) % offsets.topic.num.partitions``) joins the
transaction, so EndTxn writes a marker there too and the group's offsets committed with
TxnOffsetCommit become visible exactly when the transaction commits (KIP-98). The producer
then sends TxnOffsetCommit to the group coordinator.

v2+ answers PRODUCER_FENCED; v0-1 clients get INVALID_PRODUCER_EPOCH (KIP-588). v3+ is
flexible; v4 only adds TRANSACTION_ABORTABLE (KIP-890), never sent here.
"""

from __future__ import annotations

from kafka.protocol.producer import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import GROUP, GROUP_DENIED, READ, TRANSACTIONAL_ID, TXN_DENIED, WRITE, Requires
from . import RequestContext, api


@api(ApiKey.ADD_OFFSETS_TO_TXN, versions=(0, 4), authz=(
    Requires(WRITE, TRANSACTIONAL_ID, TXN_DENIED, "transactional_id"), Requires(READ, GROUP, GROUP_DENIED, "group_id")))
async def handle_add_offsets_to_txn(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    coord = ctx.broker.txn_coordinator
    code = ErrorCode.NONE
    if not ctx.authorize(WRITE, TRANSACTIONAL_ID, req.transactional_id):
        code = TXN_DENIED
    elif not ctx.authorize(READ, GROUP, req.group_id):
        code = GROUP_DENIED
    elif coord is None:
        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    elif not req.group_id:
        code = ErrorCode.INVALID_GROUP_ID
    else:
        try:
            await coord.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
        except KafkaError as e:
            code = e.code
    if code is ErrorCode.PRODUCER_FENCED and ctx.version < 2:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return ctx.response(throttle_time_ms=0, error_code=int(code))
