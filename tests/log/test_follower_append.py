"""A follower appends what its leader wrote (Kafka's ``appendAsFollower``, origin REPLICATION).

The leader decided each producer batch once, against its own producer state. A follower's state
can differ from it: a leader elected after a failover, or one whose producer state expired, may
hold no entry for a producer the follower still remembers, and then accepts a retried batch (a
duplicate to the follower), a batch after a gap, an older epoch, or a marker from an older
coordinator epoch. Kafka's follower appends all of these (logging the epoch cases); one that
refused would stop replicating the partition for good and drop out of the ISR. A client's
append (the leader's) still refuses each of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from log import Log, LogConfig, check_log
from protocol.errors import (
    DuplicateSequenceError,
    InvalidProducerEpochError,
    KafkaError,
    OutOfOrderSequenceError,
)
from protocol.records import ValidatedRecords, patch_base_offset
from tests.log.helpers import build_batch, build_marker, records

CFG = LogConfig(segment_bytes=1 << 20, index_interval_bytes=128)
PID = 7


def at(offset: int, batch: bytes) -> ValidatedRecords:
    """``batch`` as the leader wrote it, at ``offset`` (a follower keeps the leader's offsets)."""
    buf = bytearray(batch)
    patch_base_offset(buf, 0, offset)
    return records(bytes(buf))


def idem(seq: int, epoch: int = 0, n: int = 1) -> bytes:
    return build_batch([b"v%d" % i for i in range(n)], producer_id=PID, producer_epoch=epoch, base_sequence=seq)


def as_follower(log: Log, batch: bytes) -> None:
    log.append(at(log.log_end_offset, batch), assign_offsets=False)


@pytest.mark.parametrize("case, second, leader_error", [
    ("duplicate of the last batch", idem(0), DuplicateSequenceError),
    ("sequence gap", idem(5), OutOfOrderSequenceError),
    ("older producer epoch", idem(0, epoch=0), InvalidProducerEpochError),
], ids=["duplicate", "gap", "older-epoch"])
def test_follower_appends_producer_batches_its_leader_accepted(tmp_path: Path, case: str, second: bytes,
                                                              leader_error: type[KafkaError]) -> None:
    first = idem(0, epoch=1 if case == "older producer epoch" else 0)
    follower = Log.open(tmp_path / "follower-0", CFG)
    as_follower(follower, first)
    as_follower(follower, second)
    assert follower.log_end_offset == 2, case
    # the producer's state follows the log, as the leader's does: the second batch is the last
    entry = follower.producer_state.last_entry(PID)
    assert entry is not None and entry.last_data_offset == 1
    assert check_log(follower.dir) == []

    leader = Log.open(tmp_path / "leader-0", CFG)
    leader.append(records(first))
    with pytest.raises(leader_error):
        leader.append(records(second))
    assert leader.log_end_offset == 1


def test_follower_appends_a_marker_from_an_older_coordinator_epoch(tmp_path: Path) -> None:
    txn = build_batch([b"t"], producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True)
    follower = Log.open(tmp_path / "follower-0", CFG)
    as_follower(follower, txn)
    as_follower(follower, build_marker(PID, 0, commit=True, coordinator_epoch=5))
    as_follower(follower, build_batch([b"t"], producer_id=PID, producer_epoch=0, base_sequence=1,
                                      transactional=True))
    as_follower(follower, build_marker(PID, 0, commit=False, coordinator_epoch=3))
    assert follower.log_end_offset == 4
    assert follower.producer_state.first_unstable_offset() is None  # the older marker closed it

    leader = Log.open(tmp_path / "leader-0", CFG)
    leader.append(records(txn))
    leader.append(records(build_marker(PID, 0, commit=True, coordinator_epoch=5)))
    leader.append(records(build_batch([b"t"], producer_id=PID, producer_epoch=0, base_sequence=1,
                                      transactional=True)))
    with pytest.raises(KafkaError) as e:
        leader.append(records(build_marker(PID, 0, commit=False, coordinator_epoch=3)))
    assert e.value.code.name == "TRANSACTION_COORDINATOR_FENCED"
