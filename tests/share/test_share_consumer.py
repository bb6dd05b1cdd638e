"""Share groups (KIP-932) against a real broker with confluent-kafka's ``ShareConsumer``
(librdkafka's share consumer): delivery, implicit and explicit acknowledgement, RELEASE /
REJECT, acquisition-lock timeouts, the delivery count limit, several members on one partition,
and a broker restart in the middle.

One broker serves the module (each test has its own topic and group) with short locks
(``group.share.record.lock.duration.ms`` 2000) and ``share.auto.offset.reset=earliest``; the
restart test starts its own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.brokers import BrokerProcess, make_broker

LOCK_MS = 2000
LIMIT = 3
CONFIG = {"group.share.record.lock.duration.ms": LOCK_MS, "group.share.min.record.lock.duration.ms": 1000,
          "group.share.delivery.count.limit": LIMIT,
          "share.auto.offset.reset": "earliest", "offsets.topic.num.partitions": 3,
          "share.coordinator.state.topic.num.partitions": 3}


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = make_broker(tmp_path_factory.mktemp("share"), overrides=CONFIG, name="share")
    b.start()
    try:
        yield b
    finally:
        b.kill()


def topic_with(b: BrokerProcess, values: list[bytes], partitions: int = 1) -> str:
    name = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    produce(b, name, values)
    return name


def produce(b: BrokerProcess, topic: str, values: list[bytes], per_batch: int = 0) -> None:
    """Produce ``values``; ``per_batch`` > 0 flushes after every so many (one batch each)."""
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i, v in enumerate(values, 1):
        p.produce(topic, value=v)
        if per_batch and i % per_batch == 0:
            p.flush(30)
    assert p.flush(30) == 0


def consumer(b: BrokerProcess, group: str, topic: str, **conf: Any) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group, **conf})
    c.subscribe([topic])
    return c


def poll_until(c: ShareConsumer, want: int, timeout: float = 30.0, ack: Any = None) -> list[Any]:
    """Poll until ``want`` records arrived (or ``timeout``); ``ack(msg)`` acknowledges each
    (explicit mode), and the acknowledgements are committed after every poll."""
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        msgs = [m for m in c.poll(0.5) if m.error() is None]
        for m in msgs:
            if ack is not None:
                ack(m)
        if ack is not None and msgs:
            c.commit_sync(30)
        out += msgs
    return out


def values(msgs: list[Any]) -> list[bytes]:
    return [m.value() for m in msgs]


def test_implicit_acknowledgement(share_broker: BrokerProcess) -> None:
    sent = [f"r{i}".encode() for i in range(50)]
    t = topic_with(share_broker, sent)
    g = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(share_broker, g, t)
    try:
        got = poll_until(c, 50)
        assert sorted(values(got)) == sorted(sent)
        assert {m.delivery_count() for m in got} == {1}
        c.poll(0.5)  # acknowledges the last batch (implicit mode)
    finally:
        c.close()
    # Everything was accepted: a new member of the group sees only what comes next.
    c2 = consumer(share_broker, g, t)
    try:
        produce(share_broker, t, [b"later"])
        got = poll_until(c2, 1)
        assert values(got) == [b"later"]
        assert values(poll_until(c2, 1, timeout=3)) == []
    finally:
        c2.close()


def test_explicit_release_redelivers_and_reject_never_does(share_broker: BrokerProcess) -> None:
    sent = [f"e{i}".encode() for i in range(10)]
    t = topic_with(share_broker, sent)
    g = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(share_broker, g, t, **{"share.acknowledgement.mode": "explicit"})
    try:
        def first(m: Any) -> None:
            n = int(m.value()[1:])
            c.acknowledge(m, AcknowledgeType.RELEASE if n < 3 else
                          AcknowledgeType.REJECT if n < 6 else AcknowledgeType.ACCEPT)
        got = poll_until(c, 10, ack=first)
        assert sorted(values(got)) == sorted(sent)
        again = poll_until(c, 3, ack=lambda m: c.acknowledge(m, AcknowledgeType.ACCEPT))
        assert sorted(values(again)) == [b"e0", b"e1", b"e2"]
        assert {m.delivery_count() for m in again} == {2}
        assert values(poll_until(c, 1, timeout=LOCK_MS / 1000 + 2)) == []
    finally:
        c.close()


def test_lock_timeout_redelivers_to_another_member(share_broker: BrokerProcess) -> None:
    sent = [f"l{i}".encode() for i in range(5)]
    t = topic_with(share_broker, sent)
    g = f"g-{uuid.uuid4().hex[:6]}"
    a = consumer(share_broker, g, t, **{"share.acknowledgement.mode": "explicit"})
    b = None
    try:
        held = poll_until(a, 5)  # acquired by a, never acknowledged
        assert sorted(values(held)) == sorted(sent)
        b = consumer(share_broker, g, t)
        start = time.monotonic()
        got = poll_until(b, 5, timeout=LOCK_MS / 1000 + 20)
        assert sorted(values(got)) == sorted(sent)
        assert {m.delivery_count() for m in got} == {2}
        assert time.monotonic() - start >= LOCK_MS / 1000 - 0.5, "redelivered before the lock expired"
    finally:
        if b is not None:
            b.close()
        a.close()


def test_delivery_count_limit_archives(share_broker: BrokerProcess) -> None:
    t = topic_with(share_broker, [b"poison", b"fine"])
    g = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(share_broker, g, t, **{"share.acknowledgement.mode": "explicit"})
    counts = []
    try:
        def ack(m: Any) -> None:
            if m.value() == b"poison":
                counts.append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.RELEASE)
            else:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
        poll_until(c, LIMIT + 1, timeout=20, ack=ack)
        poll_until(c, 1, timeout=3, ack=ack)
    finally:
        c.close()
    assert counts == list(range(1, LIMIT + 1)), f"deliveries of a released record: {counts}"


def test_two_members_share_one_partition(share_broker: BrokerProcess) -> None:
    sent = [f"m{i}".encode() for i in range(400)]
    t = topic_with(share_broker, [])
    g = f"g-{uuid.uuid4().hex[:6]}"
    # Records are acquired whole batches at a time: small batches and small fetches
    # (max.poll.records is librdkafka's MaxRecords) give both members a share.
    a = consumer(share_broker, g, t, **{"max.poll.records": 20})
    b = consumer(share_broker, g, t, **{"max.poll.records": 20})
    got_a: list[bytes] = []
    got_b: list[bytes] = []
    try:
        a.poll(1.0)
        b.poll(1.0)
        produce(share_broker, t, sent, per_batch=10)
        deadline = time.monotonic() + 60
        while len(got_a) + len(got_b) < len(sent) and time.monotonic() < deadline:
            got_a += [m.value() for m in a.poll(0.2) if m.error() is None]
            got_b += [m.value() for m in b.poll(0.2) if m.error() is None]
        a.poll(0.5)
        b.poll(0.5)
    finally:
        a.close()
        b.close()
    assert sorted(got_a + got_b) == sorted(sent), "every record once across the members"
    assert got_a and got_b, f"one member got everything ({len(got_a)} / {len(got_b)})"


def test_broker_restart_redelivers_only_unacknowledged(tmp_path: Path) -> None:
    b = make_broker(tmp_path, overrides=CONFIG, name="restart")
    b.start()
    try:
        sent = [f"s{i}".encode() for i in range(20)]
        t = topic_with(b, sent)
        c = consumer(b, "g-restart", t, **{"share.acknowledgement.mode": "explicit"})
        try:
            def ack(m: Any) -> None:
                n = int(m.value()[1:])
                if n < 8:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                elif n < 12:
                    c.acknowledge(m, AcknowledgeType.REJECT)
                elif n < 14:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 20 and time.monotonic() < deadline:
                msgs = [m for m in c.poll(0.5) if m.error() is None]
                for m in msgs:
                    ack(m)
                got += msgs
                if msgs:
                    c.commit_sync(30)
                    msgs = []
            assert sorted(values(got)) == sorted(sent)
        finally:
            b.kill()  # SIGKILL, with s14-s19 still acquired and s12-s13 released
            c.close()
        b.start()
        c = consumer(b, "g-restart", t)
        try:
            again = poll_until(c, 8, timeout=40)
            assert sorted(values(again)) == sorted(f"s{i}".encode() for i in range(12, 20))
            c.poll(0.5)
            assert values(poll_until(c, 1, timeout=3)) == []
        finally:
            c.close()
    finally:
        b.kill()


def test_share_groups_tool_and_admin_apis(share_broker: BrokerProcess) -> None:
    """``samsa share-groups`` over ShareGroupDescribe, DescribeShareGroupOffsets,
    AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups; ListGroups shows the type."""
    from tests.tools.test_cli import samsa, samsa_json

    sent = [f"a{i}".encode() for i in range(10)]
    t = topic_with(share_broker, sent)
    g = f"g-{uuid.uuid4().hex[:6]}"
    bs = ("--bootstrap-server", share_broker.bootstrap)
    c = consumer(share_broker, g, t, **{"share.acknowledgement.mode": "explicit"})
    try:
        poll_until(c, 10, ack=lambda m: c.acknowledge(
            m, AcknowledgeType.ACCEPT if int(m.value()[1:]) < 6 else AcknowledgeType.RELEASE))
        members = samsa_json("share-groups", *bs, "--describe", "--group", g, "--members")
        assert [(m["group"], [tuple(a) for a in m["assignment"]]) for m in members] == [(g, [(t, 0)])]
        assert samsa("share-groups", *bs, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest",
                     "--execute", check=False).returncode != 0, "a group with members cannot be reset"
    finally:
        c.close()
    # consumer-groups --describe shows share groups too (current offset: the start offset).
    [doc] = samsa_json("consumer-groups", *bs, "--describe", "--group", g)
    assert (doc["type"], doc["state"], [(o["topic"], o["partition"], o["current_offset"], o["lag"])
                                         for o in doc["offsets"]]) == ("share", "Empty", [(t, 0, 6, 4)])
    listed = samsa_json("consumer-groups", *bs, "--list", "--type", "share")
    assert {"group": g, "protocol_type": "share", "state": "Empty", "type": "share"} in listed
    assert g in [x["group"] for x in samsa_json("share-groups", *bs, "--list")]
    offsets = samsa_json("share-groups", *bs, "--describe", "--group", g)
    assert [(o["topic"], o["partition"], o["start_offset"], o["lag"]) for o in offsets] == [(t, 0, 6, 4)]
    state = samsa_json("share-groups", *bs, "--describe", "--group", g, "--state")
    assert (state[0]["state"], state[0]["members"]) == ("Empty", 0)
    # Back to the beginning: the group receives every record again.
    reset = samsa_json("share-groups", *bs, "--reset-offsets", "--group", g, "--topic", t, "--to-earliest",
                       "--execute")
    assert [(r["new_start_offset"], r["error"]) for r in reset] == [(0, None)]
    c = consumer(share_broker, g, t)
    try:
        assert sorted(values(poll_until(c, 10))) == sorted(sent)
        c.poll(0.5)
    finally:
        c.close()
    deleted = samsa_json("share-groups", *bs, "--delete-offsets", "--group", g, "--topic", t)
    assert deleted == [{"group": g, "topic": t, "error": None}]
    assert [o["start_offset"] for o in samsa_json("share-groups", *bs, "--describe", "--group", g)] == []
    assert samsa_json("share-groups", *bs, "--delete", "--group", g) == [{"group": g, "error": None}]
    assert g not in [x["group"] for x in samsa_json("share-groups", *bs, "--list")]


def test_latest_is_the_default_reset(broker_factory: Any) -> None:
    """Without ``share.auto.offset.reset`` a group's first fetch starts at the high watermark."""
    from tests.tools.test_cli import samsa_json

    b = broker_factory({"offsets.topic.num.partitions": 1, "share.coordinator.state.topic.num.partitions": 1})
    t = topic_with(b, [b"old1", b"old2", b"old3"])
    c = consumer(b, "g-latest", t)
    try:
        deadline = time.monotonic() + 30
        offsets: list[Any] = []
        while time.monotonic() < deadline:  # until the first ShareFetch has initialized the partition
            assert [m for m in c.poll(0.3) if m.error() is None] == []
            offsets = samsa_json("share-groups", "--bootstrap-server", b.bootstrap, "--describe",
                                 "--group", "g-latest")
            if offsets:
                break
        assert [(o["partition"], o["start_offset"], o["lag"]) for o in offsets] == [(0, 3, 0)]
        produce(b, t, [b"new"])
        assert values(poll_until(c, 1)) == [b"new"]
    finally:
        c.close()


