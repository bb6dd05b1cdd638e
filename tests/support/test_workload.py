"""The round-trip checker must fail on the faults it exists to catch (no broker needed)."""

from __future__ import annotations

import pytest

from tests.support.workload import Consumed, check_round_trip, kcat_message, messages, seq_from_key


def consumed_in_order(n: int, partitions: int = 3) -> list[Consumed]:
    """What a perfect broker returns: message i in partition i % partitions at the next offset."""
    next_offset = [0] * partitions
    out = []
    for m in messages(n):
        p = hash(m.key) % partitions if m.key is not None else m.seq % partitions
        out.append(Consumed(p, next_offset[p], m.key, m.value, list(m.headers)))
        next_offset[p] += 1
    return out


def test_perfect_round_trip_passes() -> None:
    counts = check_round_trip(consumed_in_order(500), messages(500))
    assert sum(counts.values()) == 500


@pytest.mark.parametrize(
    "fault, expect",
    [
        ("lose", "lost"),
        ("duplicate", "duplicated"),
        ("swap", "after seq"),
        ("null_value", "value"),
        ("extra_header", "headers"),
        ("rekey", "key"),
    ],
)
def test_faults_are_caught(fault: str, expect: str) -> None:
    got = consumed_in_order(500)
    victim = next(
        i for i, c in enumerate(got) if c.value is not None and c.key is not None and c.partition == 0
    )
    if fault == "lose":
        del got[victim]
    elif fault == "duplicate":
        got.append(Consumed(0, 10_000, got[victim].key, got[victim].value, list(got[victim].headers)))
    elif fault == "swap":
        nxt = next(i for i in range(victim + 1, len(got)) if got[i].partition == 0)
        got[victim].headers, got[nxt].headers = got[nxt].headers, got[victim].headers
        got[victim].key, got[nxt].key = got[nxt].key, got[victim].key
        got[victim].value, got[nxt].value = got[nxt].value, got[victim].value
    elif fault == "null_value":
        got[victim].value = None
    elif fault == "extra_header":
        got[victim].headers = got[victim].headers + [("x", b"y")]
    elif fault == "rekey":
        got[victim].key = b"other"
    with pytest.raises(AssertionError, match=expect):
        check_round_trip(got, messages(500))


def test_kcat_variant_reads_seq_from_key() -> None:
    sent = [kcat_message(i) for i in range(50)]
    got = [Consumed(0, i, m.key, m.value, list(m.headers)) for i, m in enumerate(sent)]
    check_round_trip(got, sent, seq_of=seq_from_key)
    got[3], got[4] = got[4], got[3]
    with pytest.raises(AssertionError, match="after seq"):
        check_round_trip(got, sent, seq_of=seq_from_key)
