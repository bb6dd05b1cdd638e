"""Parsing the three schema formats Confluent's registry serves: AVRO, JSON and PROTOBUF.

:func:`parse` turns a schema string and its resolved references into a :class:`ParsedSchema`:
the text to store, a fingerprint that decides "same schema" (for ids and lookups), and the
parsed form the compatibility checks (:mod:`.compatibility`) walk. A schema that does not parse
is an :func:`~.errors.invalid_schema` (42201), never an exception escaping to the HTTP layer.

Libraries: fastavro parses Avro (names resolved across references through its
``named_schemas``); jsonschema checks a JSON Schema against its draft's meta-schema; protobuf's
``descriptor_pool`` checks a file descriptor and its imports. A ``.proto`` text needs a
compiler, which the protobuf package does not have: grpcio-tools ships Google's own protoc as
a library (``grpc_tools.protoc``), so text is compiled by the real protoc (run as a child
process, so its error messages can be captured and a crash cannot take the broker down) into
a ``FileDescriptorSet``. confluent-kafka's Python ProtobufSerializer registers base64
``FileDescriptorProto`` bytes instead of text; both are accepted, and ``format=serialized``
returns the base64 form.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections import OrderedDict
from dataclasses import dataclass, field

import fastavro
import jsonschema
from google.protobuf import (
    any_pb2,
    api_pb2,
    descriptor_pb2,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)
from google.protobuf.descriptor_pb2 import DescriptorProto, FileDescriptorProto, FileDescriptorSet
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import DecodeError

from . import protobuf_text
from .errors import RegistryError, invalid_schema
from .json_types import Json, JsonObject

log = logging.getLogger("samsa.schema_registry")

AVRO, JSON, PROTOBUF = "AVRO", "JSON", "PROTOBUF"
SCHEMA_TYPES = (AVRO, JSON, PROTOBUF)


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> JsonObject:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass
class Dependency:
    """A referenced schema, already resolved: its import name and its own parsed schema."""

    name: str
    schema: ParsedSchema


@dataclass
class ParsedSchema:
    schema_type: str
    text: str  # what is stored and returned
    fingerprint: str  # equal fingerprints (with equal references) = the same schema
    parsed: Json | FileDescriptorProto  # the document (AVRO, JSON) or the compiled file (PROTOBUF)
    references: tuple[Reference, ...] = ()
    dependencies: list[Dependency] = field(default_factory=list)
    named: dict[str, JsonObject] = field(default_factory=dict)  # AVRO: every named type, dependencies included

    @property
    def doc(self) -> Json:
        """An AVRO or JSON schema's document."""
        if isinstance(self.parsed, FileDescriptorProto):
            raise TypeError("a PROTOBUF schema has no JSON document")
        return self.parsed

    @property
    def descriptor(self) -> FileDescriptorProto:
        """A PROTOBUF schema's compiled file."""
        if not isinstance(self.parsed, FileDescriptorProto):
            raise TypeError(f"a {self.schema_type} schema has no file descriptor")
        return self.parsed

    def serialized(self) -> str:
        """``format=serialized``: base64 FileDescriptorProto for PROTOBUF, the text otherwise."""
        if self.schema_type == PROTOBUF:
            return base64.standard_b64encode(self.descriptor.SerializeToString()).decode("ascii")
        return self.text


_CACHE: OrderedDict[tuple[str, str, tuple[Reference, ...], tuple[str, ...], bool], ParsedSchema] = OrderedDict()
_CACHE_SIZE = 1000


def parse(schema_type: str, text: str, references: tuple[Reference, ...] = (),
          dependencies: list[Dependency] | None = None, normalize: bool = False) -> ParsedSchema:
    """Parse ``text`` of ``schema_type``; raises RegistryError 42201 if it is not a valid schema."""
    deps = dependencies or []
    key = (schema_type, text, references, tuple(d.schema.fingerprint for d in deps), normalize)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        return hit
    try:
        if schema_type == AVRO:
            out = _parse_avro(text, deps, normalize)
        elif schema_type == JSON:
            out = _parse_json(text, deps, normalize)
        elif schema_type == PROTOBUF:
            out = _parse_protobuf(text, deps, normalize)
        else:
            raise invalid_schema(f"unknown schema type {schema_type!r}")
    except RecursionError:
        raise invalid_schema(f"{_short(text)}: nested too deeply") from None
    out.references = references
    out.dependencies = deps
    _CACHE[key] = out
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return out


