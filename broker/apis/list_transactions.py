"""ListTransactions (key 66), versions 0-2 (KIP-664).

``kafka-transactions.sh list``: every transactional id this coordinator knows, filtered by
state names (``state_filters``; names we do not know come back in ``unknown_state_filters``)
and producer ids. v1 adds ``duration_filter`` (KIP-994): only transactions running longer than
that many ms (-1: no filter). v2 adds ``transactional_id_pattern`` (KIP-1152), a Java regular
expression matched against the whole id; we apply it with Python's ``re.fullmatch``, which
agrees for the patterns tools use. v0 is flexible.
"""

from __future__ import annotations

import re

from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import DESCRIBE, TRANSACTIONAL_ID, TXN_DENIED, Requires
from . import RequestContext, api


@api(ApiKey.LIST_TRANSACTIONS, versions=(0, 2), authz=(
    Requires(DESCRIBE, TRANSACTIONAL_ID, TXN_DENIED, "each transactional id: unauthorized ones left out"),))
async def handle_list_transactions(ctx: RequestContext, req: ListTransactionsRequest) -> ListTransactionsResponse:
    R = ctx.response_class
    coord = ctx.broker.txn_coordinator
    if coord is None:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.COORDINATOR_NOT_AVAILABLE), unknown_state_filters=[],
                 transaction_states=[])
    duration = req.duration_filter if ctx.version >= 1 else -1
    pattern = req.transactional_id_pattern if ctx.version >= 2 else None
    try:
        rx = re.compile(pattern) if pattern else None
    except re.error:
        return R(throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST), unknown_state_filters=[],
                 transaction_states=[])
    try:
        found, unknown = coord.list_transactions(req.state_filters or [], req.producer_id_filters or [],
                                                 duration if duration is not None else -1)
    except KafkaError as e:
        return R(throttle_time_ms=0, error_code=int(e.code), unknown_state_filters=[], transaction_states=[])
    states = [R.TransactionState(transactional_id=m.transactional_id, producer_id=m.producer_id,
                                 transaction_state=m.state.wire_name)
              for m in found if (rx is None or rx.fullmatch(m.transactional_id))
              and ctx.authorize(DESCRIBE, TRANSACTIONAL_ID, m.transactional_id, log_denied=False)]
    return R(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=states)
