"""Transactions in a 3-broker cluster: the transaction coordinator is the leader of the
transactional id's ``__transaction_state`` partition (RF 3, min.insync.replicas 2), markers go
to each partition's leader over WriteTxnMarkers, and Produce verifies transactional batches
with the coordinator broker (KIP-890). The coordinator's broker is SIGKILLed while a
confluent-kafka transactional producer commits: read_committed consumers see every
transaction all or nothing, and every transaction the producer saw committed is there."""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.support.cluster import SamsaCluster
from tests.support.replicas import create_topic, find_coordinator, partitions, wait_for, wait_full_isr

PARTS = 3


def txn_coordinator(cluster: SamsaCluster, tid: str) -> int:
    return find_coordinator(cluster, tid, key_type=1)


def read_committed(bootstrap: str, topic: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTS)])
    out: list[bytes] = []
    idle = time.monotonic()
    while time.monotonic() - idle < 6:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        idle = time.monotonic()
        out.append(m.value())
    c.close()
    return out


def test_transactions_survive_the_coordinator_being_killed(cluster3: SamsaCluster) -> None:
    topic = f"ctxn-{uuid.uuid4().hex[:6]}"
    tid = f"tid-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, PARTS, 3, {"min.insync.replicas": "2"})
    wait_full_isr(cluster3, topic, 3)
    committed: list[int] = []
    aborted: list[int] = []
    stop = threading.Event()
    failure: list[BaseException] = []

    def new_producer() -> Producer:
        p = Producer({"bootstrap.servers": cluster3.bootstrap, "transactional.id": tid,
                      "transaction.timeout.ms": 60000, "message.timeout.ms": 60000})
        deadline = time.monotonic() + 90
        while True:
            try:
                p.init_transactions(30)
                return p
            except KafkaException as e:
                if time.monotonic() > deadline or not e.args[0].retriable():
                    raise
                time.sleep(0.5)

    def run() -> None:
        try:
            p = new_producer()
            n = 0
            while not stop.is_set() or n < 5:
                n += 1
                p.begin_transaction()
                for part in range(PARTS):
                    p.produce(topic, value=b"%d:%d" % (n, part), partition=part)
                try:
                    while True:
                        try:
                            p.commit_transaction(60)
                            committed.append(n)
                            break
                        except KafkaException as e:
                            err = e.args[0]
                            if err.retriable():
                                time.sleep(0.2)
                                continue
                            raise
                except KafkaException as e:
                    err = e.args[0]
                    if err.txn_requires_abort():
                        p.abort_transaction(60)
                        aborted.append(n)
                    else:  # fatal, outcome unknown (the new coordinator may complete it): start over
                        p = new_producer()
        except BaseException as e:  # reported to the test thread
            failure.append(e)

    t = threading.Thread(target=run)
    t.start()
    try:
        wait_for(lambda: len(committed) >= 5, 90, "the first transactions")
        coord = wait_for(lambda: txn_coordinator(cluster3, tid) + 1, 30, "the transaction coordinator") - 1
        wait_full_isr(cluster3, "__transaction_state", 3)
        before = len(committed)
        cluster3.kill(coord)
        wait_for(lambda: txn_coordinator(cluster3, tid) not in (-1, coord), 60, "a new transaction coordinator")
        wait_for(lambda: len(committed) >= before + 10, 120, "transactions to commit after the failover")
        cluster3.restart(coord)
    finally:
        stop.set()
        t.join(180)
    assert not failure, failure
    values = read_committed(cluster3.bootstrap, topic)
    seen: dict[int, set[int]] = {}
    for v in values:
        n, part = map(int, v.split(b":"))
        seen.setdefault(n, set()).add(part)
    for n, parts in seen.items():
        assert parts == set(range(PARTS)), f"transaction {n} is only partly visible: {sorted(parts)}"
    assert set(committed) <= set(seen), f"committed transactions missing: {sorted(set(committed) - set(seen))[:5]}"
    assert not set(aborted) & set(seen), f"aborted transactions became visible: {sorted(set(aborted) & set(seen))}"
    assert len(values) == len(seen) * PARTS, "a transaction's records appear more than once"


