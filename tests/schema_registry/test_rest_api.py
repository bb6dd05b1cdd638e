"""The Schema Registry REST API against a real broker, through confluent-kafka's SchemaRegistryClient
and raw HTTP (for the status codes, Confluent's error bodies and content types the client hides).

One broker serves the whole module; each test uses its own subjects.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError
from google.protobuf import descriptor_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.brokers import BrokerProcess
from tests.support.net import free_port
from tests.support.schema_registry import V1, RegistryHttp, start_registry_broker


def avro(fields: list[dict[str, object]], name: str = "Rec") -> str:
    return json.dumps({"type": "record", "name": name, "fields": fields})


CONSOLE_PORT = free_port()
V1_SCHEMA = avro([{"name": "a", "type": "int"}])
V2_SCHEMA = avro([{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "x"}])
V2_NO_DEFAULT = avro([{"name": "a", "type": "int"}, {"name": "b", "type": "string"}])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, RegistryHttp]]:
    b, reg = start_registry_broker(Path(tmp_path_factory.mktemp("sr-api")),
                                   {"console.listener": f"http://127.0.0.1:{CONSOLE_PORT}",
                                    "schema.registry.max.request.bytes": 4 << 20})
    try:
        yield b, reg
    finally:
        b.kill()


@pytest.fixture(scope="module")
def http(registry: tuple[BrokerProcess, RegistryHttp]) -> RegistryHttp:
    return registry[1]


@pytest.fixture(scope="module")
def client(http: RegistryHttp) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": http.url})


def _err(exc: pytest.ExceptionInfo[SchemaRegistryError]) -> tuple[int, int]:
    return exc.value.http_status_code, exc.value.error_code


def test_register_get_lookup_with_the_confluent_client(client: SchemaRegistryClient, http: RegistryHttp) -> None:
    sid = client.register_schema("api-a-value", Schema(V1_SCHEMA, "AVRO"))
    assert sid >= 1
    # the same schema again: same id, no new version; whitespace does not make it another schema
    spaced = json.dumps(json.loads(V1_SCHEMA), indent=2)
    assert client.register_schema("api-a-value", Schema(spaced, "AVRO")) == sid
    assert client.get_versions("api-a-value") == [1]
    got = client.get_schema(sid)
    assert json.loads(got.schema_str) == json.loads(V1_SCHEMA) and got.schema_type == "AVRO"
    sid2 = client.register_schema("api-a-value", Schema(V2_SCHEMA, "AVRO"))
    assert sid2 != sid
    latest = client.get_latest_version("api-a-value")
    assert (latest.version, latest.schema_id) == (2, sid2)
    found = client.lookup_schema("api-a-value", Schema(V1_SCHEMA, "AVRO"))
    assert (found.version, found.schema_id) == (1, sid)
    # the same schema under another subject keeps its id (ids are per schema, not per subject)
    assert client.register_schema("api-a-other", Schema(V1_SCHEMA, "AVRO")) == sid
    assert sorted(client.get_subjects()) >= ["api-a-other", "api-a-value"]
    status, doc = http.get(f"/schemas/ids/{sid}/versions")
    assert status == 200 and {"subject": "api-a-other", "version": 1} in doc and \
        {"subject": "api-a-value", "version": 1} in doc
    assert sorted(http.get(f"/schemas/ids/{sid}/subjects")[1]) == ["api-a-other", "api-a-value"]
    status, text, headers = http.request("GET", f"/schemas/ids/{sid}/schema")
    assert status == 200 and text == json.loads(V1_SCHEMA)


def test_compatibility_is_enforced_and_checked(client: SchemaRegistryClient, http: RegistryHttp) -> None:
    client.register_schema("api-c-value", Schema(V1_SCHEMA, "AVRO"))
    # BACKWARD (the default): a new field without a default cannot read old data
    assert client.test_compatibility("api-c-value", Schema(V2_NO_DEFAULT, "AVRO")) is False
    assert client.test_compatibility("api-c-value", Schema(V2_SCHEMA, "AVRO")) is True
    with pytest.raises(SchemaRegistryError) as e:
        client.register_schema("api-c-value", Schema(V2_NO_DEFAULT, "AVRO"))
    assert _err(e) == (409, 40901)
    assert "incompatible with an earlier schema" in e.value.error_message
    status, doc = http.post("/compatibility/subjects/api-c-value/versions/latest?verbose=true",
                            {"schema": V2_NO_DEFAULT})
    assert status == 200 and doc["is_compatible"] is False and doc["messages"]
    # per-subject NONE lets it through; the global level is untouched
    assert client.set_compatibility("api-c-value", "NONE") == {"compatibility": "NONE"}
    assert client.register_schema("api-c-value", Schema(V2_NO_DEFAULT, "AVRO")) >= 1
    assert http.get("/config/api-c-value")[1] == {"compatibilityLevel": "NONE"}
    assert http.get("/config")[1] == {"compatibilityLevel": "BACKWARD"}
    status, doc = http.get("/config/api-never-configured")
    assert (status, doc["error_code"]) == (404, 40408)
    assert http.get("/config/api-never-configured?defaultToGlobal=true")[1] == {"compatibilityLevel": "BACKWARD"}
    assert http.delete("/config/api-c-value") == (200, {"compatibilityLevel": "NONE"})
    status, doc = http.put("/config/api-c-value", {"compatibility": "SIDEWAYS"})
    assert (status, doc["error_code"]) == (422, 42203)


def test_soft_and_permanent_deletes(client: SchemaRegistryClient, http: RegistryHttp) -> None:
    subject = "api-d-value"
    client.register_schema(subject, Schema(V1_SCHEMA, "AVRO"))
    client.register_schema(subject, Schema(V2_SCHEMA, "AVRO"))
    # a version must be soft deleted before it can be deleted permanently
    status, doc = http.delete(f"/subjects/{subject}/versions/1?permanent=true")
    assert (status, doc["error_code"]) == (404, 40407)
    assert http.delete(f"/subjects/{subject}/versions/1") == (200, 1)
    status, doc = http.delete(f"/subjects/{subject}/versions/1")
    assert (status, doc["error_code"]) == (404, 40406)
    assert http.get(f"/subjects/{subject}/versions")[1] == [2]
    assert http.get(f"/subjects/{subject}/versions?deleted=true")[1] == [1, 2]
    assert http.get(f"/subjects/{subject}/versions/1?deleted=true")[0] == 200
    assert http.get(f"/subjects/{subject}/versions/1")[1]["error_code"] == 40402
    # the subject: permanent first is refused, soft delete lists what it deleted
    status, doc = http.delete(f"/subjects/{subject}?permanent=true")
    assert (status, doc["error_code"]) == (404, 40405)
    assert http.delete(f"/subjects/{subject}") == (200, [2])
    status, doc = http.delete(f"/subjects/{subject}")
    assert (status, doc["error_code"]) == (404, 40404)
    assert subject not in http.get("/subjects")[1]
    assert subject in http.get("/subjects?deleted=true")[1]
    assert http.get(f"/subjects/{subject}/versions")[1]["error_code"] == 40401
    assert http.delete(f"/subjects/{subject}?permanent=true") == (200, [1, 2])
    assert subject not in http.get("/subjects?deleted=true")[1]
    # a re-registration after a permanent delete starts at version 1 again
    assert http.post(f"/subjects/{subject}/versions", {"schema": V1_SCHEMA})[0] == 200
    assert http.get(f"/subjects/{subject}/versions")[1] == [1]


def test_references_and_referencedby(client: SchemaRegistryClient, http: RegistryHttp) -> None:
    addr = json.dumps({"type": "record", "name": "Address", "namespace": "ex",
                       "fields": [{"name": "street", "type": "string"}]})
    client.register_schema("api-r-address", Schema(addr, "AVRO"))
    person = json.dumps({"type": "record", "name": "Person", "namespace": "ex",
                         "fields": [{"name": "home", "type": "ex.Address"}]})
    ref = SchemaReference("ex.Address", "api-r-address", 1)
    sid = client.register_schema("api-r-person", Schema(person, "AVRO", [ref]))
    doc = http.get(f"/schemas/ids/{sid}")[1]
    assert doc["references"] == [{"name": "ex.Address", "subject": "api-r-address", "version": 1}]
    assert http.get("/subjects/api-r-address/versions/1/referencedby")[1] == [sid]
    # a referenced version cannot be deleted
    status, doc = http.delete("/subjects/api-r-address/versions/1")
    assert (status, doc["error_code"]) == (422, 42206)
    # an unknown reference, and a type no reference defines, are invalid schemas
    status, doc = http.post("/subjects/api-r-bad/versions",
                            {"schema": person, "references": [{"name": "ex.Address", "subject": "nope",
                                                               "version": 1}]})
    assert (status, doc["error_code"]) == (422, 42201)
    status, doc = http.post("/subjects/api-r-bad/versions", {"schema": person})
    assert (status, doc["error_code"]) == (422, 42201)


def test_modes(http: RegistryHttp) -> None:
    assert http.get("/mode")[1] == {"mode": "READWRITE"}
    assert http.post("/subjects/api-m-value/versions", {"schema": V1_SCHEMA})[0] == 200
    assert http.put("/mode/api-m-value", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, doc = http.post("/subjects/api-m-value/versions", {"schema": V2_SCHEMA})
    assert (status, doc["error_code"]) == (422, 42205)
    assert http.delete("/mode/api-m-value") == (200, {"mode": "READONLY"})
    assert http.post("/subjects/api-m-value/versions", {"schema": V2_SCHEMA})[0] == 200
    status, doc = http.put("/mode/api-m-value", {"mode": "SOMETIMES"})
    assert (status, doc["error_code"]) == (422, 42204)
    # IMPORT: only for an empty subject (unless forced); then explicit ids and versions are kept
    status, doc = http.put("/mode/api-m-value", {"mode": "IMPORT"})
    assert (status, doc["error_code"]) == (422, 42205)
    assert http.put("/mode/api-m-import", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    status, doc = http.post("/subjects/api-m-import/versions", {"schema": V1_SCHEMA, "id": 9000, "version": 7})
    assert status == 200 and (doc["id"], doc["version"]) == (9000, 7)
    assert http.get("/subjects/api-m-import/versions")[1] == [7]
    assert http.get("/schemas/ids/9000")[0] == 200
    http.delete("/mode/api-m-import")


def test_lookup_and_not_found_codes(http: RegistryHttp) -> None:
    http.post("/subjects/api-l-value/versions", {"schema": V1_SCHEMA})
    status, doc = http.post("/subjects/api-l-value", {"schema": V1_SCHEMA})
    assert status == 200 and doc["subject"] == "api-l-value" and doc["version"] == 1
    status, doc = http.post("/subjects/api-l-value", {"schema": V2_SCHEMA})
    assert (status, doc["error_code"]) == (404, 40403)
    status, doc = http.post("/subjects/api-l-none", {"schema": V1_SCHEMA})
    assert (status, doc["error_code"]) == (404, 40401)
    assert http.get("/subjects/api-l-none/versions/1")[1]["error_code"] == 40401
    assert http.get("/subjects/api-l-value/versions/9")[1]["error_code"] == 40402
    status, doc = http.get("/subjects/api-l-value/versions/0")
    assert (status, doc["error_code"]) == (422, 42202)
    assert http.get("/subjects/api-l-value/versions/abc")[1]["error_code"] == 42202
    assert http.get("/schemas/ids/987654")[1] == {"error_code": 40403, "message": "Schema 987654 not found"}
    assert http.get("/schemas/types")[1] == ["JSON", "PROTOBUF", "AVRO"]


def test_bad_input_gets_confluent_codes_never_500(http: RegistryHttp) -> None:
    bad = [
        ({"schema": "{\"type\": \"record\", \"name\": \"X\", \"fields\": [{\"name\": \"a\", \"type\": \"intx\"}]}"},
         422, 42201),
        ({"schema": "not json at all {"}, 422, 42201),
        ({"schema": "{\"type\": 5}", "schemaType": "JSON"}, 422, 42201),
        ({"schema": "message {", "schemaType": "PROTOBUF"}, 422, 42201),
        ({"schema": ""}, 422, 42201),
        ({"schema": V1_SCHEMA, "schemaType": "XML"}, 422, 422),
    ]
    status, doc = http.post("/subjects/bad%01subject/versions", {"schema": V1_SCHEMA})
    assert (status, doc["error_code"]) == (422, 42208)
    for body, status, code in bad:
        got_status, doc = http.post("/subjects/api-bad-value/versions", body)
        assert (got_status, doc["error_code"]) == (status, code), body
        assert isinstance(doc["message"], str) and doc["message"]
    status, doc, _ = http.request("POST", "/subjects/api-bad-value/versions", raw=b"{not json")
    assert (status, doc["error_code"]) == (400, 400)
    status, doc, _ = http.request("POST", "/subjects/api-bad-value/versions", raw=b"[1, 2]")
    assert (status, doc["error_code"]) == (422, 422)
    status, doc, _ = http.request("POST", "/subjects/api-bad-value/versions", raw=b"[" * 200000 + b"]" * 200000)
    assert (status, doc["error_code"]) == (400, 400)
    deep = '{"type":"array","items":' * 5000 + '"int"' + "}" * 5000
    status, doc = http.post("/subjects/api-bad-value/versions", {"schema": deep})
    assert (status, doc["error_code"]) == (422, 42201)
    for body in ({"schema": 5}, {"schema": V1_SCHEMA, "references": "x"}, {"schema": V1_SCHEMA, "references": [{}]},
                 {"schema": V1_SCHEMA, "schemaType": 5}, {"schema": V1_SCHEMA, "id": "abc"}):
        status, doc = http.post("/subjects/api-bad-value/versions", body)
        assert 400 <= status < 500 and isinstance(doc["error_code"], int), body
    # wrong content type, unknown path, wrong method
    status, doc, _ = http.request("POST", "/subjects/api-bad-value/versions", raw=json.dumps(
        {"schema": V1_SCHEMA}).encode(), headers={"Content-Type": "text/plain"})
    assert (status, doc["error_code"]) == (415, 415)
    assert http.get("/no/such/path")[1]["error_code"] == 404
    status, doc, _ = http.request("PATCH", "/subjects")
    assert (status, doc["error_code"]) == (405, 405)
    status, doc, _ = http.request("GET", "/subjects", headers={"Accept": "text/html"})
    assert (status, doc["error_code"]) == (406, 406)
    # oversized: refused before the body is read, and the registry keeps serving
    status, doc, _ = http.request("POST", "/subjects/api-bad-value/versions",
                                  raw=b"{\"schema\": \"" + b"x" * (5 << 20) + b"\"}")
    assert (status, doc["error_code"]) == (413, 413)
    # under the body limit but larger than a _schemas record may be: Confluent's 42209
    big = json.dumps({"type": "object", "description": "d" * (2 << 20)})
    status, doc = http.post("/subjects/api-bad-value/versions", {"schema": big, "schemaType": "JSON"})
    assert (status, doc["error_code"]) == (422, 42209)
    assert http.get("/subjects")[0] == 200
    assert "api-bad-value" not in http.get("/subjects?deleted=true")[1]


def _raw_answers(port: int, data: bytes) -> list[tuple[int, bytes, bytes]]:
    """Send ``data`` on one connection, read until the registry closes it: (status, head, body) of
    each answer (the registry always says Content-Length)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    answers = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        length = int(next(v for k, _, v in (h.partition(b": ") for h in head.split(b"\r\n")[1:])
                          if k.lower() == b"content-length"))
        answers.append((int(head.split(b" ")[1]), head, rest[:length]))
        out = rest[length:]
    return answers


