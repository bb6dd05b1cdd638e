"""Protobuf ``normalize``: a FileDescriptorProto written back as canonical ``.proto`` text.

Confluent's registry normalizes a Protobuf schema (``normalize=true`` on register, lookup and
compatibility, or the ``normalize`` config) by printing it again in one canonical form, so that
two texts that mean the same schema register as one id. This module does the same from the
descriptor protoc compiled (the registry's parsed form), with Confluent's rules:

* imports sorted and deduplicated (plain, then ``public``, then ``weak``);
* options sorted by name at every level (file, message, field, oneof, enum, value, service,
  rpc); custom options are read back through the schema's own descriptor pool and written
  with their fully qualified names;
* a message's fields in field-number order, then its oneofs (each in field-number order,
  ordered by their first field number); enum values by number, then name (proto3's zero
  value stays first, as proto3 requires);
* reserved ranges and names one per statement, numbers ascending, then names;
* every message and enum type fully qualified with a leading dot; map fields as ``map<K, V>``
  (their synthetic entry messages are not written, protoc makes them again);
* the order of messages, enums, services and rpcs is kept: a serializer's message indexes
  (the wire format's index path into the file) are counted in that order.

Comments and formatting are dropped. :func:`normalized_text` raises :class:`Unsupported` for
what it does not write (proto2 groups, editions); the caller then keeps the schema as given.
"""

from __future__ import annotations

import math

from google.protobuf import descriptor_pool, message_factory, text_encoding, text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    EnumDescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
    ServiceDescriptorProto,
)
from google.protobuf.message import Message

_SCALARS = {
    FieldDescriptorProto.TYPE_DOUBLE: "double", FieldDescriptorProto.TYPE_FLOAT: "float",
    FieldDescriptorProto.TYPE_INT64: "int64", FieldDescriptorProto.TYPE_UINT64: "uint64",
    FieldDescriptorProto.TYPE_INT32: "int32", FieldDescriptorProto.TYPE_FIXED64: "fixed64",
    FieldDescriptorProto.TYPE_FIXED32: "fixed32", FieldDescriptorProto.TYPE_BOOL: "bool",
    FieldDescriptorProto.TYPE_STRING: "string", FieldDescriptorProto.TYPE_BYTES: "bytes",
    FieldDescriptorProto.TYPE_UINT32: "uint32", FieldDescriptorProto.TYPE_SFIXED32: "sfixed32",
    FieldDescriptorProto.TYPE_SFIXED64: "sfixed64", FieldDescriptorProto.TYPE_SINT32: "sint32",
    FieldDescriptorProto.TYPE_SINT64: "sint64",
}
_LABELS = {FieldDescriptorProto.LABEL_OPTIONAL: "optional", FieldDescriptorProto.LABEL_REQUIRED: "required",
           FieldDescriptorProto.LABEL_REPEATED: "repeated"}
_MAX_FIELD_NUMBER = 536870911
_SINGLE = (Message, str, bytes, int, float, bool)  # a field's value when it is not repeated


class Unsupported(Exception):
    """Something :func:`normalized_text` does not write; the schema is kept as it was given."""


def normalized_text(fdp: FileDescriptorProto, pool: descriptor_pool.DescriptorPool) -> str:
    """The canonical ``.proto`` text of ``fdp``, whose imports (and their custom options) are in ``pool``."""
    return _Writer(fdp, pool).file()


def json_name(name: str) -> str:
    """protoc's default ``json_name``: underscores dropped, the letter after one upper-cased."""
    out, upper = [], False
    for c in name:
        if c == "_":
            upper = True
        elif upper:
            out.append(c.upper())
            upper = False
        else:
            out.append(c)
    return "".join(out)


def _quote(value: str | bytes) -> str:
    if isinstance(value, bytes):
        return '"' + text_encoding.CEscape(value, as_utf8=False) + '"'
    return '"' + text_encoding.CEscape(value, as_utf8=True) + '"'


