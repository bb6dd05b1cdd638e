"""Producer ids are unique across restarts: blocks are durable before use."""

from __future__ import annotations

import json
from pathlib import Path

from txn.producer_ids import ProducerIdManager


def test_sequential_within_a_block(tmp_path: Path) -> None:
    m = ProducerIdManager(tmp_path / "producer-id-block", block_size=10)
    assert [m.generate() for _ in range(25)] == list(range(25))
    data = json.loads((tmp_path / "producer-id-block").read_text())
    assert data == {"version": 1, "broker": 0, "block_start": "20", "block_end": "29"}
    assert not list(tmp_path.glob("*.tmp"))


def test_never_repeats_across_restarts(tmp_path: Path) -> None:
    seen: list[int] = []
    for used in (0, 3, 10, 1, 17):
        m = ProducerIdManager(tmp_path / "producer-id-block", block_size=10)
        seen += [m.generate_producer_id() for _ in range(used)]
    assert len(seen) == len(set(seen))
    assert seen == sorted(seen)


def test_block_is_persisted_before_the_first_id(tmp_path: Path) -> None:
    m = ProducerIdManager(tmp_path / "producer-id-block", block_size=100)
    first = m.generate()
    # a crash right now must not let a new manager hand out `first` again
    again = ProducerIdManager(tmp_path / "producer-id-block", block_size=100).generate()
    assert again > first and again == 100


def test_directory_path_accepted(tmp_path: Path) -> None:
    m = ProducerIdManager(tmp_path)
    assert m.generate() == 0
    assert (tmp_path / "producer-id-block").exists()
