"""The broker is SIGKILLed in the middle of a commit and restarted (issue #4, point 2).

A transaction must end committed everywhere or aborted everywhere, never half. The crash
points are forced with the coordinator's fault injection (the broker property ``transaction.fault.injection``):

* ``crash-after-markers=4``: PrepareCommit is durable and 4 of 9 COMMIT markers are written.
  The restarted coordinator finishes the commit; the client's retried EndTxn succeeds.
* ``crash-before-prepare``: the broker dies on EndTxn before PrepareCommit is written. The
  transaction is still Ongoing after the restart: the client's retried EndTxn commits it, or
  the timeout aborts it -- either way on all 9 partitions.

and one more test kills the broker at a random moment while a producer commits transaction
after transaction, then checks every transaction for all-or-nothing.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from tests.txn.compat_support import TOPICS, create_topics, read_all, tp_list, wait_until

pytestmark = pytest.mark.slow


def commit_in_background(bootstrap: str, tid: str, tag: str) -> tuple[threading.Thread, dict[str, Any]]:
    """Write ``tag`` to all 9 partitions in one transaction and commit it, in a thread."""
    result: dict[str, Any] = {}
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5,
                  "transaction.timeout.ms": 60000, "reconnect.backoff.max.ms": 500})
    p.init_transactions(30)
    p.begin_transaction()
    for t, part in tp_list():
        p.produce(t, value=f"{tag}-{t}-{part}".encode(), partition=part)
    p.flush(30)

    def run() -> None:
        try:
            p.commit_transaction(90)
            result["ok"] = True
        except KafkaException as e:
            result["error"] = e.args[0]
        result["producer"] = p

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th, result


def partitions_with(bootstrap: str, tag: str, isolation: str = "read_committed") -> set[tuple[str, int]]:
    got = read_all(bootstrap, tp_list(), isolation, settle_s=1.0)
    return {tp for tp, vs in got.items() if any(v.startswith(tag.encode() + b"-") for v in vs)}


@pytest.mark.parametrize("fault", ["crash-after-markers=4", "crash-before-prepare"])
def test_sigkill_during_commit_is_all_or_nothing(broker_factory: Any, fault: str) -> None:
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
                        "transaction.fault.injection": fault})
    create_topics(b.bootstrap)
    th, result = commit_in_background(b.bootstrap, "crash-1", "T1")
    assert wait_until(lambda: not b.is_running(), timeout=30), "the fault did not fire"
    b.kill()  # reap the process the fault killed
    b.overrides.pop("transaction.fault.injection")
    b.restart()
    th.join(120)
    assert not th.is_alive()
    assert "Resuming PrepareCommit" in b.log_text() or fault == "crash-before-prepare"
    everywhere = set(tp_list())
    if result.get("ok"):
        # the client was told "committed": then it is committed on every partition
        assert wait_until(lambda: partitions_with(b.bootstrap, "T1") == everywhere, timeout=30), \
            partitions_with(b.bootstrap, "T1")
    else:
        # the client got an error: all or nothing, and it must settle (commit resumed or timeout abort)
        def settled() -> bool:
            return partitions_with(b.bootstrap, "T1") in (set(), everywhere)
        assert wait_until(settled, timeout=90), partitions_with(b.bootstrap, "T1")
    if fault.startswith("crash-after-markers"):
        # PrepareCommit was durable: the outcome must be commit, whatever the client saw
        assert partitions_with(b.bootstrap, "T1") == everywhere
    # nothing is left hanging: the last stable offset reached the end of every partition
    uncommitted = read_all(b.bootstrap, tp_list(), "read_uncommitted", settle_s=1.0)
    committed = read_all(b.bootstrap, tp_list(), "read_committed", settle_s=1.0)
    if partitions_with(b.bootstrap, "T1") == everywhere:
        assert committed == uncommitted


def test_sigkill_at_random_moments_while_committing(broker_factory: Any) -> None:
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    create_topics(b.bootstrap)
    stop = threading.Event()
    outcome: dict[str, str] = {}

    def producer_loop() -> None:
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "crash-loop", "linger.ms": 2,
                      "transaction.timeout.ms": 10000, "reconnect.backoff.max.ms": 500})
        p.init_transactions(60)
        n = 0
        while not stop.is_set() and n < 5000:
            tag = f"L{n:04d}"
            try:
                p.begin_transaction()
                for t, part in tp_list():
                    p.produce(t, value=f"{tag}-{t}-{part}".encode(), partition=part)
                p.commit_transaction(60)
                outcome[tag] = "committed"
            except KafkaException as e:
                err = e.args[0]
                outcome[tag] = f"error {err}"
                if err.fatal():
                    return
                if err.txn_requires_abort():
                    try:
                        p.abort_transaction(60)
                    except KafkaException:
                        return
            n += 1

    th = threading.Thread(target=producer_loop, daemon=True)
    th.start()
    rng = random.Random(4)
    for _ in range(2):
        time.sleep(rng.uniform(1.0, 3.0))
        b.kill()
        b.restart()
    time.sleep(2)
    stop.set()
    th.join(180)
    assert not th.is_alive()
    assert sum(1 for v in outcome.values() if v == "committed") >= 3, outcome

    def by_tag() -> dict[str, set[tuple[str, int]]]:
        got = read_all(b.bootstrap, tp_list(), "read_committed", settle_s=1.5)
        tags: dict[str, set[tuple[str, int]]] = {}
        for tp, vs in got.items():
            for v in vs:
                tags.setdefault(v.decode().split("-", 1)[0], set()).add(tp)
        return tags

    # every transaction is on all 9 partitions or on none, once the broker settled (timeouts)
    everywhere = set(tp_list())
    assert wait_until(lambda: all(tps == everywhere for tps in by_tag().values()), timeout=90), \
        {tag: len(tps) for tag, tps in by_tag().items() if tps != everywhere}
    tags = by_tag()
    for tag, status in outcome.items():
        if status == "committed":
            assert tags.get(tag) == everywhere, (tag, tags.get(tag))
    assert len(TOPICS) == 3


@pytest.mark.parametrize("fault", ["crash-after-markers=1", "crash-before-prepare"])
def test_sigkill_during_commit_with_offsets(broker_factory: Any, fault: str) -> None:
    """A transaction with consumer offsets: data and offsets end together, committed or aborted.

    The __consumer_offsets marker is written first (partitions are visited in name order), so
    ``crash-after-markers=1`` kills the broker with the offsets published and no data marker.
    """
    from confluent_kafka import Consumer, TopicPartition

    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
                        "transaction.fault.injection": fault})
    create_topics(b.bootstrap)
    create_topics(b.bootstrap, ["crash-in"], 1)
    src = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        src.produce("crash-in", value=b"in-%d" % i, partition=0)
    assert src.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "crash-group", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("crash-in", 0, 0)])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        got += [m for m in consumer.consume(10, 0.5) if not m.error()]
    assert len(got) == 10

    result: dict[str, Any] = {}
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "crash-offsets", "linger.ms": 5,
                  "transaction.timeout.ms": 60000, "reconnect.backoff.max.ms": 500})
    p.init_transactions(30)
    p.begin_transaction()
    for t, part in tp_list():
        p.produce(t, value=f"T2-{t}-{part}".encode(), partition=part)
    p.send_offsets_to_transaction([TopicPartition("crash-in", 0, 10)], consumer.consumer_group_metadata(), 30)

    def run() -> None:
        try:
            p.commit_transaction(90)
            result["ok"] = True
        except KafkaException as e:
            result["error"] = e.args[0]

    th = threading.Thread(target=run, daemon=True)
    th.start()
    assert wait_until(lambda: not b.is_running(), timeout=30), "the fault did not fire"
    b.kill()
    b.overrides.pop("transaction.fault.injection")
    b.restart()
    th.join(120)
    consumer.close()

    def committed_offset() -> int:
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "crash-group", "enable.auto.commit": False})
        try:
            return c.committed([TopicPartition("crash-in", 0)], timeout=20)[0].offset
        finally:
            c.close()

    everywhere = set(tp_list())

    def settled() -> bool:
        return partitions_with(b.bootstrap, "T2") in (set(), everywhere)
    assert wait_until(settled, timeout=90), partitions_with(b.bootstrap, "T2")
    data_committed = partitions_with(b.bootstrap, "T2") == everywhere
    if result.get("ok") or fault.startswith("crash-after-markers"):
        assert data_committed
    assert committed_offset() == (10 if data_committed else -1001), (data_committed, committed_offset())