def _number(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


class _Writer:
    def __init__(self, fdp: FileDescriptorProto, pool: descriptor_pool.DescriptorPool) -> None:
        self.fdp = fdp
        self.pool = pool
        self.proto3 = fdp.syntax == "proto3"
        if fdp.syntax not in ("", "proto2", "proto3"):
            raise Unsupported(f"syntax {fdp.syntax!r}")
        self.prefix = f".{fdp.package}" if fdp.package else ""

    # --- options ------------------------------------------------------------------------------

    def _options(self, options: Message) -> list[tuple[str, str]]:
        """(name, value) of every option set, custom ones read through the schema's pool."""
        raw = options.SerializeToString(deterministic=True)
        if not raw:
            return []
        try:
            cls = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(options.DESCRIPTOR.full_name))
        except KeyError as e:
            raise Unsupported(f"options type {options.DESCRIPTOR.full_name}: {e}") from None
        msg = cls()
        msg.ParseFromString(raw)
        out: list[tuple[str, str]] = []
        for fd, value in msg.ListFields():
            if fd.name in ("map_entry", "uninterpreted_option", "features"):
                continue
            name = f"(.{fd.full_name})" if fd.is_extension else fd.name
            values = [value] if isinstance(value, _SINGLE) else list(value)  # else a repeated field's container
            out.extend((name, self._option_value(fd, v)) for v in values)
        return sorted(out, key=lambda nv: (nv[0].strip("(.)"), nv[1]))

    @staticmethod
    def _option_value(fd: FieldDescriptor, value: object) -> str:
        if isinstance(value, Message):
            return "{ " + text_format.MessageToString(value, as_one_line=True) + " }"
        if fd.type == FieldDescriptor.TYPE_ENUM and fd.enum_type is not None and isinstance(value, int):
            ev = fd.enum_type.values_by_number.get(value)
            return ev.name if ev is not None else str(value)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (str, bytes)):
            return _quote(value)
        if isinstance(value, float):
            return _number(value)
        return str(value)

    def _statements(self, options: Message, indent: str) -> list[str]:
        return [f"{indent}option {n} = {v};" for n, v in self._options(options)]

    # --- file ---------------------------------------------------------------------------------

    def file(self) -> str:
        f = self.fdp
        lines = [f'syntax = "{"proto3" if self.proto3 else "proto2"}";']
        if f.package:
            lines.append(f"package {f.package};")
        public = {f.dependency[i] for i in f.public_dependency}
        weak = {f.dependency[i] for i in f.weak_dependency}
        plain = sorted(set(f.dependency) - public - weak)
        if f.dependency:
            lines.append("")
            lines += [f'import "{d}";' for d in plain]
            lines += [f'import public "{d}";' for d in sorted(public)]
            lines += [f'import weak "{d}";' for d in sorted(weak)]
        opts = self._statements(f.options, "")
        if opts:
            lines += [""] + opts
        for m in f.message_type:
            lines += [""] + self._message(m, "", self.prefix)
        for e in f.enum_type:
            lines += [""] + self._enum(e, "")
        lines += self._extends(list(f.extension), "")
        for s in f.service:
            lines += [""] + self._service(s)
        return "\n".join(lines) + "\n"

    # --- messages -----------------------------------------------------------------------------

    def _message(self, m: DescriptorProto, indent: str, scope: str) -> list[str]:
        inner = indent + "  "
        full = f"{scope}.{m.name}"
        maps = {f"{full}.{n.name}": n for n in m.nested_type if n.options.map_entry}
        body: list[str] = []
        reserved: list[tuple[int, str]] = [(r.start, f"{r.start}" if r.end - 1 == r.start else
                                            f"{r.start} to {'max' if r.end - 1 >= _MAX_FIELD_NUMBER else r.end - 1}")
                                           for r in m.reserved_range]
        body += [f"{inner}reserved {text};" for _, text in sorted(reserved)]
        body += [f"{inner}reserved {_quote(n)};" for n in sorted(set(m.reserved_name))]
        body += self._statements(m.options, inner)
        real_oneofs: dict[int, list[FieldDescriptorProto]] = {}
        plain: list[FieldDescriptorProto] = []
        for fld in m.field:
            if fld.HasField("oneof_index") and not fld.proto3_optional:
                real_oneofs.setdefault(fld.oneof_index, []).append(fld)
            else:
                plain.append(fld)
        body += [self._field(fld, inner, maps) for fld in sorted(plain, key=lambda x: x.number)]
        for index, fields in sorted(real_oneofs.items(), key=lambda kv: min(x.number for x in kv[1])):
            decl = m.oneof_decl[index]
            body.append(f"{inner}oneof {decl.name} {{")
            body += self._statements(decl.options, inner + "  ")
            body += [self._field(fld, inner + "  ", maps, in_oneof=True) for fld in sorted(fields, key=lambda x: x.number)]
            body.append(f"{inner}}}")
        for r in m.extension_range:
            end = "max" if r.end - 1 >= _MAX_FIELD_NUMBER else str(r.end - 1)
            opts = self._options(r.options)
            suffix = " [" + ", ".join(f"{n} = {v}" for n, v in opts) + "]" if opts else ""
            body.append(f"{inner}extensions {r.start}" + ("" if end == str(r.start) else f" to {end}") + suffix + ";")
        body += self._extends(list(m.extension), inner)
        for n in m.nested_type:
            if not n.options.map_entry:
                body += self._message(n, inner, full)
        for e in m.enum_type:
            body += self._enum(e, inner)
        return [f"{indent}message {m.name} {{", *body, f"{indent}}}"]

    def _type(self, fld: FieldDescriptorProto) -> str:
        if fld.type == FieldDescriptorProto.TYPE_GROUP:
            raise Unsupported("proto2 groups")
        if fld.type in _SCALARS:
            return _SCALARS[fld.type]
        if not fld.type_name.startswith("."):
            raise Unsupported(f"unresolved type {fld.type_name}")
        return fld.type_name

    def _field(self, fld: FieldDescriptorProto, indent: str, maps: dict[str, DescriptorProto],
               in_oneof: bool = False) -> str:
        entry = maps.get(fld.type_name) if fld.label == FieldDescriptorProto.LABEL_REPEATED else None
        if entry is not None:
            key = next(x for x in entry.field if x.number == 1)
            value = next(x for x in entry.field if x.number == 2)
            head = f"map<{self._type(key)}, {self._type(value)}>"
        else:
            label = ""
            if not in_oneof:
                if fld.label == FieldDescriptorProto.LABEL_REPEATED:
                    label = "repeated "
                elif fld.proto3_optional or not self.proto3:
                    label = _LABELS[fld.label] + " "
            head = label + self._type(fld)
        opts = self._options(fld.options)
        if fld.HasField("default_value"):
            opts.append(("default", self._default(fld)))
        if fld.HasField("json_name") and fld.json_name != json_name(fld.name):
            opts.append(("json_name", _quote(fld.json_name)))
        opts.sort(key=lambda nv: (nv[0].strip("(.)"), nv[1]))
        suffix = " [" + ", ".join(f"{n} = {v}" for n, v in opts) + "]" if opts else ""
        return f"{indent}{head} {fld.name} = {fld.number}{suffix};"

    @staticmethod
    def _default(fld: FieldDescriptorProto) -> str:
        v = fld.default_value
        if fld.type == FieldDescriptorProto.TYPE_STRING:
            return _quote(v)
        if fld.type == FieldDescriptorProto.TYPE_BYTES:
            return f'"{v}"'  # already C-escaped in the descriptor
        return v

    def _extends(self, fields: list[FieldDescriptorProto], indent: str) -> list[str]:
        out: list[str] = []
        by_extendee: dict[str, list[FieldDescriptorProto]] = {}
        for fld in fields:
            by_extendee.setdefault(fld.extendee, []).append(fld)
        for extendee, group in by_extendee.items():
            out += ([""] if not indent else []) + [f"{indent}extend {extendee} {{"]
            out += [self._field(fld, indent + "  ", {}) for fld in sorted(group, key=lambda x: x.number)]
            out.append(f"{indent}}}")
        return out

    # --- enums and services -------------------------------------------------------------------

    def _enum(self, e: EnumDescriptorProto, indent: str) -> list[str]:
        inner = indent + "  "
        body = self._statements(e.options, inner)
        # the first value stays first: it is the default (proto2) and must be the zero (proto3)
        for v in list(e.value[:1]) + sorted(e.value[1:], key=lambda v: (v.number, v.name)):
            opts = self._options(v.options)
            suffix = " [" + ", ".join(f"{n} = {x}" for n, x in opts) + "]" if opts else ""
            body.append(f"{inner}{v.name} = {v.number}{suffix};")
        body += [f"{inner}reserved {r.start}" + ("" if r.end == r.start else f" to {r.end}") + ";"
                 for r in sorted(e.reserved_range, key=lambda r: r.start)]
        body += [f"{inner}reserved {_quote(n)};" for n in sorted(set(e.reserved_name))]
        return [f"{indent}enum {e.name} {{", *body, f"{indent}}}"]

    def _service(self, s: ServiceDescriptorProto) -> list[str]:
        body = self._statements(s.options, "  ")
        for rpc in s.method:
            request = ("stream " if rpc.client_streaming else "") + rpc.input_type
            response = ("stream " if rpc.server_streaming else "") + rpc.output_type
            opts = self._statements(rpc.options, "    ")
            head = f"  rpc {rpc.name} ({request}) returns ({response})"
            body += [head + " {", *opts, "  }"] if opts else [head + ";"]
        return [f"service {s.name} {{", *body, "}"]


