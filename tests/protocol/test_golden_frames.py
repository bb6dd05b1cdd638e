"""Golden frames captured from the Java client 3.6.1 and a Kafka broker.

The frames are captured facts (bytes on the wire, keyed by API and version), kept in the
repository in ``tests/protocol/golden/java_frames.json`` so every clone runs these tests.

Each request frame is decoded with our header parser and kafka-python's schema classes and
re-encoded; each response frame is decoded and re-encoded through ``encode_response``. Both
must reproduce the captured bytes exactly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from protocol.api_keys import ApiKey
from protocol.framing import FrameDecoder
from protocol.messages import REQUEST_CLASSES, RESPONSE_CLASSES, decode_body, encode_response, parse_header

GOLDEN = Path(__file__).resolve().parent / "golden" / "java_frames.json"
FRAMES: dict[str, list[int]] = json.loads(GOLDEN.read_text())

NAMES = {"api_versions": ApiKey.API_VERSIONS, "metadata": ApiKey.METADATA, "produce": ApiKey.PRODUCE}


def _parse_name(name: str) -> tuple[int, str, int]:
    m = re.match(r"(.+)_(request|response)_v(\d+)_\d+$", name)
    assert m, name
    return NAMES[m.group(1)], m.group(2), int(m.group(3))


@pytest.mark.parametrize("name", sorted(n for n in FRAMES if "_request_" in n))
def test_request_round_trip(name: str) -> None:
    key, _, version = _parse_name(name)
    raw = bytes(FRAMES[name])
    [frame] = FrameDecoder().feed(raw)
    header = parse_header(frame)
    assert (header.api_key, header.api_version) == (key, version)
    req = decode_body(header, frame)
    cls = REQUEST_CLASSES[key]
    req.with_header(correlation_id=header.correlation_id, client_id=header.client_id)
    again = bytes(req.encode(version=version, header=True, framed=True))
    assert again == raw
    assert cls.name == type(req).name


@pytest.mark.parametrize("name", sorted(n for n in FRAMES if "_response_" in n))
def test_response_round_trip(name: str) -> None:
    key, _, version = _parse_name(name)
    raw = bytes(FRAMES[name])
    cls = RESPONSE_CLASSES[key]
    flexible_header = key != ApiKey.API_VERSIONS and cls.flexible_version_q(version)
    body_start = 4 + 4 + (1 if flexible_header else 0)
    correlation_id = int.from_bytes(raw[4:8], "big")
    resp = cls.decode(raw[body_start:], version=version)
    assert encode_response(key, version, correlation_id, resp) == raw
