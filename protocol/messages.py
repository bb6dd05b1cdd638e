"""Request decoding and response encoding over kafka-python's message classes, sans-io.

kafka-python 3.x generates a class per API from Kafka's JSON schemas (``kafka.protocol``);
this module builds a registry of them by API key and does the header work around them:

* :func:`parse_header` reads the request header (v1, or v2 with tagged fields for flexible
  versions) itself, so that a frame whose body is unreadable still yields its correlation id;
  :func:`decode_body` then decodes the body with the schema class at the requested version
  (:func:`decode_generic`). Produce and Fetch, the requests of every produced batch and every
  replica fetch, first try hand-written decoders of their common shapes
  (``protocol.produce_codec``, ``protocol.fetch_codec``), which build the same kafka-python
  objects at about half the cost and leave anything unusual to the generic decoder.
* :func:`encode_response` frames a response object at the request's version with the right
  response header (v0, or v1 for flexible versions; ApiVersions always answers with v0).
* Produce requests keep their records in the frame: kafka-python's generated decoder copies a
  ``records`` field into new ``bytes`` (and ``validate_batches`` would copy it again to patch
  offsets); here ProduceRequest's records field decodes as a ``memoryview`` slice of the body
  instead (:class:`protocol.kafka_python_internals.RecordsView`). A large request has a buffer of its own
  (``protocol.framing``), so its batches are validated, patched and written where they were
  read. Everything else about the decode (versions, compact and tagged forms, nulls) is
  kafka-python's own.

What this needs of kafka-python's internals (the compiled decoder with its end position, the
records codec) is in :mod:`protocol.kafka_python_internals`, and only there.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafka.protocol import admin as _admin
from kafka.protocol import consumer as _consumer
from kafka.protocol import metadata as _metadata
from kafka.protocol import producer as _producer
from kafka.protocol import sasl as _sasl
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer

from . import inter_broker as _inter_broker
from . import kip714 as _kip714
from . import kip848 as _kip848
from . import kip932 as _kip932
from .api_keys import ApiKey
from .fetch_codec import decode_fetch_request
from .kafka_python_internals import (
    Decoder,
    EncodeBuffer,
    Encoder,
    SchemaField,
    compiled_decoder,
    compiled_encoder,
    decode_records_in_place,
)
from .produce_codec import decode_produce_request
from .varint import read_uvarint

_HDR = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_HDR0 = struct.Struct(">ii")
_FLEX_HDR = struct.Struct(">iib")


def _collect() -> tuple[dict[int, type[ApiMessage]], dict[int, type[ApiMessage]]]:
    requests: dict[int, type[ApiMessage]] = {}
    responses: dict[int, type[ApiMessage]] = {}
    # protocol.inter_broker, protocol.kip848, protocol.kip714 and protocol.kip932: classes
    # kafka-python lacks, from the schemas in protocol/schemas.
    for mod in (_producer, _consumer, _metadata, _admin, _inter_broker, _kip848, _kip714, _kip932, _sasl):
        for name in getattr(mod, "__all__", dir(mod)):
            obj = getattr(mod, name, None)
            if not isinstance(obj, type) or not issubclass(obj, ApiMessage) or obj is ApiMessage:
                continue
            cls: type[ApiMessage] = obj
            try:
                key = cls.API_KEY
                kind = cls.type
            except Exception:  # pragma: no cover - abstract helpers
                continue
            (requests if kind == "request" else responses)[key] = cls
    return requests, responses


REQUEST_CLASSES, RESPONSE_CLASSES = _collect()
# (api key, version) of every flexible request version up to the class's newest: the header
# parse asks this of every request, and a set lookup is cheaper than asking the class.
_FLEXIBLE = frozenset((key, v) for key, cls in REQUEST_CLASSES.items() for v in range(cls.max_version + 1)
                      if cls.flexible_version_q(v))
_MAX_VERSION = {key: cls.max_version for key, cls in REQUEST_CLASSES.items()}


decode_records_in_place(REQUEST_CLASSES[ApiKey.PRODUCE])


class MalformedRequest(Exception):
    """The frame is not a readable request: the connection that sent it must be closed."""


class UnsupportedVersion(Exception):
    """The API key is known but the version is not (body left undecoded)."""


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes taken by the header in the frame


def _uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    try:
        return read_uvarint(buf, pos)
    except IndexError:
        raise MalformedRequest("truncated varint in request header") from None
    except ValueError:
        raise MalformedRequest("varint too long in request header") from None

def is_flexible(api_key: int, version: int) -> bool:
    if (api_key, version) in _FLEXIBLE:
        return True
    newest = _MAX_VERSION.get(api_key)
    return newest is not None and version > newest and bool(REQUEST_CLASSES[api_key].flexible_version_q(version))


def parse_header(frame: bytes | memoryview) -> RequestHeader:
    """Read the request header; raises MalformedRequest if even that is unreadable."""
    size = len(frame)
    if size < 10:
        raise MalformedRequest(f"request of {size} bytes is shorter than a header")
    api_key, api_version, correlation_id, n = _HDR.unpack_from(frame, 0)
    pos = 10
    client_id: str | None = None
    if n >= 0:
        pos += n
        if pos > size:
            raise MalformedRequest("client_id overruns the request")
        try:
            client_id = str(frame[10:pos], "utf-8")
        except UnicodeDecodeError as e:
            raise MalformedRequest("client_id is not UTF-8") from e
    elif n != -1:
        raise MalformedRequest(f"invalid client_id length {n}")
    if api_key == ApiKey.API_VERSIONS and api_version > _MAX_VERSION[api_key]:
        # A version from the future: its body is never read (the answer is v0 with
        # UNSUPPORTED_VERSION), so neither is the rest of its header, whatever its shape.
        return RequestHeader(api_key, api_version, correlation_id, client_id, pos)
    if (api_key, api_version) in _FLEXIBLE or (api_version > _MAX_VERSION.get(api_key, 0x7FFF)
                                                and is_flexible(api_key, api_version)):
        if pos < size and not frame[pos]:  # no tagged fields, as nearly always
            return RequestHeader(api_key, api_version, correlation_id, client_id, pos + 1)
        count, pos = _uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _uvarint(frame, pos)
            size, pos = _uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise MalformedRequest("tagged fields overrun the request header")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


# Hand-written decoders of the hot requests' common shapes, by API key: (oldest version they
# read, decoder). A decoder answers None for anything else, and kafka-python decodes it.
FastDecoder = Callable[[memoryview, int], "ApiMessage | None"]
_FAST_DECODERS: dict[int, tuple[int, FastDecoder]] = {
    ApiKey.PRODUCE: (3, decode_produce_request),
    ApiKey.FETCH: (4, decode_fetch_request),
}


def decode_body(header: RequestHeader, frame: bytes | memoryview) -> ApiMessage:
    version = header.api_version
    fast = _FAST_DECODERS.get(header.api_key)
    if fast is not None and fast[0] <= version <= _MAX_VERSION[header.api_key]:
        request = fast[1](memoryview(frame)[header.size:], version)
        if request is not None:
            return request
    return decode_generic(header, frame)


def decode_generic(header: RequestHeader, frame: bytes | memoryview) -> ApiMessage:
    """Decode the body with kafka-python's generated decoder for the class and version."""
    plan = _PLANS.get((header.api_key, header.api_version))
    if plan is None:
        plan = _plan(header.api_key, header.api_version)
    cls, decoder, null_check = plan
    version = header.api_version
    body = memoryview(frame)[header.size:]
    try:
        request, end = decoder(body, 0)
    except Exception as e:
        raise MalformedRequest(f"cannot decode {cls.name} v{version}: {e}") from e
    # kafka-python's decoders slice without bounds checks: a length prefix that runs past the
    # frame shows up as a read position beyond its end, and the request is unreadable. Trailing
    # bytes are ignored, as Kafka does (librdkafka's Metadata v12 carries some).
    if end > len(body):
        raise MalformedRequest(f"{cls.name} v{version} body is {len(body)} bytes but its fields "
                               f"overrun it (they end at {end})")
    if null_check is not None:
        null_field = null_check(request)
        if null_field is not None:
            raise MalformedRequest(f"{cls.name} v{version}: non-nullable field {null_field} was serialized as null")
    return request


