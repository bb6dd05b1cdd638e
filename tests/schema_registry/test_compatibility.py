"""Compatibility matrices per format, against the rules Confluent documents
("Schema Evolution and Compatibility": the summary table per level, and the per-format rules
for Avro, Protobuf and JSON Schema). Pure: the registry's checker on parsed schemas, no broker.

Each case is (level, [earlier versions, oldest first], new schema, compatible?).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.schema_registry import compatibility, formats
from broker.schema_registry.errors import RegistryError


def rec(*fields: dict[str, object], name: str = "R") -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


A = {"name": "a", "type": "int"}
B_OPT = {"name": "b", "type": "string", "default": ""}
B_REQ = {"name": "b", "type": "string"}


def check(schema_type: str, level: str, earlier: list[str], new: str) -> bool:
    parsed = [formats.parse(schema_type, s) for s in earlier]
    return not compatibility.check(level, formats.parse(schema_type, new), parsed)


AVRO_CASES = [
    # Confluent's summary table: BACKWARD = delete fields, add optional fields
    ("BACKWARD", [rec(A)], rec(A, B_OPT), True),
    ("BACKWARD", [rec(A)], rec(A, B_REQ), False),
    ("BACKWARD", [rec(A, B_REQ)], rec(A), True),
    # FORWARD = add fields, delete optional fields
    ("FORWARD", [rec(A)], rec(A, B_REQ), True),
    ("FORWARD", [rec(A, B_OPT)], rec(A), True),
    ("FORWARD", [rec(A, B_REQ)], rec(A), False),
    # FULL = add or delete optional fields only
    ("FULL", [rec(A)], rec(A, B_OPT), True),
    ("FULL", [rec(A)], rec(A, B_REQ), False),
    ("FULL", [rec(A, B_REQ)], rec(A), False),
    ("FULL", [rec(A, B_OPT)], rec(A), True),
    ("NONE", [rec(A)], rec(B_REQ), True),
    # transitive: checked against every version, not only the latest
    ("BACKWARD", [rec(A), rec(A, B_OPT)], rec(A, B_REQ), True),
    ("BACKWARD_TRANSITIVE", [rec(A), rec(A, B_OPT)], rec(A, B_REQ), False),
    ("FORWARD", [rec(A, B_REQ), rec(A, B_OPT)], rec(A), True),
    ("FORWARD_TRANSITIVE", [rec(A, B_REQ), rec(A, B_OPT)], rec(A), False),
    ("FULL", [rec(A), rec(A, B_OPT)], rec(A, B_REQ), True),
    ("FULL_TRANSITIVE", [rec(A), rec(A, B_OPT)], rec(A, B_REQ), False),
    ("FULL_TRANSITIVE", [rec(A), rec(A, B_OPT)], rec(A, B_OPT, {"name": "c", "type": "int", "default": 0}),
     True),
    # Avro's promotions: a reader's long reads a writer's int, not the other way round
    ("BACKWARD", [rec({"name": "a", "type": "int"})], rec({"name": "a", "type": "long"}), True),
    ("BACKWARD", [rec({"name": "a", "type": "long"})], rec({"name": "a", "type": "int"}), False),
    ("BACKWARD", [rec({"name": "a", "type": "float"})], rec({"name": "a", "type": "double"}), True),
    ("BACKWARD", [rec({"name": "a", "type": "string"})], rec({"name": "a", "type": "bytes"}), True),
    ("BACKWARD", [rec({"name": "a", "type": "string"})], rec({"name": "a", "type": "int"}), False),
    # unions: widening to a union reads the old data; narrowing does not
    ("BACKWARD", [rec(A)], rec({"name": "a", "type": ["null", "int"]}), True),
    ("BACKWARD", [rec({"name": "a", "type": ["null", "int"]})], rec(A), False),
    ("FORWARD", [rec({"name": "a", "type": ["null", "int"]})], rec(A), True),
    # enums: a reader must know every symbol a writer may use
    ("BACKWARD", [json.dumps({"type": "enum", "name": "E", "symbols": ["A"]})],
     json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]}), True),
    ("BACKWARD", [json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]})],
     json.dumps({"type": "enum", "name": "E", "symbols": ["A"]}), False),
    ("BACKWARD", [json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]})],
     json.dumps({"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}), True),
    # named types: a renamed record needs an alias
    ("BACKWARD", [rec(A, name="Old")], rec(A, name="New"), False),
    ("BACKWARD", [rec(A, name="Old")], json.dumps({"type": "record", "name": "New", "aliases": ["Old"],
                                                    "fields": [A]}), True),
    # a field renamed with an alias of the old name
    ("BACKWARD", [rec(A)], rec({"name": "a2", "type": "int", "aliases": ["a"]}), True),
    ("BACKWARD", [json.dumps({"type": "fixed", "name": "F", "size": 4})],
     json.dumps({"type": "fixed", "name": "F", "size": 8}), False),
    ("BACKWARD", [json.dumps({"type": "array", "items": "int"})], json.dumps({"type": "array", "items": "long"}),
     True),
    ("BACKWARD", [json.dumps({"type": "map", "values": "long"})], json.dumps({"type": "map", "values": "int"}),
     False),
    # recursive types terminate
    ("BACKWARD", [json.dumps({"type": "record", "name": "Node", "fields": [
        {"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]})],
     json.dumps({"type": "record", "name": "Node", "fields": [
         {"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"], "default": None}]}), True),
]


@pytest.mark.parametrize("level,earlier,new,ok", AVRO_CASES)
def test_avro_matrix(level: str, earlier: list[str], new: str, ok: bool) -> None:
    assert check("AVRO", level, earlier, new) is ok


def obj(props: dict[str, object], required: list[str] | None = None, closed: bool = False) -> str:
    doc: dict[str, object] = {"type": "object", "properties": props}
    if required:
        doc["required"] = required
    if closed:
        doc["additionalProperties"] = False
    return json.dumps(doc)


INT = {"type": "integer"}
STR = {"type": "string"}

JSON_CASES = [
    # open content model: removing a property is backward compatible, adding one is forward compatible
    ("BACKWARD", [obj({"a": INT, "b": STR})], obj({"a": INT}), True),
    ("BACKWARD", [obj({"a": INT})], obj({"a": INT, "b": STR}), False),
    ("FORWARD", [obj({"a": INT})], obj({"a": INT, "b": STR}), True),
    ("FORWARD", [obj({"a": INT, "b": STR})], obj({"a": INT}), False),
    # closed content model: the other way round
    ("BACKWARD", [obj({"a": INT}, closed=True)], obj({"a": INT, "b": STR}, closed=True), True),
    ("BACKWARD", [obj({"a": INT, "b": STR}, closed=True)], obj({"a": INT}, closed=True), False),
    # a new required property cannot be satisfied by old documents
    ("BACKWARD", [obj({"a": INT, "b": STR}, closed=True)], obj({"a": INT, "b": STR}, ["b"], closed=True), False),
    ("BACKWARD", [obj({"a": INT, "b": STR}, ["b"])], obj({"a": INT, "b": STR}), True),
    # types: widening integer -> number is backward compatible, narrowing is not
    ("BACKWARD", [obj({"a": INT})], obj({"a": {"type": "number"}}), True),
    ("BACKWARD", [obj({"a": {"type": "number"}})], obj({"a": INT}), False),
    ("BACKWARD", [obj({"a": INT})], obj({"a": STR}), False),
    ("BACKWARD", [obj({"a": INT})], obj({"a": {"type": ["integer", "null"]}}), True),
    # bounds
    ("BACKWARD", [obj({"a": {"type": "string", "maxLength": 10}})], obj({"a": {"type": "string", "maxLength": 5}}),
     False),
    ("BACKWARD", [obj({"a": {"type": "string", "maxLength": 5}})], obj({"a": {"type": "string", "maxLength": 10}}),
     True),
    ("BACKWARD", [obj({"a": {"type": "integer"}})], obj({"a": {"type": "integer", "minimum": 0}}), False),
    # enums
    ("BACKWARD", [obj({"a": {"enum": ["x"]}})], obj({"a": {"enum": ["x", "y"]}}), True),
    ("BACKWARD", [obj({"a": {"enum": ["x", "y"]}})], obj({"a": {"enum": ["x"]}}), False),
    # FULL needs both directions
    ("FULL", [obj({"a": INT})], obj({"a": INT, "b": STR}), False),
    ("FULL", [obj({"a": INT})], obj({"a": INT}), True),
    # arrays and local $refs
    ("BACKWARD", [json.dumps({"type": "array", "items": INT})], json.dumps({"type": "array", "items": STR}), False),
    ("BACKWARD", [json.dumps({"definitions": {"n": INT}, "type": "object", "properties": {"a": {"$ref": "#/definitions/n"}}})],
     json.dumps({"definitions": {"n": {"type": "number"}}, "type": "object",
                 "properties": {"a": {"$ref": "#/definitions/n"}}}), True),
    ("BACKWARD_TRANSITIVE", [obj({"a": INT, "b": STR}, closed=True), obj({"a": INT}, closed=True)],
     obj({"a": INT}, closed=True), False),
]


@pytest.mark.parametrize("level,earlier,new,ok", JSON_CASES)
def test_json_schema_matrix(level: str, earlier: list[str], new: str, ok: bool) -> None:
    assert check("JSON", level, earlier, new) is ok


def proto(body: str, package: str = "ex") -> str:
    return f'syntax = "proto3";\npackage {package};\n{body}\n'


M1 = proto("message M { string a = 1; int32 b = 2; }")

PROTO_CASES = [
    # adding and removing fields is wire compatible both ways
    ("FULL", [M1], proto("message M { string a = 1; int32 b = 2; bool c = 3; }"), True),
    ("FULL", [M1], proto("message M { string a = 1; }"), True),
    # renaming a field keeps its number: compatible
    ("FULL", [M1], proto("message M { string a = 1; int32 count = 2; }"), True),
    # wire-compatible scalar changes, and incompatible ones
    ("BACKWARD", [M1], proto("message M { string a = 1; int64 b = 2; }"), True),
    ("BACKWARD", [M1], proto("message M { bytes a = 1; int32 b = 2; }"), True),
    ("BACKWARD", [M1], proto("message M { string a = 1; double b = 2; }"), False),
    ("BACKWARD", [M1], proto("message M { int32 a = 1; int32 b = 2; }"), False),
    ("BACKWARD", [M1], proto("message M { string a = 1; sint32 b = 2; }"), False),
    # a message field's type, a removed message, a changed package
    ("BACKWARD", [proto("message N { int32 x = 1; }\nmessage O { int32 x = 1; }\nmessage M { N n = 1; }")],
     proto("message N { int32 x = 1; }\nmessage O { int32 x = 1; }\nmessage M { O n = 1; }"), False),
    ("BACKWARD", [proto("message N { int32 x = 1; }\nmessage M { int32 a = 1; }")],
     proto("message M { int32 a = 1; }"), False),
    ("BACKWARD", [M1], proto("message M { string a = 1; int32 b = 2; }", package="other"), False),
    # a field moved into a oneof
    ("BACKWARD", [M1], proto("message M { oneof o { string a = 1; } int32 b = 2; }"), False),
    # enum values added or removed
    ("FULL", [proto("enum E { A = 0; B = 1; }\nmessage M { E e = 1; }")],
     proto("enum E { A = 0; B = 1; C = 2; }\nmessage M { E e = 1; }"), True),
    ("NONE", [M1], proto("message M { double a = 1; }"), True),
]


@pytest.mark.parametrize("level,earlier,new,ok", PROTO_CASES)
def test_protobuf_matrix(level: str, earlier: list[str], new: str, ok: bool) -> None:
    assert check("PROTOBUF", level, earlier, new) is ok


def test_proto2_required_fields() -> None:
    old = 'syntax = "proto2";\npackage ex;\nmessage M { required string a = 1; optional int32 b = 2; }\n'
    assert not check("PROTOBUF", "BACKWARD", [old], 'syntax = "proto2";\npackage ex;\nmessage M { optional int32 b = 2; }\n')
    assert not check("PROTOBUF", "BACKWARD", [old], 'syntax = "proto2";\npackage ex;\nmessage M { required string a = 1; '
                                        'optional int32 b = 2; required int32 c = 3; }\n')


def test_a_schema_of_another_type_is_incompatible() -> None:
    problems = compatibility.check("BACKWARD", formats.parse("JSON", obj({"a": INT})), [formats.parse("AVRO", rec(A))])
    assert problems == ["Incompatible schema type: JSON after AVRO"]


def test_invalid_schemas_raise_42201() -> None:
    for schema_type, text in [("AVRO", '{"type": "record", "name": "R"}'), ("AVRO", '{"type": "nope"}'),
                              ("JSON", '{"type": "object", "properties": 5}'), ("JSON", "[1]"),
                              ("PROTOBUF", "message M { string a = ; }"),
                              ("PROTOBUF", 'syntax = "proto3";\nmessage M { Unknown u = 1; }')]:
        with pytest.raises(RegistryError) as e:
            formats.parse(schema_type, text)
        assert e.value.error_code == 42201, (schema_type, text)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                           lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.sampled_from(["type", "name", "fields", "items", "values", "symbols",
                                                              "properties", "required", "enum", "default", "$ref",
                                                              "additionalProperties", "oneOf", "size", "aliases"]),
                                             children, max_size=5), max_leaves=20)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema_type=st.sampled_from(["AVRO", "JSON"]), a=json_values, b=json_values)
def test_arbitrary_json_is_parsed_or_refused_with_42201_and_never_crashes_the_checker(
        schema_type: str, a: object, b: object) -> None:
    parsed = []
    for doc in (a, b):
        try:
            parsed.append(formats.parse(schema_type, json.dumps(doc)))
        except RegistryError as e:
            assert e.error_code == 42201
    if len(parsed) == 2:
        for level in compatibility.LEVELS:
            assert isinstance(compatibility.check(level, parsed[0], [parsed[1]]), list)


def test_deep_nesting_is_an_invalid_schema_not_a_crash() -> None:
    deep = '{"type":"array","items":' * 5000 + '"int"' + "}" * 5000
    for schema_type in ("AVRO", "JSON"):
        with pytest.raises(RegistryError) as e:
            formats.parse(schema_type, deep)
        assert e.value.error_code == 42201


def test_same_schema_whatever_the_spelling() -> None:
    """Fingerprints decide "same schema" (same id, lookup hit): whitespace, property order and
    {"type": "int"} for "int" do not count; a field's type does."""
    same = ['{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}',
            '{"fields": [{"type": {"type": "int"}, "name": "a"}], "name": "R", "type": "record"}',
            '{\n  "type": "record",\n  "name": "R",\n  "fields": [ {"name": "a", "type": "int"} ]\n}']
    assert len({formats.parse("AVRO", s).fingerprint for s in same}) == 1
    assert formats.parse("AVRO", '"string"').fingerprint == formats.parse("AVRO", '{"type": "string"}').fingerprint
    assert formats.parse("AVRO", same[0]).fingerprint != formats.parse("AVRO", same[0].replace("int", "long")).fingerprint
    assert formats.parse("JSON", '{"type": "object", "title": "T"}').fingerprint == \
        formats.parse("JSON", '{"title": "T", "type": "object"}').fingerprint


def test_json_schema_references() -> None:
    from broker.schema_registry.formats import Dependency, Reference

    def with_address(street_type: str, version: int) -> formats.ParsedSchema:
        addr = formats.parse("JSON", json.dumps({"type": "object", "properties": {"street": {"type": street_type}}}))
        return formats.parse("JSON", json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}}),
                             (Reference("address.json", "address", version),), [Dependency("address.json", addr)])

    assert compatibility.check("BACKWARD", with_address("number", 2), [with_address("integer", 1)]) == []
    assert compatibility.check("BACKWARD", with_address("integer", 2), [with_address("string", 1)])
    # a $ref to a document that is not one of the schema's references is refused
    with pytest.raises(RegistryError) as e:
        formats.parse("JSON", json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}}))
    assert e.value.error_code == 42201
