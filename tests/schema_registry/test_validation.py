"""Broker-side schema id validation through real producers (confluent-kafka) and its serializers.

Topics are created and altered through the Admin API with Confluent Server's config names and
Redpanda's synonyms; a record refused comes back to the producer as INVALID_RECORD, and
nothing of a refused batch is in the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.brokers import BrokerProcess
from tests.support.net import free_port
from tests.support.schema_registry import RegistryHttp, start_registry_broker

METRICS_PORT = free_port()
USER = json.dumps({"type": "record", "name": "User", "namespace": "ex", "fields": [{"name": "n", "type": "string"}]})


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, RegistryHttp]]:
    b, reg = start_registry_broker(Path(tmp_path_factory.mktemp("sr-validation")),
                                   {"metrics.listener": f"http://127.0.0.1:{METRICS_PORT}"})
    try:
        yield b, reg
    finally:
        b.kill()


def _create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
        f.result(30)


def _produce(bootstrap: str, topic: str, value: bytes | None, key: bytes | None = None) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "retries": 0, "acks": "all"})
    p.produce(topic, value=value, key=key, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    return errors[0]


def _end_offset(bootstrap: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "offsets"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        c.close()


def _avro_value(reg: RegistryHttp, topic: str, conf: dict[str, object] | None = None) -> bytes:
    ser = AvroSerializer(SchemaRegistryClient({"url": reg.url}), USER, conf=conf)
    return ser({"n": "x"}, SerializationContext(topic, MessageField.VALUE))


def test_value_validation_refuses_records_without_a_registered_id(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    b, reg = registry
    _create(b.bootstrap, "val-on", {"confluent.value.schema.validation": "true"})
    err = _produce(b.bootstrap, "val-on", b"plain bytes")
    assert err is not None and err.code() == KafkaError.INVALID_RECORD
    assert _end_offset(b.bootstrap, "val-on") == 0
    good = _avro_value(reg, "val-on")  # registers ex.User as val-on-value
    assert _produce(b.bootstrap, "val-on", good) is None
    # a well-formed header with an id nobody registered, and an id registered under another subject
    assert _produce(b.bootstrap, "val-on", b"\x00\x00\x01\x86\xa0payload").code() == KafkaError.INVALID_RECORD
    other_id = SchemaRegistryClient({"url": reg.url}).register_schema(
        "somewhere-else", Schema(json.dumps({"type": "enum", "name": "E", "symbols": ["A"]}), "AVRO"))
    assert _produce(b.bootstrap, "val-on", b"\x00" + other_id.to_bytes(4, "big") + b"\x00").code() == \
        KafkaError.INVALID_RECORD
    # a tombstone carries no value to check; the key is not validated unless asked
    assert _produce(b.bootstrap, "val-on", None, key=b"k") is None
    assert _end_offset(b.bootstrap, "val-on") == 2


def test_validation_off_by_default_and_switched_by_alter_configs(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    b, _ = registry
    _create(b.bootstrap, "val-off", {})
    assert _produce(b.bootstrap, "val-off", b"plain") is None
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, "val-off", incremental_configs=[
        ConfigEntry("confluent.value.schema.validation", "true", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(30)
    assert _produce(b.bootstrap, "val-off", b"plain").code() == KafkaError.INVALID_RECORD
    desc = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "val-off")])
    configs = list(desc.values())[0].result(30)
    assert configs["confluent.value.schema.validation"].value == "true"
    assert configs["redpanda.key.schema.id.validation"].value == "false"
    # a bad strategy name is refused as Kafka refuses any bad config value
    bad = ConfigResource(ConfigResource.Type.TOPIC, "val-off", incremental_configs=[
        ConfigEntry("confluent.value.subject.name.strategy", "Sideways", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="TopicNameStrategy"):
        for f in admin.incremental_alter_configs([bad]).values():
            f.result(30)


def test_redpanda_key_synonym_and_record_name_strategy(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    b, reg = registry
    _create(b.bootstrap, "val-key", {"redpanda.key.schema.id.validation": "true"})
    assert _produce(b.bootstrap, "val-key", b"any value", key=b"plain key").code() == KafkaError.INVALID_RECORD
    assert _produce(b.bootstrap, "val-key", b"any value", key=None) is None
    _create(b.bootstrap, "val-record", {"confluent.value.schema.validation": "true",
                                        "confluent.value.subject.name.strategy":
                                            "io.confluent.kafka.serializers.subject.RecordNameStrategy"})
    # registered under val-record-value (TopicNameStrategy): the wrong subject for this topic
    topic_named = _avro_value(reg, "val-record")
    assert _produce(b.bootstrap, "val-record", topic_named).code() == KafkaError.INVALID_RECORD
    by_record = _avro_value(reg, "val-record", {"subject.name.strategy": record_subject_name_strategy})
    assert reg.get("/subjects/ex.User/versions")[1] == [1]
    assert _produce(b.bootstrap, "val-record", by_record) is None


def test_the_brokers_metrics_listener_shows_the_registry(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    import urllib.request

    _, reg = registry
    text = urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=30).read().decode()
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if line.startswith("kafka_schema_registry"))
    assert float(lines["kafka_schema_registry_subjects"]) == len(reg.get("/subjects")[1])
    assert "kafka_schema_registry_master_slave_role" in lines