def test_bad_http_gets_confluent_bodies_and_good_http_keeps_the_connection(
        registry: tuple[BrokerProcess, RegistryHttp]) -> None:
    b, http = registry
    for request, status in [(b"NONSENSE\r\n\r\n", 400),
                            (b"GET /subjects HTTP/2.0\r\nHost: x\r\n\r\n", 400),
                            (b"GET /subjects HTTP/1.1\r\n\r\n", 400),  # RFC 9112: HTTP/1.1 needs Host
                            (b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
                            (b"GET /subjects HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 3000 + b"\r\n", 431),
                            (b"GET /subjects/%ff HTTP/1.1\r\nHost: x\r\n\r\n", 400)]:
        [(got, head, body)] = _raw_answers(http.port, request)
        assert got == status and json.loads(body)["error_code"] == status, (request[:40], head, body)
        assert b"\r\nContent-Type: " + V1.encode() in head and b"\r\nConnection: close" in head
    # keep-alive and pipelining: three requests in one write, a chunked body among them, answered
    # in order on one connection, which the last one closes
    schema = json.dumps({"schema": V1_SCHEMA}).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(schema), schema)
    answers = _raw_answers(http.port, b"GET /subjects HTTP/1.1\r\nHost: x\r\n\r\n"
                           b"POST /subjects/api-pipelined-value/versions HTTP/1.1\r\nHost: x\r\n"
                           b"Content-Type: " + V1.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked +
                           b"GET /subjects HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert [a[0] for a in answers] == [200, 200, 200]
    assert "id" in json.loads(answers[1][2]) and "api-pipelined-value" in json.loads(answers[2][2])
    assert http.get("/subjects")[0] == 200
    assert "Traceback" not in b.log_text()


def test_content_types(http: RegistryHttp) -> None:
    status, _, headers = http.request("GET", "/subjects")
    assert status == 200 and headers["content-type"] == V1
    status, _, headers = http.request("GET", "/subjects", headers={"Accept": "application/json"})
    assert status == 200 and headers["content-type"] == "application/json"
    for ctype in (V1, "application/vnd.schemaregistry+json", "application/json", "application/octet-stream"):
        status, doc, _ = http.request("POST", "/subjects/api-ct-value/versions",
                                      raw=json.dumps({"schema": V1_SCHEMA}).encode(),
                                      headers={"Content-Type": ctype})
        assert status == 200 and "id" in doc, ctype


def test_json_and_protobuf_schemas(client: SchemaRegistryClient, http: RegistryHttp) -> None:
    js = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}})
    sid = client.register_schema("api-j-value", Schema(js, "JSON"))
    assert http.get(f"/schemas/ids/{sid}")[1]["schemaType"] == "JSON"
    narrowed = json.dumps({"type": "object", "properties": {"a": {"type": "integer", "maximum": 5}}})
    assert client.test_compatibility("api-j-value", Schema(narrowed, "JSON")) is False
    proto = 'syntax = "proto3";\npackage ex;\nmessage M { string a = 1; int32 b = 2; }\n'
    pid = client.register_schema("api-p-value", Schema(proto, "PROTOBUF"))
    doc = http.get(f"/schemas/ids/{pid}")[1]
    assert doc["schemaType"] == "PROTOBUF" and doc["schema"] == proto
    # format=serialized is the base64 FileDescriptorProto the Python deserializer asks for
    serialized = http.get(f"/schemas/ids/{pid}?format=serialized")[1]["schema"]
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert fdp.package == "ex" and [f.name for f in fdp.message_type[0].field] == ["a", "b"]
    # the same schema registered as that descriptor is the same schema
    assert client.register_schema("api-p-value", Schema(serialized, "PROTOBUF")) == pid
    retyped = 'syntax = "proto3";\npackage ex;\nmessage M { string a = 1; double b = 2; }\n'
    assert client.test_compatibility("api-p-value", Schema(retyped, "PROTOBUF")) is False


