"""The compatibility workload: which messages each client sends and how a round trip is judged.

Every client test produces the same kind of stream: ``N_MESSAGES`` small
messages, each carrying its sequence number in a ``seq`` header, some with
null keys, some with null values, some with an extra empty-valued header.
``check_round_trip`` then demands, of what a consumer read back from offset 0:

* every sequence number exactly once (nothing lost, nothing duplicated);
* key, value and headers byte-for-byte as sent (null stays null);
* per partition, in the order the consumer delivered them, offsets strictly
  increasing and sequence numbers strictly increasing (the producer sent them
  in order, and idempotence forbids reordering);
* a given non-null key always in the same partition.

kcat cannot attach per-message headers, so its variant (``kcat_message``)
carries the sequence number in the key instead.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
N_MESSAGES = 10_000
PARTITIONS = 3

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Message:
    seq: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)


@dataclass
class Consumed:
    """One record as a consumer returned it; headers normalised to a list of (str, bytes|None)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)


def message(seq: int) -> Message:
    value = None if seq % 10 == 3 else f"value-{seq}".encode()
    # kafka-python refuses a record whose key and value are both null, so never both.
    key = None if seq % 17 == 5 and value is not None else f"key-{seq % 101}".encode()
    headers: Headers = [("seq", str(seq).encode())]
    if seq % 7 == 0:
        headers.append(("empty", b""))
    return Message(seq, key, value, headers)


def messages(n: int = N_MESSAGES) -> list[Message]:
    return [message(i) for i in range(n)]


def kcat_message(seq: int) -> Message:
    """kcat -P: key carries the sequence number, empty value + ``-Z`` means null, one ``-H`` header for all."""
    value = None if seq % 10 == 3 else f"value-{seq}".encode()
    return Message(seq, f"k{seq}".encode(), value, [("src", b"kcat")])


def seq_from_header(c: Consumed) -> int:
    for k, v in c.headers:
        if k == "seq" and v is not None:
            return int(v)
    raise AssertionError(
        f"record at partition {c.partition} offset {c.offset} has no seq header: {c.headers!r}"
    )


def seq_from_key(c: Consumed) -> int:
    assert c.key is not None and c.key.startswith(b"k"), (
        f"unexpected key {c.key!r} at {c.partition}/{c.offset}"
    )
    return int(c.key[1:])


def normalise_headers(headers: Iterable[tuple[str, bytes | str | None]] | None) -> Headers:
    out: Headers = []
    for k, v in headers or ():
        if isinstance(v, str):
            v = v.encode()
        out.append((k, v))
    return out


def check_round_trip(
    consumed: Sequence[Consumed],
    expected: Sequence[Message],
    seq_of: Callable[[Consumed], int] = seq_from_header,
    partitions: int | None = PARTITIONS,
) -> dict[int, int]:
    """Assert the round-trip properties in the module docstring; return {partition: count}."""
    problems: list[str] = []

    def problem(msg: str) -> None:
        if len(problems) < 25:
            problems.append(msg)
        elif len(problems) == 25:
            problems.append("... (more problems omitted)")

    by_seq = {m.seq: m for m in expected}
    seen: dict[int, tuple[int, int]] = {}
    last_in_partition: dict[int, tuple[int, int]] = {}
    key_partition: dict[bytes, int] = {}
    per_partition: dict[int, int] = defaultdict(int)

    for c in consumed:
        per_partition[c.partition] += 1
        if partitions is not None and not 0 <= c.partition < partitions:
            problem(f"record in unexpected partition {c.partition}")
        try:
            seq = seq_of(c)
        except (AssertionError, ValueError) as e:
            problem(str(e))
            continue
        want = by_seq.get(seq)
        if want is None:
            problem(f"seq {seq} was never sent (partition {c.partition} offset {c.offset})")
            continue
        if seq in seen:
            problem(f"seq {seq} duplicated: at {seen[seq]} and {(c.partition, c.offset)}")
        seen[seq] = (c.partition, c.offset)
        if c.key != want.key:
            problem(f"seq {seq}: key {c.key!r} != sent {want.key!r}")
        if c.value != want.value:
            problem(f"seq {seq}: value {c.value!r} != sent {want.value!r}")
        if list(c.headers) != list(want.headers):
            problem(f"seq {seq}: headers {c.headers!r} != sent {want.headers!r}")
        prev = last_in_partition.get(c.partition)
        if prev is not None:
            prev_offset, prev_seq = prev
            if c.offset <= prev_offset:
                problem(f"partition {c.partition}: offset {c.offset} delivered after {prev_offset}")
            if seq <= prev_seq:
                problem(
                    f"partition {c.partition}: seq {seq} (offset {c.offset}) after seq {prev_seq} (offset {prev_offset})"
                )
        last_in_partition[c.partition] = (c.offset, seq)
        if c.key is not None:
            p = key_partition.setdefault(c.key, c.partition)
            if p != c.partition:
                problem(f"key {c.key!r} in partitions {p} and {c.partition}")

    missing = sorted(set(by_seq) - set(seen))
    if missing:
        problem(f"{len(missing)} of {len(by_seq)} messages lost, first: {missing[:20]}")
    assert not problems, "round trip failed:\n  " + "\n  ".join(problems)
    return dict(per_partition)


def topic_name(prefix: str) -> str:
    """A fresh topic name per test, so tests sharing a broker never see each other's data."""
    import uuid

    return f"{prefix}-{uuid.uuid4().hex[:10]}"
