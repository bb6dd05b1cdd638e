"""ProducerStateManager: duplicates, gaps, fencing, sequence wrap, transactions, snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from log.producer_state import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    INT32_MAX,
    ProducerStateManager,
    control_record_type,
)
from protocol.errors import DuplicateSequenceError, InvalidProducerEpochError, OutOfOrderSequenceError
from protocol.records import BatchHeader

_next_offset = [0]


def header(pid: int, epoch: int, seq: int, count: int = 1, *, offset: int | None = None, ts: int = 1000,
           transactional: bool = False, control: bool = False) -> BatchHeader:
    attrs = (0x10 if transactional else 0) | (0x20 if control else 0)
    return BatchHeader(0, offset if offset is not None else 0, 49, 0, 2, 0, attrs, count - 1, ts, ts, pid, epoch,
                       seq, count)


class Appender:
    """Validate + commit like Log.append does, assigning offsets."""

    def __init__(self, psm: ProducerStateManager) -> None:
        self.psm = psm
        self.offset = 0

    def __call__(self, *hs: BatchHeader) -> list[tuple[int, int]]:
        infos = self.psm.validate_append(hs)
        out = []
        for h in hs:
            h.base_offset = self.offset
            self.offset += h.last_offset_delta + 1
            out.append((h.base_offset, h.base_offset + h.last_offset_delta))
        self.psm.commit(infos)
        self.psm.map_end_offset = self.offset
        return out


@pytest.fixture
def app(tmp_path: Path) -> Appender:
    return Appender(ProducerStateManager(tmp_path))


def test_in_sequence_appends(app: Appender) -> None:
    assert app(header(1, 0, 0, 3)) == [(0, 2)]
    assert app(header(1, 0, 3, 2)) == [(3, 4)]
    e = app.psm.last_entry(1)
    assert e is not None and (e.producer_epoch, e.first_seq, e.last_seq, e.last_data_offset) == (0, 0, 4, 4)


def test_duplicate_of_any_of_last_five(app: Appender) -> None:
    for i in range(7):
        app(header(1, 0, i))
    with pytest.raises(DuplicateSequenceError) as e:
        app.psm.validate_append([header(1, 0, 2)])
    assert (e.value.first_offset, e.value.last_offset) == (2, 2)
    # seq 1 has left the window of five: it is out of order, not a duplicate
    with pytest.raises(OutOfOrderSequenceError):
        app.psm.validate_append([header(1, 0, 1)])


def test_duplicate_needs_same_epoch_and_range(app: Appender) -> None:
    app(header(1, 0, 0, 3))
    with pytest.raises(OutOfOrderSequenceError):
        app.psm.validate_append([header(1, 0, 0, 2)])  # overlapping, not identical
    app.psm.validate_append([header(1, 1, 0, 3)])  # same seqs, new epoch: a fresh start


def test_gap_and_unknown_producer(app: Appender) -> None:
    app(header(1, 0, 0))
    with pytest.raises(OutOfOrderSequenceError):
        app.psm.validate_append([header(1, 0, 2)])
    # An unknown producer may start at any sequence (Kafka: its state may have gone with
    # retention or DeleteRecords); from then on its sequences must follow.
    app(header(2, 0, 5))
    assert app.psm.last_entry(2).last_seq == 5  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceError):
        app.psm.validate_append([header(2, 0, 7)])


def test_fencing_and_epoch_bump(app: Appender) -> None:
    app(header(1, 3, 0, 2))
    with pytest.raises(InvalidProducerEpochError):
        app.psm.validate_append([header(1, 2, 2)])
    with pytest.raises(OutOfOrderSequenceError):
        app.psm.validate_append([header(1, 4, 5)])  # a new epoch must start at 0
    app(header(1, 4, 0))
    assert app.psm.last_entry(1).producer_epoch == 4  # type: ignore[union-attr]
    with pytest.raises(InvalidProducerEpochError):
        app.psm.validate_append([header(1, 3, 2)])


def test_sequence_wraps_at_int32_max(app: Appender) -> None:
    app(header(1, 0, 0))
    e = app.psm.last_entry(1)
    assert e is not None
    e.batch_metadata[-1].last_seq = INT32_MAX - 2
    app(header(1, 0, INT32_MAX - 1, 2))
    app(header(1, 0, 0, 1))
    assert app.psm.last_entry(1).last_seq == 0  # type: ignore[union-attr]


def test_batch_spanning_the_wrap(app: Appender) -> None:
    app(header(1, 0, 0))
    app.psm.last_entry(1).batch_metadata[-1].last_seq = INT32_MAX - 1  # type: ignore[union-attr]
    h = header(1, 0, INT32_MAX, 3)  # seqs MAX, 0, 1
    assert h.last_sequence == 1
    app(h)
    with pytest.raises(DuplicateSequenceError):
        app.psm.validate_append([header(1, 0, INT32_MAX, 3)])
    app(header(1, 0, 2))


def test_several_batches_in_one_append(app: Appender) -> None:
    assert app(header(1, 0, 0, 2), header(1, 0, 2, 2)) == [(0, 1), (2, 3)]
    with pytest.raises(OutOfOrderSequenceError):
        app.psm.validate_append([header(1, 0, 4), header(1, 0, 7)])
    assert app.psm.last_entry(1).last_seq == 3  # type: ignore[union-attr]  # nothing committed


def test_nothing_committed_on_failure(app: Appender) -> None:
    app(header(1, 0, 0))
    with pytest.raises(OutOfOrderSequenceError):
        app.psm.validate_append([header(2, 0, 0), header(1, 0, 5)])
    assert app.psm.last_entry(2) is None
    assert app.psm.last_entry(1).last_seq == 0  # type: ignore[union-attr]


def test_transactions_open_and_close(app: Appender) -> None:
    app(header(1, 0, 0, 2, transactional=True))
    app(header(2, 0, 0, 1, transactional=True))
    assert app.psm.first_unstable_offset() == 0
    app(header(1, 0, 2, 1, transactional=True))
    assert app.psm.last_entry(1).current_txn_first_offset == 0  # type: ignore[union-attr]
    infos = app.psm.validate_append([header(1, 0, -1, control=True)])
    h = infos[1].batches[0]
    h.base_offset = app.offset
    app.offset += 1
    done = app.psm.commit(infos)
    assert [(c.producer_id, c.first_offset, c.last_offset) for c in done] == [(1, 0, 4)]
    assert app.psm.first_unstable_offset() == 2
    assert app.psm.last_entry(1).current_txn_first_offset == -1  # type: ignore[union-attr]
    # the marker did not disturb the sequence
    app(header(1, 0, 3))


def test_snapshot_round_trip(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    app = Appender(psm)
    for pid in (5, 6, 2**40):
        for s in range(7):
            app(header(pid, 1, s * 2, 2, ts=5000 + s))
    app(header(9, 0, 0, transactional=True))
    psm.take_snapshot()
    assert psm.list_snapshots() == [app.offset]
    other = ProducerStateManager(tmp_path)
    assert other.load_latest_snapshot(10**9) == app.offset
    assert other.producers == psm.producers
    assert other.first_unstable_offset() == psm.first_unstable_offset()
    with pytest.raises(DuplicateSequenceError):
        other.validate_append([header(6, 1, 10, 2)])
    other.validate_append([header(6, 1, 14, 1)])


def test_snapshot_selection_and_corruption(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    app = Appender(psm)
    offsets = []
    for i in range(5):
        app(header(1, 0, i))
        psm.take_snapshot()
        offsets.append(app.offset)
    assert psm.list_snapshots() == offsets[-3:]  # only the latest three are kept
    # a snapshot above the log end is deleted; a corrupt one is skipped
    path = psm.snapshot_path(offsets[-2])
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_latest_snapshot(offsets[-2]) == offsets[-3]
    assert fresh.list_snapshots() == [offsets[-3]]
    assert fresh.last_entry(1).last_seq == 2  # type: ignore[union-attr]


def test_control_record_type() -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    for t in (CONTROL_ABORT, CONTROL_COMMIT):
        b = DefaultRecordBatchBuilder(2, 0, True, 1, 0, -1, 1 << 20)
        b.append(0, timestamp=1, key=b"\x00\x00" + t.to_bytes(2, "big"), value=b"\x00\x00\x00\x00\x00\x05",
                 headers=[])
        assert control_record_type(bytes(b.build())) == t


def test_expire(app: Appender) -> None:
    app(header(1, 0, 0, ts=1000))
    app(header(2, 0, 0, ts=5000, transactional=True))
    assert app.psm.remove_expired_producers(now_ms=100_000, expiration_ms=50_000) == 1
    assert app.psm.last_entry(1) is None and app.psm.last_entry(2) is not None
