"""Brokers replicate to each other over a SASL_SSL inter-broker listener (issue 10).

Two brokers, each with a PLAINTEXT listener for clients and an INTERNAL listener mapped to
SASL_SSL (``listener.security.protocol.map``) named by ``inter.broker.listener.name``; the
broker-side PLAIN users include ``broker``, whose JAAS ``username``/``password`` the brokers use
as clients. A topic with replication factor 2 takes acks=all writes only if the follower's
replica fetcher authenticates over TLS + SASL and catches up; a wrong inter-broker password
keeps the follower out of the ISR, refused with SASL_AUTHENTICATION_FAILED in its log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.net import free_port, wait_until
from tests.support.security import make_pki

pytestmark = pytest.mark.timeout(300)


def _secure(cluster, pki, password: str = "broker-secret") -> None:
    for b in cluster.brokers:
        internal = free_port()
        jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
                f'password="{password}" user_broker="broker-secret";')
        b.overrides.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{internal}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
            "inter.broker.listener.name": "INTERNAL",
            "listener.name.internal.ssl.keystore.location": str(pki.server_pem),
            "listener.name.internal.ssl.truststore.location": str(pki.ca),
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": jaas,
        })


def _replicated(cluster, topic: str) -> bool:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=cluster.brokers[0].bootstrap, acks="all", request_timeout_ms=5000,
                      max_block_ms=10000)
    try:
        p.send(topic, b"replicated").get(timeout=15)
        return True
    except Exception:
        return False
    finally:
        p.close()


def test_replication_over_sasl_ssl_inter_broker_listener(cluster_factory, tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(2, start=False, overrides={"min.insync.replicas": 2})
    _secure(cluster, pki)
    cluster.start()
    cluster.wait_for_brokers(2)
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[0].bootstrap)
    admin.create_topics([NewTopic("secure-rf2", 1, 2)])
    admin.close()
    assert wait_until(lambda: _replicated(cluster, "secure-rf2"), 90, interval=1.0), cluster.log_tails()
    part = cluster.partition("secure-rf2", 0)
    assert sorted(part["isr"]) == [0, 1], part


def test_security_inter_broker_protocol_names_the_listener(cluster_factory, tmp_path: Path) -> None:
    """``security.inter.broker.protocol=SASL_SSL`` (instead of a listener name): the SASL_SSL listener."""
    from kafka.admin import KafkaAdminClient, NewTopic

    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(2, start=False, overrides={"min.insync.replicas": 2})
    for b in cluster.brokers:
        b.overrides.update({
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_SSL://127.0.0.1:{free_port()}",
            "security.inter.broker.protocol": "SASL_SSL",
            "ssl.keystore.location": str(pki.server_pem), "ssl.truststore.location": str(pki.ca),
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
                'password="broker-secret" user_broker="broker-secret";'})
    cluster.start()
    cluster.wait_for_brokers(2)
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[0].bootstrap)
    admin.create_topics([NewTopic("secure-proto", 1, 2)])
    admin.close()
    assert wait_until(lambda: _replicated(cluster, "secure-proto"), 90, interval=1.0), cluster.log_tails()


def test_wrong_inter_broker_password_is_refused(cluster_factory, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    cluster = cluster_factory(2, start=False)
    _secure(cluster, pki, password="wrong")
    cluster.start()
    assert wait_until(lambda: "Authentication failed: Invalid username or password" in
                      "".join(b.log_text() for b in cluster.brokers), 60, interval=1.0), cluster.log_tails()


def test_scram_credentials_live_in_zookeeper(cluster_factory, tmp_path: Path) -> None:
    """A SCRAM user created through broker 0 authenticates at broker 1 (Kafka's /config/users/<user>)."""
    from kafka import KafkaProducer

    from tests.support.security import scram_user

    cluster = cluster_factory(2, start=False)
    sasl_ports = []
    for b in cluster.brokers:
        port = free_port()
        sasl_ports.append(port)
        b.overrides.update({"listeners": f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{port}",
                            "inter.broker.listener.name": "PLAINTEXT",
                            "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    cluster.start()
    cluster.wait_for_brokers(2)
    scram_user(cluster.brokers[0].bootstrap, "carol", "carol-secret", "SCRAM-SHA-512")

    def authenticates() -> bool:
        try:
            KafkaProducer(bootstrap_servers=f"127.0.0.1:{sasl_ports[1]}", security_protocol="SASL_PLAINTEXT",
                          sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="carol",
                          sasl_plain_password="carol-secret", max_block_ms=5000).close()
            return True
        except Exception:
            return False

    assert wait_until(authenticates, 60, interval=1.0), cluster.log_tails()
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=cluster.zookeeper_connect)
    zk.start(timeout=15)
    data, _ = zk.get("/config/users/carol")
    zk.stop()
    zk.close()
    assert b"SCRAM-SHA-512" in data and b"stored_key=" in data and b"carol-secret" not in data
