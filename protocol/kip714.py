"""KIP-714 (client metrics) message classes kafka-python 3.0 lacks, built by its own JSON-schema machinery.

GetTelemetrySubscriptions (key 71) and PushTelemetry (key 72), v0 as Kafka 4.1 defines them; the
schemas live in :mod:`protocol.schemas` and are loaded exactly as :mod:`protocol.kip848` loads the
consumer-group ones. :mod:`protocol.messages` adds these classes to its registry by API key.
"""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

_SCHEMAS = "protocol.schemas"


class GetTelemetrySubscriptionsRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class GetTelemetrySubscriptionsResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class PushTelemetryRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


class PushTelemetryResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[call-arg]
    pass


MESSAGES = [GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse,
            PushTelemetryRequest, PushTelemetryResponse]
