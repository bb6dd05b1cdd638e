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


@pytest.mark.parametrize("session", [(0, -1, []), (0, 0, []),
                                     (987654, 12, [("alpha", [3, 4]), ("c" * 130, [0])])],
                         ids=["sessionless", "full", "incremental-with-forgotten"])
def test_fetch_request_matches_schema_encoder(session: tuple[int, int, list[tuple[str, list[int]]]]) -> None:
    """The replica fetcher's FetchRequest v12 is byte for byte what kafka-python encodes, the
    fetch session's id, epoch and forgotten partitions (KIP-227) included."""
    from kafka.protocol.consumer import FetchRequest as F

    from protocol.fetch_codec import FETCHER_VERSION, FetchPartitionRequest, encode_fetch_request

    session_id, epoch, forgotten = session
    parts = {"alpha": [FetchPartitionRequest(0, 3, 1234567890123, 17, 1048576),
                       FetchPartitionRequest(7, 0, 0, 0, 65536, last_fetched_epoch=2)],
             "b" * 200: [FetchPartitionRequest(2, -1, 5, -1, 1)]}
    ours = encode_fetch_request(41, "samsa-replica-fetcher-2", list(parts.items()), replica_id=2,
                                max_wait_ms=500, min_bytes=1, max_bytes=10485760, session_id=session_id,
                                session_epoch=epoch, forgotten=forgotten)
    req = F(replica_id=2, max_wait_ms=500, min_bytes=1, max_bytes=10485760, isolation_level=0,
            session_id=session_id, session_epoch=epoch, rack_id="",
            forgotten_topics_data=[F.ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten], topics=[
                F.FetchTopic(topic=t, partitions=[F.FetchTopic.FetchPartition(
                    partition=p.partition, current_leader_epoch=p.current_leader_epoch, fetch_offset=p.fetch_offset,
                    last_fetched_epoch=p.last_fetched_epoch, log_start_offset=p.log_start_offset,
                    partition_max_bytes=p.partition_max_bytes) for p in ps]) for t, ps in parts.items()])
    req.API_VERSION = FETCHER_VERSION
    req.with_header(correlation_id=41, client_id="samsa-replica-fetcher-2")
    assert ours == bytes(req.encode(header=True, framed=True))


@pytest.mark.parametrize("with_leader", [False, True])
def test_fetch_response_decoder_reads_what_the_encoder_writes(with_leader: bool) -> None:
    """decode_fetch_response (the replica fetcher's) agrees with kafka-python's decoder on a
    response from our encoder, tagged fields included, and hands out records without copying."""
    from protocol.fetch_codec import decode_fetch_response
    from protocol.messages import RESPONSE_CLASSES

    data = bytes(range(256)) * 40
    topics = [
        TopicData("alpha", None, [
            PartitionData(0, 0, 10, 9, 2, None, -1, data),
            PartitionData(1, 6, -1, -1, -1, None, -1, b"",
                          current_leader=(3, 12) if with_leader else None),
            PartitionData(2, 0, 5, 3, 0, [(7, 1), (8, 2)], -1, b"xyz"),
        ]),
        TopicData("beta", None, [PartitionData(4, 0, 1, 1, 0, [], -1, FakeRegion(b"q" * 70))]),
    ]
    endpoints = [(3, "host-3", 9093, "r1")] if with_leader else []
    chunks, _total = encode_fetch_response(12, 99, topics, throttle_time_ms=5, session_id=0,
                                           node_endpoints=endpoints)
    payload = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)[4:]
    got = decode_fetch_response(payload)
    ref = RESPONSE_CLASSES[1].decode(payload, version=12, header=True)
    assert got.correlation_id == 99 and got.throttle_time_ms == ref.throttle_time_ms == 5
    assert (got.error_code, got.session_id) == (ref.error_code, ref.session_id)
    assert [t.topic for t in got.topics] == [t.topic for t in ref.responses] == ["alpha", "beta"]
    for gt, rt in zip(got.topics, ref.responses, strict=True):
        for gp, rp in zip(gt.partitions, rt.partitions, strict=True):
            assert (gp.partition_index, gp.error_code, gp.high_watermark, gp.last_stable_offset,
                    gp.log_start_offset, gp.preferred_read_replica) == \
                (rp.partition_index, rp.error_code, rp.high_watermark, rp.last_stable_offset,
                 rp.log_start_offset, rp.preferred_read_replica)
            want_aborted = None if rp.aborted_transactions is None else \
                [(a.producer_id, a.first_offset) for a in rp.aborted_transactions]
            assert gp.aborted_transactions == want_aborted
            assert isinstance(gp.records, memoryview) and bytes(gp.records) == bytes(rp.records or b"")
    assert got.topics[0].partitions[1].current_leader == ((3, 12) if with_leader else None)
    with pytest.raises((ValueError, IndexError)):
        decode_fetch_response(payload[: len(payload) // 2])
