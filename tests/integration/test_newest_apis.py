"""The newest API versions and the APIs kafka-python has no classes for, on the wire.

One broker per module; each test talks to it with the wire-level RawClient at the version under
test and checks the answer against what Kafka gives.

KIP-714 telemetry: GetTelemetrySubscriptions assigns a client instance id to a client that sends
the zero id and echoes the id of one that has it; the subscription is empty (no metrics) with
Kafka's 5-minute push interval. PushTelemetry answers each of Kafka's validation errors.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.api_keys import ApiKey
from protocol.kip714 import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from tests.support.brokers import BrokerProcess, make_broker
from tests.support.rawclient import RawClient

ZERO = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp: Path = tmp_path_factory.mktemp("newest-apis")
    b = make_broker(tmp, overrides={"telemetry.max.bytes": 1000, "num.partitions": 2})
    b.start()
    try:
        yield b
    finally:
        b.kill()


@pytest.fixture
def client(broker: BrokerProcess) -> Iterator[RawClient]:
    with RawClient(broker.host, broker.port) as c:
        yield c


def _subscribe(c: RawClient, instance: uuid.UUID) -> Any:
    return c.roundtrip(GetTelemetrySubscriptionsRequest[0](client_instance_id=instance), 0,
                       GetTelemetrySubscriptionsResponse)


def test_telemetry_apis_are_advertised(client: RawClient) -> None:
    assert client.versions[ApiKey.GET_TELEMETRY_SUBSCRIPTIONS] == (0, 0)
    assert client.versions[ApiKey.PUSH_TELEMETRY] == (0, 0)


def test_get_telemetry_subscriptions_assigns_an_id_once(client: RawClient) -> None:
    first = _subscribe(client, ZERO)
    assert first.error_code == 0
    assert first.client_instance_id not in (None, ZERO)
    assert first.requested_metrics == []  # the empty subscription
    assert first.push_interval_ms == 300_000
    assert first.telemetry_max_bytes == 1000
    assert set(first.accepted_compression_types) == {1, 2, 3, 4}
    again = _subscribe(client, first.client_instance_id)
    assert again.error_code == 0
    assert again.client_instance_id == first.client_instance_id  # Kafka echoes a known id
    assert again.subscription_id == first.subscription_id
    other = _subscribe(client, ZERO)
    assert other.client_instance_id not in (ZERO, first.client_instance_id)


@pytest.mark.parametrize(("change", "code"), [
    ({}, 0),
    ({"terminating": True}, 0),
    ({"client_instance_id": ZERO}, 42),  # INVALID_REQUEST
    ({"subscription_id": "other"}, 117),  # UNKNOWN_SUBSCRIPTION_ID
    ({"compression_type": 9}, 76),  # UNSUPPORTED_COMPRESSION_TYPE
    ({"metrics": b"x" * 1001}, 118),  # TELEMETRY_TOO_LARGE (telemetry.max.bytes is 1000)
])
def test_push_telemetry_validation(client: RawClient, change: dict[str, Any], code: int) -> None:
    sub = _subscribe(client, ZERO)
    fields: dict[str, Any] = {"client_instance_id": sub.client_instance_id, "subscription_id": sub.subscription_id,
                              "terminating": False, "compression_type": 0, "metrics": b"\x00" * 1000}
    fields.update(change)
    if fields["subscription_id"] == "other":
        fields["subscription_id"] = sub.subscription_id ^ 1
    resp = client.roundtrip(PushTelemetryRequest[0](**fields), 0, PushTelemetryResponse)
    assert resp.error_code == code
