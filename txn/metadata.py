"""Transaction states and the per-transactional-id metadata the coordinator keeps.

Theory of operation: every transactional id has one :class:`TransactionMetadata`. Its
``state`` only moves along the edges of :class:`TransactionState` (each state lists its valid
previous states, exactly as Kafka's ``TransactionState``); anything else is a bug and raises
:class:`IllegalStateTransition`. The coordinator never mutates a live metadata object to
change state: it builds the next version with :meth:`TransactionMetadata.prepare`, writes it
as a record to ``__transaction_state`` and lets ``replay()`` install it. While a write is in
flight, ``pending_state`` is set on the live object so that concurrent requests for the same
transactional id are answered CONCURRENT_TRANSACTIONS instead of racing.

This module does no I/O.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps ``Short.MAX_VALUE`` in reserve for fencing, so MAX-1 is the last usable epoch."""
    return epoch >= SHORT_MAX - 1


class IllegalStateTransition(RuntimeError):
    """A transition that Kafka's state machine forbids: always a coordinator bug."""


class TransactionState(Enum):
    """Kafka's transaction states; ``value`` is the status byte of ``TransactionLogValue``.

    ``Empty``            no transaction open. transition: AddPartitions/AddOffsets => Ongoing
    ``Ongoing``          partitions added. transition: EndTxn(commit) => PrepareCommit,
                         EndTxn(abort) / timeout / fencing => PrepareAbort
    ``PrepareCommit``    commit decided and durable; markers being written => CompleteCommit
    ``PrepareAbort``     abort decided and durable; markers being written => CompleteAbort
    ``CompleteCommit``   markers written everywhere (a finished transaction, like Empty)
    ``CompleteAbort``    markers written everywhere
    ``Dead``             transactional id expired; a tombstone is being written
    ``PrepareEpochFence``  in memory only: an Ongoing transaction whose producer is being
                         fenced (InitProducerId by a new instance, or a timeout) => PrepareAbort
    """

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def wire_name(self) -> str:
        """The name DescribeTransactions / ListTransactions report (``Ongoing``, ``PrepareCommit`` ...)."""
        return _NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS[self]

    @property
    def expiration_allowed(self) -> bool:
        """Whether an idle transactional id in this state may expire (be tombstoned)."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                        TransactionState.COMPLETE_ABORT)

    @property
    def is_complete(self) -> bool:
        """No transaction open: a new one may start from here."""
        return self.expiration_allowed

    @classmethod
    def from_wire_name(cls, name: str) -> TransactionState:
        for state, n in _NAMES.items():
            if n == name:
                return state
        raise ValueError(f"unknown transaction state {name!r}")


TS = TransactionState
_NAMES = {
    TS.EMPTY: "Empty", TS.ONGOING: "Ongoing", TS.PREPARE_COMMIT: "PrepareCommit",
    TS.PREPARE_ABORT: "PrepareAbort", TS.COMPLETE_COMMIT: "CompleteCommit",
    TS.COMPLETE_ABORT: "CompleteAbort", TS.DEAD: "Dead", TS.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    TS.EMPTY: frozenset({TS.EMPTY, TS.COMPLETE_COMMIT, TS.COMPLETE_ABORT}),
    TS.ONGOING: frozenset({TS.ONGOING, TS.EMPTY, TS.COMPLETE_COMMIT, TS.COMPLETE_ABORT}),
    TS.PREPARE_COMMIT: frozenset({TS.ONGOING}),
    # Kafka 4 (transactions v2) also allows Empty/Complete* => PrepareAbort; kept for parity.
    TS.PREPARE_ABORT: frozenset({TS.ONGOING, TS.PREPARE_EPOCH_FENCE, TS.EMPTY, TS.COMPLETE_COMMIT,
                                 TS.COMPLETE_ABORT}),
    TS.COMPLETE_COMMIT: frozenset({TS.PREPARE_COMMIT}),
    TS.COMPLETE_ABORT: frozenset({TS.PREPARE_ABORT}),
    TS.DEAD: frozenset({TS.EMPTY, TS.COMPLETE_COMMIT, TS.COMPLETE_ABORT}),
    TS.PREPARE_EPOCH_FENCE: frozenset({TS.ONGOING}),
}

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class TransactionMetadata:
    """What the coordinator knows about one transactional id.

    Invariants: ``partitions`` is empty unless ``state`` is Ongoing, Prepare* or
    PrepareEpochFence; ``txn_start_timestamp`` is -1 when no transaction has started since the
    last InitProducerId. ``last_producer_epoch`` is kept in memory only, as is ``last_producer_id``
    with ``TransactionLogValue`` v0 (v1, written for transactions v2, persists it as
    PreviousProducerId, which recognises a retried EndTxn v5 that rotated the producer id): they
    let a KIP-360 retry of InitProducerId be recognised, and are lost on restart, which only turns
    such a retry into PRODUCER_FENCED.
    """

    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TransactionState = TransactionState.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # Transactions v2 (KIP-890 part 2): the version of the protocol the client ends its
    # transactions with (2: every EndTxn bumps the epoch), and the producer id an exhausted
    # epoch rotates to when the transaction completes (TransactionLogValue v1 tagged fields).
    client_transaction_version: int = 0
    next_producer_id: int = NO_PRODUCER_ID
    # Not part of the persisted record: the state a write in flight is moving this id to.
    pending_state: TransactionState | None = None
    # A fence whose PrepareAbort write failed: the next fence must not bump the epoch again.
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def prepare(self, state: TransactionState, **changes: object) -> TransactionMetadata:
        """The next version of this metadata, in ``state``; raises on an illegal transition.

        Returns a copy; the live object is untouched apart from ``pending_state``, which the
        caller sets while the copy is being written.
        """
        check_transition(self.state, state, self.transactional_id)
        nxt = dataclasses.replace(self, state=state, pending_state=None, **changes)  # type: ignore[arg-type]
        nxt.partitions = set(nxt.partitions)
        return nxt

    def copy(self) -> TransactionMetadata:
        c = dataclasses.replace(self)
        c.partitions = set(self.partitions)
        return c


def check_transition(old: TransactionState, new: TransactionState, transactional_id: str = "") -> None:
    if old not in new.valid_previous_states:
        raise IllegalStateTransition(
            f"transactional id {transactional_id!r}: illegal transition {old.wire_name} -> {new.wire_name}")