# (api key, version) -> (request class, its compiled decoder, its null check or None): looked up
# once per request instead of asked of kafka-python's class each time. Built on first use.
_PLANS: dict[tuple[int, int], tuple[type[ApiMessage], Decoder, NullCheck | None]] = {}


def _plan(api_key: int, version: int) -> tuple[type[ApiMessage], Decoder, NullCheck | None]:
    cls = REQUEST_CLASSES.get(api_key)
    if cls is None:
        raise MalformedRequest(f"unknown API key {api_key}")
    if not 0 <= version <= cls.max_version:
        raise UnsupportedVersion(f"{cls.name} v{version}")
    try:
        decoder = compiled_decoder(cls, version)
    except Exception as e:
        raise MalformedRequest(f"cannot decode {cls.name} v{version}: {e}") from e
    plan = _PLANS[(api_key, version)] = (cls, decoder, _struct_check(cls.fields, version))
    return plan


# --- non-nullable fields -------------------------------------------------------------------
#
# kafka-python's decoders read a null (length -1) string, bytes or array whatever the schema
# says; Kafka's generated parsers refuse one where the field has no ``nullableVersions`` ("non-
# nullable field X was serialized as null"), so the request is malformed and never reaches a
# handler. One checker per (API, version) is built from the schema on first use: it visits
# only the fields that could decode as None (strings, bytes, records, arrays, structs) and the
# arrays and structs that contain such fields, so a Produce costs a few attribute reads per
# partition, never a look at the records.

