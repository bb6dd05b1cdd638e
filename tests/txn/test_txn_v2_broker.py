"""Transactions v2 (KIP-890 part 2) on the wire, against a live broker.

No stock client here speaks transactions v2 (the Java client 3.9.1 and librdkafka 2.16 stay on
v1; Java 4.x enables v2 when ``transaction.version`` is finalized at 2), so each request is sent
by hand with the scaffolding of test_txn_broker.py: InitProducerId, then Produce v12 with no
AddPartitionsToTxn (the leader has the coordinator add the partition), TxnOffsetCommit v5 with
no AddOffsetsToTxn, and EndTxn v5, which answers the bumped epoch. Checked: what read_committed
consumers see, the markers' epoch, the fencing of the old epoch, EndTxn retries, the feature in
ApiVersions and UpdateFeatures, and that v1 clients are unaffected.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import EndTxnRequest, TxnOffsetCommitRequest

from protocol.records import ATTR_TRANSACTIONAL, iter_headers
from tests.txn import test_txn_broker
from tests.txn.test_txn_broker import TOPIC, Conn, add, end, fetch, init, produce, records
from txn.markers import build_batch

TID = "v2-1"
conn = test_txn_broker.conn  # the same fixture: a broker with TOPIC (2 partitions) and a connection


def produce_v12(c: Conn, tid: str, pid: int, epoch: int, seq: int, values: list[bytes], partition: int = 0) -> Any:
    batch = build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        attributes=ATTR_TRANSACTIONAL)
    R = ProduceRequest[12]
    r = c.call(ProduceRequest, 12, transactional_id=tid, acks=-1, timeout_ms=5000,
               topic_data=[R.TopicProduceData(name=TOPIC, partition_data=[
                   R.TopicProduceData.PartitionProduceData(index=partition, records=batch)])])
    return r.responses[0].partition_responses[0]


def end_v5(c: Conn, tid: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    r = c.call(EndTxnRequest, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
    return int(r.error_code), r.producer_id, r.producer_epoch


def describe(c: Conn, tid: str) -> Any:
    return c.call(DescribeTransactionsRequest, 0, transactional_ids=[tid]).transaction_states[0]


def test_produce_v12_adds_partitions_and_end_txn_v5_bumps_the_epoch(conn: Conn) -> None:
    c = conn
    pid, e0 = init(c, TID, version=5)
    # no AddPartitionsToTxn: Produce v12 has the coordinator add each partition
    assert produce_v12(c, TID, pid, e0, 0, [b"a1", b"a2"], partition=0).error_code == 0
    assert produce_v12(c, TID, pid, e0, 0, [b"b1"], partition=1).error_code == 0
    d = describe(c, TID)
    assert d.transaction_state == "Ongoing"
    assert sorted((t.topic, p) for t in d.topics for p in t.partitions) == [(TOPIC, 0), (TOPIC, 1)]
    assert fetch(c, 1).last_stable_offset == 0  # the open transaction holds read_committed back
    code, pid1, e1 = end_v5(c, TID, pid, e0, commit=True)
    assert (code, pid1, e1) == (0, pid, e0 + 1)
    p = fetch(c, 1)
    assert [v for ctl, v in records(p.records) if not ctl] == [b"a1", b"a2"]
    marker = list(iter_headers(p.records))[-1]
    assert marker.is_control and (marker.producer_id, marker.producer_epoch) == (pid, e0 + 1)
    # a late write of the finished transaction (old epoch) is fenced by the marker's epoch
    assert produce_v12(c, TID, pid, e0, 2, [b"late"]).error_code in (47, 90)  # INVALID_PRODUCER_EPOCH, FENCED
    # the answer was lost: a retry with the old epoch gets the new one, nothing changes
    assert end_v5(c, TID, pid, e0, commit=True) == (0, pid, e0 + 1)
    # the next transaction runs at the new epoch from sequence 0, and aborts
    assert produce_v12(c, TID, pid, e1, 0, [b"c1"]).error_code == 0
    assert end_v5(c, TID, pid, e1, commit=False) == (0, pid, e1 + 1)
    p = fetch(c, 1)
    assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 3)]  # c1, for the client to drop
    # v2 may abort with nothing open (only the epoch moves); committing nothing is invalid
    assert end_v5(c, TID, pid, e1 + 1, commit=False) == (0, pid, e1 + 2)
    assert end_v5(c, TID, pid, e1 + 2, commit=True)[0] == 48  # INVALID_TXN_STATE
    assert describe(c, TID).producer_epoch == e1 + 2


def test_txn_offset_commit_v5_adds_the_group_partition(conn: Conn) -> None:
    c = conn
    tid, group = "v2-offsets", "v2-group"
    pid, epoch = init(c, tid, version=5)
    assert produce_v12(c, tid, pid, epoch, 0, [b"x"]).error_code == 0
    T = TxnOffsetCommitRequest[5].TxnOffsetCommitRequestTopic
    r = c.call(TxnOffsetCommitRequest, 5, transactional_id=tid, group_id=group, producer_id=pid,
               producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
               topics=[T(name=TOPIC, partitions=[T.TxnOffsetCommitRequestPartition(
                   partition_index=0, committed_offset=42, committed_leader_epoch=-1, committed_metadata="m")])])
    assert [p.error_code for t in r.topics for p in t.partitions] == [0]
    assert any(t.topic == "__consumer_offsets" for t in describe(c, tid).topics)

    def committed() -> int:
        G = OffsetFetchRequest[8].OffsetFetchRequestGroup
        f = c.call(OffsetFetchRequest, 8, groups=[G(group_id=group, topics=[
            G.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])])], require_stable=False)
        return int(f.groups[0].topics[0].partitions[0].committed_offset)

    assert committed() == -1  # held back until the COMMIT marker
    assert end_v5(c, tid, pid, epoch, commit=True)[0] == 0
    assert committed() == 42


def test_v1_clients_are_unchanged(conn: Conn) -> None:
    c = conn
    pid, epoch = init(c, "v1-1")
    # Produce v11 still refuses a partition the producer did not add (KIP-890 part 1)
    assert produce(c, "v1-1", pid, epoch, 0, [b"z"]).error_code != 0
    assert add(c, "v1-1", pid, epoch, [0]) == {0: 0}
    assert produce(c, "v1-1", pid, epoch, 0, [b"z"]).error_code == 0
    assert end(c, "v1-1", pid, epoch, commit=True, version=4) == 0
    assert describe(c, "v1-1").producer_epoch == epoch  # no bump for v1
    marker = list(iter_headers(fetch(c, 0).records))[-1]
    assert marker.is_control and marker.producer_epoch == epoch


def test_transaction_version_feature(conn: Conn) -> None:
    from kafka.protocol.admin import UpdateFeaturesRequest

    c = conn

    def finalized(version: int = 4) -> tuple[dict[str, int], int, dict[str, tuple[int, int]]]:
        r = c.call(ApiVersionsRequest, version, client_software_name="samsa-test", client_software_version="1")
        return ({f.name: f.max_version_level for f in r.finalized_features}, r.finalized_features_epoch,
                {f.name: (f.min_version, f.max_version) for f in r.supported_features})

    levels, epoch, supported = finalized()
    assert levels == {"transaction.version": 2} and supported == {"transaction.version": (0, 2)}
    assert finalized(3)[2] == {}  # v3 leaves out features whose minimum is 0 (KAFKA-17011)
    U = UpdateFeaturesRequest[1].FeatureUpdateKey

    def update(level: int, upgrade_type: int, validate_only: bool = False) -> Any:
        return c.call(UpdateFeaturesRequest, 1, timeout_ms=5000, validate_only=validate_only,
                      feature_updates=[U(feature="transaction.version", max_version_level=level,
                                         upgrade_type=upgrade_type)])

    r = update(1, 1)  # a downgrade needs a downgrade type
    assert (r.error_code, r.results[0].error_code) == (95, 95)  # INVALID_UPDATE_VERSION
    assert update(3, 1).error_code == 95  # beyond the supported range
    assert update(1, 2, validate_only=True).error_code == 0 and finalized()[0] == levels
    assert update(1, 2).error_code == 0
    assert finalized()[:2] == ({"transaction.version": 1}, epoch + 1)
    # the level survives a restart
    c.broker.restart()  # type: ignore[attr-defined]
    c2 = Conn(c.broker.bootstrap)  # type: ignore[attr-defined]
    try:
        r2 = c2.call(ApiVersionsRequest, 4, client_software_name="samsa-test", client_software_version="1")
        assert {f.name: f.max_version_level for f in r2.finalized_features} == {"transaction.version": 1}
        assert r2.finalized_features_epoch == epoch + 1
    finally:
        c2.close()


def test_init_producer_id_v6_refuses_two_phase_commit(conn: Conn) -> None:
    from kafka.protocol.producer.transaction import InitProducerIdRequest

    c = conn

    def init_v6(**flags: bool) -> Any:
        return c.call(InitProducerIdRequest, 6, transactional_id="v6", transaction_timeout_ms=60000,
                      producer_id=-1, producer_epoch=-1, **flags)

    ok = init_v6(enable2_pc=False, keep_prepared_txn=False)
    assert (ok.error_code, ok.producer_epoch, ok.ongoing_txn_producer_id, ok.ongoing_txn_producer_epoch) == \
        (0, 0, -1, -1)
    assert init_v6(enable2_pc=True, keep_prepared_txn=False).error_code == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert init_v6(enable2_pc=False, keep_prepared_txn=True).error_code == 42  # INVALID_REQUEST
