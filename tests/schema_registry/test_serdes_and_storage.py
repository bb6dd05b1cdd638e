"""confluent-kafka's serializers end to end against one broker with the registry, and the
``_schemas`` topic: Confluent's exact record bytes, and every schema back after a restart.

Records are produced with confluent-kafka's Producer and Avro/JSON/Protobuf serializers
(auto-registering their schemas), consumed with its Consumer and deserialized by ids fetched
from the registry (``cache`` off where the fetch is the point).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.support.brokers import BrokerProcess
from tests.support.schema_registry import RegistryHttp, start_registry_broker

AVRO_SCHEMA = json.dumps({"type": "record", "name": "User", "namespace": "ex",
                          "fields": [{"name": "name", "type": "string"},
                                     {"name": "age", "type": ["null", "int"], "default": None}]})
JSON_SCHEMA = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order",
                          "type": "object", "properties": {"id": {"type": "integer"},
                                                           "item": {"type": "string"}},
                          "required": ["id"]})
COMMON_PROTO = 'syntax = "proto3";\npackage ex;\nmessage Money { string currency = 1; int64 units = 2; }\n'
ORDER_PROTO = ('syntax = "proto3";\npackage ex;\nimport "ex/common.proto";\n'
               'message Payment { string id = 1; ex.Money amount = 2; repeated string tags = 3; }\n')


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, RegistryHttp]]:
    b, reg = start_registry_broker(Path(tmp_path_factory.mktemp("sr-serdes")))
    try:
        yield b, reg
    finally:
        b.kill()


def _client(reg: RegistryHttp) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": reg.url})


def _roundtrip(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    out: list[bytes] = []
    try:
        for _ in range(300):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                out.append(m.value())
            if len(out) == len(values):
                break
    finally:
        c.close()
    return out


def _proto_classes() -> dict[str, Any]:
    """Message classes built from .proto text by protoc, as generated code would carry them."""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "ex"))
        Path(tmp, "ex", "common.proto").write_text(COMMON_PROTO)
        Path(tmp, "ex", "payment.proto").write_text(ORDER_PROTO)
        out = os.path.join(tmp, "set.pb")
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"--descriptor_set_out={out}",
                        "--include_imports", "ex/payment.proto"], check=True, capture_output=True)
        fds = descriptor_pb2.FileDescriptorSet.FromString(Path(out).read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in fds.file:
        pool.Add(f)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"ex.{n}")) for n in ("Money", "Payment")}


def test_avro_serializer_end_to_end(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    b, reg = registry
    topic = "serde-avro"
    ser = AvroSerializer(_client(reg), AVRO_SCHEMA)
    users = [{"name": "ann", "age": 31}, {"name": "bob", "age": None}]
    ctx = SerializationContext(topic, MessageField.VALUE)
    got = _roundtrip(b.bootstrap, topic, [ser(u, ctx) for u in users])
    de = AvroDeserializer(_client(reg))  # a fresh client: the writer schema comes from the registry by id
    assert [de(v, ctx) for v in got] == users
    assert got[0][0] == 0 and reg.get("/subjects/serde-avro-value/versions")[1] == [1]


def test_json_serializer_end_to_end(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    b, reg = registry
    topic = "serde-json"
    ser = JSONSerializer(JSON_SCHEMA, _client(reg))
    orders = [{"id": 1, "item": "pen"}, {"id": 2}]
    ctx = SerializationContext(topic, MessageField.VALUE)
    got = _roundtrip(b.bootstrap, topic, [ser(o, ctx) for o in orders])
    de = JSONDeserializer(None, schema_registry_client=_client(reg))
    assert [de(v, ctx) for v in got] == orders
    # the serializer validates against the schema: a document the schema refuses is not sent
    with pytest.raises(Exception, match="id"):
        ser({"item": "no id"}, ctx)


def test_protobuf_serializer_with_a_reference_end_to_end(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    b, reg = registry
    topic = "serde-proto"
    classes = _proto_classes()
    Payment, Money = classes["Payment"], classes["Money"]
    ser = ProtobufSerializer(Payment, _client(reg), {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    msgs = [Payment(id="p1", amount=Money(currency="EUR", units=12), tags=["a", "b"]), Payment(id="p2")]
    got = _roundtrip(b.bootstrap, topic, [ser(m, ctx) for m in msgs])
    de = ProtobufDeserializer(Payment, {"use.deprecated.format": False}, schema_registry_client=_client(reg))
    assert [de(v, ctx) for v in got] == msgs
    # the import became a reference to its own subject, registered first
    doc = reg.get("/subjects/serde-proto-value/versions/latest")[1]
    assert doc["schemaType"] == "PROTOBUF"
    assert doc["references"] == [{"name": "ex/common.proto", "subject": "ex/common.proto", "version": 1}]
    assert reg.get("/subjects/ex%2Fcommon.proto/versions/1/referencedby")[1] == [doc["id"]]


def _schemas_records(bootstrap: str) -> list[tuple[bytes, bytes | None]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "schemas-reader", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.subscribe(["_schemas"])
    out: list[tuple[bytes, bytes | None]] = []
    try:
        for _ in range(300):
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == -191:  # _PARTITION_EOF
                    break
                continue
            out.append((m.key(), m.value()))
    finally:
        c.close()
    return out


def test_schemas_topic_holds_confluents_exact_records(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    """The bytes Confluent's registry (7.x-8.x, Jackson with NON_EMPTY and its property orders)
    writes for the same operations: SchemaKey/SchemaValue, ConfigKey/ConfigValue, ModeKey/
    ModeValue, DeleteSubjectKey/DeleteSubjectValue, and tombstones for permanent deletes."""
    b, reg = registry
    assert reg.put("/config", {"compatibility": "FULL"})[0] == 200
    assert reg.put("/config", {"compatibility": "BACKWARD"})[0] == 200
    assert reg.put("/config/serde-avro-value", {"compatibility": "FORWARD"})[0] == 200
    assert reg.put("/mode/serde-json-value", {"mode": "READONLY"})[0] == 200
    assert reg.delete("/mode/serde-json-value")[0] == 200
    plain = json.dumps({"type": "enum", "name": "Gone", "symbols": ["A"]})
    assert reg.post("/subjects/gone-value/versions", {"schema": plain})[0] == 200
    gone_id = reg.get("/subjects/gone-value/versions/1")[1]["id"]
    assert reg.delete("/subjects/gone-value")[0] == 200
    assert reg.delete("/subjects/gone-value?permanent=true")[0] == 200
    log = _schemas_records(b.bootstrap)
    records = dict(log)
    avro_key = b'{"keytype":"SCHEMA","subject":"serde-avro-value","version":1,"magic":1}'
    compact_avro = json.dumps(json.loads(AVRO_SCHEMA), separators=(",", ":"))
    avro_id = reg.get("/subjects/serde-avro-value/versions/1")[1]["id"]
    assert records[avro_key] == (b'{"subject":"serde-avro-value","version":1,"id":%d,"schemaType":"AVRO","schema":'
                                 % avro_id + json.dumps(compact_avro).encode() + b',"deleted":false}')
    proto_key = b'{"keytype":"SCHEMA","subject":"serde-proto-value","version":1,"magic":1}'
    proto_value = json.loads(records[proto_key])
    assert list(proto_value) == ["subject", "version", "id", "schemaType", "references", "schema", "deleted"]
    assert proto_value["references"] == [{"name": "ex/common.proto", "subject": "ex/common.proto", "version": 1}]
    assert records[proto_key] == json.dumps(proto_value, separators=(",", ":")).encode()
    # the global config's key has no subject; a subject's config value names its subject
    assert records[b'{"keytype":"CONFIG","magic":0}'] == b'{"compatibilityLevel":"BACKWARD"}'
    assert records[b'{"keytype":"CONFIG","subject":"serde-avro-value","magic":0}'] == \
        b'{"subject":"serde-avro-value","compatibilityLevel":"FORWARD"}'
    mode_key = b'{"keytype":"MODE","subject":"serde-json-value","magic":0}'
    assert (mode_key, b'{"subject":"serde-json-value","mode":"READONLY"}') in log
    assert log[-1] == (b'{"keytype":"SCHEMA","subject":"gone-value","version":1,"magic":1}', None)
    assert (b'{"keytype":"DELETE_SUBJECT","subject":"gone-value","magic":0}',
            b'{"subject":"gone-value","version":1}') in log
    assert (mode_key, None) in log
    assert gone_id >= 1
    assert reg.delete("/config/serde-avro-value")[0] == 200


def test_restart_replays_schemas_including_records_confluent_wrote(
        registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    b, reg = registry
    before = {s: reg.get(f"/subjects/{s}/versions/latest")[1] for s in reg.get("/subjects")[1]}
    assert len(before) >= 4
    # records as Confluent's registry writes them, produced straight into _schemas
    foreign_schema = json.dumps({"type": "record", "name": "Foreign", "fields": [{"name": "x", "type": "long"}]})
    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce("_schemas", key=b'{"keytype":"NOOP","magic":0}', value=None)
    p.produce("_schemas", key=b'{"keytype":"SCHEMA","subject":"from-confluent","version":1,"magic":1}',
              value=json.dumps({"subject": "from-confluent", "version": 1, "id": 500, "schema": foreign_schema,
                                "deleted": False}).encode())
    p.produce("_schemas", key=b'{"keytype":"CONFIG","subject":"from-confluent","magic":0}',
              value=b'{"compatibilityLevel":"FORWARD"}')
    p.produce("_schemas", key=b'{"keytype":"garbage', value=b"not json")  # skipped, logged
    assert p.flush(30) == 0
    b.kill()
    b.start()
    reg.wait_ready()
    after = {s: reg.get(f"/subjects/{s}/versions/latest")[1] for s in reg.get("/subjects")[1]}
    assert {s: after[s] for s in before} == before
    assert after["from-confluent"]["id"] == 500
    assert reg.get("/config/from-confluent")[1] == {"compatibilityLevel": "FORWARD"}
    # ids continue past the largest one in the topic, never reusing one
    status, doc = reg.post("/subjects/after-restart-value/versions",
                           {"schema": json.dumps({"type": "enum", "name": "E", "symbols": ["A"]})})
    assert (status, doc["id"], doc["version"]) == (200, 501, 1)
    # and the clients still deserialize what was produced before the restart
    de = AvroDeserializer(_client(reg))
    ctx = SerializationContext("serde-avro", MessageField.VALUE)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "after-restart", "auto.offset.reset": "earliest"})
    c.subscribe(["serde-avro"])
    values = []
    try:
        for _ in range(300):
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                values.append(de(m.value(), ctx))
            if len(values) == 2:
                break
    finally:
        c.close()
    assert values == [{"name": "ann", "age": 31}, {"name": "bob", "age": None}]
