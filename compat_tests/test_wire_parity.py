"""Where Samsa used to differ from Kafka on the wire (issue 14), each driven by the stock client
that tripped over it, plus raw frames for the versions no single client covers.

* Fetch error partitions carry empty records, never null: librdkafka drops a whole flexible
  Fetch response with a null ``records`` ("invalid MessageSetSize") and so never resets an
  out-of-range offset. Tested with a confluent-kafka consumer whose committed offset lies
  beyond the log end, for each ``auto.offset.reset``, and with raw Fetch frames at v4-17.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import FetchRequest, FetchResponse

from tests.support.rawclient import RawClient
from tests.support.workload import topic_name

pytestmark = pytest.mark.timeout(180)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    nt = NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})
    for f in admin.create_topics([nt]).values():
        f.result(timeout=30)


def produce_values(bootstrap: str, topic: str, values: list[bytes]) -> None:
    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(topic, value=v, partition=0,
                  on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
    assert p.flush(30) == 0
    assert not errors, errors


# --- 1. Fetch: error partitions carry empty records ----------------------------------------------

@pytest.mark.parametrize("reset", ["earliest", "latest", "error"])
def test_confluent_committed_offset_beyond_log_end(broker, reset: str) -> None:
    """A committed offset past the log end: Fetch answers OFFSET_OUT_OF_RANGE, which librdkafka
    can only act on if it can parse the response (it could not while records were null)."""
    topic = topic_name(f"oor-{reset}")
    group = f"g-{topic}"
    create_topic(broker.bootstrap, topic)
    produce_values(broker.bootstrap, topic, [b"v%d" % i for i in range(5)])
    tp = TopicPartition(topic, 0)

    committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    committer.commit(offsets=[TopicPartition(topic, 0, 1000)], asynchronous=False)
    assert committer.committed([tp], timeout=10)[0].offset == 1000
    committer.close()

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": reset, "fetch.wait.max.ms": 100})
    c.assign([tp])  # starts from the committed offset, 1000
    try:
        got: list[tuple[int, bytes]] = []
        reset_errors: list[KafkaError] = []
        deadline = time.monotonic() + 60
        produced_after = 0
        next_produce = time.monotonic() + 1
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is not None:
                assert msg.error().code() == KafkaError._AUTO_OFFSET_RESET, msg.error()
                reset_errors.append(msg.error())
            elif msg is not None:
                got.append((msg.offset(), msg.value()))
            if reset == "earliest" and len(got) >= 5:
                break
            if reset == "latest":
                if got:
                    break
                # librdkafka reports no position until it delivers a message, so keep adding one
                # until the consumer, reset to the end, picks one up (it must never see v0-v4)
                if time.monotonic() >= next_produce:
                    produce_values(broker.bootstrap, topic, [b"after%d" % produced_after])
                    produced_after += 1
                    next_produce = time.monotonic() + 1
            if reset == "error" and reset_errors:
                break
        if reset == "earliest":
            assert got == [(i, b"v%d" % i) for i in range(5)]
        elif reset == "latest":
            assert got, f"nothing consumed after the reset (produced {produced_after})"
            first_offset, first_value = got[0]
            assert first_offset >= 5 and first_value.startswith(b"after"), got
            assert all(v.startswith(b"after") for _o, v in got), got
        else:
            assert reset_errors and not got
            assert "out of range" in reset_errors[0].str().lower() or "offset" in reset_errors[0].str().lower()
    finally:
        c.close()


def _fetch(raw: RawClient, version: int, topic: str, topic_id: uuid.UUID, partition: int, offset: int,
           leader_epoch: int = -1):
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[T(
                           topic=topic, topic_id=topic_id, partitions=[T.FetchPartition(
                               partition=partition, current_leader_epoch=leader_epoch, fetch_offset=offset,
                               last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
                       forgotten_topics_data=[], rack_id="")
    resp = raw.roundtrip(req, version, FetchResponse)
    (t,) = resp.responses
    (p,) = t.partitions
    return p


def test_fetch_error_partitions_have_empty_records_at_every_version(broker) -> None:
    """OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION (names, v4-12), UNKNOWN_TOPIC_ID (ids,
    v13-17) and UNKNOWN_LEADER_EPOCH (v9+, KIP-320): records is an empty byte string (kafka-python
    decodes null as None)."""
    from kafka import KafkaAdminClient  # noqa: PLC0415

    topic = topic_name("err-records")
    create_topic(broker.bootstrap, topic)
    produce_values(broker.bootstrap, topic, [b"x"])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        (desc,) = admin.describe_topics([topic])
        topic_id = uuid.UUID(str(desc["topic_id"])) if not isinstance(desc["topic_id"], uuid.UUID) \
            else desc["topic_id"]
    finally:
        admin.close()
    host, port = broker.bootstrap.split(":")
    with RawClient(host, int(port)) as raw:
        for v in range(4, 18):
            cases = [(topic, topic_id, 0, 99, 1)]  # OFFSET_OUT_OF_RANGE
            if v < 13:
                cases.append(("no-such-topic-x", uuid.UUID(int=0), 0, 0, 3))
                cases.append((topic, uuid.UUID(int=0), 7, 0, 3))  # no partition 7
            else:
                cases.append(("", uuid.uuid4(), 0, 0, 100))  # UNKNOWN_TOPIC_ID
            cases_epoch = [(name, tid, part, offset, code, -1) for name, tid, part, offset, code in cases]
            if v >= 9:  # KIP-320: a leader epoch ahead of the broker's (0 on a single broker)
                cases_epoch.append((topic, topic_id, 0, 0, 75, 7))  # UNKNOWN_LEADER_EPOCH
            for name, tid, part, offset, code, epoch in cases_epoch:
                p = _fetch(raw, v, name, tid, part, offset, epoch)
                assert p.error_code == code, (v, name, part, p.error_code)
                assert p.records is not None and bytes(p.records) == b"", (v, code, p.records)
            ok = _fetch(raw, v, topic, topic_id, 0, 0)
            assert ok.error_code == 0 and ok.records, v


# --- 3. Internal topics are listed, is_internal=true ----------------------------------------------

def _make_consumer_offsets(bootstrap: str) -> None:
    """Any group commit makes __consumer_offsets exist, as on Kafka."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-internal", "enable.auto.commit": False})
    topic = topic_name("internal-src")
    create_topic(bootstrap, topic)
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-internal"})
    p.init_transactions(30)  # and a transactional id makes __transaction_state exist




