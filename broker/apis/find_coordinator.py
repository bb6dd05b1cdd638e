"""FindCoordinator (key 10), versions 0-6.

Answers which broker coordinates a consumer group (``key_type`` 0) or a transactional id
(``key_type`` 1): on a single broker, always this one, as the leader of every
``__consumer_offsets`` / ``__transaction_state`` partition. As in Kafka, the first request for a
key type creates that internal topic (``broker/auto_topic_creation.py``: with
``offsets.topic.num.partitions`` / ``transaction.state.log.num.partitions`` partitions).
COORDINATOR_NOT_AVAILABLE until the matching coordinator has started or while its topic cannot
be had; share-group keys (``key_type`` 2, KIP-932) get INVALID_REQUEST.

Version notes: v1 adds ``key_type`` (KIP-98) and ``error_message``; v3 is flexible (KIP-482);
v4 batches several keys in ``coordinator_keys`` with one result each (KIP-699); v5 (KIP-890)
and v6 (KIP-932) change nothing a classic client sees.
"""

from __future__ import annotations

from typing import Any

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..auto_topic_creation import (
    GROUP_METADATA_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
    ensure_internal_topic,
)
from . import RequestContext, api

GROUP_KEY, TRANSACTION_KEY = 0, 1


async def _lookup(ctx: RequestContext, key_type: int) -> tuple[ErrorCode, str | None]:
    if key_type == GROUP_KEY:
        coord, topic = ctx.broker.group_coordinator, GROUP_METADATA_TOPIC_NAME
    elif key_type == TRANSACTION_KEY:
        coord, topic = ctx.broker.txn_coordinator, TRANSACTION_STATE_TOPIC_NAME
    else:
        return ErrorCode.INVALID_REQUEST, f"Unsupported key type {key_type}"
    if coord is None or await ensure_internal_topic(ctx.broker, topic) is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
    return ErrorCode.NONE, None


@api(ApiKey.FIND_COORDINATOR, versions=(0, 6))
async def handle_find_coordinator(ctx: RequestContext, req: Any) -> Any:
    R = ctx.response_class
    adv = ctx.broker.advertised
    node = ctx.broker.broker_id
    key_type = req.key_type if ctx.version >= 1 else GROUP_KEY
    code, message = await _lookup(ctx, key_type)
    ok = code is ErrorCode.NONE
    if ctx.version >= 4:
        return R(throttle_time_ms=0, coordinators=[
            R.Coordinator(key=key, node_id=node if ok else -1, host=adv.host if ok else "",
                          port=adv.port if ok else -1, error_code=int(code), error_message=message)
            for key in req.coordinator_keys])
    return R(throttle_time_ms=0, error_code=int(code), error_message=message,
             node_id=node if ok else -1, host=adv.host if ok else "", port=adv.port if ok else -1)