def _compact(doc: Json, sort: bool = False) -> str:
    return json.dumps(doc, separators=(",", ":"), sort_keys=sort, ensure_ascii=False)


# --- Avro -------------------------------------------------------------------------------------


def _parse_avro(text: str, deps: list[Dependency], normalize: bool) -> ParsedSchema:
    try:
        doc = json.loads(text)
    except ValueError:
        # Avro's parser accepts a bare primitive name, as Confluent's does ("string")
        doc = text.strip()
        if not doc or not doc.replace(".", "").replace("_", "").isalnum():
            raise invalid_schema(f"{text[:200]}: not a JSON document") from None
    named: dict[str, JsonObject] = {}
    for d in deps:
        if d.schema.schema_type != AVRO:
            raise invalid_schema(f"reference {d.name} is a {d.schema.schema_type} schema, not AVRO")
        named.update(d.schema.named)
    try:
        parsed = fastavro.parse_schema(doc, named_schemas=named, _write_hint=False)
    except Exception as e:  # fastavro raises SchemaParseException, UnknownType, ValueError, TypeError...
        raise invalid_schema(f"{_short(text)}: {type(e).__name__}: {e}") from None
    _avro_structure(doc)
    stored = _compact(doc)
    # Same schema = the same parsed form: whitespace and the order of JSON properties do not
    # count, names are fully qualified. Field order and defaults do count, as in Avro.
    fingerprint = _compact(_avro_canonical(parsed), sort=True)
    if normalize:
        stored = _compact(parsed)
    return ParsedSchema(AVRO, stored, fingerprint, parsed, named=named)


_AVRO_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))


def _avro_canonical(doc: Json) -> Json:
    """``{"type": "string"}`` is the schema ``"string"`` (Avro's parsing canonical form does the same)."""
    if isinstance(doc, list):
        return [_avro_canonical(d) for d in doc]
    if isinstance(doc, dict):
        if set(doc) == {"type"} and doc["type"] in _AVRO_PRIMITIVES:
            return doc["type"]
        return {k: _avro_canonical(v) if k in ("type", "items", "values", "fields") else v for k, v in doc.items()}
    return doc


def _avro_structure(doc: Json, depth: int = 0) -> None:
    """What Avro's own parser refuses and fastavro lets through: a record without ``fields``."""
    if depth > 200:
        raise invalid_schema("nested deeper than 200 levels")
    if isinstance(doc, list):
        for d in doc:
            _avro_structure(d, depth + 1)
    elif isinstance(doc, dict):
        if doc.get("type") in ("record", "error") and not isinstance(doc.get("fields"), list):
            raise invalid_schema(f"{_short(_compact(doc))}: Record has no fields")
        fields = doc.get("fields")
        for f in fields if isinstance(fields, list) else []:
            if isinstance(f, dict):
                _avro_structure(f.get("type"), depth + 1)
        for k in ("items", "values"):
            if k in doc:
                _avro_structure(doc[k], depth + 1)
        if isinstance(doc.get("type"), (dict, list)):
            _avro_structure(doc["type"], depth + 1)


# --- JSON Schema --------------------------------------------------------------------------------