HOLDER = """
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                   "share.acknowledgement.mode": "explicit"})
c.subscribe([sys.argv[3]])
got = 0
while got < int(sys.argv[4]):
    got += sum(1 for m in c.poll(0.5) if m.error() is None)
print("holding", got, flush=True)
time.sleep(600)
"""


def test_dead_consumer_releases_its_records_at_once(broker_factory: Any) -> None:
    """A consumer killed while holding records: its connection closes, its share session ends and
    the records go to another member well before their 30 s locks would time out."""
    import subprocess
    import sys

    b = broker_factory({"share.auto.offset.reset": "earliest", "offsets.topic.num.partitions": 1,
                        "share.coordinator.state.topic.num.partitions": 1})
    sent = [f"d{i}".encode() for i in range(5)]
    t = topic_with(b, sent)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, b.bootstrap, "g-dead", t, "5"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().split() == ["holding", "5"]
    finally:
        holder.kill()
        holder.wait()
    start = time.monotonic()
    c = consumer(b, "g-dead", t)
    try:
        got = poll_until(c, 5, timeout=25)
        assert sorted(values(got)) == sorted(sent)
        assert {m.delivery_count() for m in got} == {2}
        assert time.monotonic() - start < 25, "released by the lock timeout, not by the disconnect"
    finally:
        c.close()
