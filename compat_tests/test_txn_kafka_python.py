"""Transactions with kafka-python 3.x against a live broker (issue #4).

Same scenarios as test_txn_confluent.py, driven by kafka-python's transactional
KafkaProducer and its read_committed KafkaConsumer; librdkafka is the independent reader.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as Errors

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


def producer(bootstrap: str, tid: str, **extra: Any) -> KafkaProducer:
    p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, linger_ms=5, **extra)
    p.init_transactions()
    return p


def run_txn(p: KafkaProducer, values: dict[tuple[str, int], list[bytes]], commit: bool) -> None:
    p.begin_transaction()
    for (t, part), vs in values.items():
        for v in vs:
            p.send(t, value=v, partition=part)
    if commit:
        p.commit_transaction()
    else:
        p.flush()
        p.abort_transaction()


def kp_read(bootstrap: str, tps: list[tuple[str, int]], isolation: str, expect: int) -> dict[Any, list[bytes]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                      group_id=None, consumer_timeout_ms=2000)
    out: dict[Any, list[bytes]] = {tp: [] for tp in tps}
    try:
        c.assign([TopicPartition(t, p) for t, p in tps])
        c.seek_to_beginning()
        deadline = time.monotonic() + 60
        n = 0
        while time.monotonic() < deadline:
            batch = c.poll(timeout_ms=500)
            got = sum(len(ms) for ms in batch.values())
            for tp, ms in batch.items():
                out[(tp.topic, tp.partition)].extend(m.value for m in ms)
            n += got
            if not got and n >= expect:
                break
        return out
    finally:
        c.close()


def test_commit_and_abort_across_partitions(broker_factory: Any) -> None:
    b = broker_factory()
    create_topics(b.bootstrap)
    p = producer(b.bootstrap, "kp-3x3")
    t1, t2, t3 = txn_values("c1"), txn_values("a2"), txn_values("c3")
    run_txn(p, t1, commit=True)
    run_txn(p, t2, commit=False)
    run_txn(p, t3, commit=True)
    p.close()
    assert_same(read_all(b.bootstrap, tp_list(), "read_committed", expect=90), merge(t1, t3), "librdkafka committed")
    assert_same(read_all(b.bootstrap, tp_list(), "read_uncommitted", expect=135), merge(t1, t2, t3),
                "librdkafka uncommitted")
    assert_same(kp_read(b.bootstrap, tp_list(), "read_committed", 90), merge(t1, t3), "kafka-python committed")
    assert_same(kp_read(b.bootstrap, tp_list(), "read_uncommitted", 135), merge(t1, t2, t3),
                "kafka-python uncommitted")


def test_second_producer_fences_the_first(broker_factory: Any) -> None:
    b = broker_factory()
    create_topics(b.bootstrap)
    zombie = producer(b.bootstrap, "kp-fence")
    zombie.begin_transaction()
    zombie.send("txn-t0", value=b"zombie", partition=0)
    zombie.flush()
    fresh = producer(b.bootstrap, "kp-fence")
    with pytest.raises((Errors.ProducerFencedError, Errors.InvalidProducerEpochError, Errors.KafkaError)) as ei:
        zombie.send("txn-t0", value=b"zombie-2", partition=0)
        zombie.commit_transaction()
    assert isinstance(ei.value, (Errors.ProducerFencedError, Errors.InvalidProducerEpochError)) or \
        "fenc" in str(ei.value).lower() or "epoch" in str(ei.value).lower(), repr(ei.value)
    zombie.close(timeout=1)
    run_txn(fresh, {("txn-t0", 0): [b"fresh"]}, commit=True)
    fresh.close()
    assert read_all(b.bootstrap, [("txn-t0", 0)], "read_committed", expect=1) == {("txn-t0", 0): [b"fresh"]}


def test_open_transaction_times_out(broker_factory: Any) -> None:
    b = broker_factory(FAST_TXN)
    create_topics(b.bootstrap)
    stuck = producer(b.bootstrap, "kp-timeout", transaction_timeout_ms=10000)
    stuck.begin_transaction()
    for i in range(5):
        stuck.send("txn-t2", value=b"stuck-%d" % i, partition=1)
    stuck.flush()
    assert wait_until(lambda: read_all(b.bootstrap, [("txn-t2", 1)], "read_uncommitted", settle_s=0.3)
                      [("txn-t2", 1)][:5] == [b"stuck-%d" % i for i in range(5)], timeout=10)
    other = producer(b.bootstrap, "kp-other")
    run_txn(other, {("txn-t2", 1): [b"after"]}, commit=True)
    other.close()
    assert wait_until(lambda: read_all(b.bootstrap, [("txn-t2", 1)], "read_committed", settle_s=0.3)
                      == {("txn-t2", 1): [b"after"]}, timeout=60, interval=0.5)
    with pytest.raises(Errors.KafkaError):
        stuck.commit_transaction()
    stuck.close(timeout=1)


def test_consume_transform_produce_survives_sigkill(broker_factory: Any, tmp_path: Path) -> None:
    b = broker_factory(FAST_TXN)
    ctp_round(b.bootstrap, "kafka-python", tmp_path)
