"""Compatibility levels and the per-format rules Confluent's registry applies.

A level names which earlier versions a new schema is checked against and in which direction:

* BACKWARD: the new schema (reader) reads data written with the latest version;
* FORWARD: the latest version (reader) reads data written with the new schema;
* FULL: both; the ``_TRANSITIVE`` variants check every live version, not just the latest;
* NONE: no check.

:func:`can_read` answers "can a reader with schema R read what schema W wrote?" as a list
of problems (empty = yes), per format:

* AVRO: Avro's schema resolution (the rules Avro's ``SchemaCompatibility`` implements): same
  named type (or an alias), numeric promotions int->long->float->double, string<->bytes,
  unions branch by branch, reader fields missing from the writer need a default, writer enum
  symbols must exist in the reader (unless the reader has a default).
* JSON: the reader must accept every document the writer accepts, in Confluent's terms:
  no narrowed ``type``, no property added to an open content model, no new ``required``,
  no tighter bounds (maximum, minLength, maxItems ...), no smaller ``enum``, no closed
  ``additionalProperties`` where the writer was open.
* PROTOBUF: wire compatibility by field number, as Confluent checks it: a message that
  disappears, a field whose kind changes outside its wire-compatible group (int32/uint32/
  int64/uint64/bool; sint32/sint64; fixed32/sfixed32; fixed64/sfixed64; string/bytes), a
  message field whose type name changes, a field moved into a oneof, a changed package, or a
  required field added or removed (proto2) is incompatible; adding or removing optional
  fields, renaming, and enum values added or removed are compatible.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf.descriptor_pb2 import DescriptorProto, FieldDescriptorProto, FileDescriptorProto

from .formats import AVRO, JSON, PROTOBUF, ParsedSchema, json_ref_target
from .json_types import Json, JsonObject

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def check(level: str, new: ParsedSchema, previous: list[ParsedSchema]) -> list[str]:
    """Problems with registering ``new`` after ``previous`` (oldest first) under ``level``."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for old in reversed(against):
        if old.schema_type != new.schema_type:
            problems.append(f"Incompatible schema type: {new.schema_type} after {old.schema_type}")
            continue
        try:
            if base in ("BACKWARD", "FULL"):
                problems += can_read(new, old)
            if base in ("FORWARD", "FULL"):
                problems += can_read(old, new)
        except RecursionError:
            problems.append("the schemas are nested too deeply to compare")
        if problems:
            break
    return problems


def can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    if reader.schema_type == AVRO:
        return _Avro(reader.named, writer.named).check(reader.doc, writer.doc, "/")
    if reader.schema_type == JSON:
        return _Json(reader, writer).check(reader.doc, writer.doc, "#")
    if reader.schema_type == PROTOBUF:
        return _protobuf(reader.descriptor, writer.descriptor)
    return [f"unknown schema type {reader.schema_type}"]


# --- Avro ---------------------------------------------------------------------------------------

_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
               ("float", "double"), ("string", "bytes"), ("bytes", "string")}


