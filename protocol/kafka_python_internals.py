"""Every reach into kafka-python's private parts, in one module (convention 18).

kafka-python 3.x's generated message classes are Samsa's codec. Their public surface
(``decode``/``encode``, ``fields``, ``flexible_version_q``, ``max_version``, the schema fields'
``for_version_q``/``nullable_for_version_q``/``is_array``...) covers everything but two needs,
which this module meets by relying on kafka-python's internals:

* **The end of a decoded body.** ``ApiMessage.decode`` drops the read position; Samsa needs it
  to refuse a request whose length prefixes run past the frame (kafka-python's generated decoders
  slice without bounds checks). :func:`compiled_decoder` returns the decoder kafka-python
  compiles per version: ``cls._struct.compiled_decode_from(version, compact=, tagged=,
  data_class=)`` -> ``(object, end)``.
* **Produce records without a copy.** The generated decoder copies a ``records`` field into new
  ``bytes``. :func:`decode_records_in_place` swaps the codec of a class's ``records`` fields
  (schema tree: ``cls._struct``, a field's ``_type_str``/``_type``/``_fields``/``array_of``) for
  :class:`RecordsView`, whose ``emit_decode_from`` writes decoder source (the code generator's
  ``ctx.next_var``/``ctx.emit``, and ``Bytes``/``UnsignedVarInt32`` from
  ``kafka.protocol.schemas.fields.codecs.types``) that takes a slice of the input instead.
* **Decoded objects built by hand.** The hand-written Produce and Fetch request decoders
  (``protocol.produce_codec``, ``protocol.fetch_codec``) build the objects kafka-python's
  generated decoder builds, as it does: :func:`new_decoded` makes one without ``__init__``
  and sets the bookkeeping slots every ``DataContainer`` has (``_version``, ``tags``,
  ``unknown_tags``); the decoder then sets the version's untagged fields.
* **Encoding into a buffer of our own.** ``ApiMessage.encode`` returns the body alone (a copy
  out of kafka-python's pooled buffer), so framing it costs two more copies and the encoder's
  lookups per response. :func:`compiled_encoder` returns the encoder kafka-python compiles per
  version, ``cls._struct.compiled_encode_into(version, compact=, tagged=)`` -> ``f(message,
  out)``, which writes at ``out.pos`` of an ``EncodeBuffer`` (``buf``, ``pos``, ``ensure``;
  ``kafka.protocol.schemas.fields.codecs``): ``protocol.messages.encode_response`` leaves room
  for the response header in front and frames the response in one copy.
* **A field's ``mapKey`` flag.** Error responses built from the schemas (``broker/hooks.py``)
  match a response entry to its request entry by key fields; :func:`is_map_key` reads the flag
  from the field's schema JSON (``field._json``), which kafka-python keeps but does not expose.

The pin these rely on is stated beside the kafka-python dependency in ``pyproject.toml``;
:func:`check_internals` lists what no longer matches, and ``tests/protocol/
test_kafka_python_internals.py`` fails with that list when kafka-python changes. Nothing else in
Samsa touches these names: add a new reach here, with its check, or not at all.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TypeAlias, TypeVar

import kafka
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.data_container import DataContainer
from kafka.protocol.schemas.fields.base import BaseField
from kafka.protocol.schemas.fields.codecs import EncodeBuffer
from kafka.protocol.schemas.fields.codecs.types import Bytes, UnsignedVarInt32

# The kafka-python releases these internals were checked against (pyproject.toml says the same).
CHECKED_VERSIONS = "3.0.x (checked: 3.0.12)"

# A field of a message schema, as kafka-python's schema classes model it.
SchemaField: TypeAlias = BaseField

# A compiled decoder: (body, position) -> (the decoded message, the position after it).
Decoder = Callable[[memoryview, int], tuple[ApiMessage, int]]
# A compiled encoder: (message, buffer) -> None, writing the message at ``buffer.pos`` and
# moving it on (growing ``buffer.buf`` as needed).
Encoder = Callable[[ApiMessage, EncodeBuffer], None]


class RecordsView(Bytes):
    """kafka-python's ``records`` codec (Bytes), decoding to a slice of the input, not a copy."""

    # ``ctx`` is kafka-python's code-generation context (untyped, internal): it names variables
    # and collects the lines of the decoder being generated.
    @classmethod
    def emit_decode_from(cls, ctx: object, var_name: str, indent: str, compact: bool = False) -> None:
        emit = ctx.emit  # type: ignore[attr-defined]
        ln = ctx.next_var("ln")  # type: ignore[attr-defined]
        if compact:
            UnsignedVarInt32.emit_decode_from(ctx, ln, indent)
            emit(indent, f"{ln} -= 1")
        else:
            emit(indent, f'{ln} = unpack_from(">i", data, pos)[0]')
            emit(indent, "pos += 4")
        emit(indent, f"if {ln} < 0:")
        emit(indent, f"    {var_name} = None")
        emit(indent, "else:")
        emit(indent, f"    {var_name} = data[pos:pos+{ln}]")
        emit(indent, f"    pos += {ln}")


