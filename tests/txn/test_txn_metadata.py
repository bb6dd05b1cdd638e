"""The transaction state machine: every edge Kafka allows is allowed, every other one raises."""

from __future__ import annotations

import itertools

import pytest

from txn.metadata import (
    IllegalStateTransition,
    TransactionMetadata,
    TransactionState,
    check_transition,
    is_epoch_exhausted,
)

S = TransactionState
# Written out independently from Kafka's TransactionState.validPreviousStates: (from, to).
ALLOWED = {
    (S.EMPTY, S.EMPTY), (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_ABORT, S.EMPTY),
    (S.ONGOING, S.ONGOING), (S.EMPTY, S.ONGOING), (S.COMPLETE_COMMIT, S.ONGOING),
    (S.COMPLETE_ABORT, S.ONGOING),
    (S.ONGOING, S.PREPARE_COMMIT),
    (S.ONGOING, S.PREPARE_ABORT), (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT), (S.EMPTY, S.PREPARE_ABORT),
    (S.COMPLETE_COMMIT, S.PREPARE_ABORT), (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.EMPTY, S.DEAD), (S.COMPLETE_COMMIT, S.DEAD), (S.COMPLETE_ABORT, S.DEAD),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
}


@pytest.mark.parametrize("old,new", list(itertools.product(S, S)),
                         ids=lambda s: s.wire_name)
def test_every_transition(old: TransactionState, new: TransactionState) -> None:
    m = TransactionMetadata("t", 7, state=old)
    if (old, new) in ALLOWED:
        check_transition(old, new)
        nxt = m.prepare(new)
        assert nxt.state is new and m.state is old  # prepare copies, never mutates
    else:
        with pytest.raises(IllegalStateTransition):
            check_transition(old, new)
        with pytest.raises(IllegalStateTransition):
            m.prepare(new)


def test_wire_names_and_status_bytes() -> None:
    expected = {"Empty": 0, "Ongoing": 1, "PrepareCommit": 2, "PrepareAbort": 3, "CompleteCommit": 4,
                "CompleteAbort": 5, "Dead": 6, "PrepareEpochFence": 7}
    assert {s.wire_name: s.value for s in S} == expected
    for name in expected:
        assert S.from_wire_name(name).wire_name == name
    with pytest.raises(ValueError):
        S.from_wire_name("Bogus")


def test_expiration_allowed_only_when_no_transaction_is_open() -> None:
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


def test_epoch_exhaustion_threshold() -> None:
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766)
    assert is_epoch_exhausted(32767)


def test_prepare_copies_partitions() -> None:
    m = TransactionMetadata("t", 1, state=S.EMPTY)
    nxt = m.prepare(S.ONGOING, partitions={("a", 0)})
    nxt.partitions.add(("b", 1))
    assert m.partitions == set()