class _Avro:
    def __init__(self, reader_names: dict[str, JsonObject], writer_names: dict[str, JsonObject]) -> None:
        self.rn, self.wn = reader_names, writer_names
        self.seen: set[tuple[str, str]] = set()

    def _resolve(self, s: Json, names: dict[str, JsonObject]) -> Json:
        if isinstance(s, str) and s in names:
            return names[s]
        t = s.get("type") if isinstance(s, dict) else None
        if isinstance(t, (dict, list)):
            return t if isinstance(t, list) else self._resolve(t, names)
        if isinstance(t, str) and t in names:
            return names[t]
        return s

    @staticmethod
    def _kind(s: Json) -> str:
        if isinstance(s, list):
            return "union"
        if isinstance(s, dict):
            return str(s.get("type"))
        return str(s)

    def check(self, r: Json, w: Json, path: str) -> list[str]:
        r, w = self._resolve(r, self.rn), self._resolve(w, self.wn)
        rk, wk = self._kind(r), self._kind(w)
        if isinstance(w, list):
            out: list[str] = []
            for i, branch in enumerate(w):
                out += self.check(r, branch, f"{path}{i}/")
            return out
        if isinstance(r, list):
            for branch in r:
                if not self.check(branch, w, path):
                    return []
            return [f"READER_UNION_MISSING_WRITER_TYPE at {path}: reader union lacks the writer's {wk}"]
        if rk != wk:
            if (wk, rk) in _PROMOTIONS:
                return []
            return [f"TYPE_MISMATCH at {path}: reader type {rk} not compatible with writer type {wk}"]
        if not isinstance(r, dict) or not isinstance(w, dict):
            return []  # primitives of the same kind
        if rk in ("record", "enum", "fixed"):
            rname, wname = str(r.get("name")), str(w.get("name"))
            aliases = r.get("aliases")
            if not _same_name(rname, wname, [str(a) for a in aliases] if isinstance(aliases, list) else []):
                return [f"NAME_MISMATCH at {path}: expected {wname}, found {rname}"]
        if rk == "record":
            key = (str(r.get("name")), str(w.get("name")))
            if key in self.seen:
                return []
            self.seen.add(key)
            out = []
            wfields = {str(f.get("name")): f for f in _objects(w.get("fields"))}
            for f in _objects(r.get("fields")):
                aliases = f.get("aliases")
                names = [str(f.get("name")), *([str(a) for a in aliases] if isinstance(aliases, list) else [])]
                wf = next((wfields[n] for n in names if n in wfields), None)
                if wf is None:
                    if "default" not in f:
                        out.append(f"READER_FIELD_MISSING_DEFAULT_VALUE at {path}fields/{f.get('name')}: "
                                   f"{f.get('name')} has no default value")
                else:
                    out += self.check(f.get("type"), wf.get("type"), f"{path}fields/{f.get('name')}/")
            return out
        if rk == "enum":
            rsymbols, wsymbols = r.get("symbols"), w.get("symbols")
            missing = [s for s in (wsymbols if isinstance(wsymbols, list) else [])
                       if not isinstance(rsymbols, list) or s not in rsymbols]
            if missing and "default" not in r:
                return [f"MISSING_ENUM_SYMBOLS at {path}symbols: {missing}"]
            return []
        if rk == "fixed":
            if r.get("size") != w.get("size"):
                return [f"FIXED_SIZE_MISMATCH at {path}size: expected {w.get('size')}, found {r.get('size')}"]
            return []
        if rk == "array":
            return self.check(r.get("items"), w.get("items"), path + "items/")
        if rk == "map":
            return self.check(r.get("values"), w.get("values"), path + "values/")
        return []


def _same_name(reader: str, writer: str, aliases: list[str]) -> bool:
    def short(n: str) -> str:
        return n.rsplit(".", 1)[-1]

    return reader == writer or short(reader) == short(writer) or writer in aliases or \
        short(writer) in [short(a) for a in aliases]


# --- JSON Schema --------------------------------------------------------------------------------

_NUMERIC_MAX = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_NUMERIC_MIN = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")


def _objects(v: Json) -> list[JsonObject]:
    """The objects of a JSON list (an Avro record's fields): anything else is skipped."""
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _types(s: Json) -> set[str] | None:
    if s is True or s == {}:
        return None  # anything
    if s is False:
        return set()
    if not isinstance(s, dict):
        return None
    t = s.get("type")
    if t is None:
        if "properties" in s or "additionalProperties" in s or "required" in s:
            return None
        return None
    ts = {str(x) for x in t} if isinstance(t, list) else {str(t)}
    if "number" in ts:
        ts.add("integer")
    return ts


