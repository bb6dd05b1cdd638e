"""Transactions with confluent-kafka (librdkafka) against a live broker (issue #4).

* commit and abort across 3 topics x 3 partitions: read_committed sees exactly the committed
  transactions, read_uncommitted sees everything;
* a second producer with the same transactional.id fences the first;
* a transaction left open past transaction.timeout.ms is aborted by the broker;
* a consume-transform-produce application SIGKILLed midway and restarted writes every output
  exactly once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from tests.txn.compat_support import (
    FAST_TXN,
    assert_same,
    create_topics,
    ctp_round,
    merge,
    read_all,
    tp_list,
    txn_values,
    wait_until,
)


def producer(bootstrap: str, tid: str, **extra: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def run_txn(p: Producer, values: dict[tuple[str, int], list[bytes]], commit: bool) -> None:
    p.begin_transaction()
    for (t, part), vs in values.items():
        for v in vs:
            p.produce(t, value=v, partition=part)
    if commit:
        p.commit_transaction(30)
    else:
        p.flush(30)  # the records reach the log before the abort
        p.abort_transaction(30)


def test_commit_and_abort_across_partitions(broker_factory: Any) -> None:
    b = broker_factory()
    create_topics(b.bootstrap)
    p = producer(b.bootstrap, "cfk-3x3")
    t1, t2, t3 = txn_values("c1"), txn_values("a2"), txn_values("c3")
    run_txn(p, t1, commit=True)
    run_txn(p, t2, commit=False)
    run_txn(p, t3, commit=True)
    committed = read_all(b.bootstrap, tp_list(), "read_committed", expect=90)
    assert_same(committed, merge(t1, t3), "read_committed")
    everything = read_all(b.bootstrap, tp_list(), "read_uncommitted", expect=135)
    assert_same(everything, merge(t1, t2, t3), "read_uncommitted")


def test_second_producer_fences_the_first(broker_factory: Any) -> None:
    b = broker_factory()
    create_topics(b.bootstrap)
    zombie = producer(b.bootstrap, "cfk-fence")
    zombie.begin_transaction()
    zombie.produce("txn-t0", value=b"zombie", partition=0)
    zombie.flush(30)
    fresh = producer(b.bootstrap, "cfk-fence")  # aborts the zombie's transaction, bumps the epoch
    with pytest.raises(KafkaException) as ei:
        zombie.produce("txn-t0", value=b"zombie-2", partition=0)
        zombie.commit_transaction(30)
    err = ei.value.args[0]
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH), err
    assert err.fatal(), err
    run_txn(fresh, {("txn-t0", 0): [b"fresh"]}, commit=True)
    got = read_all(b.bootstrap, [("txn-t0", 0)], "read_committed", expect=1)
    assert got == {("txn-t0", 0): [b"fresh"]}


def test_open_transaction_times_out(broker_factory: Any) -> None:
    b = broker_factory(FAST_TXN)
    create_topics(b.bootstrap)
    stuck = producer(b.bootstrap, "cfk-timeout", **{"transaction.timeout.ms": 10000})
    stuck.begin_transaction()
    for i in range(5):
        stuck.produce("txn-t1", value=b"stuck-%d" % i, partition=2)
    stuck.flush(30)
    # while it is open, nothing after it is readable with read_committed
    other = producer(b.bootstrap, "cfk-other")
    run_txn(other, {("txn-t1", 2): [b"after"]}, commit=True)
    assert read_all(b.bootstrap, [("txn-t1", 2)], "read_committed", settle_s=0.5) == {("txn-t1", 2): []}
    # the broker aborts it once transaction.timeout.ms has passed
    assert wait_until(lambda: read_all(b.bootstrap, [("txn-t1", 2)], "read_committed", settle_s=0.3)
                      == {("txn-t1", 2): [b"after"]}, timeout=60, interval=0.5)
    with pytest.raises(KafkaException):
        stuck.commit_transaction(30)


def test_consume_transform_produce_survives_sigkill(broker_factory: Any, tmp_path: Path) -> None:
    b = broker_factory(FAST_TXN)
    ctp_round(b.bootstrap, "confluent", tmp_path)
