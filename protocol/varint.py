"""Kafka's variable-length integers: the one codec for them (no I/O).

Two encodings appear on the wire: *unsigned varints* (protobuf's base-128, at most 5 bytes for the
32-bit lengths of compact strings, arrays and tagged fields in flexible versions) and *varints*
(zig-zag signed, at most 10 bytes, for the fields of magic-v2 records and their headers).  Kafka's
``ByteUtils.readUnsignedVarint`` / ``readVarlong`` define both.

Readers take a buffer and a position and return ``(value, next position)``.  A buffer that ends
inside a varint raises IndexError; one longer than its encoding allows raises ValueError.  Callers
at the edge turn both into their own Kafka error.
"""

from __future__ import annotations

Buffer = bytes | bytearray | memoryview


def read_uvarint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode the unsigned varint at ``pos`` (at most 5 bytes, Kafka's 32-bit limit)."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ValueError("unsigned varint longer than 5 bytes")


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode the zig-zag varint at ``pos`` (at most 10 bytes: a 64-bit varlong)."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def put_uvarint(out: bytearray, n: int) -> None:
    """Append ``n`` (>= 0) as an unsigned varint."""
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def put_varint(out: bytearray, n: int) -> None:
    """Append ``n`` as a zig-zag varint (64-bit)."""
    put_uvarint(out, ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def uvarint(n: int) -> bytes:
    """``n`` as an unsigned varint."""
    if 0 <= n < 0x80:  # the common case (short strings and arrays, empty tagged fields): one byte
        return _ONE_BYTE[n]
    out = bytearray()
    put_uvarint(out, n)
    return bytes(out)


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def varint(n: int) -> bytes:
    """``n`` as a zig-zag varint."""
    out = bytearray()
    put_varint(out, n)
    return bytes(out)