def semantic_key(fdp: FileDescriptorProto) -> object:
    """``fdp`` with every order that does not change its meaning taken out: what a normalized text
    must still equal once compiled again (the check that nothing was lost or changed)."""
    doc = _canon(fdp, [])
    assert isinstance(doc, dict)
    deps = list(fdp.dependency)
    doc["public_dependency"] = sorted(deps[i] for i in fdp.public_dependency)
    doc["weak_dependency"] = sorted(deps[i] for i in fdp.weak_dependency)
    doc.pop("name", None)
    return doc


def _canon(msg: Message, oneofs: list[str]) -> object:
    out: dict[str, object] = {}
    own_oneofs = [o.name for o in msg.oneof_decl] if isinstance(msg, DescriptorProto) else oneofs
    for fd, value in msg.ListFields():
        name = fd.name
        if name in ("source_code_info", "public_dependency", "weak_dependency"):
            continue
        if name == "json_name" and isinstance(msg, FieldDescriptorProto):
            if value != json_name(msg.name):  # protoc fills in the default one: only a custom one counts
                out[name] = value
        elif name == "options":
            out[name] = value.SerializeToString(deterministic=True)
        elif name == "oneof_index" and isinstance(msg, FieldDescriptorProto):
            out["oneof"] = oneofs[value] if value < len(oneofs) else value
        elif not isinstance(value, _SINGLE):  # a repeated field
            items = [_canon(v, own_oneofs) if isinstance(v, Message) else v for v in value]
            if name == "reserved_range" and isinstance(msg, DescriptorProto):
                out[name] = _merged([(r.start, r.end) for r in msg.reserved_range])
                continue
            out[name] = sorted(items, key=repr)
        elif isinstance(value, Message):
            out[name] = _canon(value, own_oneofs)
        else:
            out[name] = value
    return out


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Half-open ranges, sorted and joined where they touch: ``9, 10 to 12`` is ``9 to 12``."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