NullCheck = Callable[[DataContainer], "str | None"]
_NULLABLE_TYPES = frozenset({"string", "bytes", "records"})


def _struct_check(fields: Mapping[str, SchemaField], version: int) -> NullCheck | None:
    """A function returning the path of the first illegal null in a decoded struct, or None
    when nothing in the struct can be an illegal null (then no check is needed)."""
    checks: list[tuple[str, bool, str, NullCheck | None]] = []  # (name, nullable, kind, inner)
    for f in fields.values():
        if not f.for_version_q(version) or f.tagged_field_q(version):
            continue  # an absent tagged field takes its default, which may be null
        nullable = f.nullable_for_version_q(version)
        if f.is_struct_array():
            inner = _struct_check(f.array_of.fields, version)
            if not nullable or inner is not None:
                checks.append((f.name, nullable, "structs", inner))
        elif f.is_array():
            elem_can_be_null = f.array_of.type_str in _NULLABLE_TYPES
            if not nullable or elem_can_be_null:
                checks.append((f.name, nullable, "values" if elem_can_be_null else "array", None))
        elif f.is_struct():
            inner = _struct_check(f.fields, version)
            if not nullable or inner is not None:
                checks.append((f.name, nullable, "struct", inner))
        elif f.type_str in _NULLABLE_TYPES and not nullable:
            checks.append((f.name, False, "value", None))
    if not checks:
        return None

    def check(obj: DataContainer) -> str | None:
        for name, nullable, kind, inner in checks:
            value = getattr(obj, name, None)
            if value is None:
                if nullable:
                    continue
                return name
            if kind == "structs" and inner is not None:
                for i, item in enumerate(value):
                    bad = inner(item)
                    if bad is not None:
                        return f"{name}[{i}].{bad}"
            elif kind == "values":
                for i, item in enumerate(value):
                    if item is None:
                        return f"{name}[{i}]"
            elif kind == "struct" and inner is not None:
                bad = inner(value)
                if bad is not None:
                    return f"{name}.{bad}"
        return None

    return check


def response_class(api_key: int, version: int) -> type[ApiMessage]:
    return RESPONSE_CLASSES[api_key][version]


def encode_response(api_key: int, version: int, correlation_id: int, response: ApiMessage) -> bytes:
    """Frame ``response`` (a kafka-python response object) for the wire.

    Response header v1 (flexible versions) is the correlation id plus an empty tagged-field
    section; ApiVersions always answers with header v0 so that a client that does not yet know
    our versions can read it (KIP-511). The body is encoded by kafka-python's compiled encoder
    into a buffer of this thread's, after room for the size and the header, and leaves it in
    one copy (``ApiMessage.encode`` would copy it out, and framing it would copy it twice more).
    """
    if response.API_VERSION != version:
        response.API_VERSION = version
    cls = type(response)
    plan = _ENCODERS.get((cls, version))
    if plan is None:
        plan = _ENCODERS[(cls, version)] = (api_key != ApiKey.API_VERSIONS and cls.flexible_version_q(version),
                                            compiled_encoder(cls, version))
    flexible, encoder = plan
    try:
        out: EncodeBuffer = _LOCAL.out
    except AttributeError:
        out = _LOCAL.out = EncodeBuffer(_OUT_SIZE)
    out.pos = 9 if flexible else 8
    encoder(response, out)
    buf, end = out.buf, out.pos  # re-read: the encoder may have grown the buffer
    if flexible:
        _FLEX_HDR.pack_into(buf, 0, end - 4, correlation_id, 0)
    else:
        _HDR0.pack_into(buf, 0, end - 4, correlation_id)
    frame = bytes(memoryview(buf)[:end])
    if len(buf) > _OUT_KEPT:  # a huge response: its buffer is not kept for the thread's life
        _LOCAL.out = EncodeBuffer(_OUT_SIZE)
    return frame


# (response class, version) -> (whether its header is v1, kafka-python's compiled encoder).
_ENCODERS: dict[tuple[type[ApiMessage], int], tuple[bool, Encoder]] = {}
# The buffer responses are encoded into, one per thread (the event loop's, and any worker's).
_LOCAL = threading.local()
_OUT_SIZE = 64 * 1024
_OUT_KEPT = 1 << 20


def encode_response_header(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    """Frame a response body encoded already, as :func:`encode_response` frames one."""
    if api_key != ApiKey.API_VERSIONS and RESPONSE_CLASSES[api_key].flexible_version_q(version):
        return _FLEX_HDR.pack(len(body) + 5, correlation_id, 0) + body
    return _HDR0.pack(len(body) + 4, correlation_id) + body
