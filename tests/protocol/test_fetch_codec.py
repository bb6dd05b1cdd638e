"""The hand-written FetchResponse encoder must produce exactly what kafka-python's schema
encoder produces, at every version we serve, with and without regions in place of bytes."""

from __future__ import annotations

import uuid

import pytest

from protocol.fetch_codec import PartitionData, TopicData, encode_fetch_response
from protocol.messages import encode_response, response_class


class FakeRegion:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def read(self) -> bytes:
        return self.data


def _reference(version: int, topics: list[TopicData]) -> bytes:
    R = response_class(1, version)
    T = R.FetchableTopicResponse
    P = T.PartitionData
    resp = R(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        T(topic=t.topic, topic_id=t.topic_id, partitions=[
            P(partition_index=p.partition_index, error_code=p.error_code, high_watermark=p.high_watermark,
              last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
              aborted_transactions=None if p.aborted_transactions is None else [
                  P.AbortedTransaction(producer_id=a, first_offset=b) for a, b in p.aborted_transactions],
              preferred_read_replica=p.preferred_read_replica,
              records=p.records.read() if isinstance(p.records, FakeRegion) else p.records)
            for p in t.partitions]) for t in topics])
    return encode_response(1, version, 77, resp)


@pytest.mark.parametrize("version", range(4, 18))
@pytest.mark.parametrize("as_region", [False, True])
def test_matches_schema_encoder(version: int, as_region: bool) -> None:
    data = bytes(range(256)) * 3

    def rec(b: bytes) -> object:
        return FakeRegion(b) if as_region else b

    topics = [
        TopicData("alpha", uuid.uuid4(), [
            PartitionData(0, 0, 10, 10, 0, None, -1, rec(data)),
            PartitionData(1, 1, -1, -1, -1, None, -1),  # error partition: default empty records
            PartitionData(2, 0, 5, 3, 0, [(7, 1), (8, 2)], -1, rec(b"")),
        ]),
        TopicData("beta", uuid.uuid4(), [PartitionData(0, 0, 1, 1, 0, [], -1, rec(b"xyz"))]),
    ]
    chunks, total = encode_fetch_response(version, 77, topics)
    flat = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)
    assert len(flat) == total
    assert flat == _reference(version, topics)


@pytest.mark.parametrize("version", range(4, 18))
def test_error_partition_records_are_empty_never_null(version: int) -> None:
    """Kafka sends MemoryRecords.EMPTY on an error partition; a null there makes librdkafka drop
    the whole Fetch response ("invalid MessageSetSize"). Even a None passed in encodes as empty."""
    topics = [TopicData("alpha", uuid.uuid4(), [
        PartitionData(0, 1, 5, 5, 0, None, -1, None),  # type: ignore[arg-type]
    ])]
    chunks, _ = encode_fetch_response(version, 77, topics)
    flat = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)
    R = response_class(1, version)
    resp = R.decode(flat[8 + (1 if version >= 12 else 0):], version=version)
    part = resp.responses[0].partitions[0]
    assert part.error_code == 1
    assert part.records == b""
    # and the schema encoder agrees byte for byte with empty (not null) records
    ref = topics[0].partitions[0]
    ref.records = b""
    assert flat == _reference(version, topics)