def decode_records_in_place(cls: type[ApiMessage]) -> int:
    """Make ``cls``'s ``records`` fields decode with :class:`RecordsView`; how many there were.

    Must run before the class first decodes (kafka-python compiles a decoder per version on
    first use). A kafka-python laying its schemas out otherwise finds none: decoding still
    works, with the copies, and :func:`check_internals` reports it.
    """
    found = 0
    stack: list[object] = [cls._struct]
    seen: set[int] = set()
    while stack:
        field = stack.pop()
        if id(field) in seen:
            continue
        seen.add(id(field))
        if getattr(field, "_type_str", None) == "records" and \
                getattr(field, "_type", None) in (Bytes, RecordsView):
            if field._type is Bytes:  # type: ignore[attr-defined]
                field._type = RecordsView  # type: ignore[attr-defined]
            found += 1
        stack.extend(getattr(field, "_fields", None) or ())
        inner = getattr(field, "array_of", None)  # an array of structs decodes through its element struct
        if inner is not None:
            stack.append(inner)
    return found


DecodedT = TypeVar("DecodedT", bound=DataContainer)
_new = object.__new__
# The slots kafka-python's generated decoder sets on every object before its fields.
BOOKKEEPING_SLOTS = ("_version", "tags", "unknown_tags")


def new_decoded(cls: type[DecodedT], version: int) -> DecodedT:
    """An empty ``cls`` object (a message or one of its structs) as kafka-python's generated
    decoder starts one at ``version``, before it sets the version's untagged fields: no
    ``__init__`` (which would fill every field with its default), no tagged fields."""
    obj: DecodedT = _new(cls)
    obj._version = version
    obj.tags = obj.unknown_tags = None
    return obj


def is_map_key(field: SchemaField) -> bool:
    """Whether the schema marks ``field`` as its struct's map key (``"mapKey": true``)."""
    return bool(field._json.get("mapKey"))


def compiled_decoder(cls: type[ApiMessage], version: int) -> Decoder:
    """kafka-python's compiled decoder of ``cls`` at ``version``: ``(data, pos) -> (object, end)``."""
    flexible = cls.flexible_version_q(version)
    decoder: Decoder = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                                         data_class=cls)
    return decoder


def compiled_encoder(cls: type[ApiMessage], version: int) -> Encoder:
    """kafka-python's compiled encoder of ``cls`` at ``version``: ``(message, out)``, writing at
    ``out.pos`` of an :class:`EncodeBuffer`."""
    flexible = cls.flexible_version_q(version)
    encoder: Encoder = cls._struct.compiled_encode_into(version, compact=flexible, tagged=flexible)
    return encoder


def check_internals(produce_request: type[ApiMessage]) -> list[str]:
    """What no longer matches the internals this module relies on (empty when all is well),
    each naming the kafka-python name that changed. ``produce_request``: the ProduceRequest class
    :func:`decode_records_in_place` was applied to."""
    problems: list[str] = []
    version = getattr(kafka, "__version__", "?")
    if not str(version).startswith("3.0."):
        problems.append(f"kafka-python {version} is not the version these internals were checked "
                        f"against ({CHECKED_VERSIONS}); re-check them and update the pin")
    struct = getattr(produce_request, "_struct", None)
    if struct is None:
        problems.append("ApiMessage classes no longer have the schema struct `_struct`")
    elif not callable(getattr(struct, "compiled_decode_from", None)):
        problems.append("the schema struct lost `compiled_decode_from(version, compact, tagged, "
                        "data_class)` (decoding with the end position)")
    else:
        params = inspect.signature(struct.compiled_decode_from).parameters
        missing = [p for p in ("version", "compact", "tagged", "data_class") if p not in params]
        if missing:
            problems.append(f"`_struct.compiled_decode_from` no longer takes {missing}")
    if struct is not None:
        if not callable(getattr(struct, "compiled_encode_into", None)):
            problems.append("the schema struct lost `compiled_encode_into(version, compact, tagged)` "
                            "(encoding into a buffer of our own)")
        else:
            params = inspect.signature(struct.compiled_encode_into).parameters
            missing = [p for p in ("version", "compact", "tagged") if p not in params]
            if missing:
                problems.append(f"`_struct.compiled_encode_into` no longer takes {missing}")
    if set(getattr(EncodeBuffer, "__slots__", ())) != {"buf", "pos"} or not callable(getattr(EncodeBuffer, "ensure", None)):
        problems.append("kafka.protocol.schemas.fields.codecs.EncodeBuffer is no longer `buf`, `pos` "
                        "and `ensure` (the buffer responses are encoded into)")
    for codec in (Bytes, UnsignedVarInt32):
        if not callable(getattr(codec, "emit_decode_from", None)):
            problems.append(f"kafka.protocol.schemas.fields.codecs.types.{codec.__name__} lost "
                            "`emit_decode_from` (the decoder code generator)")
    slots = set(getattr(DataContainer, "__slots__", ()))
    if not slots >= set(BOOKKEEPING_SLOTS):
        problems.append(f"DataContainer's slots are {sorted(slots)}, no longer {list(BOOKKEEPING_SLOTS)} "
                        "(the objects the hand-written request decoders build)")
    name_field = produce_request.fields.get("topic_data")
    name_field = name_field.fields.get("name") if name_field is not None else None
    if not isinstance(getattr(name_field, "_json", None), dict):
        problems.append("schema fields lost their schema JSON `_json` (the `mapKey` flag)")
    elif not is_map_key(name_field):
        problems.append("ProduceRequest's topic `name` is no longer a `mapKey` in `_json`")
    if struct is not None and decode_records_in_place(produce_request) == 0:
        problems.append("no `records` field of type Bytes found in ProduceRequest's schema tree "
                        "(`_fields`, `array_of`, `_type_str`, `_type`): Produce records are "
                        "copied again")
    return problems
