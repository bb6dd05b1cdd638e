"""Retention and compaction on a live broker, seen by stock clients.

* Retention: with a small ``segment.bytes``, closed segments past ``retention.bytes`` or
  ``retention.ms`` disappear in the background, the log start offset moves, a consumer
  positioned before it gets OFFSET_OUT_OF_RANGE (``auto_offset_reset='none'``) or resets to
  the new start (``'earliest'``), and the active segment is never deleted.
* Compaction: the background cleaner (``log/cleaner.py``, started by the broker) reduces a
  compacted topic written by a KafkaProducer (lz4, plus a committed and an aborted
  transaction) to exactly the latest value per key, then drops tombstones once
  ``delete.retention.ms`` has passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, OffsetSpec
from kafka.errors import OffsetOutOfRangeError
from kafka.structs import TopicPartition

pytestmark = pytest.mark.timeout(240)

FAST = {"log.retention.check.interval.ms": "300", "log.cleaner.backoff.ms": "300"}


def offsets(admin: KafkaAdminClient, tp: TopicPartition) -> tuple[int, int]:
    lo = admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset
    hi = admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset
    return lo, hi


def wait_for(cond: Any, timeout: float = 60, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def consume_all(bootstrap: str, topic: str, *, isolation: str = "read_committed") -> list[Any]:
    tp = TopicPartition(topic, 0)
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                      isolation_level=isolation)
    c.assign([tp])
    c.seek_to_beginning(tp)
    end = c.end_offsets([tp])[tp]
    out: list[Any] = []
    idle = 0
    while c.position(tp) < end and idle < 50:
        batch = c.poll(timeout_ms=200)
        idle = 0 if batch else idle + 1
        for recs in batch.values():
            out.extend(recs)
    c.close()
    return out


def test_retention_by_size_and_time(broker_factory: Any) -> None:
    broker = broker_factory(FAST)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics({"ret": {"num_partitions": 1, "replication_factor": 1,
                                     "configs": {"segment.bytes": "1000", "retention.bytes": "3000",
                                                 "file.delete.delay.ms": "0"}}})
        p = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(100):
            p.send("ret", key=b"k%d" % i, value=b"x" * 80).get(timeout=10)
        tp = TopicPartition("ret", 0)
        def log_bytes() -> int:
            return sum(f.stat().st_size for f in (broker.data_dir / "ret-0").glob("*.log"))

        # Kafka's rule: delete the oldest closed segments while what remains still exceeds
        # retention.bytes, so at most retention.bytes + one closed segment + the active one stay.
        wait_for(lambda: log_bytes() <= 3000 + 2 * 1000, what="size retention")
        lo, hi = offsets(admin, tp)
        assert hi == 100 and lo > 50, "about 3000-5000 bytes of 100 ~110-byte batches are left"
        files = sorted((broker.data_dir / "ret-0").glob("*.log"))
        assert int(files[0].name.split(".")[0]) == lo, "the log start offset is the oldest segment's base"

        # A consumer before the log start: OFFSET_OUT_OF_RANGE without a reset policy ...
        strict = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none",
                               enable_auto_commit=False)
        strict.assign([tp])
        strict.seek(tp, 0)
        with pytest.raises(Exception) as exc:
            for _ in range(50):
                strict.poll(timeout_ms=200)
        assert isinstance(exc.value, OffsetOutOfRangeError) or "OffsetOutOfRange" in repr(exc.value) \
            or "NoOffsetForPartition" in repr(exc.value)
        strict.close()
        # ... and a reset to the new start with auto.offset.reset=earliest.
        recs = consume_all(broker.bootstrap, "ret", isolation="read_uncommitted")
        # the log start at the reset: lo, or later if the retention pass deleted another segment
        # since lo was read (seen once in CI: 78 against 72)
        assert lo <= recs[0].offset <= offsets(admin, tp)[0] and recs[-1].offset == 99

        # Time: records stamped an hour ago go as soon as retention.ms says so (the active
        # segment excepted).
        admin.create_topics({"old": {"num_partitions": 1, "replication_factor": 1,
                                     "configs": {"segment.bytes": "1000", "file.delete.delay.ms": "0"}}})
        hour_ago = int(time.time() * 1000) - 3_600_000
        for i in range(40):
            p.send("old", value=b"y" * 80, timestamp_ms=hour_ago + i).get(timeout=10)
        tpo = TopicPartition("old", 0)
        time.sleep(1)
        assert offsets(admin, tpo)[0] == 0, "the default retention.ms (7 days) keeps them"
        out = subprocess.run([sys.executable, "-m", "broker.cli", "configs", "--bootstrap-server", broker.bootstrap,
                              "--alter", "--topic", "old", "--add-config", "retention.ms=60000"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        active_base = max(int(f.name.split(".")[0]) for f in (broker.data_dir / "old-0").glob("*.log"))
        wait_for(lambda: offsets(admin, tpo)[0] == active_base, what="time retention")
        assert [int(f.name.split(".")[0]) for f in (broker.data_dir / "old-0").glob("*.log")] == [active_base]
        p.close()
    finally:
        admin.close()


def test_background_compaction_with_transactions_and_tombstones(broker_factory: Any) -> None:
    broker = broker_factory(FAST)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    topic = "state"
    try:
        admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1,
                                     "configs": {"cleanup.policy": "compact", "segment.bytes": "16384",
                                                 "min.cleanable.dirty.ratio": "0.01",
                                                 "delete.retention.ms": "3000", "file.delete.delay.ms": "0"}}})
    finally:
        admin.close()
    latest: dict[bytes, bytes | None] = {}
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="lz4", linger_ms=5)
    for i in range(20_000):
        k = b"key-%d" % (i % 500)
        v = b"value-%d" % i
        p.send(topic, key=k, value=v)
        latest[k] = v
    p.flush()
    txp = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="compaction-test")
    txp.init_transactions()
    txp.begin_transaction()
    for k in range(10):
        txp.send(topic, key=b"key-%d" % k, value=b"committed-%d" % k)
        latest[b"key-%d" % k] = b"committed-%d" % k
    txp.commit_transaction()
    txp.begin_transaction()
    for k in range(10, 20):
        txp.send(topic, key=b"key-%d" % k, value=b"aborted-%d" % k)
    txp.flush()  # the aborted records reach the log before the ABORT marker
    txp.abort_transaction()
    txp.close()
    for k in range(450, 500):  # tombstones
        p.send(topic, key=b"key-%d" % k, value=None)
        latest[b"key-%d" % k] = None
    p.flush()
    p.close()
    raw = KafkaProducer(bootstrap_servers=broker.bootstrap)  # incompressible filler, unique keys:
    for i in range(400):  # pushes the workload out of the active segment
        raw.send(topic, key=b"filler-%d" % i, value=os.urandom(100))
    raw.flush()
    raw.close()

    def compacted() -> list[Any] | None:
        recs = [r for r in consume_all(broker.bootstrap, topic) if r.key.startswith(b"key-")]
        keys = [r.key for r in recs]
        return recs if len(keys) == len(set(keys)) else None

    recs = wait_for(compacted, timeout=90, what="compaction to one record per key")
    assert {r.key: r.value for r in recs} == latest
    offs = [r.offset for r in recs]
    assert offs == sorted(offs)
    uncommitted = consume_all(broker.bootstrap, topic, isolation="read_uncommitted")
    assert not [r for r in uncommitted if r.value and r.value.startswith(b"aborted-")]
    dump = subprocess.run([sys.executable, "-m", "broker.cli", "dump-log", "--files",
                           str(broker.data_dir / f"{topic}-0"), "--json"], capture_output=True, text=True, timeout=60)
    txn_batches = [b for d in json.loads(dump.stdout) if d["type"] == "log" for b in d["batches"]
                   if b["isTransactional"] and not b["isControl"]]
    # the committed batch survives in full; the aborted one is emptied (kept for producer state)
    assert sorted(b["count"] for b in txn_batches) == [0, 10]

    def tombstones_gone() -> bool:
        vals = {r.key: r.value for r in consume_all(broker.bootstrap, topic) if r.key.startswith(b"key-")}
        return all(k not in vals for k, v in latest.items() if v is None) and len(vals) == 450

    wait_for(tombstones_gone, timeout=90, what="tombstones to pass delete.retention.ms")
    # dump-log shows what the cleaner wrote: gaps, and a delete horizon on rewritten batches.
    out = subprocess.run([sys.executable, "-m", "broker.cli", "dump-log", "--files",
                          str(broker.data_dir / f"{topic}-0"), "--json", "--index-sanity-check"],
                         capture_output=True, text=True, timeout=60)
    docs = json.loads(out.stdout)
    assert not [p for d in docs for p in d["problems"]]
    assert (broker.data_dir / "cleaner-offset-checkpoint").exists()
