"""count_records: the produce path's check that a batch's records tile its records section.

Runs of records of one length are crossed with strided slices (protocol.records.count_records);
whatever the input, well formed or corrupt, it must give the record-by-record walk's answer
(``walk_records``: a count, or an error that validate_batches turns into CORRUPT_MESSAGE).
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
    """The record-by-record walk, the reference."""
    try:
        return R.walk_records(data)
    except Exception:
        return "error"


def _count(data: bytes | memoryview) -> int | str:
    try:
        return R.count_records(data)
    except Exception:
        return "error"


LENGTHS = st.sampled_from([1, 2, 63, 64, 100, 1000, 8191, 8192, 9000])


@settings(max_examples=300, deadline=None)
@given(uniform=st.booleans(), n=st.integers(1, 40),
       lengths=st.lists(st.tuples(LENGTHS, st.integers(1, 30)), min_size=1, max_size=6).map(
           lambda runs: [size for size, count in runs for _ in range(count)]),
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


def test_a_producers_batch() -> None:
    """A real 1,000-record batch of 1 KiB values (kafka-python's builder, as a producer writes
    it): its records are 1 KiB plus deltas whose varints grow at 64, so not all one length."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 21)
    for i in range(1000):
        builder.append(i, timestamp=1_700_000_000_000 + i // 7, key=None, value=b"v" * 1024, headers=[])
    records = bytes(builder.build())[R.HEADER_SIZE:]
    assert R.walk_records(records) == 1000
    assert R.count_records(records) == 1000
    assert R.count_records(memoryview(bytearray(records))) == 1000


@pytest.mark.parametrize("sizes", [[1000] * 500, [1000, 1000, 999], [5, 5, 5, 6], [1000], [7] * 9 + [8] * 9 + [7] * 9,
                                   [100] * 63 + [101] * 200 + [102] * 5])
def test_runs_and_single_records(sizes: list[int]) -> None:
    data = _section(sizes)
    assert R.count_records(data) == len(sizes) == R.walk_records(data)


@pytest.mark.parametrize("prefix", [b"\x81\x80\x01", b"\xff\xff\xff\xff\x0f", b"\x81\x80\x80\x80\x01"])
@pytest.mark.parametrize("tail", [40, 20_000])
def test_negative_multibyte_length_is_refused(prefix: bytes, tail: int) -> None:
    """A negative record length in a varint of three or more bytes (zigzag odd): a bad length,
    never a stride backwards (which walked forever, hanging the broker on one Produce)."""
    data = prefix + b"x" * tail
    for walk in (R.count_records, R.walk_records):
        with pytest.raises(ValueError, match="bad record length"):
            walk(data)

