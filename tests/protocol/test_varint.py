"""protocol.varint: Kafka's unsigned varints and zig-zag varints, against known bytes and round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.varint import put_uvarint, put_varint, read_uvarint, read_varint, uvarint, varint

# (value, bytes) as Kafka's ByteUtils writes them.
ZIGZAG = [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01"),
          (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-(2**63), b"\xff" * 9 + b"\x01")]
UNSIGNED = [(0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
            (2**32 - 1, b"\xff\xff\xff\xff\x0f")]


@pytest.mark.parametrize(("value", "encoded"), ZIGZAG)
def test_zigzag_known_bytes(value: int, encoded: bytes) -> None:
    assert varint(value) == encoded
    assert read_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, 1 + len(encoded))


@pytest.mark.parametrize(("value", "encoded"), UNSIGNED)
def test_unsigned_known_bytes(value: int, encoded: bytes) -> None:
    assert uvarint(value) == encoded
    assert read_uvarint(memoryview(encoded), 0) == (value, len(encoded))


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_zigzag_round_trip(n: int) -> None:
    out = bytearray(b"x")
    put_varint(out, n)
    assert read_varint(out, 1) == (n, len(out))


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_unsigned_round_trip(n: int) -> None:
    out = bytearray()
    put_uvarint(out, n)
    assert read_uvarint(bytes(out), 0) == (n, len(out))


def test_truncated_and_overlong_are_errors_not_garbage() -> None:
    with pytest.raises(IndexError):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(IndexError):
        read_uvarint(b"\xff", 0)
    with pytest.raises(ValueError):
        read_uvarint(b"\xff" * 5 + b"\x01", 0)
    with pytest.raises(ValueError):
        read_varint(b"\xff" * 10 + b"\x01", 0)
