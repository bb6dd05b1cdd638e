"""InitProducerId (key 22), versions 0-6.

Without a transactional id (idempotent producers, KIP-98) the broker hands out a fresh
producer id from the never-repeating :class:`txn.producer_ids.ProducerIdManager`, epoch 0.
KIP-360 (v3+): an idempotent producer that sends its current id and epoch after an
UNKNOWN_PRODUCER_ID / OUT_OF_ORDER_SEQUENCE error gets the same id with epoch + 1 (a new id
once the epoch would overflow), so it can reset its sequences without losing ordering.
Transactional ids are handed to the transaction coordinator when one is running.

v6 (KIP-939) lets a producer ask for two-phase-commit transactions (``enable_2pc``, with
``keep_prepared_txn`` to resume one prepared before a restart). Samsa does not offer them, as a
Kafka broker with ``transaction.two.phase.commit.enable=false`` (its default): such a request
gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, ``keep_prepared_txn`` without 2PC INVALID_REQUEST,
and the response's ``ongoing_txn_producer_id``/``epoch`` are always -1.
"""

from __future__ import annotations

from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..security.acl import (
    CLUSTER,
    CLUSTER_DENIED,
    CLUSTER_NAME,
    IDEMPOTENT_WRITE,
    TOPIC,
    TRANSACTIONAL_ID,
    TXN_DENIED,
    WRITE,
    Requires,
)
from . import RequestContext, api

MAX_EPOCH = 32767


@api(ApiKey.INIT_PRODUCER_ID, versions=(0, 6), authz=(
    Requires(WRITE, TRANSACTIONAL_ID, TXN_DENIED, "transactional_id, when set"),
    Requires(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_DENIED, "without a transactional id: IDEMPOTENT_WRITE on the "
             "cluster or WRITE on any topic (KIP-679)")))
async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    broker = ctx.broker
    if ctx.version >= 6 and (req.enable2_pc or req.keep_prepared_txn):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if req.enable2_pc else ErrorCode.INVALID_REQUEST
        return ctx.response(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    try:  # in a cluster the next producer-id block may still be on its way from ZooKeeper
        await broker.metadata_support.producer_ids_ready()
    except KafkaError as e:
        return ctx.response(throttle_time_ms=0, error_code=e.code, producer_id=-1, producer_epoch=-1)
    if req.transactional_id is not None:
        if not ctx.authorize(WRITE, TRANSACTIONAL_ID, req.transactional_id):
            return ctx.response(throttle_time_ms=0, error_code=TXN_DENIED, producer_id=-1, producer_epoch=-1)
        coord = broker.txn_coordinator
        if coord is None:
            return ctx.response(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                producer_id=-1, producer_epoch=-1)
        # Transactional ids (txn engineer): txn/coordinator.py does fencing, KIP-360 bumps and
        # epoch exhaustion; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4 (KIP-588).
        try:
            res = await coord.init_producer_id(
                req.transactional_id, req.transaction_timeout_ms,
                req.producer_id if ctx.version >= 3 else -1, req.producer_epoch if ctx.version >= 3 else -1)
            pid, epoch, code = res.producer_id, res.producer_epoch, ErrorCode.NONE
        except KafkaError as e:
            pid, epoch, code = -1, -1, e.code
            if code is ErrorCode.PRODUCER_FENCED and ctx.version < 4:
                code = ErrorCode.INVALID_PRODUCER_EPOCH
        return ctx.response(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)

    authorizer = broker.authorizer
    if authorizer is not None and not ctx.authorize(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME, log_denied=False) \
            and not authorizer.authorize_by_resource_type(ctx.principal, ctx.client_host, WRITE, TOPIC):
        return ctx.response(throttle_time_ms=0, error_code=CLUSTER_DENIED, producer_id=-1, producer_epoch=-1)
    pid_in = getattr(req, "producer_id", -1) if ctx.version >= 3 else -1
    epoch_in = getattr(req, "producer_epoch", -1) if ctx.version >= 3 else -1
    if pid_in >= 0 and epoch_in >= 0 and epoch_in < MAX_EPOCH - 1:
        pid, epoch = pid_in, epoch_in + 1
    else:
        pid, epoch = broker.producer_ids.generate(), 0
    return ctx.response(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=epoch)
