"""The hand-written Produce and Fetch request decoders must give exactly what kafka-python's
generated decoder gives (the codec of record): the same classes, the same slots set, the same
values, records as views of the frame. Requests are built and encoded with kafka-python's own
classes, at every version the broker serves, with null and empty fields, several topics and
partitions, and tagged fields where the version is flexible (those, and any other unusual shape,
are left to kafka-python: the decoders answer None). Damaged frames (truncated, lying lengths,
stray bytes) must meet the same verdict as with kafka-python alone: the same value or the same
MalformedRequest.

``golden/client_request_frames.json`` holds requests recorded by ``broker.testing.SamsaBroker``
(``record_requests``; hex of each frame after its size): from confluent-kafka 2.16.1 (librdkafka
2.16.0), kafka-python 3.0.12 and Samsa's replica fetcher on ``brokers=3`` with a replication
factor 3 topic, from aiokafka 0.14.0 (Produce v7, Fetch v11: the classic versions) and from the
Java client 3.9.1 (``compat_tests/java/SamsaCompat.java``).
"""

from __future__ import annotations

import json
import struct
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.api_header import RequestHeader as KafkaRequestHeader
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.data_container import DataContainer
from kafka.protocol.producer import ProduceRequest

from protocol.fetch_codec import decode_fetch_request
from protocol.messages import REQUEST_CLASSES, MalformedRequest, decode_body, decode_generic, parse_header
from protocol.produce_codec import decode_produce_request
from protocol.varint import uvarint

GOLDEN = Path(__file__).resolve().parent / "golden" / "client_request_frames.json"
CLIENT_FRAMES: dict[str, str] = json.loads(GOLDEN.read_text())

I8 = st.integers(-(2**7), 2**7 - 1)
I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=12)
IDS = st.uuids() | st.just(uuid.UUID(int=0))  # the zero id decodes as None


def snapshot(obj: object) -> object:
    """Everything a decoded object carries: its class, and each slot that is set (unset slots
    answer the schema default through ``DataContainer.__getattr__``, so which are set matters)."""
    if isinstance(obj, DataContainer):
        values = {}
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                try:
                    values[name] = snapshot(object.__getattribute__(obj, name))
                except AttributeError:
                    pass
        return type(obj), values
    if isinstance(obj, list):
        return [snapshot(x) for x in obj]
    if isinstance(obj, memoryview):  # records: a view of the frame, as kafka-python's decoder gives here
        return "view", bytes(obj)
    return type(obj), obj


def frame_of(req: ApiMessage, version: int, correlation_id: int = 7, client_id: str | None = "c") -> bytes:
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(req.encode(version=version, header=True))


def verdict(decode: object, frame: bytes) -> object:
    """The decoded request's snapshot, or the MalformedRequest's message."""
    try:
        header = parse_header(frame)
        return snapshot(decode(header, frame))  # type: ignore[operator]
    except MalformedRequest as e:
        return "malformed", str(e)


def check_same(frame: bytes, fast_expected: bool) -> None:
    header = parse_header(frame)
    body = memoryview(frame)[header.size:]
    fast = (decode_produce_request if header.api_key == 0 else decode_fetch_request)(body, header.api_version)
    reference = decode_generic(header, frame)
    if fast_expected:
        assert fast is not None, "the common shape must not fall back to kafka-python"
    if fast is not None:
        assert snapshot(fast) == snapshot(reference)
        if header.api_key == 0:  # records are views of the frame itself, never copies
            assert all(p.records.obj is frame for t in fast.topic_data for p in t.partition_data)
    assert snapshot(decode_body(header, frame)) == snapshot(reference)


# --- the request header (every request) -------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(REQUEST_CLASSES)), st.data(), I32, st.none() | TEXT,
       st.lists(st.tuples(st.integers(0, 300), st.binary(max_size=5)), max_size=2), st.binary(max_size=8))
def test_header_matches_kafka_python(api_key: int, data: st.DataObject, correlation_id: int, client_id: str | None,
                                     tags: list[tuple[int, bytes]], body: bytes) -> None:
    """Header v1 or v2 (flexible versions, with their tagged fields) as kafka-python encodes it."""
    version = data.draw(st.integers(0, REQUEST_CLASSES[api_key].max_version))
    flexible = REQUEST_CLASSES[api_key].flexible_version_q(version)
    raw = bytes(KafkaRequestHeader(request_api_key=api_key, request_api_version=version,
                                   correlation_id=correlation_id, client_id=client_id).encode(flexible=flexible))
    if flexible and tags:  # kafka-python writes none: replace its empty tag section
        raw = raw[:-1] + bytes([len(tags)]) + b"".join(
            uvarint(tag) + uvarint(len(value)) + value for tag, value in sorted(tags))
    header = parse_header(raw + body)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id, header.size) == \
        (api_key, version, correlation_id, client_id, len(raw))


# --- Produce, versions 3-13 --------------------------------------------------------------------

@st.composite
def produce_requests(draw: st.DrawFn) -> tuple[int, ProduceRequest, bool]:
    version = draw(st.integers(3, 13))
    T = ProduceRequest.TopicProduceData
    P = T.PartitionProduceData
    null_records = False
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = []
        for _ in range(draw(st.integers(0, 3))):
            records = draw(st.none() | st.binary(max_size=40))
            null_records |= records is None
            parts.append(P(index=draw(I32), records=records))
        topics.append(T(topic_id=draw(IDS), partition_data=parts) if version >= 13
                      else T(name=draw(TEXT), partition_data=parts))
    req = ProduceRequest(transactional_id=draw(st.none() | TEXT), acks=draw(I16), timeout_ms=draw(I32),
                         topic_data=topics)
    return version, req, not null_records  # a null records field is left to kafka-python


