"""Internal topics are created when first needed, as in Kafka, and what they hold survives restarts.

A fresh broker starts without ``__consumer_offsets`` and ``__transaction_state`` (and says so
in a handful of log lines, not hundreds). The first FindCoordinator for a group creates
``__consumer_offsets`` with ``offsets.topic.num.partitions`` partitions, the first one for a
transactional id creates ``__transaction_state`` with ``transaction.state.log.num.partitions``;
each creation is one log line, not two per partition. Groups and transactional ids written then
are loaded again on restart without any FindCoordinator. Stock clients (confluent-kafka,
kafka-python) drive it; exact frames check the error codes a client that skips FindCoordinator
gets.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse
from kafka.protocol.metadata import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(180)

OFFSETS, TXN = "__consumer_offsets", "__transaction_state"
OVERRIDES = {"offsets.topic.num.partitions": 7, "transaction.state.log.num.partitions": 5}
NOT_COORDINATOR, UNKNOWN_TOPIC = 16, 3


def _client(broker: Any) -> RawClient:
    return RawClient(broker.host, broker.port)


def _internal_metadata(c: RawClient, allow_create: bool = False) -> dict[str, tuple[int, int, bool]]:
    T = MetadataRequest.MetadataRequestTopic
    r = c.roundtrip(MetadataRequest(topics=[T(name=OFFSETS, topic_id=None), T(name=TXN, topic_id=None)],
                                    allow_auto_topic_creation=allow_create), 9, MetadataResponse)
    return {t.name: (t.error_code, len(t.partitions), t.is_internal) for t in r.topics}


def _init_producer_id(c: RawClient, tid: str) -> tuple[int, int, int]:
    r = c.roundtrip(FindCoordinatorRequest(key=tid, key_type=1), 3, FindCoordinatorResponse)
    assert r.error_code == 0, r
    r = c.roundtrip(InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                          producer_id=-1, producer_epoch=-1), 4, InitProducerIdResponse)
    return r.error_code, r.producer_id, r.producer_epoch


def test_created_on_first_find_coordinator_and_loaded_after_restart(broker_factory: Any) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    b = broker_factory(OVERRIDES)
    with _client(b) as c:
        assert _internal_metadata(c) == {OFFSETS: (UNKNOWN_TOPIC, 0, False), TXN: (UNKNOWN_TOPIC, 0, False)}
        # A client that skips FindCoordinator is sent to look for its coordinator.
        P = JoinGroupRequest.JoinGroupRequestProtocol
        r = c.roundtrip(JoinGroupRequest(group_id="early", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                                         member_id="", group_instance_id=None, protocol_type="consumer",
                                         protocols=[P(name="range", metadata=b"")]), 5, JoinGroupResponse)
        assert r.error_code == NOT_COORDINATOR
    assert not [d for d in b.data_dir.iterdir() if d.name.startswith(("__consumer_offsets", "__transaction_state"))]
    start_log = b.log_text()
    assert "Created" not in start_log and len(start_log.splitlines()) < 15, start_log

    bs = b.bootstrap
    p = Producer({"bootstrap.servers": bs, "transactional.id": "tx-lazy"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("lazy", b"in-a-transaction")
    p.commit_transaction(30)
    cons = Consumer({"bootstrap.servers": bs, "group.id": "g-lazy", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    try:
        cons.subscribe(["lazy"])
        got = None
        for _ in range(120):
            m = cons.poll(0.5)
            if m is not None and not m.error():
                got = m
                break
        assert got is not None and got.value() == b"in-a-transaction"
        cons.commit(message=got, asynchronous=False)
    finally:
        cons.close()

    with _client(b) as c:
        assert _internal_metadata(c) == {OFFSETS: (0, 7, True), TXN: (0, 5, True)}
        code, pid, epoch = _init_producer_id(c, "tx-lazy")  # fences the confluent producer: epoch + 1
        assert code == 0 and pid >= 0
    text = b.log_text()
    for topic, n in ((OFFSETS, 7), (TXN, 5)):
        assert text.count(f"Created topic {topic} with topic ID") == 1, text
        assert f"{n} partitions and configs {{'cleanup.policy': 'compact'" in text
        assert f"{topic}-3" not in text  # no line per partition
        assert len({d.name for d in b.data_dir.iterdir() if d.name.startswith(topic + "-")}) == n

    b.stop()
    b.start()
    restart_log = b.log_text().split("===== start #2")[1]
    assert "group coordinator loaded 1 groups from 7 partitions of __consumer_offsets" in restart_log
    assert "Loaded 1 transactional ids from __transaction_state" in restart_log
    assert f"{OFFSETS}-3" not in restart_log
    cons = Consumer({"bootstrap.servers": bs, "group.id": "g-lazy"})
    try:
        [tp] = cons.committed([TopicPartition("lazy", 0)], timeout=30)
        assert tp.offset == got.offset() + 1
    finally:
        cons.close()
    with _client(b) as c:
        assert _init_producer_id(c, "tx-lazy") == (0, pid, epoch + 1)  # the same id, recovered


def test_metadata_auto_creation_of_an_internal_name_uses_its_spec(broker_factory: Any) -> None:
    """``kcat -L -t __consumer_offsets`` on a fresh broker must not make a 1-partition topic."""
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.structs import OffsetAndMetadata

    b = broker_factory({**OVERRIDES, "num.partitions": 1})
    with _client(b) as c:
        assert _internal_metadata(c, allow_create=True) == {OFFSETS: (0, 7, True), TXN: (0, 5, True)}
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        admin.create_topics([NewTopic("meta-lazy", 1, 1)])
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="g-meta", enable_auto_commit=False)
    try:
        tp = TopicPartition("meta-lazy", 0)
        consumer.commit({tp: OffsetAndMetadata(5, "", -1)})
        assert consumer.committed(tp) == 5
    finally:
        consumer.close()
    assert "__consumer_offsets with topic ID" in b.log_text()
