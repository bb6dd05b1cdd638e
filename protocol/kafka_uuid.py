"""Kafka's textual form of a ``Uuid`` (topic ids, KIP-516; cluster ids): URL-safe base64, no padding.

Kafka prints and parses ids as ``Uuid.toString()`` / ``Uuid.fromString()`` do: the 16 bytes in
URL-safe base64 with the ``==`` padding dropped, 22 characters (``J7Rg-Pv8RMiFqNEelCWqKg``).
Python's ``str(uuid.UUID)`` (``27b460f8-fbfc-44c8-85a8-d11e9425aa2a``) names the same id
differently, so everything Samsa prints or writes goes through :func:`to_string`; :func:`from_string`
also accepts the dashed form (ids written by older Samsa versions). No I/O.
"""

from __future__ import annotations

import base64
import binascii
import uuid

ZERO = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: "no id"


def to_string(value: uuid.UUID | bytes | str) -> str:
    """Kafka's ``Uuid.toString()``: 22 characters of URL-safe base64."""
    if isinstance(value, str):
        value = from_string(value)
    raw = value if isinstance(value, bytes) else value.bytes
    if len(raw) != 16:
        raise ValueError(f"a Uuid has 16 bytes, not {len(raw)}")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def from_string(text: str) -> uuid.UUID:
    """Kafka's ``Uuid.fromString()`` (URL-safe base64), or the dashed hex form; ValueError otherwise."""
    text = text.strip()
    if len(text) == 22:
        try:
            raw = base64.urlsafe_b64decode(text + "==")
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"not a Kafka Uuid: {text!r}") from e
        if len(raw) == 16:
            return uuid.UUID(bytes=raw)
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ValueError(f"not a Kafka Uuid: {text!r}") from None


_ZERO = uuid.UUID(int=0)
_TOPIC_IDS: dict[bytes, uuid.UUID | None] = {}


def read_topic_id(data: memoryview, pos: int) -> uuid.UUID | None:
    """The 16-byte topic id at ``pos`` of a request (None for the zero id, as kafka-python reads
    it), for the hand-written Produce and Fetch decoders. ``uuid.UUID()`` costs ~0.6 us, more than
    the rest of a one-partition request: the ids seen are kept (at most 10,000, then forgotten)."""
    raw = bytes(data[pos:pos + 16])
    topic_id = _TOPIC_IDS.get(raw, _ZERO)
    if topic_id is _ZERO:
        topic_id = uuid.UUID(bytes=raw)  # ValueError unless 16 bytes
        if topic_id == _ZERO:
            topic_id = None
        if len(_TOPIC_IDS) >= 10_000:
            _TOPIC_IDS.clear()
        _TOPIC_IDS[raw] = topic_id
    return topic_id