def test_metrics_on_the_registry_port(http: RegistryHttp) -> None:
    http.post("/subjects/api-metrics-value/versions", {"schema": V1_SCHEMA})
    status, text, headers = http.request("GET", "/metrics", headers={"Accept": "application/openmetrics-text"})
    assert status == 200 and headers["content-type"].startswith("text/plain")
    lines = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    subjects = http.get("/subjects")[1]
    assert float(lines["kafka_schema_registry_subjects"]) == len(subjects)
    assert float(lines["kafka_schema_registry_master_slave_role"]) == 1.0
    assert float(lines['kafka_schema_registry_schemas{schema_type="AVRO"}']) >= 1
    assert float(lines["kafka_schema_registry_registrations_total"]) >= 1
    assert float(lines['kafka_schema_registry_requests_total{method="POST",status="200"}']) >= 1


def test_console_schemas_page(http: RegistryHttp) -> None:
    import urllib.request

    http.post("/subjects/api-console-value/versions", {"schema": V2_SCHEMA})

    def get(path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{CONSOLE_PORT}{path}", timeout=60) as r:
            return r.read().decode()

    doc = json.loads(get("/api/schemas"))
    assert doc["url"] == http.url and doc["compatibility"] == "BACKWARD"
    row = next(s for s in doc["subjects"] if s["subject"] == "api-console-value")
    latest = http.get("/subjects/api-console-value/versions/latest")[1]
    assert (row["id"], row["latest_version"], row["schema_type"]) == (latest["id"], latest["version"], "AVRO")
    page = get("/schemas")
    assert 'href="/schemas/api-console-value"' in page and ">Schemas<" in page
    subject_page = get("/schemas/api-console-value")
    assert f"id {latest['id']}" in subject_page and "&quot;default&quot;: &quot;x&quot;" in subject_page


def test_concurrent_registrations_give_one_id_per_schema(http: RegistryHttp) -> None:
    """8 clients at once register 10 distinct schemas, each under 4 subjects: every schema gets
    exactly one id, distinct schemas distinct ids, and every subject exactly one version."""
    import threading

    schemas = [avro([{"name": f"c{i}", "type": "int"}], name=f"Conc{i}") for i in range(10)]
    jobs = [(f"api-conc-{j}-{i}", schemas[i]) for i in range(10) for j in range(4)]
    results: list[tuple[str, int, int]] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        for subject, schema in jobs[k::8]:
            status, doc = http.post(f"/subjects/{subject}/versions", {"schema": schema})
            assert status == 200, doc
            with lock:
                results.append((subject, schemas.index(schema), doc["id"]))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == len(jobs)
    ids_by_schema = {}
    for _subject, i, sid in results:
        ids_by_schema.setdefault(i, set()).add(sid)
    assert all(len(v) == 1 for v in ids_by_schema.values()), ids_by_schema
    assert len({next(iter(v)) for v in ids_by_schema.values()}) == 10
    for subject, _i, _sid in results:
        assert http.get(f"/subjects/{subject}/versions")[1] == [1]


_SEGMENTS = ["subjects", "schemas", "ids", "versions", "config", "mode", "compatibility", "types", "schema",
             "referencedby", "latest", "-1", "0", "1", "2", "99999999999", "abc", "fz-a-value", "%2F", "%00", "%ff",
             "x" * 300, ""]
_VALUES = st.none() | st.booleans() | st.integers(-3, 10**12) | st.text(max_size=30) | st.sampled_from(
    [V1_SCHEMA, V2_SCHEMA, "{", "[]", '"string"', "AVRO", "JSON", "PROTOBUF", "BACKWARD", "IMPORT", "READONLY"])
_BODIES = st.dictionaries(st.sampled_from(["schema", "schemaType", "references", "version", "id", "compatibility",
                                           "mode", "normalize"]),
                          _VALUES | st.lists(st.dictionaries(st.sampled_from(["name", "subject", "version"]), _VALUES,
                                                             max_size=3), max_size=2), max_size=5)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH"]),
       segments=st.lists(st.sampled_from(_SEGMENTS), max_size=5),
       query=st.sampled_from(["", "?deleted=true", "?permanent=true", "?normalize=true", "?format=serialized",
                              "?defaultToGlobal=true&verbose=x", "?force=true", "?deleted=%zz"]),
       body=st.one_of(st.none(), _BODIES.map(lambda d: json.dumps(d).encode()),
                      st.binary(max_size=64)),
       ctype=st.sampled_from([V1, "application/json", "text/plain", "", "application/octet-stream"]))
def test_fuzzed_requests_never_get_a_500(http: RegistryHttp, method: str, segments: list[str], query: str,
                                         body: bytes | None, ctype: str) -> None:
    """Runs last in this module: it may register, delete and reconfigure at random."""
    path = "/" + "/".join(segments) + query
    headers = {"Content-Type": ctype} if ctype else {}
    status, doc, _ = http.request(method, path, raw=body if method in ("POST", "PUT") else None, headers=headers)
    assert status < 500, (method, path, body, doc)
    if status >= 400 and method != "HEAD":
        assert isinstance(doc, dict) and isinstance(doc.get("error_code"), int) and doc.get("message"), doc