def test_transactions_v2_across_brokers(cluster3: SamsaCluster) -> None:
    """KIP-890 part 2 in a cluster, by hand (no stock client here speaks it): Produce v12 to
    partition leaders that are not the transaction coordinator makes them add the partition
    there (AddPartitionsToTxn v5 between brokers), TxnOffsetCommit v5 does the same from the
    group coordinator, and EndTxn v5's bumped epoch reaches every leader in the markers."""
    from kafka.protocol.consumer.fetch import FetchRequest
    from kafka.protocol.producer.produce import ProduceRequest
    from kafka.protocol.producer.transaction import (
        EndTxnRequest,
        InitProducerIdRequest,
        TxnOffsetCommitRequest,
    )

    from protocol.records import ATTR_TRANSACTIONAL, iter_headers
    from tests.txn.test_txn_broker import Conn
    from txn.markers import build_batch

    topic = f"ctv2-{uuid.uuid4().hex[:6]}"
    tid = f"tv2-{uuid.uuid4().hex[:6]}"
    group = f"g-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, PARTS, 3)
    wait_full_isr(cluster3, topic, 3)
    coordinator = wait_for(lambda: max(txn_coordinator(cluster3, tid), -1) + 1, 60, "a transaction coordinator") - 1
    group_coordinator = wait_for(lambda: find_coordinator(cluster3, group) + 1, 60, "a group coordinator") - 1
    leaders = {p: md.leader for p, md in partitions(cluster3, topic).items()}
    elsewhere = [p for p, leader in leaders.items() if leader != coordinator]
    assert elsewhere, f"every partition is led by the coordinator {coordinator}: {leaders}"

    def conn(broker_id: int) -> Conn:  # broker i of the cluster has broker.id i
        return Conn(cluster3[broker_id].bootstrap)

    coord = conn(coordinator)
    init = coord.call(InitProducerIdRequest, 5, transactional_id=tid, transaction_timeout_ms=60000,
                      producer_id=-1, producer_epoch=-1)
    assert init.error_code == 0
    pid, epoch = init.producer_id, init.producer_epoch
    R = ProduceRequest[12]
    for p in elsewhere:
        batch = build_batch([(None, b"v2-%d" % p)], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                            attributes=ATTR_TRANSACTIONAL)
        r = conn(leaders[p]).call(ProduceRequest, 12, transactional_id=tid, acks=-1, timeout_ms=10000, topic_data=[
            R.TopicProduceData(name=topic, partition_data=[R.TopicProduceData.PartitionProduceData(index=p,
                                                                                                records=batch)])])
        assert r.responses[0].partition_responses[0].error_code == 0, (p, r)
    T = TxnOffsetCommitRequest[5].TxnOffsetCommitRequestTopic
    r = conn(group_coordinator).call(
        TxnOffsetCommitRequest, 5, transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
        generation_id=-1, member_id="", group_instance_id=None,
        topics=[T(name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=7, committed_leader_epoch=-1, committed_metadata="")])])
    assert [p.error_code for t in r.topics for p in t.partitions] == [0]
    end = coord.call(EndTxnRequest, 5, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True)
    assert (end.error_code, end.producer_id, end.producer_epoch) == (0, pid, epoch + 1)
    assert sorted(read_committed(cluster3.bootstrap, topic)) == sorted(b"v2-%d" % p for p in elsewhere)
    F = FetchRequest[11]
    for p in elsewhere:  # every leader wrote the COMMIT marker with the bumped epoch
        c = conn(leaders[p])
        f = c.call(FetchRequest, 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1,
                   session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
                   topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                       partition=p, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                       partition_max_bytes=1 << 20)])])
        marker = list(iter_headers(f.responses[0].partitions[0].records))[-1]
        assert marker.is_control and (marker.producer_id, marker.producer_epoch) == (pid, epoch + 1)
