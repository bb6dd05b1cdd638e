"""count_records: the produce path's check that a batch's records tile its records section.

Records of one size take a strided shortcut (protocol.records._count_uniform); whatever the
input, well formed or corrupt, it must give the record-by-record walk's answer (a count, or an
error that validate_batches turns into CORRUPT_MESSAGE).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import records as R


def _varint(z: int) -> bytes:
    out = bytearray()
    while True:
        b, z = z & 0x7F, z >> 7
        if not z:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def _section(sizes: list[int]) -> bytes:
    return b"".join(_varint(2 * n) + bytes((n + i) & 0xFF for i in range(n)) for n in sizes)


def _walk(data: bytes) -> int | str:
    """The record-by-record walk alone (the shortcut switched off)."""
    saved = R._count_uniform
    R._count_uniform = lambda _r: 0  # type: ignore[assignment]
    try:
        return R.count_records(data)
    except Exception:
        return "error"
    finally:
        R._count_uniform = saved  # type: ignore[assignment]


def _count(data: bytes | memoryview) -> int | str:
    try:
        return R.count_records(data)
    except Exception:
        return "error"


LENGTHS = st.sampled_from([1, 2, 63, 64, 100, 1000, 8191, 8192, 9000])


@settings(max_examples=300, deadline=None)
@given(uniform=st.booleans(), n=st.integers(1, 40), lengths=st.lists(LENGTHS, min_size=1, max_size=40),
       one=LENGTHS, flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=3),
       cut=st.none() | st.integers(0, 1 << 20))
def test_same_answer_as_the_walk(uniform: bool, n: int, lengths: list[int], one: int,
                                 flips: list[tuple[int, int]], cut: int | None) -> None:
    data = bytearray(_section([one] * n if uniform else lengths))
    for pos, value in flips:  # corruption anywhere, length prefixes included
        data[pos % len(data)] = value
    if cut is not None:
        data = data[:cut % (len(data) + 1)]
    expected = _walk(bytes(data))
    assert _count(bytes(data)) == expected
    assert _count(memoryview(data)) == expected


def test_uniform_records_counted_without_the_walk() -> None:
    data = _section([1000] * 500)
    assert R._count_uniform(data) == 500
    assert R.count_records(data) == 500


@pytest.mark.parametrize("sizes", [[1000, 1000, 999], [5, 5, 5, 6], [1000]])
def test_mixed_or_single_records_fall_back_to_the_walk(sizes: list[int]) -> None:
    data = _section(sizes)
    assert R._count_uniform(data) == 0
    assert R.count_records(data) == len(sizes)
