"""``normalize``: textually different but equivalent schemas register as one id, through
confluent-kafka's SchemaRegistryClient (``normalize_schemas=True``) and the ``normalize`` config.

Protobuf is the format where it matters: protoc keeps the order in which fields, enum values
and imports are written, so without ``normalize`` a reordered file is another schema (another
id, as in Confluent's registry); with it, both are stored as one canonical text.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from broker.schema_registry import formats
from tests.support.brokers import BrokerProcess
from tests.support.schema_registry import RegistryHttp, start_registry_broker

COMMON = 'syntax = "proto3";\npackage ex;\nmessage Money { string currency = 1; int64 units = 2; }\n'
# One schema written twice: fields, enum values, imports and options in another order,
# other whitespace, comments, a type named relatively or fully qualified.
ORDER_A = """syntax = "proto3";
package ex;
import "ex/common.proto";
import "google/protobuf/timestamp.proto";
option java_package = "com.example";
option java_multiple_files = true;

message Order {
  string id = 1;
  Money total = 2 [deprecated = true, json_name = "sum"];
  google.protobuf.Timestamp at = 3;
  map<string, Money> parts = 5;
  oneof pay { string card = 6; string iban = 7; }
  Status status = 4;
  enum Status { UNKNOWN = 0; OPEN = 1; CLOSED = 2; }
}
"""
ORDER_B = """// the same order, written by someone else
syntax = "proto3";
package ex;

import "google/protobuf/timestamp.proto";
import "ex/common.proto";

option java_multiple_files = true;
option java_package = "com.example";