class _Json:
    def __init__(self, reader: ParsedSchema, writer: ParsedSchema) -> None:
        self.reader, self.writer = reader, writer
        self.seen: set[tuple[int, int]] = set()

    def _deref(self, s: Json, schema: ParsedSchema) -> Json:
        for _ in range(32):
            ref = s.get("$ref") if isinstance(s, dict) else None
            if isinstance(ref, str):
                target = json_ref_target(schema, ref)
                if target is None:
                    return s
                s = target
            else:
                break
        return s

    def check(self, r: Json, w: Json, path: str) -> list[str]:
        r, w = self._deref(r, self.reader), self._deref(w, self.writer)
        key = (id(r), id(w))
        if key in self.seen:
            return []
        self.seen.add(key)
        if r is True or r == {}:
            return []
        if w is False:
            return []
        if r is False:
            return [f"SCHEMA_NARROWED at {path}: reader accepts nothing"]
        if not isinstance(r, dict) or not isinstance(w, dict):
            return []
        out: list[str] = []
        for comb in ("oneOf", "anyOf"):
            branches = w.get(comb)
            if isinstance(branches, list):
                for i, branch in enumerate(branches):
                    rest = {k: v for k, v in w.items() if k != comb}
                    merged: Json = {**rest, **branch} if isinstance(branch, dict) else branch
                    out += self.check(r, merged, f"{path}/{comb}/{i}")
                return out
        for comb in ("oneOf", "anyOf"):
            branches = r.get(comb)
            if isinstance(branches, list):
                rest = {k: v for k, v in r.items() if k != comb}
                for branch in branches:
                    merged = {**rest, **branch} if isinstance(branch, dict) else branch
                    if not self.check(merged, w, path):
                        return []
                return [f"COMBINED_TYPE_SUBSCHEMAS_CHANGED at {path}/{comb}: no branch accepts the writer's schema"]
        rt, wt = _types(r), _types(w)
        if rt is not None:
            if wt is None:
                out.append(f"TYPE_NARROWED at {path}: reader restricts type to {sorted(rt)}")
            elif not wt <= rt:
                out.append(f"TYPE_CHANGED at {path}: writer type {sorted(wt)} not accepted by reader {sorted(rt)}")
                return out
        for kw in _NUMERIC_MAX:
            rv = r.get(kw)
            if isinstance(rv, (int, float)) and not isinstance(rv, bool):
                wv = w.get(kw)
                if not isinstance(wv, (int, float)) or wv > rv:
                    out.append(f"{kw.upper()}_DECREASED at {path}/{kw}: reader {kw} {rv}, writer {wv}")
        for kw in _NUMERIC_MIN:
            rv = r.get(kw)
            if isinstance(rv, (int, float)) and not isinstance(rv, bool):
                wv = w.get(kw)
                if not isinstance(wv, (int, float)) or wv < rv:
                    out.append(f"{kw.upper()}_INCREASED at {path}/{kw}: reader {kw} {rv}, writer {wv}")
        for kw in ("pattern", "const", "multipleOf", "format"):
            if kw in r and r.get(kw) != w.get(kw):
                out.append(f"{kw.upper()}_CHANGED at {path}/{kw}")
        renum = r.get("enum")
        if isinstance(renum, list):
            wenum = w.get("enum")
            if not isinstance(wenum, list) or any(v not in renum for v in wenum):
                out.append(f"ENUM_ARRAY_NARROWED at {path}/enum")
        if rt is None or "object" in rt:
            out += self._object(r, w, path)
        if rt is None or "array" in rt:
            ri, wi = r.get("items"), w.get("items")
            if isinstance(ri, dict) or isinstance(ri, bool):
                out += self.check(ri, wi if wi is not None else {}, f"{path}/items")
        return out

    def _object(self, r: JsonObject, w: JsonObject, path: str) -> list[str]:
        out: list[str] = []
        rprops = r.get("properties") or {}
        wprops = w.get("properties") or {}
        if not isinstance(rprops, dict) or not isinstance(wprops, dict):
            return out
        radd = r.get("additionalProperties", True)
        wadd = w.get("additionalProperties", True)
        w_open = wadd is not False
        for name, rs in rprops.items():
            p = f"{path}/properties/{name}"
            if name in wprops:
                out += self.check(rs, wprops[name], p)
            elif w_open:
                # the writer may have put anything under this name
                if not (rs is True or rs == {}):
                    if isinstance(wadd, dict):
                        out += self.check(rs, wadd, p)
                    else:
                        out.append(f"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at {p}")
        for name, ws in wprops.items():
            if name in rprops:
                continue
            p = f"{path}/properties/{name}"
            if radd is False:
                out.append(f"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at {p}")
            elif isinstance(radd, dict):
                out += self.check(radd, ws, p)
        if radd is False and w_open and not wprops.keys() <= rprops.keys():
            pass  # reported above per property
        elif radd is False and w_open:
            out.append(f"ADDITIONAL_PROPERTIES_REMOVED at {path}/additionalProperties")
        elif isinstance(radd, dict) and isinstance(wadd, dict):
            out += self.check(radd, wadd, f"{path}/additionalProperties")
        rr, wr = r.get("required"), w.get("required")
        rreq = {str(n) for n in rr} if isinstance(rr, list) else set()
        wreq = {str(n) for n in wr} if isinstance(wr, list) else set()
        for name in sorted(rreq - wreq):
            rs = rprops.get(name)
            if not (isinstance(rs, dict) and "default" in rs):
                out.append(f"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL at {path}/required/{name}")
        return out