@settings(max_examples=300, deadline=None)
@given(produce_requests())
def test_produce_matches_kafka_python(case: tuple[int, ProduceRequest, bool]) -> None:
    version, req, fast_expected = case
    check_same(frame_of(req, version), fast_expected)


# --- Fetch, versions 4-18 ----------------------------------------------------------------------

@st.composite
def fetch_requests(draw: st.DrawFn) -> tuple[int, FetchRequest, bool]:
    version = draw(st.integers(4, 18))
    flexible = version >= 12
    R = FetchRequest
    T = R.FetchTopic
    P = T.FetchPartition
    tagged = False
    topics = []
    for _ in range(draw(st.integers(0, 3))):
        parts = []
        for _ in range(draw(st.integers(0, 3))):
            fields = {"partition": draw(I32), "fetch_offset": draw(I64), "partition_max_bytes": draw(I32)}
            if version >= 9:
                fields["current_leader_epoch"] = draw(I32)
            if version >= 12:
                fields["last_fetched_epoch"] = draw(I32)
            if version >= 5:
                fields["log_start_offset"] = draw(I64)
            if version >= 17 and draw(st.booleans()):  # tagged (KIP-853)
                fields["replica_directory_id"] = draw(st.uuids())
                tagged = True
            if version >= 18 and draw(st.booleans()):  # tagged (KIP-1166)
                fields["high_watermark"] = draw(I64)
                tagged = True
            parts.append(P(**fields))
        topics.append(T(topic_id=draw(IDS), partitions=parts) if version >= 13
                      else T(topic=draw(TEXT), partitions=parts))
    fields = {"max_wait_ms": draw(I32), "min_bytes": draw(I32), "max_bytes": draw(I32),
              "isolation_level": draw(I8), "topics": topics}
    if version <= 14:
        fields["replica_id"] = draw(I32)
    elif draw(st.booleans()):  # a follower's tagged ReplicaState (KIP-903)
        fields["replica_state"] = R.ReplicaState(replica_id=draw(I32), replica_epoch=draw(I64))
        tagged = True
    if flexible and draw(st.booleans()):  # tagged ClusterId
        fields["cluster_id"] = draw(st.none() | TEXT)
        tagged = True
    if version >= 7:
        fields["session_id"] = draw(I32)
        fields["session_epoch"] = draw(I32)
        forgotten = [R.ForgottenTopic(topic_id=draw(IDS), partitions=draw(st.lists(I32, max_size=3)))
                     if version >= 13 else
                     R.ForgottenTopic(topic=draw(TEXT), partitions=draw(st.lists(I32, max_size=3)))
                     for _ in range(draw(st.integers(0, 2)))]
        fields["forgotten_topics_data"] = forgotten
    if version >= 11:
        fields["rack_id"] = draw(TEXT)
    return version, R(**fields), not tagged  # tagged fields are left to kafka-python


@settings(max_examples=300, deadline=None)
@given(fetch_requests())
def test_fetch_matches_kafka_python(case: tuple[int, FetchRequest, bool]) -> None:
    version, req, fast_expected = case
    check_same(frame_of(req, version), fast_expected)


# --- real clients, unknown tagged fields, damaged frames ---------------------------------------

@pytest.mark.parametrize("name", sorted(CLIENT_FRAMES))
def test_client_frames_take_the_fast_path(name: str) -> None:
    check_same(bytes.fromhex(CLIENT_FRAMES[name]), fast_expected=True)


@pytest.mark.parametrize("version", [9, 13])
def test_unknown_tagged_fields_fall_back(version: int) -> None:
    """A tagged field no schema defines (kafka-python keeps it in ``unknown_tags``) is decoded
    by kafka-python: here one closes the request, replacing its empty tagged-field section."""
    T = ProduceRequest.TopicProduceData
    req = ProduceRequest(transactional_id="tx", acks=-1, timeout_ms=30000, topic_data=[
        T(name="t", topic_id=uuid.uuid4(), partition_data=[T.PartitionProduceData(index=0, records=b"batch")])])
    frame = frame_of(req, version)
    assert frame.endswith(b"\x00")
    frame = frame[:-1] + b"\x01\x63\x02hi"  # one tagged field: tag 99, 2 bytes
    header = parse_header(frame)
    assert decode_produce_request(memoryview(frame)[header.size:], version) is None
    assert decode_body(header, frame).unknown_tags == decode_generic(header, frame).unknown_tags
    assert decode_body(header, frame).unknown_tags


def damaged(frame: bytes, data: st.DataObject) -> bytes:
    header_end = 10 + max(struct.unpack_from(">h", frame, 8)[0], 0)
    kind = data.draw(st.sampled_from(["truncate", "byte", "length"]))
    pos = data.draw(st.integers(header_end, max(len(frame) - 1, header_end)))
    if kind == "truncate":
        return frame[:pos]
    if kind == "byte":
        return frame[:pos] + bytes([data.draw(st.integers(0, 255))]) + frame[pos + 1:]
    # a lying length: an int16/int32 or a varint-sized value written over the bytes at pos
    value = data.draw(st.sampled_from([-2, -1, 0, 1, 0x7F, 0x80, 0x7FFF, 0x7FFFFFFF]))
    return frame[:pos] + struct.pack(">i", value) + frame[pos + 4:]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(produce_requests(), fetch_requests()), st.data())
def test_damaged_frames_meet_the_same_verdict(case: tuple[int, ApiMessage, bool], data: st.DataObject) -> None:
    version, req, _ = case
    frame = damaged(frame_of(req, version), data)
    assert verdict(decode_body, frame) == verdict(decode_generic, frame)
