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
from tests.support.replicas import create_topic, find_coordinator, wait_for, wait_full_isr

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
