"""The transaction coordinator: Kafka's TransactionCoordinator + TransactionStateManager in one.

Theory of operation
-------------------
One :class:`TransactionMetadata` per transactional id, owned by this object and changed only
here, on the broker's event loop (no locks). Every state change follows the same three steps:

1. *validate*: check producer id / epoch / state; errors are raised as :class:`KafkaError`
   carrying Kafka's code (PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE ...).
2. *write*: encode the next metadata as a ``TransactionLogKey``/``TransactionLogValue`` record
   and append it to the transactional id's partition of ``__transaction_state``. Until the
   record is replicated the metadata carries ``pending_state``, so a concurrent request for
   the same id gets CONCURRENT_TRANSACTIONS (retriable) instead of racing.
3. *replay*: the record is applied by :meth:`replay` -- the very function that rebuilds the
   state from the log at start-up, so live and recovered state cannot drift apart -- once, as
   it enters the leader's log (:mod:`log.coordinator_runtime`), never again when its replication
   completes: by then the id's partition may have been reloaded and moved on.

EndTxn writes PrepareCommit/PrepareAbort; once that is durable the outcome is decided. Markers
are then written to every partition of the transaction (retried until each partition accepts
it) and finally CompleteCommit/CompleteAbort is written. After a crash, :meth:`load` finds
transactions still in Prepare* and drives them to Complete*; transactions still Ongoing are
aborted by the timeout task. So a transaction ends committed everywhere or aborted everywhere.

A transaction open longer than its ``transaction.timeout.ms`` is aborted by
:meth:`abort_timed_out_transactions` (run every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``): the producer epoch is bumped
(fencing the producer) and the abort proceeds as above. Idle transactional ids older than
``transactional.id.expiration.ms`` are tombstoned by :meth:`expire_transactional_ids`.

Transactions v2 (KIP-890 part 2, ``transaction_version`` 2: EndTxn v5, Produce v12,
TxnOffsetCommit v5, AddPartitionsToTxn v5 from a partition leader): partitions join the
transaction implicitly when the producer first writes to them (:meth:`add_partitions` on the
leader's behalf), and every EndTxn bumps the producer epoch -- Prepare* is written with epoch+1
(the old epoch kept as ``last_producer_epoch``), the markers carry the new epoch, which fences
any late write of the finished transaction, and EndTxn answers the new producer id and epoch.
An exhausted epoch (``Short.MAX - 1``) instead allocates ``next_producer_id``, written with
Prepare* and installed (at epoch 0) by Complete*. A retried EndTxn v5 (its answer lost) carries
the epoch just below the current one (or the exhausted one of the rotated producer id) and is
answered with the current one -- which also lets a v2 producer whose transaction timed out
(aborted with a bumped epoch) abort and carry on; a v2 producer may also abort when no
transaction is open (Empty/Complete* -> PrepareAbort, bumping the epoch). Older clients keep
transactions v1 unchanged. This module does no network I/O.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from log.coordinator_runtime import CoordinatorRuntime
from protocol.errors import ErrorCode, KafkaError

from . import transaction_log as tlog
from .markers import TxnMarker
from .metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    SHORT_MAX,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from .storage import Record as LogRecord
from .storage import TransactionStorage

log = logging.getLogger(__name__)

TS = TransactionState
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"

# Marker write errors after which the partition is dropped from the transaction rather than
# retried: the topic is gone, or the partition already moved past this producer epoch.
_MARKER_GIVE_UP = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                   ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED,
                   ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_TOPIC_EXCEPTION}


@dataclass(slots=True)
class TransactionConfig:
    """Kafka's coordinator settings, with Kafka's defaults."""

    transaction_max_timeout_ms: int = 900_000                       # transaction.max.timeout.ms
    num_partitions: int = tlog.DEFAULT_NUM_PARTITIONS               # transaction.state.log.num.partitions
    abort_timed_out_interval_ms: int = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    transactional_id_expiration_ms: int = 604_800_000               # transactional.id.expiration.ms
    remove_expired_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms
    offsets_num_partitions: int = 50                                # offsets.topic.num.partitions
    coordinator_epoch: int = 0
    marker_retry_backoff_ms: int = 100
    # How long EndTxn waits for the markers before answering. Kafka answers as soon as Prepare*
    # is durable; waiting briefly for Complete* spares the client a CONCURRENT_TRANSACTIONS
    # retry loop on its next AddPartitionsToTxn. The outcome is decided either way.
    end_txn_wait_ms: int = 5_000

    @classmethod
    def from_properties(cls, get: Callable[[str], object]) -> TransactionConfig:
        """Build from a broker config lookup ``get(name) -> value or None``."""
        c = cls()
        names = {
            "transaction_max_timeout_ms": "transaction.max.timeout.ms",
            "num_partitions": "transaction.state.log.num.partitions",
            "abort_timed_out_interval_ms": "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "transactional_id_expiration_ms": "transactional.id.expiration.ms",
            "remove_expired_interval_ms": "transaction.remove.expired.transaction.cleanup.interval.ms",
            "offsets_num_partitions": "offsets.topic.num.partitions",
        }
        for attr, prop in names.items():
            try:
                v = get(prop)
            except Exception:
                v = None
            if v is not None and v != "":
                setattr(c, attr, int(v))  # type: ignore[call-overload]
        return c


@dataclass(slots=True)
class InitProducerIdResult:
    producer_id: int
    producer_epoch: int


class TransactionCoordinator:
    """Owns every transactional id's metadata; the only writer of ``__transaction_state``."""

    def __init__(self, storage: TransactionStorage, producer_ids: object,
                 config: TransactionConfig | None = None,
                 clock: Callable[[], int] | None = None, fault: str | None = None) -> None:
        self.storage = storage
        self.producer_ids = producer_ids
        self.config = config or TransactionConfig()
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.transactions: dict[str, TransactionMetadata] = {}
        self.runtime = CoordinatorRuntime()
        self.loaded = False
        self._completions: dict[str, asyncio.Task[None]] = {}
        self._background: list[asyncio.Task[None]] = []
        # Fault injection for crash tests only (the broker property transaction.fault.injection):
        # "crash-before-prepare" or "crash-after-markers=K" SIGKILL the broker at that point
        # of the next commit, to prove the outcome is all-or-nothing after a restart.
        self.fault = fault
        self._markers_written = 0

    # --- helpers --------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return tlog.partition_for(transactional_id, self.config.num_partitions)

    def _new_producer_id(self) -> int:
        gen = getattr(self.producer_ids, "generate", None) or self.producer_ids.generate_producer_id  # type: ignore[attr-defined]
        return int(gen())

    def _check_loaded(self) -> None:
        if not self.loaded:
            raise KafkaError(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)

    def _get(self, transactional_id: str | None) -> TransactionMetadata:
        if not transactional_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "transactional id must not be empty")
        self._check_loaded()
        m = self.transactions.get(transactional_id)
        if m is None:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        return m

    # --- log: write and replay ------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one ``__transaction_state`` record: the only way durable state changes."""
        tid = tlog.decode_key(key)
        if value is None:
            self.transactions.pop(tid, None)
            return
        m = tlog.decode_value(value).to_metadata(tid)
        old = self.transactions.get(tid)
        if old is not None and m.last_producer_id == NO_PRODUCER_ID:
            # Not in TransactionLogValue v0: carried over from memory (lost only on restart).
            m.last_producer_id = old.last_producer_id
        self.transactions[tid] = m

    async def _write(self, current: TransactionMetadata, nxt: TransactionMetadata) -> TransactionMetadata:
        """Persist ``nxt`` (the next version of ``current``), installed via replay() as the record
        enters the log; return it once the record is replicated."""
        if current.pending_state is not None:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        current.pending_state = nxt.state
        key = tlog.encode_key(nxt.transactional_id)
        value = tlog.encode_value(nxt)
        installed: list[TransactionMetadata] = []

        def apply() -> None:
            self.replay(key, value)
            m = self.transactions[nxt.transactional_id]
            m.last_producer_epoch = nxt.last_producer_epoch
            m.last_producer_id = nxt.last_producer_id
            m.pending_state = nxt.state  # until replicated: other writers of this id wait
            installed.append(m)

        try:
            await self._append(nxt.transactional_id, [(key, value)], apply)
        except BaseException as e:
            if installed and self.transactions.get(nxt.transactional_id) is installed[0]:
                # Appended but not replicated: the transition is reverted, as Kafka's
                # transaction coordinator leaves the metadata unchanged when its append fails,
                # so the client's retry (e.g. EndTxn after COORDINATOR_NOT_AVAILABLE) writes it
                # again. Nothing else wrote this id meanwhile: pending_state kept them out.
                self.transactions[nxt.transactional_id] = current
            if not isinstance(e, KafkaError):
                raise
            log.warning("Writing %s for transactional id %s failed: %s", nxt.state.wire_name,
                        nxt.transactional_id, e)
            # Kafka's appendTransactionToLog maps storage errors to retriable coordinator errors.
            if e.code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                          ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
                          ErrorCode.KAFKA_STORAGE_ERROR):
                raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, str(e)) from e
            if e.code in (ErrorCode.NOT_LEADER_OR_FOLLOWER,):
                raise KafkaError(ErrorCode.NOT_COORDINATOR, str(e)) from e
            if e.code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE,
                          ErrorCode.INVALID_FETCH_SIZE):
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from e
            raise
        finally:
            current.pending_state = None
            if installed:
                installed[0].pending_state = None
        return installed[0]

    async def _write_tombstone(self, current: TransactionMetadata) -> None:
        current.pending_state = TS.DEAD
        key = tlog.encode_key(current.transactional_id)
        try:
            await self._append(current.transactional_id, [(key, None)], lambda: self.replay(key, None))
        finally:
            current.pending_state = None

    async def _append(self, transactional_id: str, records: list[LogRecord],
                      apply: Callable[[], None]) -> None:
        partition = self.partition_for(transactional_id)
        await self.runtime.write(
            partition, lambda on_appended: self.storage.append(partition, records,
                                                               on_appended=on_appended), apply)

    async def load(self) -> None:
        """Replay every partition of ``__transaction_state``; then resume unfinished commits/aborts."""
        self.transactions.clear()
        for p in range(self.config.num_partitions):
            for key, value in self.storage.read(p):
                try:
                    self.replay(key, value)
                except ValueError as e:
                    log.warning("Skipping unreadable __transaction_state-%d record: %s", p, e)
        self.loaded = True
        for m in list(self.transactions.values()):
            if m.state in (TS.PREPARE_COMMIT, TS.PREPARE_ABORT):
                log.info("Resuming %s of transactional id %s after restart", m.state.wire_name,
                         m.transactional_id)
                self._start_completion(m)
        log.log(logging.INFO if self.transactions else logging.DEBUG, "Loaded %d transactional ids from %s",
                len(self.transactions), tlog.TRANSACTION_STATE_TOPIC)

    def load_partition(self, partition: int) -> None:
        """In a cluster: this broker became the leader of ``__transaction_state-<partition>``;
        replay it (its replica here is up to date with what was committed) and finish the
        commits and aborts the previous coordinator left prepared.

        A completion task still running here from an earlier tenure is cancelled first: the log
        may have moved on (another coordinator finished that transaction, the producer began the
        next), and the old task, its markers written for the old partitions, would otherwise
        complete whatever transaction it finds now, without that one's markers."""
        for tid in [t for t in self.transactions if self.partition_for(t) == partition]:
            stale = self._completions.pop(tid, None)
            if stale is not None:
                stale.cancel()
            del self.transactions[tid]
        for key, value in self.storage.read(partition):
            try:
                self.replay(key, value)
            except ValueError as e:
                log.warning("Skipping unreadable __transaction_state-%d record: %s", partition, e)
        n = 0
        for m in list(self.transactions.values()):
            if self.partition_for(m.transactional_id) != partition:
                continue
            n += 1
            if m.state in (TS.PREPARE_COMMIT, TS.PREPARE_ABORT):
                log.info("Resuming %s of transactional id %s (new coordinator)", m.state.wire_name,
                         m.transactional_id)
                self._start_completion(m)
        log.info("Loaded %d transactional ids from %s-%d", n, tlog.TRANSACTION_STATE_TOPIC, partition)

    # --- InitProducerId -------------------------------------------------------------------

    def validate_timeout(self, txn_timeout_ms: int) -> None:
        if txn_timeout_ms <= 0 or txn_timeout_ms > self.config.transaction_max_timeout_ms:
            raise KafkaError(ErrorCode.INVALID_TRANSACTION_TIMEOUT,
                             f"transaction timeout {txn_timeout_ms} ms must be in (0, "
                             f"transaction.max.timeout.ms={self.config.transaction_max_timeout_ms}]")

    async def init_producer_id(self, transactional_id: str, txn_timeout_ms: int,
                               producer_id: int = NO_PRODUCER_ID,
                               producer_epoch: int = NO_PRODUCER_EPOCH) -> InitProducerIdResult:
        """InitProducerId for a transactional id (KIP-98, KIP-360 when producer id/epoch are given).

        Outcomes: a new id gets a fresh producer id at epoch 0; a known id gets its epoch
        bumped (fencing older instances), or a new producer id once the epoch is exhausted; an
        open transaction is first aborted with a bumped epoch and CONCURRENT_TRANSACTIONS is
        returned so the client retries once the abort is complete.
        """
        if not transactional_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "transactional id must not be empty")
        self.validate_timeout(txn_timeout_ms)
        self._check_loaded()
        expected = producer_id != NO_PRODUCER_ID or producer_epoch != NO_PRODUCER_EPOCH
        now = self.clock()
        m = self.transactions.get(transactional_id)
        if m is None:
            m = TransactionMetadata(transactional_id, self._new_producer_id(), txn_timeout_ms=txn_timeout_ms,
                                    txn_last_update_timestamp=now)
            self.transactions[transactional_id] = m
        if m.pending_transition_in_progress:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected and not self._is_valid_producer_id(m, producer_id, producer_epoch):
            raise KafkaError(ErrorCode.PRODUCER_FENCED)
        if m.state in (TS.PREPARE_COMMIT, TS.PREPARE_ABORT):
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if m.state is TS.ONGOING:
            # Abort the open transaction with a bumped epoch (never returned to the client), then
            # let the client retry: its retry bumps the epoch once more, or rotates the id.
            await self._fence_and_abort(m)
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if m.state in (TS.DEAD, TS.PREPARE_EPOCH_FENCE):
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        # Empty, CompleteCommit, CompleteAbort
        if m.is_producer_epoch_exhausted and (not expected or producer_epoch == m.producer_epoch):
            nxt = m.prepare(TS.EMPTY, producer_id=self._new_producer_id(), producer_epoch=0,
                            last_producer_id=m.producer_id,
                            last_producer_epoch=m.producer_epoch if expected else NO_PRODUCER_EPOCH,
                            txn_timeout_ms=txn_timeout_ms, partitions=set(), txn_start_timestamp=-1,
                            txn_last_update_timestamp=now)
        else:
            nxt = self._prepare_increment_epoch(m, txn_timeout_ms, producer_epoch if expected else None, now)
        installed = await self._write(m, nxt)
        return InitProducerIdResult(installed.producer_id, installed.producer_epoch)

    @staticmethod
    def _is_valid_producer_id(m: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
        # 1. metadata was just created (client recovering from UNKNOWN_PRODUCER_ID);
        # 2. the id matches (the epoch is checked when bumping);
        # 3. the previous id, with an exhausted epoch: a retry of a rotation whose answer was lost.
        return (m.producer_epoch == NO_PRODUCER_EPOCH or producer_id == m.producer_id
                or (producer_id == m.last_producer_id and is_epoch_exhausted(producer_epoch)))

    @staticmethod
    def _prepare_increment_epoch(m: TransactionMetadata, txn_timeout_ms: int, expected_epoch: int | None,
                                 now: int) -> TransactionMetadata:
        if m.is_producer_epoch_exhausted:
            # Only reachable when the client's expected epoch matches neither epoch.
            raise KafkaError(ErrorCode.PRODUCER_FENCED)
        bumped = m.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif m.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == m.producer_epoch:
            epoch, last = bumped, m.producer_epoch
        elif expected_epoch == m.last_producer_epoch:
            epoch, last = m.producer_epoch, m.last_producer_epoch  # retry of a bump that succeeded
        else:
            raise KafkaError(ErrorCode.PRODUCER_FENCED,
                             f"expected epoch {expected_epoch} matches neither current {m.producer_epoch} "
                             f"nor previous {m.last_producer_epoch}")
        return m.prepare(TS.EMPTY, producer_epoch=epoch, last_producer_epoch=last, txn_timeout_ms=txn_timeout_ms,
                         partitions=set(), txn_start_timestamp=-1, txn_last_update_timestamp=now)

    # --- fencing / abort ------------------------------------------------------------------

    async def _fence_and_abort(self, m: TransactionMetadata, bump: bool = True) -> None:
        """Ongoing -> PrepareEpochFence (memory) -> PrepareAbort (written) with a bumped epoch."""
        if m.producer_epoch == SHORT_MAX:
            log.error("Fencing transactional id %s whose epoch is already Short.MAX", m.transactional_id)
        bumped = m.producer_epoch if (m.has_failed_epoch_fence or m.producer_epoch == SHORT_MAX or not bump) \
            else m.producer_epoch + 1
        fence = m.prepare(TS.PREPARE_EPOCH_FENCE, producer_epoch=bumped)
        nxt = fence.prepare(TS.PREPARE_ABORT, last_producer_epoch=NO_PRODUCER_EPOCH,
                            txn_last_update_timestamp=self.clock())
        try:
            installed = await self._write(m, nxt)
        except KafkaError:
            # As Kafka: the bumped epoch stays in memory (the write may yet have reached the log),
            # so the fenced producer stays fenced and the next attempt does not bump again.
            m.producer_epoch, m.last_producer_epoch = bumped, NO_PRODUCER_EPOCH
            m.has_failed_epoch_fence = True
            raise
        self._start_completion(installed)

    async def abort_timed_out_transactions(self) -> list[str]:
        """Abort every Ongoing transaction older than its timeout; return their ids."""
        if not self.loaded:
            return []
        now = self.clock()
        aborted = []
        for m in list(self.transactions.values()):
            if (m.state is TS.ONGOING and not m.pending_transition_in_progress
                    and m.txn_start_timestamp + m.txn_timeout_ms < now):
                log.info("Aborting transaction of %s (producer id %d, epoch %d): open for %d ms, timeout %d ms",
                         m.transactional_id, m.producer_id, m.producer_epoch, now - m.txn_start_timestamp,
                         m.txn_timeout_ms)
                try:
                    # An exhausted epoch cannot be bumped: abort with the current one (Kafka's
                    # prepareNoTransit); the next InitProducerId rotates the producer id.
                    await self._fence_and_abort(m, bump=not m.is_producer_epoch_exhausted)
                    aborted.append(m.transactional_id)
                except KafkaError as e:
                    log.warning("Could not abort timed-out transaction of %s: %s", m.transactional_id, e)
        return aborted

    async def expire_transactional_ids(self) -> list[str]:
        """Tombstone ids idle (in a completed state) for longer than transactional.id.expiration.ms."""
        if not self.loaded:
            return []
        now = self.clock()
        expired = []
        for m in list(self.transactions.values()):
            if (m.state.expiration_allowed and not m.pending_transition_in_progress
                    and m.txn_last_update_timestamp + self.config.transactional_id_expiration_ms <= now):
                m.prepare(TS.DEAD)  # checks the transition
                try:
                    await self._write_tombstone(m)
                    expired.append(m.transactional_id)
                except KafkaError as e:
                    log.warning("Could not expire transactional id %s: %s", m.transactional_id, e)
        return expired

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------

    def _check_producer(self, m: TransactionMetadata, producer_id: int, producer_epoch: int) -> None:
        if m.producer_id != producer_id:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if m.producer_epoch != producer_epoch:
            raise KafkaError(ErrorCode.PRODUCER_FENCED)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition], transaction_version: int = 0) -> None:
        """Add partitions to the open transaction, starting one if none is open.

        ``transaction_version`` 2: the add is implicit (a Produce v12 or TxnOffsetCommit v5 on the
        producer's behalf); a transaction it starts ends with the v2 rules."""
        parts = set(partitions)
        m = self._get(transactional_id)
        self._check_producer(m, producer_id, producer_epoch)
        if m.pending_transition_in_progress or m.state in (TS.PREPARE_COMMIT, TS.PREPARE_ABORT):
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        if m.state is TS.DEAD or m.state is TS.PREPARE_EPOCH_FENCE:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE)
        if m.state is TS.ONGOING and parts <= m.partitions:
            return
        now = self.clock()
        start = now if m.state.is_complete else m.txn_start_timestamp
        version = max(transaction_version, m.client_transaction_version) if m.state is TS.ONGOING \
            else transaction_version
        nxt = m.prepare(TS.ONGOING, partitions=m.partitions | parts, txn_start_timestamp=start,
                        txn_last_update_timestamp=now, client_transaction_version=version)
        await self._write(m, nxt)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ ``verify_only``: are these partitions in the open transaction?"""
        parts = list(partitions)
        try:
            m = self._get(transactional_id)
            self._check_producer(m, producer_id, producer_epoch)
            if m.pending_transition_in_progress or m.state in (TS.PREPARE_COMMIT, TS.PREPARE_ABORT):
                raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        except KafkaError as e:
            return {tp: e.code for tp in parts}
        ongoing = m.state is TS.ONGOING
        return {tp: ErrorCode.NONE if ongoing and tp in m.partitions else ErrorCode.INVALID_TXN_STATE
                for tp in parts}

    def offsets_partition(self, group_id: str) -> TopicPartition:
        return CONSUMER_OFFSETS_TOPIC, tlog.partition_for(group_id, self.config.offsets_num_partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> None:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        await self.add_partitions(transactional_id, producer_id, producer_epoch,
                                  [self.offsets_partition(group_id)])

    def validate_txn_offset_commit(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                   group_id: str) -> None:
        """TxnOffsetCommit may only come from the current producer, inside a transaction that
        AddOffsetsToTxn joined the group's offsets partition to."""
        m = self._get(transactional_id)
        self._check_producer(m, producer_id, producer_epoch)
        if m.state is not TS.ONGOING or self.offsets_partition(group_id) not in m.partitions:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"the offsets partition of group {group_id} is not part of the transaction")

    # --- EndTxn ---------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                      transaction_version: int = 0) -> InitProducerIdResult:
        """EndTxn: decide the outcome (Prepare* durable), then complete it (markers, Complete*).

        Returns the producer id and epoch the client continues with: unchanged for transactions
        v1, bumped (or a new producer id at epoch 0) for v2 (EndTxn v5)."""
        m = self._get(transactional_id)
        tv2 = transaction_version >= 2
        st = m.state
        # v2 retries (Kafka's rules): the epoch this EndTxn already bumped, or the exhausted epoch
        # whose producer id it already rotated (the new id is at epoch 0).
        retry_bump = tv2 and producer_id == m.producer_id and producer_epoch + 1 == m.producer_epoch
        retry_overflow = tv2 and producer_id == m.last_producer_id != NO_PRODUCER_ID and m.producer_epoch == 0 \
            and producer_epoch == SHORT_MAX - 1
        retry = retry_bump or retry_overflow
        if m.producer_id != producer_id and not retry_overflow:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if not tv2 or st in (TS.ONGOING, TS.EMPTY):
            valid = producer_epoch == m.producer_epoch
        elif st in (TS.PREPARE_COMMIT, TS.PREPARE_ABORT):
            valid = retry_bump
        else:  # Complete*
            valid = retry or producer_epoch == m.producer_epoch
        if not valid:
            raise KafkaError(ErrorCode.PRODUCER_FENCED)
        if m.pending_transition_in_progress:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        current = InitProducerIdResult(m.producer_id, m.producer_epoch)
        if st is TS.ONGOING or tv2 and not retry and not commit and st.is_complete:
            if commit and self.fault == "crash-before-prepare":
                _crash(f"fault injection: before PrepareCommit of {transactional_id}")
            changes: dict[str, object] = {}
            if tv2:  # KIP-890 part 2: the epoch moves on with every transaction
                changes = {"producer_epoch": m.producer_epoch + 1, "last_producer_epoch": m.producer_epoch,
                           "client_transaction_version": transaction_version}
                if m.is_producer_epoch_exhausted:
                    changes["next_producer_id"] = self._new_producer_id()
                if st.is_complete:  # aborting with no transaction open: nothing to mark
                    changes.update(partitions=set(), txn_start_timestamp=self.clock())
            nxt = m.prepare(TS.PREPARE_COMMIT if commit else TS.PREPARE_ABORT,
                            txn_last_update_timestamp=self.clock(), **changes)
            installed = await self._write(m, nxt)
            task = self._start_completion(installed)
            if self.config.end_txn_wait_ms > 0:
                await asyncio.wait([task], timeout=self.config.end_txn_wait_ms / 1000)
            if installed.next_producer_id != NO_PRODUCER_ID:
                return InitProducerIdResult(installed.next_producer_id, 0)
            return InitProducerIdResult(installed.producer_id, installed.producer_epoch)
        if st is TS.COMPLETE_COMMIT and commit or st is TS.COMPLETE_ABORT and not commit:
            if tv2 and not retry:
                raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                                 f"transactional id {transactional_id} has no open transaction to end")
            return current  # a retry of an EndTxn that already completed
        if st is TS.PREPARE_COMMIT and commit or st is TS.PREPARE_ABORT and not commit:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
        raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                         f"cannot {'commit' if commit else 'abort'} transactional id {transactional_id} "
                         f"in state {st.wire_name}")

    def _start_completion(self, m: TransactionMetadata) -> asyncio.Task[None]:
        task = self._completions.get(m.transactional_id)
        if task is not None and not task.done():
            return task
        task = asyncio.get_running_loop().create_task(self._complete(m.transactional_id),
                                                      name=f"txn-complete-{m.transactional_id}")
        self._completions[m.transactional_id] = task
        tid = m.transactional_id
        task.add_done_callback(lambda t: self._completion_done(tid, t))
        return task

    def _completion_done(self, tid: str, task: asyncio.Task[None]) -> None:
        if self._completions.get(tid) is task:
            del self._completions[tid]
        if not task.cancelled() and task.exception() is not None:
            log.error("Completing the transaction of %s failed", tid, exc_info=task.exception())

    async def _complete(self, transactional_id: str) -> None:
        """Write the markers of a Prepare* transaction everywhere, then write Complete*."""
        backoff = self.config.marker_retry_backoff_ms / 1000
        m = self.transactions[transactional_id]
        commit = m.state is TS.PREPARE_COMMIT
        marker = TxnMarker(m.producer_id, m.producer_epoch, self.config.coordinator_epoch, commit)
        remaining = set(m.partitions)
        while remaining:
            order = sorted(remaining)
            results = await asyncio.gather(*(self._write_marker(tp, marker) for tp in order))
            for tp, code in zip(order, results, strict=True):
                if code is ErrorCode.NONE:
                    remaining.discard(tp)
                elif code in _MARKER_GIVE_UP:
                    log.warning("Dropping %s-%d from the transaction of %s: marker write failed with %s",
                                tp[0], tp[1], transactional_id, code.name)
                    remaining.discard(tp)
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)  # a partition that stays unavailable is retried gently
        while True:
            m = self.transactions[transactional_id]
            rotate: dict[str, object] = {}
            if m.next_producer_id != NO_PRODUCER_ID:  # v2, epoch exhausted: the new producer id starts
                rotate = {"producer_id": m.next_producer_id, "producer_epoch": 0, "last_producer_id": m.producer_id,
                          "last_producer_epoch": NO_PRODUCER_EPOCH, "next_producer_id": NO_PRODUCER_ID}
            nxt = m.prepare(TS.COMPLETE_COMMIT if commit else TS.COMPLETE_ABORT, partitions=set(),
                            txn_last_update_timestamp=self.clock(), **rotate)
            try:
                await self._write(m, nxt)
                return
            except Exception as e:  # a full disk must not strand the transaction in Prepare*
                log.warning("Writing %s for %s failed (%s); retrying", nxt.state.wire_name, transactional_id, e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _write_marker(self, tp: TopicPartition, marker: TxnMarker) -> ErrorCode:
        try:
            code = await self.storage.write_marker(tp[0], tp[1], marker)
        except KafkaError as e:
            code = e.code
        except Exception:
            log.exception("Writing a transaction marker to %s-%d failed", tp[0], tp[1])
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        if self.fault and self.fault.startswith("crash-after-markers=") and marker.commit and code == 0:
            self._markers_written += 1
            if self._markers_written >= int(self.fault.split("=", 1)[1]):
                _crash(f"fault injection: after {self._markers_written} COMMIT markers")
        return ErrorCode(code)

    async def wait_for_completions(self) -> None:
        """Wait until every Prepare* transaction has reached Complete* (tests, shutdown)."""
        while self._completions:
            await asyncio.gather(*list(self._completions.values()), return_exceptions=True)

    # --- describe / list ------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata:
        """DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND for unknown ids."""
        self._check_loaded()
        m = self.transactions.get(transactional_id)
        if m is None:
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return m

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_filter_ms: int = -1) -> tuple[list[TransactionMetadata], list[str]]:
        """ListTransactions: ``(matching metadata, unknown state filters)``.

        ``duration_filter_ms`` (v1, KIP-994) keeps transactions running longer than that.
        """
        self._check_loaded()
        wanted: set[TransactionState] = set()
        unknown = []
        for s in states:
            try:
                wanted.add(TransactionState.from_wire_name(s))
            except ValueError:
                unknown.append(s)
        if unknown and not wanted:
            return [], unknown
        pids = set(producer_ids)
        now = self.clock()
        out = []
        for m in self.transactions.values():
            if wanted and m.state not in wanted:
                continue
            if pids and m.producer_id not in pids:
                continue
            if duration_filter_ms >= 0 and (m.state is not TS.ONGOING
                                            or now - m.txn_start_timestamp <= duration_filter_ms):
                continue
            out.append(m)
        return out, unknown

    # --- background tasks -----------------------------------------------------------------

    def start_background(self) -> None:
        """Start the timeout-abort and id-expiration loops on the running event loop."""
        loop = asyncio.get_running_loop()
        self._background.append(loop.create_task(
            self._every(self.config.abort_timed_out_interval_ms, self.abort_timed_out_transactions),
            name="txn-abort-timed-out"))
        self._background.append(loop.create_task(
            self._every(self.config.remove_expired_interval_ms, self.expire_transactional_ids),
            name="txn-expire-ids"))

    async def _every(self, interval_ms: int, fn: Callable[[], object]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 1) / 1000)
            try:
                await fn()  # type: ignore[misc]
            except Exception:
                log.exception("Transaction coordinator background task failed")

    async def stop(self) -> None:
        tasks = self._background + list(self._completions.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._background.clear()
        self._completions.clear()


def _crash(reason: str) -> None:
    """SIGKILL this process (fault injection): no flush, no cleanup, like a power cut."""
    log.error("%s: SIGKILL", reason)
    os.kill(os.getpid(), signal.SIGKILL)