# --- Protobuf -----------------------------------------------------------------------------------

_WIRE_GROUPS = [
    {"int32", "uint32", "int64", "uint64", "bool"},
    {"sint32", "sint64"},
    {"fixed32", "sfixed32"},
    {"fixed64", "sfixed64"},
    {"string", "bytes"},
]


def _field_kind(f: FieldDescriptorProto) -> str:
    F = FieldDescriptorProto  # noqa: N806
    names = {F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64", F.TYPE_UINT64: "uint64",
             F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64", F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool",
             F.TYPE_STRING: "string", F.TYPE_GROUP: "group", F.TYPE_MESSAGE: "message", F.TYPE_BYTES: "bytes",
             F.TYPE_UINT32: "uint32", F.TYPE_ENUM: "enum", F.TYPE_SFIXED32: "sfixed32",
             F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64"}
    return names.get(f.type, str(f.type))


def _messages(fdp: FileDescriptorProto) -> dict[str, DescriptorProto]:
    out: dict[str, DescriptorProto] = {}

    def walk(prefix: str, msgs: Iterable[DescriptorProto]) -> None:
        for m in msgs:
            name = f"{prefix}.{m.name}" if prefix else m.name
            out[name] = m
            walk(name, m.nested_type)

    walk(fdp.package, fdp.message_type)
    return out


def _protobuf(reader: FileDescriptorProto, writer: FileDescriptorProto) -> list[str]:
    out: list[str] = []
    if reader.package != writer.package:
        out.append(f"PACKAGE_CHANGED: {writer.package!r} -> {reader.package!r}")
    rmsgs, wmsgs = _messages(reader), _messages(writer)
    for name, wm in wmsgs.items():
        rm = rmsgs.get(name)
        if rm is None:
            out.append(f"MESSAGE_REMOVED: {name}")
            continue
        rfields = {f.number: f for f in rm.field}
        wfields = {f.number: f for f in wm.field}
        for num, wf in wfields.items():
            rf = rfields.get(num)
            where = f"{name}#{num}"
            if rf is None:
                if wf.label == 2:  # LABEL_REQUIRED
                    out.append(f"REQUIRED_FIELD_REMOVED: {where} ({wf.name})")
                continue
            rk, wk = _field_kind(rf), _field_kind(wf)
            if rk != wk:
                if rk in ("message", "group") or wk in ("message", "group"):
                    out.append(f"FIELD_KIND_CHANGED: {where} {wk} -> {rk}")
                elif "enum" in (rk, wk):
                    other = wk if rk == "enum" else rk
                    if other not in _WIRE_GROUPS[0]:
                        out.append(f"FIELD_SCALAR_KIND_CHANGED: {where} {wk} -> {rk}")
                elif not any(rk in g and wk in g for g in _WIRE_GROUPS):
                    out.append(f"FIELD_SCALAR_KIND_CHANGED: {where} {wk} -> {rk}")
            elif rk in ("message", "enum") and rf.type_name.lstrip(".") != wf.type_name.lstrip("."):
                out.append(f"FIELD_NAMED_TYPE_CHANGED: {where} {wf.type_name} -> {rf.type_name}")
            if (rf.label == 3) != (wf.label == 3) and rk in ("message", "string", "bytes", "group"):
                out.append(f"FIELD_LABEL_CHANGED: {where} repeated/singular")
            r_oneof = rf.HasField("oneof_index") and not rf.proto3_optional
            w_oneof = wf.HasField("oneof_index") and not wf.proto3_optional
            if r_oneof and not w_oneof:
                out.append(f"FIELD_MOVED_TO_EXISTING_ONEOF: {where}")
        for num, rf in rfields.items():
            if num not in wfields and rf.label == 2:
                out.append(f"REQUIRED_FIELD_ADDED: {name}#{num} ({rf.name})")
    return out
