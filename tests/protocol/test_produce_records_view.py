"""Produce requests decode their records as views of the request frame (protocol.messages).

kafka-python's own decoder copies each partition's records into new bytes; ProduceRequest's
records field is switched to a view so a large request's batches are validated, patched and
appended where FrameDecoder read them. Every version Samsa serves (3-13) must still decode to
what was encoded, field for field, and a request cut short must still be refused.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ErrorCode
from protocol.framing import FrameDecoder
from protocol.messages import REQUEST_CLASSES, MalformedRequest, decode_body, parse_header
from protocol.records import validate_batches
from tests.log.helpers import build_batch

Produce = REQUEST_CLASSES[0]
Topic = Produce.TopicProduceData
Part = Topic.PartitionProduceData


def frame_of(version: int, transactional_id: str | None, acks: int, topics: list[tuple[str, uuid.UUID,
             list[tuple[int, bytes | None]]]]) -> bytes:
    tds = [Topic(**({"topic_id": tid} if version >= 13 else {"name": name}),
                 partition_data=[Part(index=i, records=r) for i, r in parts])
           for name, tid, parts in topics]
    req = Produce(transactional_id=transactional_id, acks=acks, timeout_ms=30000, topic_data=tds)
    req.with_header(correlation_id=42, client_id="producer-1")
    return bytes(req.encode(version=version, header=True, framed=True))


def decoded(raw: bytes) -> tuple[object, bytes | memoryview]:
    [frame] = FrameDecoder().feed(raw)
    return decode_body(parse_header(frame), frame), frame


RECORDS = st.none() | st.binary(max_size=64) | st.integers(8_000, 40_000).map(lambda n: bytes(range(256)) * (n // 256))


@settings(max_examples=150, deadline=None)
@given(version=st.integers(3, 13), txn=st.none() | st.text(max_size=8), acks=st.sampled_from([-1, 0, 1]),
       topics=st.lists(st.tuples(st.text(min_size=1, max_size=10), st.uuids(),
                                 st.lists(st.tuples(st.integers(0, 1000), RECORDS), max_size=3)), max_size=3))
def test_every_version_decodes_to_what_was_encoded(version: int, txn: str | None, acks: int,
                                                    topics: list[tuple[str, uuid.UUID, list[tuple[int, bytes | None]]]]
                                                    ) -> None:
    req, _ = decoded(frame_of(version, txn, acks, topics))
    assert (req.transactional_id, req.acks, req.timeout_ms) == (txn, acks, 30000)
    assert len(req.topic_data) == len(topics)
    for td, (name, tid, parts) in zip(req.topic_data, topics, strict=True):
        assert (td.topic_id if version >= 13 else td.name) == (tid if version >= 13 else name)
        got = [(p.index, None if p.records is None else bytes(p.records)) for p in td.partition_data]
        assert got == parts


def test_large_records_are_views_of_the_frame_and_validated_in_place() -> None:
    batch = build_batch([b"v" * 1000 for _ in range(100)])  # beyond FrameDecoder.SMALL: a buffer of its own
    req, frame = decoded(frame_of(9, None, -1, [("t", uuid.uuid4(), [(0, batch)])]))
    records = req.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and not records.readonly
    assert isinstance(frame, memoryview) and records.obj is frame.obj  # no copy: the frame's own buffer
    validated = validate_batches(records)
    assert validated.buffer is records  # patched where it was read, not copied again
    assert bytes(records) == batch


def test_small_request_records_are_read_only_and_copied_by_validation() -> None:
    batch = build_batch([b"v"])
    req, frame = decoded(frame_of(11, None, 1, [("t", uuid.uuid4(), [(3, batch)])]))
    records = req.topic_data[0].partition_data[0].records
    assert bytes(records) == batch
    assert validate_batches(records).buffer is not records  # a read-only view is never written


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_cut_short_is_malformed(version: int) -> None:
    raw = frame_of(version, "tx", -1, [("topic", uuid.uuid4(), [(0, build_batch([b"x" * 100] * 50))])])
    for cut in (30, len(raw) // 2, len(raw) - 1):
        short = (cut - 4).to_bytes(4, "big") + raw[4:cut]
        [frame] = FrameDecoder().feed(short)
        with pytest.raises(MalformedRequest):
            decode_body(parse_header(frame), frame)
    assert ErrorCode.CORRUPT_MESSAGE  # the broker answers a malformed request by closing it (server)
