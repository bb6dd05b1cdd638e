"""Per-partition producer state: idempotence (sequence numbers, epochs) and open transactions.

This is Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` / ``ProducerStateEntry``.
One manager belongs to one partition's :class:`log.Log` and is changed only by that log.

Theory of operation: for every producer id the manager remembers the producer epoch and the
metadata of its last five batches (Kafka's ``NumBatchesToRetain``; a producer has at most five
requests in flight per connection). An append is checked in two steps, so that a rejected
request writes nothing:

1. :meth:`ProducerStateManager.validate_append` looks at the batch headers only. A batch whose
   (epoch, first seq, last seq) equals one of the last five is a *duplicate* (a retry whose
   first attempt was written): :class:`DuplicateSequenceError` carries the original offsets.
   A lower epoch is fenced (:class:`InvalidProducerEpochError`). A new epoch must restart at
   sequence 0; within an epoch the first sequence must follow the last one (wrapping from
   Int32.MAX to 0); an unknown producer may start anywhere, as in Kafka (its state may have
   gone with retention). Otherwise :class:`OutOfOrderSequenceError`.
2. After the log assigned offsets, :meth:`ProducerStateManager.commit` records the batches.

Transactions: a transactional data batch opens a transaction for its producer
(``current_txn_first_offset``, listed in ``ongoing_txns`` by first offset, which gives the
first unstable offset); a control batch (COMMIT/ABORT marker) closes it and is reported as a
:class:`CompletedTxn` for the transaction index / last stable offset bookkeeping in ``txn/``.

Snapshots (``%020d.snapshot``, named by the offset the state is valid up to) let a restart
skip replaying the whole log. Format (big-endian, ours; Kafka's is a similar versioned struct)::

    version int16 | crc32c uint32 (of everything after it) | offset int64 | count int32 |
    count x { producer_id int64 | epoch int16 | coordinator_epoch int32 | last_timestamp int64 |
              current_txn_first_offset int64 | n int8 |
              n x { last_seq int32 | last_offset int64 | offset_delta int32 | timestamp int64 } }

This module does no I/O except reading and writing snapshot files.
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c as _crc32c

from protocol.errors import (
    DuplicateSequenceError,
    ErrorCode,
    InvalidProducerEpochError,
    KafkaError,
    OutOfOrderSequenceError,
)
from protocol.records import ATTR_CONTROL, ATTR_TRANSACTIONAL, HEADER_SIZE, BatchHeader
from protocol.varint import read_varint

from .checkpoint import write_atomically

logger = logging.getLogger("samsa.log")

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = 2**31 - 1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
SNAPSHOTS_TO_KEEP = 3

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_SNAP_HEAD = struct.Struct(">hI")
_SNAP_BODY_HEAD = struct.Struct(">qi")
_SNAP_ENTRY = struct.Struct(">qhiqqb")
_SNAP_BATCH = struct.Struct(">iqiq")


def _decrement_sequence(seq: int, delta: int) -> int:
    """Kafka's ``DefaultRecordBatch.decrementSequence``: sequences wrap at Int32.MAX."""
    if seq < delta:
        return INT32_MAX - (delta - seq) + 1
    return seq - delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(slots=True)
class BatchMetadata:
    """What we remember of one written batch of a producer."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int
    first_seq: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        self.first_seq = _decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    """One producer's state in one partition (Kafka's ``ProducerStateEntry``)."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batch_metadata: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int = -1  # -1: no open transaction

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    def find_duplicate_batch(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.producer_epoch or not self.batch_metadata:
            return None
        first = h.base_sequence
        if in_sequence(self.batch_metadata[-1].last_seq, first):
            return None  # the common case: the next batch, not a retry
        last = h.last_sequence
        for b in self.batch_metadata:
            if b.first_seq == first and b.last_seq == last:
                return b
        return None

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        if epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch,
                                  deque(self.batch_metadata, maxlen=NUM_BATCHES_TO_RETAIN),
                                  self.coordinator_epoch, self.last_timestamp, self.current_txn_first_offset)


@dataclass(slots=True)
class TxnMetadata:
    """An open (or just completed) transaction of one producer in this partition."""

    producer_id: int
    first_offset: int
    last_offset: int = -1


