"""SamsaBroker's options: TLS and SASL listeners with generated certificates and users, a cluster."""

from __future__ import annotations

import ssl

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaError

from broker.cluster.zk.server import zookeeper_available
from broker.testing import SamsaBroker
from broker.testing.cluster import ClusterUnavailable


def test_tls_and_sasl_listeners():
    with SamsaBroker({"num.partitions": 2}, tls=True, sasl_users={"alice": "alice-secret"}) as k:
        ctx = ssl.create_default_context(cafile=str(k.tls.ca_file))
        ctx.verify_flags |= ssl.VERIFY_X509_STRICT  # Python 3.13's default
        p = KafkaProducer(bootstrap_servers=k.bootstrap("SSL"), security_protocol="SSL", ssl_context=ctx)
        p.send("secure", b"over-tls").get(timeout=30)
        p.close()
        for mechanism in ("PLAIN", "SCRAM-SHA-512"):
            p = KafkaProducer(bootstrap_servers=k.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism=mechanism, sasl_plain_username="alice",
                              sasl_plain_password="alice-secret")
            p.send("secure", b"as-alice", partition=0).get(timeout=30)
            p.close()
        with pytest.raises(KafkaError):
            p = KafkaProducer(bootstrap_servers=k.bootstrap("SASL_PLAINTEXT"), security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="wrong",
                              max_block_ms=3000)
            p.send("secure", b"no").get(timeout=10)
        values = sorted(r.value for r in k.records("secure"))
        assert values == [b"as-alice", b"as-alice", b"over-tls"]
        principals = {r.principal for r in k.requests(api="Produce")}
        assert "User:alice" in principals
        assert len(k.admin.client.describe_topics(["secure"])[0]["partitions"]) == 2  # num.partitions applied


def test_cluster_without_zookeeper_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))  # no jars there
    with pytest.raises(ClusterUnavailable, match="apt-get install zookeeper"):
        SamsaBroker(brokers=3).start()


@pytest.mark.skipif(zookeeper_available() is not None, reason=str(zookeeper_available()))
def test_three_brokers_replicate():
    with SamsaBroker(brokers=3) as k:
        assert len(k.bootstrap_servers.split(",")) == 3
        topic = k.create_topic(partitions=3, replication_factor=3)
        p = KafkaProducer(bootstrap_servers=k.bootstrap_servers, acks="all")
        for i in range(3):
            p.send(topic, value=b"%d" % i, partition=i).get(timeout=60)
        p.close()
        assert sorted(r.value for r in k.records(topic)) == [b"0", b"1", b"2"]
        desc = k.admin.client.describe_topics([topic])[0]
        assert [len(part["replica_nodes"]) for part in desc["partitions"]] == [3, 3, 3]


def test_schema_registry_option_serves_confluent_serializers():
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    schema = ('{"type": "record", "name": "Order", "fields": '
              '[{"name": "id", "type": "int"}, {"name": "item", "type": "string"}]}')
    with SamsaBroker(schema_registry=True) as k:
        client = SchemaRegistryClient({"url": k.schema_registry_url})
        ser = AvroSerializer(client, schema)
        ctx = SerializationContext("orders", MessageField.VALUE)
        p = KafkaProducer(bootstrap_servers=k.bootstrap_servers)
        p.send("orders", ser({"id": 7, "item": "tea"}, ctx)).get(timeout=30)
        p.close()
        assert client.get_subjects() == ["orders-value"]
        [record] = k.records("orders")
        assert record.value[0] == 0  # Confluent's wire format: magic byte, then the schema id
        assert AvroDeserializer(client)(record.value, ctx) == {"id": 7, "item": "tea"}
    with pytest.raises(RuntimeError, match="schema_registry=True"):
        _ = SamsaBroker().schema_registry_url
