"""GetTelemetrySubscriptions (key 71) and PushTelemetry (key 72), version 0 (KIP-714).

Client metrics: a client asks the broker which of its metrics to push, and how often, then pushes
them as OpenTelemetry ``MetricsData``. Samsa has no client-metrics subscriptions and no receiver
plugin, so it answers as a Kafka broker does whose subscription set is empty: a subscription
with no ``RequestedMetrics``, which tells the client to push nothing and to ask again after
``PushIntervalMs``. Java clients (3.7+) ask on their first connection whatever the broker
advertises; answering keeps them from logging telemetry failures and retrying.

GetTelemetrySubscriptions: a request whose ``ClientInstanceId`` is zero is given a new random id
(``Uuid.randomUuid()``); any other id is answered back unchanged, as Kafka's ``ClientMetricsManager``
does (the Java client rejects a response whose id is zero, whatever the schema's note says). ``SubscriptionId`` is a
checksum of the subscription (interval, metrics), so it is stable across restarts and the same
on every broker, like Kafka's hash of its subscription set.

PushTelemetry is validated as Kafka's ``ClientMetricsManager`` does, then the payload is dropped
(nothing receives it): a zero client instance id is INVALID_REQUEST, a subscription id that is not
the current one UNKNOWN_SUBSCRIPTION_ID, a compression type outside the accepted list
UNSUPPORTED_COMPRESSION_TYPE, metrics larger than ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE.
Neither API needs an ACL in Kafka.
"""

from __future__ import annotations

import uuid
import zlib

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from protocol.kafka_uuid import ZERO
from protocol.kip714 import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

from ..security.acl import NO_AUTHZ
from . import RequestContext, api

PUSH_INTERVAL_MS = 300_000  # Kafka's ClientMetricsConfigs default interval (5 minutes)
REQUESTED_METRICS: list[str] = []  # the empty subscription: push nothing
# Kafka's order of preference: zstd, lz4, gzip, snappy (plus none, which is always accepted).
ACCEPTED_COMPRESSION_TYPES = [4, 3, 1, 2]
_NONE = 0


def subscription_id() -> int:
    """A stable id for the current (empty) subscription, as a signed int32."""
    digest = zlib.crc32(f"{PUSH_INTERVAL_MS}|{','.join(REQUESTED_METRICS)}".encode())
    return digest - (1 << 32) if digest >= 1 << 31 else digest


@api(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, versions=(0, 0), authz=NO_AUTHZ)
async def handle_get_telemetry_subscriptions(ctx: RequestContext, req: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    instance_id = req.client_instance_id
    new_id = uuid.uuid4() if instance_id in (None, ZERO) else instance_id
    return ctx.response(throttle_time_ms=0, error_code=0, client_instance_id=new_id,
                        subscription_id=subscription_id(), accepted_compression_types=ACCEPTED_COMPRESSION_TYPES,
                        push_interval_ms=PUSH_INTERVAL_MS, telemetry_max_bytes=ctx.broker.config.int("telemetry.max.bytes"),
                        delta_temporality=True, requested_metrics=REQUESTED_METRICS)


@api(ApiKey.PUSH_TELEMETRY, versions=(0, 0), authz=NO_AUTHZ)
async def handle_push_telemetry(ctx: RequestContext, req: PushTelemetryRequest) -> PushTelemetryResponse:
    if req.client_instance_id in (None, ZERO):
        code = ErrorCode.INVALID_REQUEST
    elif req.subscription_id != subscription_id():
        code = ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    elif req.compression_type != _NONE and req.compression_type not in ACCEPTED_COMPRESSION_TYPES:
        code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    elif req.metrics is not None and len(req.metrics) > ctx.broker.config.int("telemetry.max.bytes"):
        code = ErrorCode.TELEMETRY_TOO_LARGE
    else:
        code = ErrorCode.NONE
    return ctx.response(throttle_time_ms=0, error_code=int(code))
