"""Transactions over real sockets against a live Samsa broker, request by request.

The stock clients are exercised in compat_tests/test_txn_*.py; here each transaction API is
sent by hand (kafka-python's message classes as the codec) so every field of the answers can
be checked: last stable offset, aborted_transactions, markers in the log, describe/list.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    WriteTxnMarkersRequest,
)

from protocol.records import ATTR_TRANSACTIONAL, iter_headers
from tests.support.net import recv_frame
from txn.markers import build_batch, iter_batch_records, parse_control_record

TOPIC = "txn-raw"


class Conn:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.corr = 0
        # Ask for the coordinators first, as clients do: that creates __transaction_state and
        # __consumer_offsets (until then InitProducerId answers COORDINATOR_NOT_AVAILABLE).
        for key_type in (0, 1):
            r = self.call(FindCoordinatorRequest, 3, key="raw", key_type=key_type)
            assert r.error_code == 0, r

    def call(self, req_cls: Any, version: int, **fields: Any) -> Any:
        self.corr += 1
        req = req_cls[version](**fields)
        req.with_header(correlation_id=self.corr, client_id="txn-test")
        self.sock.sendall(req.encode(header=True, framed=True))
        payload = recv_frame(self.sock)
        r = _decode_response(req_cls.API_KEY, version, payload)
        (corr,) = struct.unpack_from(">i", payload, 0)
        assert corr == self.corr
        return r

    def close(self) -> None:
        self.sock.close()


def _decode_response(api_key: int, version: int, payload: bytes) -> Any:
    from protocol.messages import response_class

    cls = response_class(api_key, version)
    return cls.decode(payload, version=version, header=True)


@pytest.fixture
def conn(broker_factory: Any) -> Iterator[Conn]:
    b = broker_factory({"num.partitions": 2, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200})
    c = Conn(b.bootstrap)
    # create the topic (auto-create through Metadata)
    c.call(MetadataRequest, 8, topics=[MetadataRequest[8].MetadataRequestTopic(name=TOPIC)],
           allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
           include_topic_authorized_operations=False)
    c.broker = b  # type: ignore[attr-defined]
    yield c
    c.close()


def init(c: Conn, tid: str, timeout_ms: int = 60000, version: int = 4) -> tuple[int, int]:
    r = c.call(InitProducerIdRequest, version, transactional_id=tid, transaction_timeout_ms=timeout_ms,
               producer_id=-1, producer_epoch=-1)
    assert r.error_code == 0, r
    return r.producer_id, r.producer_epoch


def add(c: Conn, tid: str, pid: int, epoch: int, parts: list[int], version: int = 3) -> dict[int, int]:
    T = AddPartitionsToTxnRequest[version].AddPartitionsToTxnTopic
    r = c.call(AddPartitionsToTxnRequest, version, v3_and_below_transactional_id=tid,
               v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
               v3_and_below_topics=[T(name=TOPIC, partitions=parts)])
    return {p.partition_index: p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def produce(c: Conn, tid: str | None, pid: int, epoch: int, seq: int, values: list[bytes], partition: int = 0,
            transactional: bool = True) -> Any:
    batch = build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        attributes=ATTR_TRANSACTIONAL if transactional else 0)
    R = ProduceRequest[9]
    r = c.call(ProduceRequest, 9, transactional_id=tid, acks=-1, timeout_ms=5000,
               topic_data=[R.TopicProduceData(name=TOPIC, partition_data=[
                   R.TopicProduceData.PartitionProduceData(index=partition, records=batch)])])
    return r.responses[0].partition_responses[0]


def end(c: Conn, tid: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    r = c.call(EndTxnRequest, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
    return int(r.error_code)


def fetch(c: Conn, isolation: int, partition: int = 0, offset: int = 0) -> Any:
    R = FetchRequest[11]
    r = c.call(FetchRequest, 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
               isolation_level=isolation, session_id=0, session_epoch=-1,
               topics=[R.FetchTopic(topic=TOPIC, partitions=[R.FetchTopic.FetchPartition(
                   partition=partition, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                   partition_max_bytes=1 << 20)])],
               forgotten_topics_data=[], rack_id="")
    return r.responses[0].partitions[0]


def records(data: bytes) -> list[tuple[bool, bytes | None]]:
    """(is_control, value) of every record."""
    return [(bool(attrs & 0x20), r.value) for attrs, r in iter_batch_records(data or b"")]


def test_commit_and_abort_visibility(conn: Conn) -> None:
    c = conn
    pid, epoch = init(c, "raw-1")
    assert add(c, "raw-1", pid, epoch, [0]) == {0: 0}
    assert produce(c, "raw-1", pid, epoch, 0, [b"a1", b"a2"]).error_code == 0
    # open transaction: read_committed stops at the LSO (0), read_uncommitted sees it
    p = fetch(c, 1)
    assert (p.high_watermark, p.last_stable_offset) == (2, 0) and not p.records
    assert [v for _, v in records(fetch(c, 0).records)] == [b"a1", b"a2"]
    assert end(c, "raw-1", pid, epoch, commit=False) == 0
    p = fetch(c, 1)
    assert (p.high_watermark, p.last_stable_offset) == (3, 3)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
    got = records(p.records)
    assert got[-1][0] is True  # the ABORT marker
    ctrl = [r for attrs, r in iter_batch_records(p.records) if attrs & 0x20][0]
    assert ctrl.key is not None and parse_control_record(ctrl.key, ctrl.value) == (0, 0)
    # second transaction commits
    assert add(c, "raw-1", pid, epoch, [0]) == {0: 0}
    assert produce(c, "raw-1", pid, epoch, 2, [b"b1"]).error_code == 0
    assert end(c, "raw-1", pid, epoch, commit=True) == 0
    p = fetch(c, 1, offset=3)
    assert p.last_stable_offset == 5 and p.high_watermark == 5
    assert [v for ctl, v in records(p.records) if not ctl] == [b"b1"]
    assert list(p.aborted_transactions or []) == []
    hdrs = list(iter_headers(p.records))
    assert hdrs[-1].is_control and hdrs[-1].producer_id == pid


def test_fencing_and_errors(conn: Conn) -> None:
    c = conn
    pid, epoch = init(c, "raw-2")
    assert add(c, "raw-2", pid, epoch, [0, 1]) == {0: 0, 1: 0}
    assert produce(c, "raw-2", pid, epoch, 0, [b"z"]).error_code == 0
    # a new instance fences the open transaction: CONCURRENT_TRANSACTIONS until the abort completed
    r = c.call(InitProducerIdRequest, 4, transactional_id="raw-2", transaction_timeout_ms=60000,
               producer_id=-1, producer_epoch=-1)
    assert r.error_code in (51, 0)
    for _ in range(50):
        r = c.call(InitProducerIdRequest, 4, transactional_id="raw-2", transaction_timeout_ms=60000,
                   producer_id=-1, producer_epoch=-1)
        if r.error_code == 0:
            break
    assert r.error_code == 0 and r.producer_id == pid and r.producer_epoch == epoch + 2
    # the zombie is fenced by the coordinator and by the partition (marker epoch is higher)
    assert end(c, "raw-2", pid, epoch, commit=True) == 90          # PRODUCER_FENCED
    assert end(c, "raw-2", pid, epoch, commit=True, version=1) == 47  # INVALID_PRODUCER_EPOCH before v2
    assert add(c, "raw-2", pid, epoch, [0]) == {0: 90}
    assert produce(c, "raw-2", pid, epoch, 1, [b"zombie"]).error_code == 47
    p = fetch(c, 1)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
    # unknown partition: that one UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED
    assert add(c, "raw-2", pid, epoch + 2, [0, 7]) == {0: 55, 7: 3}
    assert end(c, "raw-2", pid, epoch + 2, commit=True) == 48  # nothing open: INVALID_TXN_STATE
    # invalid timeout
    r = c.call(InitProducerIdRequest, 4, transactional_id="raw-3", transaction_timeout_ms=10**9,
               producer_id=-1, producer_epoch=-1)
    assert r.error_code == 50


def test_timeout_abort_and_admin_apis(conn: Conn) -> None:
    c = conn
    pid, epoch = init(c, "raw-4", timeout_ms=500)
    assert add(c, "raw-4", pid, epoch, [1]) == {1: 0}
    assert produce(c, "raw-4", pid, epoch, 0, [b"late"], partition=1).error_code == 0
    d = c.call(DescribeTransactionsRequest, 0, transactional_ids=["raw-4", "nope"])
    s = {t.transactional_id: t for t in d.transaction_states}
    assert s["raw-4"].transaction_state == "Ongoing" and s["raw-4"].producer_id == pid
    assert [(t.topic, list(t.partitions)) for t in s["raw-4"].topics] == [(TOPIC, [1])]
    assert s["nope"].error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND
    dp = c.call(DescribeProducersRequest, 0, topics=[DescribeProducersRequest[0].TopicRequest(
        name=TOPIC, partition_indexes=[1])])
    prods = dp.topics[0].partitions[0].active_producers
    assert [(x.producer_id, x.current_txn_start_offset) for x in prods] == [(pid, 0)]
    # the broker aborts it after transaction.timeout.ms
    import time
    for _ in range(100):
        p = fetch(c, 1, partition=1)
        if p.last_stable_offset == p.high_watermark == 2:
            break
        time.sleep(0.1)
    assert (p.last_stable_offset, p.high_watermark) == (2, 2)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]
    lt = c.call(ListTransactionsRequest, 1, state_filters=["CompleteAbort"], producer_id_filters=[],
                duration_filter=-1)
    assert [(t.transactional_id, t.transaction_state) for t in lt.transaction_states] == [("raw-4", "CompleteAbort")]
    assert end(c, "raw-4", pid, epoch, commit=True) == 90  # the producer learns it was fenced


def test_write_txn_markers_api(conn: Conn) -> None:
    c = conn
    # an open transaction closed by a raw marker, behind the coordinator's back (what
    # kafka-transactions.sh abort does for a hanging transaction)
    pid, epoch = init(c, "raw-wm")
    assert add(c, "raw-wm", pid, epoch, [1]) == {1: 0}
    assert produce(c, "raw-wm", pid, epoch, 0, [b"m"], partition=1).error_code == 0
    assert fetch(c, 1, partition=1).last_stable_offset == 0
    W = WriteTxnMarkersRequest[1]
    w = c.call(WriteTxnMarkersRequest, 1, markers=[W.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
        topics=[W.WritableTxnMarker.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[1, 9])])])
    res = {p.partition_index: p.error_code for p in w.markers[0].topics[0].partitions}
    assert res == {1: 0, 9: 3}
    p = fetch(c, 1, partition=1)
    assert p.last_stable_offset == 2
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]


def test_open_transaction_survives_broker_sigkill(conn: Conn) -> None:
    """Producer state (open transaction, LSO) and coordinator state come back after kill -9."""
    c = conn
    pid, epoch = init(c, "raw-5")
    assert add(c, "raw-5", pid, epoch, [0, 1]) == {0: 0, 1: 0}
    assert produce(c, "raw-5", pid, epoch, 0, [b"k1", b"k2"], partition=0).error_code == 0
    assert produce(c, "raw-5", pid, epoch, 0, [b"k3"], partition=1).error_code == 0
    c.close()
    b = c.broker  # type: ignore[attr-defined]
    b.kill()
    b.restart()
    c2 = Conn(b.bootstrap)
    try:
        p = fetch(c2, 1, partition=0)
        assert (p.high_watermark, p.last_stable_offset) == (2, 0)  # still open after the restart
        d = c2.call(DescribeTransactionsRequest, 0, transactional_ids=["raw-5"]).transaction_states[0]
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, epoch)
        assert end(c2, "raw-5", pid, epoch, commit=True) == 0
        p = fetch(c2, 1, partition=0)
        assert p.last_stable_offset == 3 and [v for ctl, v in records(p.records) if not ctl] == [b"k1", b"k2"]
        p = fetch(c2, 1, partition=1)
        assert p.last_stable_offset == 2 and [v for ctl, v in records(p.records) if not ctl] == [b"k3"]
        # the idempotent sequence state survived too: the next batch must continue at 1 on partition 1
        assert add(c2, "raw-5", pid, epoch, [1]) == {1: 0}
        assert produce(c2, "raw-5", pid, epoch, 5, [b"gap"], partition=1).error_code == 45  # OUT_OF_ORDER
        assert produce(c2, "raw-5", pid, epoch, 1, [b"k4"], partition=1).error_code == 0
    finally:
        c2.close()


def test_batched_add_partitions_v4_and_list_pattern(conn: Conn) -> None:
    c = conn
    pid_a, ep_a = init(c, "batch-a")
    pid_b, ep_b = init(c, "batch-b")
    assert add(c, "batch-a", pid_a, ep_a, [0]) == {0: 0}
    R = AddPartitionsToTxnRequest[4]
    Txn, Topic = R.AddPartitionsToTxnTransaction, R.AddPartitionsToTxnTopic
    r = c.call(AddPartitionsToTxnRequest, 4, transactions=[
        Txn(transactional_id="batch-a", producer_id=pid_a, producer_epoch=ep_a, verify_only=True,
            topics=[Topic(name=TOPIC, partitions=[0, 1])]),
        Txn(transactional_id="batch-b", producer_id=pid_b, producer_epoch=ep_b, verify_only=False,
            topics=[Topic(name=TOPIC, partitions=[1])]),
        Txn(transactional_id="batch-b", producer_id=pid_b, producer_epoch=ep_b + 3, verify_only=False,
            topics=[Topic(name=TOPIC, partitions=[0])]),
    ])
    assert r.error_code == 0
    got = [(t.transactional_id, {p.partition_index: p.partition_error_code for tr in t.topic_results
                                 for p in tr.results_by_partition}) for t in r.results_by_transaction]
    assert got == [("batch-a", {0: 0, 1: 48}),   # verify: 1 is not in the transaction (INVALID_TXN_STATE)
                   ("batch-b", {1: 0}),          # added
                   ("batch-b", {0: 90})]         # wrong epoch: PRODUCER_FENCED
    d = c.call(DescribeTransactionsRequest, 0, transactional_ids=["batch-a", "batch-b"]).transaction_states
    assert [(t.transactional_id, [list(x.partitions) for x in t.topics]) for t in d] == [
        ("batch-a", [[0]]), ("batch-b", [[1]])]  # verification added nothing
    lt = c.call(ListTransactionsRequest, 2, state_filters=[], producer_id_filters=[], duration_filter=-1,
                transactional_id_pattern="batch-.*")
    assert sorted(t.transactional_id for t in lt.transaction_states) == ["batch-a", "batch-b"]
    lt = c.call(ListTransactionsRequest, 0, state_filters=["Ongoing", "Bogus"], producer_id_filters=[pid_b])
    assert [t.transactional_id for t in lt.transaction_states] == ["batch-b"]
    assert list(lt.unknown_state_filters) == ["Bogus"]


def test_txnindex_files_across_segment_rolls(broker_factory: Any) -> None:
    """Aborts land in each segment's .txnindex (34-byte entries); Fetch collects them across segments."""
    b = broker_factory({"num.partitions": 1, "log.segment.bytes": 2048})
    c = Conn(b.bootstrap)
    try:
        c.call(MetadataRequest, 8, topics=[MetadataRequest[8].MetadataRequestTopic(name=TOPIC)],
               allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
               include_topic_authorized_operations=False)
        pid, epoch = init(c, "raw-idx")
        seq = 0
        aborted_first = []
        committed = []
        for i in range(8):
            assert add(c, "raw-idx", pid, epoch, [0]) == {0: 0}
            vals = [b"%d-%d-" % (i, j) + b"x" * 300 for j in range(3)]
            r = produce(c, "raw-idx", pid, epoch, seq, vals)
            assert r.error_code == 0
            seq += 3
            commit = i % 2 == 0
            if commit:
                committed += vals
            else:
                aborted_first.append(r.base_offset)
            assert end(c, "raw-idx", pid, epoch, commit=commit) == 0
        part_dir = b.data_dir / f"{TOPIC}-0"
        idx_files = sorted(part_dir.glob("*.txnindex"))
        assert len(list(part_dir.glob("*.log"))) > 2 and idx_files
        entries = []
        for f in idx_files:
            data = f.read_bytes()
            assert len(data) % 34 == 0
            entries += [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)]
        assert [(v, p, first) for v, p, first, _last, _lso in entries] == [(0, pid, f) for f in aborted_first]
        got, aborted, offset = [], [], 0
        while True:
            p = fetch(c, 1, offset=offset)
            aborted += [(a.producer_id, a.first_offset) for a in p.aborted_transactions or []]
            hdrs = list(iter_headers(p.records or b""))
            if not hdrs:
                break
            got += [(r.offset, r.value) for attrs, r in iter_batch_records(p.records) if not attrs & 0x20]
            offset = hdrs[-1].next_offset
        assert {f for _, f in aborted} == set(aborted_first)
        # what a read_committed client keeps: drop records of aborted ranges (first offset .. marker)
        ranges = [(e[2], e[3]) for e in entries]
        kept = [v for off, v in got if not any(lo <= off <= hi for lo, hi in ranges)]
        assert kept == committed
    finally:
        c.close()


def test_produce_outside_the_transaction_is_refused(conn: Conn) -> None:
    """KIP-890 verification: no hanging transaction from a late or zombie Produce."""
    c = conn
    pid, epoch = init(c, "raw-6")
    # not added with AddPartitionsToTxn: refused, nothing written, the LSO does not move
    assert produce(c, "raw-6", pid, epoch, 0, [b"sneaky"], partition=1).error_code == 48  # INVALID_TXN_STATE
    assert add(c, "raw-6", pid, epoch, [1]) == {1: 0}
    assert produce(c, "raw-6", pid, epoch, 0, [b"ok"], partition=1).error_code == 0
    assert end(c, "raw-6", pid, epoch, commit=True) == 0
    # a Produce arriving after the commit completed would open a transaction no marker closes
    assert produce(c, "raw-6", pid, epoch, 1, [b"late"], partition=1).error_code == 48
    p = fetch(c, 1, partition=1)
    assert p.last_stable_offset == p.high_watermark == 2
    assert [v for ctl, v in records(p.records) if not ctl] == [b"ok"]