@dataclass(slots=True)
class CompletedTxn:
    """A transaction closed by a marker: the aborted ones go into the transaction index."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


@dataclass(slots=True)
class ProducerAppendInfo:
    """The validated, not yet committed, batches of one producer in one append."""

    producer_id: int
    current: ProducerStateEntry | None
    batches: list[BatchHeader] = field(default_factory=list)
    # The state as it would be after the batches so far (sequence checks of later batches in
    # the same append compare against it).
    epoch: int = NO_PRODUCER_EPOCH
    last_seq: int = NO_SEQUENCE
    has_updates: bool = False

    def check(self, h: BatchHeader, origin_client: bool = True) -> None:
        """Kafka's ``ProducerAppendInfo.append`` checks for one batch (raises, writes nothing).

        ``origin_client=False`` is Kafka's ``AppendOrigin.REPLICATION`` (a follower appending what
        its leader wrote): no sequence check, and a lower producer epoch is logged, not refused."""
        cur_epoch = self.epoch if self.has_updates else (
            self.current.producer_epoch if self.current is not None else NO_PRODUCER_EPOCH)
        if h.producer_epoch < cur_epoch:
            message = (f"Epoch of producer {self.producer_id} at offset {h.base_offset} is {h.producer_epoch}, "
                       f"which is smaller than the last seen epoch {cur_epoch}")
            if origin_client:
                raise InvalidProducerEpochError(message=message)
            logger.warning("%s (appended as replicated from the leader)", message)
        # A transactional batch without a sequence is written by a coordinator, not a client
        # (TxnOffsetCommit's offsets in __consumer_offsets): Kafka appends those with origin
        # COORDINATOR, which skips the sequence check. Clients always send a sequence.
        attributes = h.attributes  # (the flags read in line: this runs for every idempotent batch)
        control = attributes & ATTR_CONTROL
        if not control and origin_client and not (attributes & ATTR_TRANSACTIONAL and h.base_sequence == NO_SEQUENCE):
            self._check_sequence(h, cur_epoch)
        self.batches.append(h)
        self.epoch = h.producer_epoch
        if not control:
            self.last_seq = h.last_sequence
            self.has_updates = True
        elif not self.has_updates:
            # a marker keeps the sequence where it was
            self.last_seq = self.current.last_seq if self.current is not None else NO_SEQUENCE
            self.has_updates = True

    def _check_sequence(self, h: BatchHeader, cur_epoch: int) -> None:
        first_seq = h.base_sequence
        if self.current is None and not self.has_updates:
            # Unknown producer: its state may have gone with retention, DeleteRecords or a
            # re-created topic. Kafka (ProducerAppendInfo.checkSequence) accepts any sequence.
            return
        if h.producer_epoch != cur_epoch:
            if first_seq != 0 and cur_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    message=f"Invalid sequence number for new epoch of producer {self.producer_id}: "
                            f"{h.producer_epoch} (request epoch), {first_seq} (seq. number), "
                            f"{cur_epoch} (current producer epoch)")
            return
        last_seq = self.last_seq if self.has_updates else (
            self.current.last_seq if self.current is not None else NO_SEQUENCE)
        if cur_epoch == NO_PRODUCER_EPOCH:
            return  # nothing known about this producer's epoch: accept any sequence (Kafka)
        if not in_sequence(last_seq, first_seq):
            raise OutOfOrderSequenceError(
                message=f"Out of order sequence number for producer {self.producer_id}: "
                        f"{first_seq} (incoming seq. number), {last_seq} (current end sequence number)")


class ProducerStateManager:
    """All producers' state in one partition, plus its snapshots in ``log_dir``.

    Invariant: the state reflects exactly the batches below ``map_end_offset`` (the log end
    offset once the owning log has finished an append or a recovery).
    """

    def __init__(self, log_dir: Path | None = None) -> None:
        self.log_dir = log_dir
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, TxnMetadata] = {}  # first offset -> txn, in offset order
        self.map_end_offset = 0
        self.last_snapshot_offset: int | None = None

    # -- queries --------------------------------------------------------------------------
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (the last stable offset), if any."""
        return next(iter(self.ongoing_txns), None) if self.ongoing_txns else None

    # -- the append path --------------------------------------------------------------------
    def validate_append(self, batches: Iterable[BatchHeader], *, origin_client: bool = True,
                        buffer: bytes | bytearray | memoryview | None = None,
                        ) -> dict[int, ProducerAppendInfo]:
        """Check the producer batches of one append; raise before anything is written.

        ``buffer`` (the append's bytes) lets transaction markers be checked against the
        producer's coordinator epoch (TRANSACTION_COORDINATOR_FENCED, as Kafka's
        ``appendEndTxnMarker``). ``origin_client=False`` (a follower's append of its leader's
        batches, Kafka's ``AppendOrigin.REPLICATION``) checks nothing a leader already decided:
        no duplicate or sequence check, and a lower producer or coordinator epoch is logged and
        appended, so a follower whose producer state differs from its leader's (state the leader
        lost with a failover or expiry) still copies the leader's log instead of failing the
        partition's replication for good.
        """
        infos: dict[int, ProducerAppendInfo] = {}
        for h in batches:
            pid = h.producer_id
            if pid < 0:
                continue
            current = self.producers.get(pid)
            control = h.attributes & ATTR_CONTROL
            if control and buffer is not None and current is not None:
                marker = _end_txn_marker(buffer, h)
                if marker is not None and current.coordinator_epoch > marker[1]:
                    message = (f"Invalid coordinator epoch for producer {pid}: {marker[1]} (zombie), "
                               f"{current.coordinator_epoch} (current)")
                    if origin_client:
                        raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED, message)
                    logger.info("%s in a marker replicated from the leader: appended", message)
            if origin_client and current is not None and not control and h.base_sequence != NO_SEQUENCE:
                dup = current.find_duplicate_batch(h)
                if dup is not None:
                    raise DuplicateSequenceError(dup.first_offset, dup.last_offset, dup.timestamp)
            info = infos.get(pid)
            if info is None:
                info = infos[pid] = ProducerAppendInfo(pid, current)
            info.check(h, origin_client)
        return infos

    def commit(self, infos: dict[int, ProducerAppendInfo], buffer: bytes | bytearray | memoryview | None = None,
               ) -> list[CompletedTxn]:
        """Record validated batches, now carrying their log offsets."""
        completed: list[CompletedTxn] = []
        for info in infos.values():
            for h in info.batches:
                marker = _end_txn_marker(buffer, h) if h.attributes & ATTR_CONTROL else None
                c = self._apply(h, None if marker is None else marker[0], None if marker is None else marker[1])
                if c is not None:
                    completed.append(c)
        return completed

    def replay(self, h: BatchHeader, control_type: int | None = None, coordinator_epoch: int | None = None,
               ) -> CompletedTxn | None:
        """Apply a batch read back from the log (recovery): no checks, Kafka's REPLICATION origin."""
        if h.producer_id < 0:
            return None
        c = self._apply(h, control_type, coordinator_epoch)
        self.map_end_offset = max(self.map_end_offset, h.base_offset + h.last_offset_delta + 1)
        return c

    def _apply(self, h: BatchHeader, control_type: int | None, coordinator_epoch: int | None = None,
               ) -> CompletedTxn | None:
        pid = h.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerStateEntry(pid)
        last_offset = h.base_offset + h.last_offset_delta
        attributes = h.attributes
        if attributes & ATTR_CONTROL:
            if h.producer_epoch != entry.producer_epoch:
                entry.batch_metadata.clear()
                entry.producer_epoch = h.producer_epoch
            entry.last_timestamp = h.max_timestamp
            if coordinator_epoch is not None:
                entry.coordinator_epoch = coordinator_epoch
            first = entry.current_txn_first_offset
            entry.current_txn_first_offset = -1
            if first < 0:
                return None
            self.ongoing_txns.pop(first, None)
            return CompletedTxn(pid, first, last_offset, control_type == CONTROL_ABORT)
        entry.add_batch(h.producer_epoch, h.last_sequence, last_offset, h.last_offset_delta, h.max_timestamp)
        if attributes & ATTR_TRANSACTIONAL and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = h.base_offset
            self.ongoing_txns[h.base_offset] = TxnMetadata(pid, h.base_offset)
        return None

    # -- maintenance ------------------------------------------------------------------------
    def truncate(self) -> None:
        """Forget everything (before reloading from a snapshot and replaying the log)."""
        self.producers.clear()
        self.ongoing_txns.clear()
        self.map_end_offset = 0

    def remove_expired_producers(self, now_ms: int, expiration_ms: int = 86400000) -> int:
        """Kafka's ``producer.id.expiration.ms``: drop idle producers without an open transaction."""
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # -- snapshots --------------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> Path:
        assert self.log_dir is not None
        return self.log_dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def list_snapshots(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        if self.log_dir is None:
            return []
        out = []
        for name in os.listdir(self.log_dir):
            if name.endswith(SNAPSHOT_SUFFIX):
                try:
                    out.append(int(name[: -len(SNAPSHOT_SUFFIX)]))
                except ValueError:
                    pass
        return sorted(out)

    def serialize(self, offset: int) -> bytes:
        parts = [_SNAP_BODY_HEAD.pack(offset, len(self.producers))]
        for e in self.producers.values():
            parts.append(_SNAP_ENTRY.pack(e.producer_id, e.producer_epoch, e.coordinator_epoch,
                                          e.last_timestamp, e.current_txn_first_offset,
                                          len(e.batch_metadata)))
            for b in e.batch_metadata:
                parts.append(_SNAP_BATCH.pack(b.last_seq, b.last_offset, b.offset_delta, b.timestamp))
        body = b"".join(parts)
        return _SNAP_HEAD.pack(SNAPSHOT_VERSION, _crc32c.crc32c(body)) + body

    def deserialize(self, data: bytes) -> int:
        """Replace the state with a snapshot's; returns its offset. Raises ValueError if corrupt."""
        if len(data) < _SNAP_HEAD.size + _SNAP_BODY_HEAD.size:
            raise ValueError("snapshot too short")
        version, crc = _SNAP_HEAD.unpack_from(data, 0)
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"unknown snapshot version {version}")
        body = memoryview(data)[_SNAP_HEAD.size:]
        if _crc32c.crc32c(body) != crc:
            raise ValueError("snapshot CRC mismatch")
        offset, count = _SNAP_BODY_HEAD.unpack_from(body, 0)
        pos = _SNAP_BODY_HEAD.size
        producers: dict[int, ProducerStateEntry] = {}
        ongoing: list[TxnMetadata] = []
        for _ in range(count):
            pid, epoch, coord_epoch, last_ts, txn_first, n = _SNAP_ENTRY.unpack_from(body, pos)
            pos += _SNAP_ENTRY.size
            e = ProducerStateEntry(pid, epoch, coordinator_epoch=coord_epoch, last_timestamp=last_ts,
                                   current_txn_first_offset=txn_first)
            for _ in range(n):
                e.batch_metadata.append(BatchMetadata(*_SNAP_BATCH.unpack_from(body, pos)))
                pos += _SNAP_BATCH.size
            producers[pid] = e
            if txn_first >= 0:
                ongoing.append(TxnMetadata(pid, txn_first))
        if pos != len(body):
            raise ValueError("snapshot has trailing bytes")
        self.producers = producers
        self.ongoing_txns = {t.first_offset: t for t in sorted(ongoing, key=lambda t: t.first_offset)}
        self.map_end_offset = offset
        return offset

    def take_snapshot(self, offset: int | None = None, *, sync: bool = True) -> Path | None:
        """Write ``%020d.snapshot`` for the state at ``offset`` (default ``map_end_offset``)."""
        if self.log_dir is None:
            return None
        offset = self.map_end_offset if offset is None else offset
        path = self.snapshot_path(offset)
        write_atomically(path, self.serialize(offset), sync=sync)
        self.last_snapshot_offset = offset
        self._delete_old_snapshots()
        return path

    def _delete_old_snapshots(self) -> None:
        snaps = self.list_snapshots()
        for off in snaps[:-SNAPSHOTS_TO_KEEP]:
            self._unlink(off)

    def _unlink(self, offset: int) -> None:
        try:
            os.unlink(self.snapshot_path(offset))
        except FileNotFoundError:
            pass

    def delete_snapshots_above(self, offset: int) -> None:
        for off in self.list_snapshots():
            if off > offset:
                self._unlink(off)

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest valid snapshot at or below ``max_offset``; delete those above it.

        Returns its offset, or None (state reset) if there is none.
        """
        self.truncate()
        self.delete_snapshots_above(max_offset)
        for off in reversed(self.list_snapshots()):
            try:
                data = self.snapshot_path(off).read_bytes()
                self.deserialize(data)
                self.last_snapshot_offset = off
                return off
            except (OSError, ValueError, struct.error) as e:
                logger.warning("Deleting corrupt producer state snapshot %s: %s", self.snapshot_path(off), e)
                self._unlink(off)
                self.truncate()
        self.last_snapshot_offset = None
        return None


def _end_txn_marker(buffer: bytes | bytearray | memoryview | None, h: BatchHeader) -> tuple[int, int] | None:
    """(type, coordinator_epoch) of a control batch in ``buffer``, or None if unreadable."""
    if buffer is None:
        return None
    try:
        return read_end_txn_marker(buffer, h.position)
    except (IndexError, ValueError, struct.error):
        return None


def read_end_txn_marker(buf: bytes | bytearray | memoryview, batch_pos: int = 0) -> tuple[int, int]:
    """(type, coordinator_epoch) of the control record of a (uncompressed) control batch.

    Key: version int16, type int16 (0 ABORT, 1 COMMIT); value (EndTransactionMarker):
    version int16, coordinator_epoch int32. The epoch is -1 if the value is missing.
    """
    pos = batch_pos + HEADER_SIZE
    _, pos = read_varint(buf, pos)  # record length
    pos += 1  # attributes
    _, pos = read_varint(buf, pos)  # timestamp delta
    _, pos = read_varint(buf, pos)  # offset delta
    key_len, pos = read_varint(buf, pos)
    if key_len < 4:
        raise IndexError("control record key too short")
    ctype = struct.unpack_from(">h", buf, pos + 2)[0]
    pos += key_len
    value_len, pos = read_varint(buf, pos)
    coordinator_epoch = struct.unpack_from(">i", buf, pos + 2)[0] if value_len >= 6 else -1
    return ctype, coordinator_epoch


def control_record_type(buf: bytes | bytearray | memoryview, batch_pos: int = 0) -> int:
    """The ``type`` field of the control record key (0 ABORT, 1 COMMIT) of a batch."""
    return read_end_txn_marker(buf, batch_pos)[0]
