"""The hand-written ProduceResponse encoder must produce exactly what kafka-python's schema
encoder produces (the codec of record), at every version the broker serves, over a range of
field values: error codes, offsets at the int64 limits, record errors, null and non-ASCII
messages, topic names and ids, throttle times."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.messages import encode_response, response_class
from protocol.produce_codec import PartitionResponse, TopicResponse, encode_produce_response

VERSIONS = range(3, 14)
I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=20)
NULLABLE = st.none() | TEXT

partitions = st.builds(PartitionResponse, I32, I16, I64, I64, I64,
                       st.lists(st.tuples(I32, NULLABLE), max_size=3), NULLABLE)
topics = st.builds(TopicResponse, TEXT.filter(bool), st.uuids(),
                   st.lists(partitions, max_size=4))


def _reference(version: int, correlation_id: int, topics: list[TopicResponse], throttle: int) -> bytes:
    R = response_class(0, version)
    T = R.TopicProduceResponse
    P = T.PartitionProduceResponse
    out = []
    for t in topics:
        parts = [P(index=p.partition, error_code=p.error_code, base_offset=p.base_offset,
                   log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
                   record_errors=[P.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                  for i, m in p.record_errors],
                   error_message=p.error_message)
                 for p in t.partitions]
        out.append(T(topic_id=t.topic_id, partition_responses=parts) if version >= 13
                   else T(name=t.name, partition_responses=parts))
    return encode_response(0, version, correlation_id, R(responses=out, throttle_time_ms=throttle))


def _check(version: int, correlation_id: int, tops: list[TopicResponse], throttle: int) -> None:
    if version < 8:  # the fields do not exist before v8: kafka-python drops them, so must we
        tops = [t._replace(partitions=[p._replace(record_errors=[], error_message=None) for p in t.partitions])
                for t in tops]
    assert encode_produce_response(version, correlation_id, tops, throttle) == \
        _reference(version, correlation_id, tops, throttle)


def test_common_shape_every_version() -> None:
    tops = [TopicResponse("orders", uuid.uuid4(), [PartitionResponse(0, 0, 41, -1, 0, [], None),
                                                    PartitionResponse(2, 0, 7, 1_700_000_000_000, 3, [], None)]),
            TopicResponse("ÿ-topic", uuid.uuid4(), [PartitionResponse(1, 6, -1, -1, -1, [(0, "bad"), (2, None)],
                                                                       "Not leader")])]
    for version in VERSIONS:
        _check(version, 12345, tops, 0)
        _check(version, -1, [], 2**31 - 1)


@settings(max_examples=60, deadline=None)
@given(version=st.sampled_from(list(VERSIONS)), correlation_id=I32,
       tops=st.lists(topics, max_size=3), throttle=I32)
def test_matches_kafka_python(version: int, correlation_id: int, tops: list[TopicResponse], throttle: int) -> None:
    _check(version, correlation_id, tops, throttle)
