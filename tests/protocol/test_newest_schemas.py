"""Codec round trips for the messages Samsa defines itself (protocol/schemas) and the newest
versions it serves, through the same parse/encode path the broker uses.

The GetTelemetrySubscriptions/PushTelemetry frames below are laid out by hand from Kafka's
message definitions (request header v2: key, version, correlation id, client id, empty tagged
fields; flexible body with a trailing empty tagged-field section), so the generated codec is
checked against the wire format, not against itself.
"""

from __future__ import annotations

import struct
import uuid

import pytest

from protocol.api_keys import ApiKey
from protocol.framing import FrameDecoder
from protocol.messages import REQUEST_CLASSES, RESPONSE_CLASSES, decode_body, encode_response, parse_header

INSTANCE = uuid.UUID("0123456789abcdef0123456789abcdef")


def _request_frame(key: int, version: int, corr: int, client_id: bytes, body: bytes) -> bytes:
    head = struct.pack(">hhih", key, version, corr, len(client_id)) + client_id + b"\x00"
    return struct.pack(">i", len(head) + len(body)) + head + body


def _decode(frame: bytes) -> tuple[object, object]:
    [f] = FrameDecoder().feed(frame)
    header = parse_header(f)
    return header, decode_body(header, f)


def test_get_telemetry_subscriptions_request_frame() -> None:
    frame = _request_frame(71, 0, 7, b"java", INSTANCE.bytes + b"\x00")
    header, req = _decode(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (71, 0, 7)  # type: ignore[attr-defined]
    assert req.client_instance_id == INSTANCE  # type: ignore[attr-defined]
    again = REQUEST_CLASSES[71][0](client_instance_id=INSTANCE)
    again.with_header(correlation_id=7, client_id="java")
    assert bytes(again.encode(header=True, framed=True)) == frame


def test_push_telemetry_request_frame() -> None:
    metrics = b"\x0a\x03abc"
    body = INSTANCE.bytes + struct.pack(">i?b", 12345, True, 4) + bytes([len(metrics) + 1]) + metrics + b"\x00"
    header, req = _decode(_request_frame(72, 0, 8, b"c", body))
    assert (req.client_instance_id, req.subscription_id, req.terminating, req.compression_type,  # type: ignore[attr-defined]
            bytes(req.metrics)) == (INSTANCE, 12345, True, 4, metrics)  # type: ignore[attr-defined]


def test_get_telemetry_subscriptions_response_frame() -> None:
    R = RESPONSE_CLASSES[71][0]
    resp = R(throttle_time_ms=0, error_code=0, client_instance_id=INSTANCE, subscription_id=-5,
             accepted_compression_types=[4, 3, 1, 2], push_interval_ms=300000, telemetry_max_bytes=1048576,
             delta_temporality=True, requested_metrics=["org.apache.kafka."])
    body = (struct.pack(">ih", 0, 0) + INSTANCE.bytes + struct.pack(">i", -5) + b"\x05\x04\x03\x01\x02"
            + struct.pack(">ii?", 300000, 1048576, True) + b"\x02\x12org.apache.kafka." + b"\x00")
    # response header v1: correlation id and an empty tagged-field section
    assert encode_response(71, 0, 9, resp) == struct.pack(">iib", len(body) + 5, 9, 0) + body
    decoded = R.decode(body, version=0)
    assert decoded.requested_metrics == ["org.apache.kafka."] and decoded.subscription_id == -5


@pytest.mark.parametrize(("key", "version"), [
    (ApiKey.PRODUCE, 13), (ApiKey.FETCH, 18), (ApiKey.LIST_OFFSETS, 10), (ApiKey.METADATA, 13),
    (ApiKey.OFFSET_COMMIT, 10), (ApiKey.OFFSET_FETCH, 10), (ApiKey.DESCRIBE_GROUPS, 6), (ApiKey.END_TXN, 5),
    (ApiKey.TXN_OFFSET_COMMIT, 5), (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0), (ApiKey.UPDATE_FEATURES, 2),
    (ApiKey.DESCRIBE_CLUSTER, 2), (ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0), (ApiKey.PUSH_TELEMETRY, 0)])
def test_default_request_round_trips_through_the_broker_parser(key: int, version: int) -> None:
    """A request of every newly served version, with its schema defaults, parses back to itself."""
    cls = REQUEST_CLASSES[key]
    req = cls[version]()
    req.with_header(correlation_id=3, client_id="rt")
    raw = bytes(req.encode(header=True, framed=True))
    header, back = _decode(raw)
    assert (header.api_key, header.api_version) == (key, version)  # type: ignore[attr-defined]
    back.with_header(correlation_id=3, client_id="rt")  # type: ignore[attr-defined]
    assert bytes(back.encode(version=version, header=True, framed=True)) == raw  # type: ignore[attr-defined]
