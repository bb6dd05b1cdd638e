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

In a cluster the coordinator of a key is the leader of its partition of ``__consumer_offsets``
(``abs(hash(group)) % partitions``) or ``__transaction_state``, as the metadata cache knows it;
the internal topic is created on the first lookup with ``offsets.topic.replication.factor`` /
``transaction.state.log.replication.factor`` replicas (COORDINATOR_NOT_AVAILABLE while fewer
brokers are alive, and while the partition has no leader).
"""

from __future__ import annotations

from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from groupcoord.coordinator import GroupCoordinator
from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from txn.coordinator import TransactionCoordinator

from ..auto_topic_creation import (
    GROUP_METADATA_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
    ensure_internal_topic,
)
from ..security.acl import DESCRIBE, GROUP, GROUP_DENIED, TRANSACTIONAL_ID, TXN_DENIED, Requires
from . import RequestContext, api

GROUP_KEY, TRANSACTION_KEY = 0, 1


async def _lookup(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, str | None]:
    if key_type == GROUP_KEY and not ctx.authorize(DESCRIBE, GROUP, key):
        return GROUP_DENIED, "Group authorization failed."
    if key_type == TRANSACTION_KEY and not ctx.authorize(DESCRIBE, TRANSACTIONAL_ID, key):
        return TXN_DENIED, "Transactional Id authorization failed."
    coord: GroupCoordinator | TransactionCoordinator
    if key_type == GROUP_KEY:
        coord, topic = ctx.broker.group_coordinator, GROUP_METADATA_TOPIC_NAME
    elif key_type == TRANSACTION_KEY:
        coord, topic = ctx.broker.txn_coordinator, TRANSACTION_STATE_TOPIC_NAME
    else:
        return ErrorCode.INVALID_REQUEST, f"Unsupported key type {key_type}"
    if coord is None or await ensure_internal_topic(ctx.broker, topic) is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available."
    return ErrorCode.NONE, None


async def _cluster_lookup(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, str | None, int, str, int]:
    """In a cluster: (code, message, node, host, port) of the leader of ``key``'s partition of the
    internal topic, as the metadata cache knows it."""
    broker = ctx.broker
    code, message = await _lookup(ctx, key_type, key)
    if code is not ErrorCode.NONE:
        return code, message, -1, "", -1
    coord = broker.group_coordinator if key_type == GROUP_KEY else broker.txn_coordinator
    topic = GROUP_METADATA_TOPIC_NAME if key_type == GROUP_KEY else TRANSACTION_STATE_TOPIC_NAME
    partition = coord.partition_for(key)
    pm = broker.metadata_support.partition(topic, partition)
    ep = broker.metadata_support.leader_endpoint(topic, partition, ctx.listener_name)
    if pm is None or ep is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", -1, "", -1
    return ErrorCode.NONE, None, pm.leader, ep.host, ep.port


@api(ApiKey.FIND_COORDINATOR, versions=(0, 6), authz=(
    Requires(DESCRIBE, GROUP, GROUP_DENIED, "key, for key type GROUP"),
    Requires(DESCRIBE, TRANSACTIONAL_ID, TXN_DENIED, "key, for key type TRANSACTION")))
async def handle_find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest) -> FindCoordinatorResponse:
    R = ctx.response_class
    adv = ctx.advertised
    node = ctx.broker.broker_id
    key_type = req.key_type if ctx.version >= 1 else GROUP_KEY
    keys = list(req.coordinator_keys) if ctx.version >= 4 else [req.key]
    results = []
    for key in keys:
        if key_type in (GROUP_KEY, TRANSACTION_KEY):
            results.append(await _cluster_lookup(ctx, key_type, key))
            continue
        code, message = await _lookup(ctx, key_type, key)
        ok = code is ErrorCode.NONE
        results.append((code, message, node if ok else -1, adv.host if ok else "", adv.port if ok else -1))
    if ctx.version >= 4:
        return R(throttle_time_ms=0, coordinators=[
            R.Coordinator(key=key, node_id=n, host=h, port=p, error_code=int(code), error_message=message)
            for key, (code, message, n, h, p) in zip(keys, results, strict=True)])
    code, message, n, h, p = results[0]
    return R(throttle_time_ms=0, error_code=int(code), error_message=message, node_id=n, host=h, port=p)
