"""A minimal blocking Kafka client over one socket, for tests that need exact frames.

It uses kafka-python's ``kafka.protocol`` message classes as the codec (the
same classes Samsa's ``protocol/`` builds on, but exercised from the client
side) and plain sockets, so a test can send a well-formed request, a
hand-corrupted one, or raw bytes, and see exactly what comes back.  It is what
the fuzz test's "separate healthy client" uses after every example.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from dataclasses import dataclass

from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from .net import api_versions_v0, recv_frame

PRODUCE_KEY = 0
FETCH_KEY = 1
# Newest non-flexible versions: simple to corrupt by hand, and every client still speaks them.
PREFERRED = {PRODUCE_KEY: 7, FETCH_KEY: 11}


def build_batch(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]], base_offset: int = 0, *,
    producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
) -> bytes:
    """A v2 (magic 2) uncompressed record batch; idempotent when given a producer id, epoch and sequence."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for i, (key, value, headers) in enumerate(records):
        b.append(base_offset + i, timestamp=None, key=key, value=value, headers=headers)
    return bytes(b.build())


def produce_request(topic: str, partition: int, records: bytes, acks: int = -1, timeout_ms: int = 10000):
    """A ProduceRequest (version chosen at encode time) carrying raw batch bytes for one partition."""
    P = ProduceRequest.TopicProduceData
    return ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[P(name=topic, partition_data=[P.PartitionProduceData(index=partition, records=records)])],
    )


@dataclass
class FetchedRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RawClient:
    """One connection; requests are sent and answered strictly one at a time."""

    def __init__(self, host: str, port: int, timeout: float = 15.0, client_id: str = "samsa-raw"):
        self.host, self.port = host, port
        self.client_id = client_id
        self.versions = api_versions_v0(host, port)
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self._corr = itertools.count(1)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def version_for(self, api_key: int) -> int:
        lo, hi = self.versions[api_key]
        v = min(hi, PREFERRED[api_key])
        assert v >= lo, f"broker's versions {lo}-{hi} for api {api_key} exclude {PREFERRED[api_key]}"
        return v

    def send_frame(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def recv_frame(self) -> bytes:
        return recv_frame(self.sock)

    def roundtrip(self, request, version: int, response_cls):
        """Encode request at version, send it, decode the response; checks the correlation id."""
        corr = next(self._corr)
        request.with_header(correlation_id=corr, client_id=self.client_id)
        self.sock.sendall(request.encode(version=version, header=True, framed=True))
        payload = self.recv_frame()
        (got,) = struct.unpack_from(">i", payload, 0)
        assert got == corr, f"correlation id {got} != {corr}"
        return response_cls.decode(payload, version=version, header=True)

    def find_coordinator(self, key: str, key_type: int = 0, timeout: float = 30.0) -> int:
        """Ask FindCoordinator (v2) for a group (key_type 0) or transactional id (1) until it
        answers without error (the coordinator's partition loads on first use); its node id."""
        from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

        deadline = time.monotonic() + timeout
        while True:
            r = self.roundtrip(FindCoordinatorRequest(key=key, key_type=key_type), 2, FindCoordinatorResponse)
            if r.error_code == 0:
                return int(r.node_id)
            assert time.monotonic() < deadline, f"no coordinator for {key!r}: error {r.error_code}"
            time.sleep(0.1)

    # -- Produce ------------------------------------------------------------
    def produce(self, topic: str, partition: int, records: bytes) -> tuple[int, int]:
        """Produce raw batch bytes with acks=all; return (error_code, base_offset)."""
        v = self.version_for(PRODUCE_KEY)
        resp = self.roundtrip(produce_request(topic, partition, records), v, ProduceResponse)
        (t,) = resp.responses
        (p,) = t.partition_responses
        return p.error_code, p.base_offset

    # -- Fetch --------------------------------------------------------------
    def fetch_raw(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20):
        """Fetch from offset; return (error_code, high_watermark, records bytes exactly as served)."""
        v = self.version_for(FETCH_KEY)
        resp = self.roundtrip(self._fetch_request(topic, partition, offset, max_bytes), v, FetchResponse)
        (t,) = resp.responses
        (p,) = t.partitions
        return p.error_code, p.high_watermark, bytes(p.records or b"")

    @staticmethod
    def _fetch_request(topic: str, partition: int, offset: int, max_bytes: int):
        """max_wait_ms=500 with min_bytes=1: answered at once when data is there
        (some brokers answer max_wait_ms=0 with no partitions at all)."""
        T = FetchRequest.FetchTopic
        return FetchRequest(
            replica_id=-1,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=max_bytes,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                T(
                    topic=topic,
                    partitions=[
                        T.FetchPartition(
                            partition=partition,
                            current_leader_epoch=-1,
                            fetch_offset=offset,
                            log_start_offset=-1,
                            partition_max_bytes=max_bytes,
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )

    def fetch(self, topic: str, partition: int, offset: int, max_bytes: int = 1 << 20):
        """Fetch from offset; return (error_code, high_watermark, decoded records)."""
        v = self.version_for(FETCH_KEY)
        req = self._fetch_request(topic, partition, offset, max_bytes)
        resp = self.roundtrip(req, v, FetchResponse)
        (t,) = resp.responses
        (p,) = t.partitions
        out: list[FetchedRecord] = []
        data = p.records
        if data:
            mr = MemoryRecords(bytes(data))
            while True:
                batch = mr.next_batch()
                if batch is None:
                    break
                for r in batch:
                    out.append(FetchedRecord(r.offset, r.key, r.value, list(r.headers)))
        return p.error_code, p.high_watermark, out
