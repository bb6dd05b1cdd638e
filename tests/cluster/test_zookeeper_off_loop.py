"""No ZooKeeper request runs on a broker's event loop: with ZooKeeper hung (SIGSTOP: its sockets
stay open, so a request neither succeeds nor fails until kazoo's read timeout), a cluster broker
still answers Metadata, Produce and Fetch on an existing topic while a CreateTopics (or a
CreateAcls, AlterUserScramCredentials, AlterClientQuotas) waits for ZooKeeper, and that request
gets REQUEST_TIMED_OUT in bounded time, never a hang."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.protocol.admin import AlterClientQuotasRequest, AlterClientQuotasResponse

from protocol.errors import ErrorCode
from tests.support.cluster import SamsaCluster
from tests.support.rawclient import RawClient
from tests.support.replicas import create_topic, wait_for, wait_full_isr

quiet = logging.getLogger("samsa.tests.zk-off-loop")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False

# ACLs on: the broker's own PLAINTEXT inter-broker requests (User:ANONYMOUS) stay allowed
AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found": "true"}


def test_hung_zookeeper_stalls_no_client_request(cluster_factory: Callable[..., SamsaCluster]) -> None:
    # one broker: it is the controller, the leader and the broker the admin client asks; a 30 s
    # session outlives the pause, so nothing fails over
    cluster = cluster_factory(1, own_zookeeper=True, overrides={"zookeeper.session.timeout.ms": 30000})
    cluster.wait_for_brokers(1)
    topic = f"zkl-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, 1, 1)
    wait_full_isr(cluster, topic, 1)
    b = cluster.brokers[0]
    producer = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 0, "logger": quiet})
    producer.produce(topic, b"before")
    assert producer.flush(30) == 0
    tp = KTopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None, enable_auto_commit=False)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    fetched: list[bytes] = []

    def fetch_new(n: int) -> None:
        deadline = time.monotonic() + 10
        while len(fetched) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                fetched.extend(r.value for r in records)
        assert len(fetched) >= n, f"no answer to a fetch while ZooKeeper hung (got {fetched})"

    fetch_new(1)
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet})
    created: dict[str, object] = {}

    def create_during_outage() -> None:
        fs = admin.create_topics([NewTopic(f"{topic}-new", 1, 1)], request_timeout=60)
        try:
            created["result"] = fs[f"{topic}-new"].result(90)
        except KafkaException as e:
            created["error"] = e.args[0]

    answered = {"metadata": 0, "produce": 0, "fetch": 0}  # while the CreateTopics was pending
    cluster.zookeeper.pause()
    try:
        creator = threading.Thread(target=create_during_outage, daemon=True)
        creator.start()
        while creator.is_alive():
            # Metadata (a raw client with a 10 s socket timeout: a blocked loop fails it)
            md = cluster.metadata(0, [topic])
            assert md.topics[0].error_code == 0 and md.topics[0].partitions[0].leader_id == 0
            answered["metadata"] += creator.is_alive()
            acked: list[object] = []
            producer.produce(topic, b"during", on_delivery=lambda err, _m, acked=acked: acked.append(err))
            deadline = time.monotonic() + 10
            while not acked and time.monotonic() < deadline:
                producer.poll(0.1)
            assert acked == [None], "no answer to a produce while ZooKeeper hung"
            answered["produce"] += creator.is_alive()
            fetch_new(len(fetched) + 1)
            answered["fetch"] += creator.is_alive()
        creator.join(5)
        assert min(answered.values()) >= 1, f"requests answered while the CreateTopics waited: {answered}"
        err = created.get("error")
        assert isinstance(err, KafkaError) and err.code() == KafkaError.REQUEST_TIMED_OUT, created
    finally:
        cluster.zookeeper.resume()

    def create_ok() -> bool:  # ZooKeeper back: creating works again
        fs = admin.create_topics([NewTopic(f"{topic}-after", 1, 1)], request_timeout=30)
        try:
            fs[f"{topic}-after"].result(30)
            return True
        except KafkaException as e:
            return bool(e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS)
    wait_for(create_ok, 60, "CreateTopics to succeed once ZooKeeper is back")
    consumer.close()


def test_hung_zookeeper_fails_security_writes_in_time_and_stalls_nothing(
        cluster_factory: Callable[..., SamsaCluster]) -> None:
    """CreateAcls, AlterUserScramCredentials and AlterClientQuotas write ZooKeeper (Kafka's ACL and
    /config/users znodes): with ZooKeeper hung, each answers REQUEST_TIMED_OUT in bounded time while
    Metadata, Produce and Fetch on the same broker are answered; once ZooKeeper is back they work."""
    cluster = cluster_factory(1, own_zookeeper=True, overrides={
        "zookeeper.session.timeout.ms": 30000, **AUTHZ})
    cluster.wait_for_brokers(1)
    topic = f"zks-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, 1, 1)
    wait_full_isr(cluster, topic, 1)
    b = cluster.brokers[0]
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "logger": quiet})
    producer = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 0, "logger": quiet})
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=None, enable_auto_commit=False)
    tp = KTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    fetched: list[bytes] = []
    outcome: dict[str, object] = {}

    def create_acl() -> None:
        acl = AclBinding(ResourceType.TOPIC, f"{topic}-x", ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
        try:
            outcome["acls"] = admin.create_acls([acl], request_timeout=60)[acl].result(90)
        except KafkaException as e:
            outcome["acls"] = e.args[0].code()

    def alter_scram() -> None:
        up = UserScramCredentialUpsertion("zk-hung", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"secret")
        try:
            outcome["scram"] = admin.alter_user_scram_credentials([up], request_timeout=60)["zk-hung"].result(90)
        except KafkaException as e:
            outcome["scram"] = e.args[0].code()

    def alter_quota() -> None:
        E = AlterClientQuotasRequest.EntryData
        req = AlterClientQuotasRequest(entries=[E(entity=[E.EntityData(entity_type="user", entity_name="zk-hung")],
                                                  ops=[E.OpData(key="producer_byte_rate", value=1024.0, remove=False)])],
                                       validate_only=False)
        with RawClient(b.host, b.port, timeout=60) as rc:
            outcome["quotas"] = rc.roundtrip(req, 1, AlterClientQuotasResponse).entries[0].error_code

    answered = {"metadata": 0, "produce": 0, "fetch": 0}  # while a security write was pending
    cluster.zookeeper.pause()
    try:
        writers = [threading.Thread(target=fn, daemon=True) for fn in (create_acl, alter_scram, alter_quota)]
        for w in writers:
            w.start()
        while any(w.is_alive() for w in writers):
            pending = any(w.is_alive() for w in writers)
            md = cluster.metadata(0, [topic])  # a raw client with a socket timeout: a blocked loop fails it
            assert md.topics[0].error_code == 0 and md.topics[0].partitions[0].leader_id == 0
            answered["metadata"] += pending
            acked: list[object] = []
            producer.produce(topic, b"during", on_delivery=lambda err, _m, acked=acked: acked.append(err))
            deadline = time.monotonic() + 10
            while not acked and time.monotonic() < deadline:
                producer.poll(0.1)
            assert acked == [None], "no answer to a produce while ZooKeeper hung"
            answered["produce"] += pending
            want = len(fetched) + 1
            deadline = time.monotonic() + 10
            while len(fetched) < want and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=200).values():
                    fetched.extend(r.value for r in records)
            assert len(fetched) >= want, "no answer to a fetch while ZooKeeper hung"
            answered["fetch"] += pending
        assert min(answered.values()) >= 1, f"requests answered while the writes waited: {answered}"
        assert outcome == {"acls": KafkaError.REQUEST_TIMED_OUT, "scram": KafkaError.REQUEST_TIMED_OUT,
                           "quotas": ErrorCode.REQUEST_TIMED_OUT}, outcome
    finally:
        cluster.zookeeper.resume()

    def scram_ok() -> bool:  # ZooKeeper back: the writes work again and are in force on the broker
        alter_scram()
        return outcome["scram"] is None
    wait_for(scram_ok, 60, "AlterUserScramCredentials to succeed once ZooKeeper is back")
    described = admin.describe_user_scram_credentials(["zk-hung"])["zk-hung"].result(30)
    assert [i.mechanism for i in described.scram_credential_infos] == [ScramMechanism.SCRAM_SHA_256]
    create_acl()
    assert outcome["acls"] is None, outcome
    flt = AclBindingFilter(ResourceType.TOPIC, f"{topic}-x", ResourcePatternType.LITERAL, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    assert [a.principal for a in admin.describe_acls(flt).result(30)] == ["User:alice"]
    consumer.close()