def _parse_json(text: str, deps: list[Dependency], normalize: bool) -> ParsedSchema:
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise invalid_schema(f"{_short(text)}: not valid JSON: {e}") from None
    if not isinstance(doc, (dict, bool)):
        raise invalid_schema(f"{_short(text)}: a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(doc, default=jsonschema.Draft7Validator).check_schema(doc)
    except jsonschema.exceptions.SchemaError as e:
        raise invalid_schema(f"{_short(text)}: {e.message}") from None
    for d in deps:
        if d.schema.schema_type != JSON:
            raise invalid_schema(f"reference {d.name} is a {d.schema.schema_type} schema, not JSON")
    own_id = doc.get("$id") if isinstance(doc, dict) else None
    for ref in _json_refs(doc):
        base = ref.partition("#")[0]
        if base and base != own_id and not any(d.name == base or d.name.endswith("/" + base)
                                               or base.endswith("/" + d.name) for d in deps):
            raise invalid_schema(f"{_short(text)}: $ref {ref!r} names no reference of this schema")
    stored = _compact(doc, sort=normalize)
    return ParsedSchema(JSON, stored, _compact(doc, sort=True), doc)


def _json_refs(doc: Json) -> list[str]:
    out: list[str] = []
    stack = [doc]
    while stack:
        d = stack.pop()
        if isinstance(d, dict):
            ref = d.get("$ref")
            if isinstance(ref, str):
                out.append(ref)
            stack.extend(d.values())
        elif isinstance(d, list):
            stack.extend(d)
    return out


def json_ref_target(schema: ParsedSchema, ref: str) -> Json:
    """Resolve a ``$ref`` inside ``schema``'s document or one of its references (by name)."""
    base, _, pointer = ref.partition("#")
    doc: Json = schema.doc
    if base:
        for d in schema.dependencies:
            if d.name == base or d.name.endswith("/" + base) or base.endswith("/" + d.name):
                doc = d.schema.parsed
                break
        else:
            return None
    for part in [p for p in pointer.split("/") if p]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        else:
            return None
    return doc


# --- Protobuf -----------------------------------------------------------------------------------


def _parse_protobuf(text: str, deps: list[Dependency], normalize: bool) -> ParsedSchema:
    fdp = _descriptor_from_base64(text)
    for d in deps:
        if d.schema.schema_type != PROTOBUF:
            raise invalid_schema(f"reference {d.name} is a {d.schema.schema_type} schema, not PROTOBUF")
    dep_files = _dependency_files(deps)
    if fdp is None:
        fdp = _compile_proto(text, deps, dep_files)
    pool = DescriptorPool()
    known = {f.name for f in dep_files}
    for wk in _well_known_files():
        if wk.name not in known:
            pool.Add(wk)
    try:
        for f in dep_files:
            pool.Add(f)
        pool.Add(fdp)
        pool.FindFileByName(fdp.name)  # builds it: unresolved types and imports fail here
    except Exception as e:
        raise invalid_schema(f"{_short(text)}: {e}") from None
    if normalize:
        text, fdp = _normalized_protobuf(text, fdp, pool, deps, dep_files)
    clean = FileDescriptorProto()
    clean.CopyFrom(fdp)
    clean.name = ""
    clean.ClearField("source_code_info")
    for msg in clean.message_type:
        _clear_json_names(msg)
    fingerprint = base64.standard_b64encode(clean.SerializeToString(deterministic=True)).decode("ascii")
    return ParsedSchema(PROTOBUF, text, fingerprint, fdp)


def _normalized_protobuf(text: str, fdp: FileDescriptorProto, pool: DescriptorPool, deps: list[Dependency],
                         dep_files: list[FileDescriptorProto]) -> tuple[str, FileDescriptorProto]:
    """``normalize``: the canonical text (:mod:`.protobuf_text`) and its descriptor, once protoc has
    compiled that text back to the same schema; else (something it cannot write) the schema as given."""
    try:
        canonical = protobuf_text.normalized_text(fdp, pool)
        compiled = _compile_proto(canonical, deps, dep_files)
    except (protobuf_text.Unsupported, RegistryError) as e:
        log.info("Schema registry: Protobuf schema kept as given, not normalized: %s", e)
        return text, fdp
    if protobuf_text.semantic_key(compiled) != protobuf_text.semantic_key(fdp):
        log.warning("Schema registry: the normalized text of a Protobuf schema compiles to another schema; "
                    "kept as given:\n%s", canonical)
        return text, fdp
    return canonical, compiled


def _clear_json_names(msg: DescriptorProto) -> None:
    for f in msg.field:
        f.ClearField("json_name")
    for m in msg.nested_type:
        _clear_json_names(m)


def _descriptor_from_base64(text: str) -> FileDescriptorProto | None:
    stripped = text.strip()
    if not stripped or any(c.isspace() for c in stripped) or "{" in stripped:
        return None
    try:
        raw = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        return None
    fdp = FileDescriptorProto()
    try:
        fdp.ParseFromString(raw)
    except DecodeError:
        return None
    if not fdp.name and not fdp.message_type and not fdp.enum_type:
        return None
    if not fdp.name:
        fdp.name = "schema.proto"
    return fdp


def _dependency_files(deps: list[Dependency]) -> list[FileDescriptorProto]:
    """Every referenced file (transitively), each named as the import names it."""
    out: list[FileDescriptorProto] = []
    seen: set[str] = set()

    def walk(ds: list[Dependency]) -> None:
        for d in ds:
            walk(d.schema.dependencies)
            if d.name in seen:
                continue
            seen.add(d.name)
            f = FileDescriptorProto()
            f.CopyFrom(d.schema.parsed)
            f.name = d.name
            out.append(f)

    walk(deps)
    return out


_WELL_KNOWN: list[FileDescriptorProto] = []


def _well_known_files() -> list[FileDescriptorProto]:
    if not _WELL_KNOWN:
        for mod in (any_pb2, source_context_pb2, type_pb2, api_pb2, descriptor_pb2, duration_pb2, empty_pb2,
                    field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2):
            f = FileDescriptorProto()
            mod.DESCRIPTOR.CopyToProto(f)
            _WELL_KNOWN.append(f)
    return _WELL_KNOWN


def _compile_proto(text: str, deps: list[Dependency], dep_files: list[FileDescriptorProto]) -> FileDescriptorProto:
    """``.proto`` text -> FileDescriptorProto, by protoc (grpcio-tools) in a child process."""
    try:
        # noqa below: grpcio-tools is needed only to compile .proto text (for its protoc and bundled includes);
        # without it the registry still serves Avro, JSON Schema and base64 FileDescriptorProto schemas
        import grpc_tools  # noqa: PLC0415
    except ImportError:
        raise invalid_schema("cannot parse .proto text: the grpcio-tools package (protoc) is not installed; "
                             "register the base64 FileDescriptorProto instead") from None
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="samsa-proto-") as tmp:
        main = "samsa_schema_registry_input.proto"
        with open(os.path.join(tmp, main), "w", encoding="utf-8") as fh:
            fh.write(text)
        args = [sys.executable, "-m", "grpc_tools.protoc", f"-I{tmp}", f"-I{include}",
                f"--descriptor_set_out={os.path.join(tmp, 'out.pb')}", "--include_imports"]
        if dep_files:
            dset = FileDescriptorSet()
            wk = {f.name for f in dep_files}
            dset.file.extend(f for f in _well_known_files() if f.name not in wk)
            dset.file.extend(dep_files)
            with open(os.path.join(tmp, "deps.pb"), "wb") as fh:
                fh.write(dset.SerializeToString())
            args.append(f"--descriptor_set_in={os.path.join(tmp, 'deps.pb')}")
        args.append(main)
        try:
            proc = subprocess.run(args, cwd=tmp, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise invalid_schema(f"protoc did not run: {e}") from None
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines()
                     if ln.strip() and not ln.startswith(("WARNING:", "W0000", "I0000"))]
            msg = "; ".join(lines).replace(tmp + "/", "").replace(main + ":", "line ")
            raise invalid_schema(f"{_short(text)}: {msg[:500]}")
        out = FileDescriptorSet()
        with open(os.path.join(tmp, "out.pb"), "rb") as fh:
            out.ParseFromString(fh.read())
    for f in out.file:
        if f.name == main:
            f.name = "schema.proto"
            return f
    raise invalid_schema(f"{_short(text)}: protoc produced no descriptor")


def _short(text: str) -> str:
    return text if len(text) <= 200 else text[:200] + "..."
