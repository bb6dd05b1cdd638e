"""What the coordinator needs from the log: append records to, and read back, one partition of
``__consumer_offsets``.

The coordinator knows nothing about segments or record batches: it hands a list of
``(key, value)`` pairs (value ``None`` is a tombstone) to :meth:`OffsetsStorage.append`, which
must write them atomically as one batch, call ``on_appended(last offset)`` synchronously as
soon as the batch is in the leader's log (the coordinator applies the records there, see
:mod:`log.coordinator_runtime`), and return the base offset once the batch is committed (acks=all),
or raise a :class:`protocol.errors.KafkaError` whose code the coordinator maps as Kafka does
(e.g. NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR). On start-up it reads each partition back from the
beginning with :meth:`OffsetsStorage.read_all` and replays every record.

:class:`MemoryOffsetsStorage` is the in-memory implementation used by the state-machine tests;
:class:`BatchOffsetsStorage` adapts any log that stores v2 record batches (the broker's).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from log.coordinator_runtime import OnAppended

from .records import Record


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """A record of a transactional batch (TxnOffsetCommit): pending until its marker."""

    producer_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """A COMMIT or ABORT control record for ``producer_id``'s transaction."""

    producer_id: int
    commit: bool


StoredRecord = Record | TxnRecord | TxnMarker


class OffsetsStorage(Protocol):
    async def append(self, partition: int, records: list[Record], *, producer_id: int = -1,
                     producer_epoch: int = -1, on_appended: OnAppended | None = None) -> int:
        """Append ``records`` as one batch to ``partition``; call ``on_appended(last offset)``
        right after the local append, then wait until the batch is committed; return the
        batch's base offset. With ``producer_id`` >= 0 the batch is transactional
        (TxnOffsetCommit)."""
        ...

    def read_all(self, partition: int) -> Iterable[StoredRecord]:
        """Every record of ``partition`` from its log start, in offset order: plain
        ``(key, value)`` pairs, :class:`TxnRecord` for records of transactional batches and
        :class:`TxnMarker` for transaction markers."""
        ...


class MemoryOffsetsStorage:
    """A list per partition. ``fail_with`` makes the next appends raise (to test error paths).

    ``commit_gate``: an append made while it is an unset :class:`asyncio.Event` is in the log
    but not committed -- as if the followers had not fetched it yet -- until the test sets that
    event (later appends wait on the gate current when they are made)."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[StoredRecord]] = {}
        self.fail_with: Exception | None = None
        self.appends = 0
        self.commit_gate: asyncio.Event | None = None

    async def append(self, partition: int, records: list[Record], *, producer_id: int = -1,
                     producer_epoch: int = -1, on_appended: OnAppended | None = None) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        log = self.partitions.setdefault(partition, [])
        base = len(log)
        if producer_id >= 0:
            log.extend(TxnRecord(producer_id, k, v) for k, v in records)
        else:
            log.extend(records)
        self.appends += 1
        gate = self.commit_gate
        if on_appended is not None:
            on_appended(len(log) - 1)
        if gate is not None:
            await gate.wait()
        return base

    def write_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        self.partitions.setdefault(partition, []).append(TxnMarker(producer_id, commit))

    def read_all(self, partition: int) -> Iterator[StoredRecord]:
        return iter(list(self.partitions.get(partition, [])))


def build_batch(records: list[Record], timestamp_ms: int | None = None, *, producer_id: int = -1,
                producer_epoch: int = -1) -> bytes:
    """Encode ``records`` as one uncompressed v2 record batch (base offset 0; the log assigns it).
    A ``producer_id`` makes it a transactional batch without a sequence, as Kafka's coordinator
    writes TxnOffsetCommit records."""
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0,
                                        is_transactional=producer_id >= 0,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=-1, batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


def iter_batch_records(data: bytes) -> Iterator[StoredRecord]:
    """The records of a run of v2 batches, as :data:`StoredRecord` items."""
    mr = MemoryRecords(bytes(data))
    while True:
        batch = mr.next_batch()
        if batch is None:
            return
        if batch.is_control_batch:
            for rec in batch:
                key = rec.key
                if key is not None and len(key) >= 4:
                    _version, ctype = struct.unpack_from(">hh", bytes(key))
                    yield TxnMarker(batch.producer_id, ctype == 1)
            continue
        for rec in batch:
            if rec.key is None:
                continue
            value = None if rec.value is None else bytes(rec.value)
            if batch.is_transactional:
                yield TxnRecord(batch.producer_id, bytes(rec.key), value)
            else:
                yield bytes(rec.key), value


class BatchOffsetsStorage:
    """Adapts a log of v2 record batches to :class:`OffsetsStorage`.

    ``append_batch(partition, batch_bytes) -> base_offset`` appends one batch (and returns once
    it is committed: the records are applied then, so this adapter suits logs whose appends
    cannot interleave with other writes);
    ``read_batches(partition) -> Iterable[bytes]`` yields the raw batches (any chunking of whole
    batches) from the log start.
    """

    def __init__(self, append_batch: Callable[[int, bytes], Awaitable[int]],
                 read_batches: Callable[[int], Iterable[bytes]]) -> None:
        self._append_batch = append_batch
        self._read_batches = read_batches

    async def append(self, partition: int, records: list[Record], *, producer_id: int = -1,
                     producer_epoch: int = -1, on_appended: OnAppended | None = None) -> int:
        base = await self._append_batch(partition, build_batch(
            records, producer_id=producer_id, producer_epoch=producer_epoch))
        if on_appended is not None:
            on_appended(base + len(records) - 1)
        return base

    def read_all(self, partition: int) -> Iterator[StoredRecord]:
        for chunk in self._read_batches(partition):
            yield from iter_batch_records(chunk)