def test_internal_topics_listed_by_all_clients(broker) -> None:
    import json  # noqa: PLC0415
    import shutil  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from aiokafka import AIOKafkaConsumer  # noqa: PLC0415
    from kafka import KafkaAdminClient, KafkaConsumer  # noqa: PLC0415

    _make_consumer_offsets(broker.bootstrap)

    # aiokafka: a pattern subscription that keeps internal topics gets __consumer_offsets
    async def aiokafka_pattern() -> set[str]:
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g-aio-internal",
                             exclude_internal_topics=False, enable_auto_commit=False)
        await c.start()
        try:
            c.subscribe(pattern="^__consumer_offsets$")
            deadline = time.monotonic() + 60
            while not c.assignment() and time.monotonic() < deadline:
                await c.getmany(timeout_ms=200)
            return {tp.topic for tp in c.assignment()}
        finally:
            await c.stop()

    import asyncio  # noqa: PLC0415
    assert asyncio.run(aiokafka_pattern()) == {"__consumer_offsets"}

    # kafka-python: the admin lists it; a consumer's cluster view (exclude_internal_topics default) does not
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert {"__consumer_offsets", "__transaction_state"} <= set(admin.list_topics())
        internal = {t["name"]: t["is_internal"] for t in admin.describe_topics()}
        assert internal["__consumer_offsets"] and internal["__transaction_state"]
        assert not any(v for k, v in internal.items() if not k.startswith("__")), internal
    finally:
        admin.close()
    kc = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert "__consumer_offsets" not in kc.topics()
    finally:
        kc.close()

    # confluent-kafka / librdkafka list_topics (as kcat -L) sees it
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    assert "__consumer_offsets" in md.topics and len(md.topics["__consumer_offsets"].partitions) == 50
    if shutil.which("kcat"):
        doc = json.loads(subprocess.run(["kcat", "-b", broker.bootstrap, "-L", "-J"], capture_output=True,
                                        text=True, timeout=60, check=True).stdout)
        assert "__consumer_offsets" in {t["topic"] for t in doc["topics"]}

    # samsa topics --list shows it, as kafka-topics.sh does; --exclude-internal hides it
    def samsa_list(*extra: str) -> list[str]:
        proc = subprocess.run([sys.executable, "-m", "broker.cli", "topics", "--bootstrap-server", broker.bootstrap,
                               "--list", *extra], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.split()

    assert "__consumer_offsets" in samsa_list()
    listed = samsa_list("--exclude-internal")
    assert "__consumer_offsets" not in listed and any(n.startswith("internal-src") for n in listed)


# --- 4. An empty cleanup.policy: accepted, described, honoured ------------------------------------

FAST = {"log.retention.check.interval.ms": "300", "log.cleaner.backoff.ms": "300"}


def _consume_values(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    from confluent_kafka import OFFSET_BEGINNING  # noqa: PLC0415

    admin = AdminClient({"bootstrap.servers": bootstrap})
    end = _offsets(admin, topic)[1]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF and (not out or out[-1][0] >= end - 1):
                    break
                continue
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def _offsets(admin: AdminClient, topic: str) -> tuple[int, int]:
    from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

    tp = TopicPartition(topic, 0)
    lo = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=30).offset
    hi = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(timeout=30).offset
    return lo, hi


def _wait(cond, what: str, timeout: float = 90):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_empty_cleanup_policy_is_kept(broker_factory) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource  # noqa: PLC0415
    from kafka import KafkaAdminClient  # noqa: PLC0415
    from kafka.admin import ConfigResource as KpConfigResource  # noqa: PLC0415

    broker = broker_factory(FAST)
    b = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    small = {"segment.bytes": "1000", "retention.ms": "200", "file.delete.delay.ms": "0",
             "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"}
    keep, ctl_delete, ctl_compact = topic_name("keep"), topic_name("ctl-del"), topic_name("ctl-cmp")
    create_topic(b, keep, config={**small, "cleanup.policy": "compact"})

    # SUBTRACT the only policy, as kafka-configs.sh --delete-config / AdminClient do: accepted
    res = ConfigResource("topic", keep, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(timeout=30)
    desc = admin.describe_configs([ConfigResource("topic", keep)])
    entry = list(desc.values())[0].result(timeout=30)["cleanup.policy"]
    assert entry.value == "" and entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, entry
    kp = KafkaAdminClient(bootstrap_servers=b)
    try:
        got = kp.describe_configs([KpConfigResource("topic", keep, configs=["cleanup.policy"])])
        assert got["topic"][keep]["cleanup.policy"]["value"] == ""
    finally:
        kp.close()

    # produce duplicate keys to the kept topic first, then to two controls that prove that the
    # retention and cleaner passes ran meanwhile
    create_topic(b, ctl_delete, config={**small, "cleanup.policy": "delete"})
    create_topic(b, ctl_compact, config={**small, "cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": b, "linger.ms": 0, "batch.num.messages": 1})
    for t in (keep, ctl_delete, ctl_compact):
        for i in range(60):
            p.produce(t, key=b"k%d" % (i % 5), value=b"%d-" % i + b"x" * 80, partition=0)
            p.poll(0)
        assert p.flush(30) == 0
    _wait(lambda: _offsets(admin, ctl_delete)[0] > 0, "retention on the delete control")
    _wait(lambda: len(_consume_values(b, ctl_compact)) < 60, "compaction of the compact control")
    segments = sorted((broker.data_dir / f"{keep}-0").glob("*.log"))
    assert len(segments) > 3

    # neither deleted nor compacted
    assert _offsets(admin, keep) == (0, 60)
    assert [o for o, _k, _v in _consume_values(b, keep)] == list(range(60))
    assert sorted((broker.data_dir / f"{keep}-0").glob("*.log")) == segments

    # DeleteRecords still moves the log start, and segments below it go (as Kafka's
    # deleteLogStartOffsetBreachedSegments, whatever the policy)
    for f in admin.delete_records([TopicPartition(keep, 0, 40)]).values():
        f.result(timeout=30)
    _wait(lambda: len(list((broker.data_dir / f"{keep}-0").glob("*.log"))) < len(segments),
          "segments below the log start offset to go")
    assert _offsets(admin, keep) == (40, 60)
