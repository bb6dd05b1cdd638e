"""Coordinator-written transactional batches (no sequence) pass the producer state checks.

TxnOffsetCommit's offsets are appended to __consumer_offsets as a transactional batch carrying the
producer id/epoch and base sequence -1 (Kafka appends them with origin COORDINATOR). They must be
accepted every time -- neither an out-of-order sequence nor a "duplicate" of the previous one --
and still open/close the producer's transaction like client batches.
"""

from __future__ import annotations

import pytest

from log.producer_state import ProducerStateManager
from protocol.errors import OutOfOrderSequenceError
from protocol.records import ATTR_TRANSACTIONAL, read_header, validate_batches
from txn.markers import TxnMarker, build_batch, build_marker_batch


def _append(psm: ProducerStateManager, raw: bytes, offset: int) -> list:
    v = validate_batches(raw)
    h = v.batches[0]
    infos = psm.validate_append(v.batches, buffer=v.buffer)
    h.base_offset = offset
    return psm.commit(infos, v.buffer)


def test_sequenceless_transactional_batches_are_accepted_repeatedly() -> None:
    psm = ProducerStateManager()
    for i in range(3):
        raw = build_batch([(b"k", b"v%d" % i)], producer_id=7, producer_epoch=2, base_sequence=-1,
                          attributes=ATTR_TRANSACTIONAL)
        assert _append(psm, raw, i) == []
    assert psm.first_unstable_offset() == 0
    done = _append(psm, build_marker_batch(TxnMarker(7, 2, 0, True)), 3)
    assert [(c.producer_id, c.first_offset, c.is_aborted) for c in done] == [(7, 0, False)]
    assert psm.first_unstable_offset() is None


def test_client_batches_still_need_sequences() -> None:
    psm = ProducerStateManager()
    _append(psm, build_batch([(None, b"x")], producer_id=8, producer_epoch=0, base_sequence=0), 0)
    raw = build_batch([(None, b"x")], producer_id=8, producer_epoch=0, base_sequence=3)
    with pytest.raises(OutOfOrderSequenceError):
        psm.validate_append([read_header(raw)])
