"""CreateTopics and DeleteTopics answer once every live broker agrees (issue 30, item 6).

The clients' own suites create a topic through one broker and go straight to another (aiokafka
lists topics, produces and lists offsets on whichever broker it picks; kafka-python moves a
replica's log dir on one named broker). Kafka answers CreateTopics once the controller's
metadata has reached the broker that was asked (DelayedCreatePartitions) and DeleteTopics once
that broker no longer has the topic (DelayedDeleteTopics); Samsa waits for every live broker.
A broker that is slow to hear from the controller (here: paused with SIGSTOP for a moment while
the request runs) must therefore delay the answer, not be left behind it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from protocol.errors import ErrorCode
from tests.support.cluster import SamsaCluster
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(180)

PAUSE_S = 1.5  # how long the other broker is frozen while the request runs


def connect(cluster: SamsaCluster, i: int) -> RawClient:
    b = cluster[i]
    return RawClient(b.host, b.port, timeout=30.0)


def topic_metadata(c: RawClient, topic: str) -> Any:
    """The broker's Metadata answer for ``topic`` (v7, never auto-creating it)."""
    req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)
    [t] = c.roundtrip(req, 7, MetadataResponse).topics
    return t


@contextmanager
def paused_for_a_moment(cluster: SamsaCluster, i: int) -> Iterator[None]:
    """Broker i frozen now and resumed PAUSE_S later (by a timer: the request under test may
    wait for it); on leaving, broker i runs again. A request sent to it in the meantime waits in
    its socket, behind whatever the controller sent it, and is answered as soon as it resumes."""
    cluster.pause(i)
    timer = threading.Timer(PAUSE_S, cluster.resume, args=(i,))
    timer.start()
    try:
        yield
    finally:
        timer.join()
        cluster.resume(i)


def other_broker(cluster: SamsaCluster) -> tuple[int, int]:
    """(controller id, another broker's index)."""
    controller = cluster.controller_id()
    return controller, next(i for i in range(len(cluster.brokers)) if i != controller)


def test_create_topics_answers_once_every_broker_has_the_topic(cluster3: SamsaCluster) -> None:
    topic = f"propagate-create-{uuid.uuid4().hex[:8]}"
    controller, slow = other_broker(cluster3)
    admin = KafkaAdminClient(bootstrap_servers=cluster3[controller].bootstrap, request_timeout_ms=60000)
    clients = [connect(cluster3, i) for i in range(len(cluster3.brokers))]  # connected before the pause
    try:
        with paused_for_a_moment(cluster3, slow):
            admin.create_topics([NewTopic(topic, 3, 3)], timeout_ms=30000)
            # asked at once: answered by the slow broker as soon as it resumes
            seen = {slow: topic_metadata(clients[slow], topic)}
        seen.update((i, topic_metadata(c, topic)) for i, c in enumerate(clients) if i != slow)
        for i, t in sorted(seen.items()):
            assert t.error_code == 0, f"broker {i} does not know {topic}: {ErrorCode(t.error_code).name}"
            assert sorted(p.partition_index for p in t.partitions) == [0, 1, 2]
            assert all(p.error_code == 0 and p.leader_id >= 0 for p in t.partitions), (i, t.partitions)
    finally:
        admin.close()
        for c in clients:
            c.close()


def test_delete_topics_answers_once_no_broker_lists_the_topic(cluster3: SamsaCluster) -> None:
    topic = f"propagate-delete-{uuid.uuid4().hex[:8]}"
    controller, slow = other_broker(cluster3)
    admin = KafkaAdminClient(bootstrap_servers=cluster3[controller].bootstrap, request_timeout_ms=60000)
    clients = [connect(cluster3, i) for i in range(len(cluster3.brokers))]
    try:
        admin.create_topics([NewTopic(topic, 3, 3)], timeout_ms=30000)
        with paused_for_a_moment(cluster3, slow):
            admin.delete_topics([topic], timeout_ms=30000)
            seen = {slow: topic_metadata(clients[slow], topic)}
        seen.update((i, topic_metadata(c, topic)) for i, c in enumerate(clients) if i != slow)
        for i, t in sorted(seen.items()):
            assert t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, \
                f"broker {i} still lists deleted {topic}: {ErrorCode(t.error_code).name}, {t.partitions}"
    finally:
        admin.close()
        for c in clients:
            c.close()


def test_metadata_auto_creation_racing_another_broker_answers_retriably(cluster3: SamsaCluster) -> None:
    """Two brokers asked to auto-create the same topic at once (aiokafka's transactional producer
    and consumer start together; a consumer's start() asks a second broker right after the
    first listed the topic): the one that loses the race to ZooKeeper lists the topic, its
    partitions possibly still leaderless, never TOPIC_ALREADY_EXISTS (aiokafka raises it) nor a
    topic-level error (aiokafka's consumer start() raises UnknownTopicOrPartitionError)."""
    topic = f"propagate-auto-{uuid.uuid4().hex[:8]}"
    late = connect(cluster3, 1)  # connected before the pause
    answers: dict[str, Any] = {}

    def ask_late() -> None:
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True)
        [answers["late"]] = late.roundtrip(req, 7, MetadataResponse).topics

    try:
        cluster3.pause(1)
        try:
            asking = threading.Thread(target=ask_late)
            asking.start()  # waits in broker 1's socket, ahead of the ZooKeeper watch it will get
            with connect(cluster3, 0) as first:
                req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                      allow_auto_topic_creation=True)
                [answers["first"]] = first.roundtrip(req, 7, MetadataResponse).topics
        finally:
            cluster3.resume(1)
        asking.join(60)
        assert answers["first"].error_code in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE), answers["first"]
        late_answer = answers["late"]
        assert late_answer.error_code == ErrorCode.NONE, f"broker 1 answered {ErrorCode(late_answer.error_code).name}"
        indexes = sorted(p.partition_index for p in late_answer.partitions)
        assert indexes and indexes == list(range(len(indexes))), late_answer
    finally:
        late.close()