message Order {
  Status status = 4;
  oneof pay {
    string iban = 7;
    string card = 6;
  }
  map<string, .ex.Money> parts = 5;
  .google.protobuf.Timestamp at = 3;
  ex.Money total = 2 [json_name = "sum", deprecated = true];
  string id = 1;  // the key
  enum Status {
    UNKNOWN = 0;
    CLOSED = 2;
    OPEN = 1;
  }
}
"""


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, RegistryHttp]]:
    b, reg = start_registry_broker(Path(tmp_path_factory.mktemp("sr-normalize")))
    try:
        yield b, reg
    finally:
        b.kill()


def _client(reg: RegistryHttp) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": reg.url, "cache.capacity": 1, "cache.latest.ttl.sec": 1})


def _order(text: str) -> Schema:
    return Schema(text, "PROTOBUF", [SchemaReference("ex/common.proto", "norm-common", 1)])


def test_protobuf_normalize_registers_equivalent_texts_as_one_id(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    _, reg = registry
    client = _client(reg)
    client.register_schema("norm-common", Schema(COMMON, "PROTOBUF"))

    # without normalize: the reordered text is another schema, as in Confluent's registry
    plain_a = client.register_schema("plain-value", _order(ORDER_A))
    plain_b = client.register_schema("plain-value", _order(ORDER_B))
    assert plain_a != plain_b
    assert _client(reg).get_schema(plain_a).schema_str == ORDER_A  # stored as given
    with pytest.raises(SchemaRegistryError) as e:
        _client(reg).lookup_schema("plain-value", _order(ORDER_B.replace("CLOSED = 2;\n    OPEN = 1;",
                                                                          "OPEN = 1;\n    CLOSED = 2;")))
    assert e.value.error_code == 40403

    # with normalize: one id, one version, whichever text comes first
    norm_b = client.register_schema("norm-value", _order(ORDER_B), normalize_schemas=True)
    norm_a = client.register_schema("norm-value", _order(ORDER_A), normalize_schemas=True)
    assert norm_a == norm_b
    assert _client(reg).get_versions("norm-value") == [1]
    found = _client(reg).lookup_schema("norm-value", _order(ORDER_A), normalize_schemas=True)
    assert (found.schema_id, found.version) == (norm_a, 1)

    # what is stored is the canonical text: imports sorted, fields by number, types fully qualified,
    # comments gone; it compiles to the same schema as either text
    canonical = _client(reg).get_schema(norm_a).schema_str
    assert canonical.index('import "ex/common.proto"') < canonical.index('import "google/protobuf/timestamp.proto"')
    assert canonical.index("option java_multiple_files") < canonical.index("option java_package")
    lines = [ln.strip() for ln in canonical.splitlines()]
    assert lines.index("string id = 1;") < lines.index(".ex.Money total = 2 [deprecated = true, json_name = \"sum\"];") \
        < lines.index(".google.protobuf.Timestamp at = 3;") < lines.index(".ex.Order.Status status = 4;") \
        < lines.index("map<string, .ex.Money> parts = 5;") < lines.index("oneof pay {")
    assert lines.index("OPEN = 1;") < lines.index("CLOSED = 2;")
    assert "//" not in canonical
    # the canonical text, sent as it is, is that schema without normalize too
    assert _client(reg).lookup_schema("norm-value", _order(canonical)).schema_id == norm_a

    # the registry's own parser agrees: both texts, normalized, are byte for byte one text
    common = formats.parse("PROTOBUF", COMMON)
    deps = [formats.Dependency("ex/common.proto", common)]
    ref = (formats.Reference("ex/common.proto", "norm-common", 1),)
    assert formats.parse("PROTOBUF", ORDER_A, ref, deps, normalize=True).text == \
        formats.parse("PROTOBUF", ORDER_B, ref, deps, normalize=True).text == canonical


def test_the_normalize_config_applies_to_registrations_and_lookups(
        registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    _, reg = registry
    client = _client(reg)
    client.register_schema("norm-common", Schema(COMMON, "PROTOBUF"))
    assert reg.get("/config/cfg-value")[0] == 404
    status, doc = reg.put("/config/cfg-value", {"normalize": True})
    assert (status, doc) == (200, {"normalize": True})
    assert reg.get("/config/cfg-value") == (200, {"normalize": True})
    assert reg.get("/config/cfg-value?defaultToGlobal=true")[1]["normalize"] is True
    # the subject's compatibility level is still the global one; setting it keeps normalize
    assert reg.put("/config/cfg-value", {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
    assert reg.get("/config/cfg-value") == (200, {"compatibilityLevel": "FULL", "normalize": True})

    first = client.register_schema("cfg-value", _order(ORDER_A))  # no normalize_schemas: the config asks
    assert client.register_schema("cfg-value", _order(ORDER_B)) == first
    assert _client(reg).lookup_schema("cfg-value", _order(ORDER_B)).schema_id == first
    assert "//" not in _client(reg).get_schema(first).schema_str

    # the global config reaches every subject without its own
    assert reg.put("/config", {"normalize": True}) == (200, {"normalize": True})
    try:
        other = client.register_schema("cfg2-value", _order(ORDER_B))
        assert other == first  # the same canonical schema: the same id under any subject
        assert reg.get("/config")[1] == {"compatibilityLevel": "BACKWARD", "normalize": True}
    finally:
        assert reg.put("/config", {"normalize": False})[0] == 200
    assert reg.put("/config/cfg-value", {"normalize": "yes"})[0] == 422
    assert reg.delete("/config/cfg-value") == (200, {"compatibilityLevel": "FULL"})
    assert reg.get("/config/cfg-value")[0] == 404


def test_avro_and_json_normalize_through_the_same_path(registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    _, reg = registry
    client = _client(reg)
    avro_a = json.dumps({"type": "record", "name": "P", "namespace": "ex",
                         "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": {"type": "string"}}]})
    avro_b = json.dumps({"fields": [{"type": "int", "name": "a"}, {"name": "b", "type": "string"}],
                         "name": "ex.P", "type": "record"}, indent=2)
    first = client.register_schema("avro-norm-value", Schema(avro_a, "AVRO"), normalize_schemas=True)
    assert client.register_schema("avro-norm-value", Schema(avro_b, "AVRO"), normalize_schemas=True) == first
    assert client.lookup_schema("avro-norm-value", Schema(avro_b, "AVRO"), normalize_schemas=True).version == 1
    json_a = json.dumps({"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}}})
    json_b = json.dumps({"properties": {"y": {"type": "string"}, "x": {"type": "integer"}}, "type": "object"})
    first = client.register_schema("json-norm-value", Schema(json_a, "JSON"), normalize_schemas=True)
    assert client.register_schema("json-norm-value", Schema(json_b, "JSON"), normalize_schemas=True) == first
    stored = _client(reg).get_schema(first).schema_str
    assert stored == json.dumps(json.loads(json_a), sort_keys=True, separators=(",", ":"))  # keys sorted


MONEY_TEXT = 'syntax = "proto3";\npackage nz;\nmessage Money { int64 units = 2; string currency = 1; }\n'


def test_protobuf_serializer_with_normalize_schemas(registry: tuple[BrokerProcess, RegistryHttp],
                                                    tmp_path: Path) -> None:
    """confluent-kafka's ProtobufSerializer registers base64 FileDescriptorProto bytes; with
    ``normalize.schemas`` the registry stores the canonical text, the same id a normalized text
    registration gets, and the deserializer reads the records back through it."""
    _, reg = registry
    (tmp_path / "nz").mkdir()
    (tmp_path / "nz" / "money.proto").write_text(MONEY_TEXT)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp_path}", f"--descriptor_set_out={tmp_path / 's.pb'}",
                    "nz/money.proto"], check=True, capture_output=True)
    pool = descriptor_pool.DescriptorPool()
    for f in descriptor_pb2.FileDescriptorSet.FromString((tmp_path / "s.pb").read_bytes()).file:
        pool.Add(f)
    money = message_factory.GetMessageClass(pool.FindMessageTypeByName("nz.Money"))
    ctx = SerializationContext("money", MessageField.VALUE)
    ser = ProtobufSerializer(money, _client(reg), {"use.deprecated.format": False, "normalize.schemas": True})
    payload = ser(money(currency="EUR", units=7), ctx)
    schema_id = int.from_bytes(payload[1:5], "big")
    stored = _client(reg).get_schema(schema_id).schema_str
    assert stored.index("string currency = 1;") < stored.index("int64 units = 2;")  # canonical text, not base64
    by_text = _client(reg).register_schema("money-value", Schema(MONEY_TEXT, "PROTOBUF"), normalize_schemas=True)
    assert by_text == schema_id
    de = ProtobufDeserializer(money, {"use.deprecated.format": False})
    assert de(payload, ctx) == money(currency="EUR", units=7)
