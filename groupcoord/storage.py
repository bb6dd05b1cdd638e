"""What the coordinator needs from the log: append records to, and read back, one partition of
``__consumer_offsets``.

The coordinator knows nothing about segments or record batches: it hands a list of
``(key, value)`` pairs (value ``None`` is a tombstone) to :meth:`OffsetsStorage.append`, which
must write them atomically as one batch and return the base offset, or raise a
:class:`protocol.errors.KafkaError` whose code the coordinator maps as Kafka does (e.g.
NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR). On start-up it reads each partition back from the
beginning with :meth:`OffsetsStorage.read_all` and replays every record.

:class:`MemoryOffsetsStorage` is the in-memory implementation used by the state-machine tests;
:class:`BatchOffsetsStorage` adapts any log that stores v2 record batches (the broker's).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import Protocol

from .records import Record


class OffsetsStorage(Protocol):
    async def append(self, partition: int, records: list[Record]) -> int:
        """Append ``records`` as one batch to ``partition``; return the batch's base offset."""
        ...

    def read_all(self, partition: int) -> Iterable[Record]:
        """Every record of ``partition`` from its log start, in offset order."""
        ...


class MemoryOffsetsStorage:
    """A list per partition. ``fail_with`` makes the next appends raise (to test error paths)."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[Record]] = {}
        self.fail_with: Exception | None = None
        self.appends = 0

    async def append(self, partition: int, records: list[Record]) -> int:
        if self.fail_with is not None:
            raise self.fail_with
        log = self.partitions.setdefault(partition, [])
        base = len(log)
        log.extend(records)
        self.appends += 1
        return base

    def read_all(self, partition: int) -> Iterator[Record]:
        return iter(list(self.partitions.get(partition, [])))


def build_batch(records: list[Record], timestamp_ms: int | None = None) -> bytes:
    """Encode ``records`` as one uncompressed v2 record batch (base offset 0; the log assigns it)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                        batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


def iter_batch_records(data: bytes) -> Iterator[Record]:
    """The ``(key, value)`` pairs of every non-control record in a run of v2 batches.

    Aborted transactional offsets are not possible here: we never write transactional batches to
    ``__consumer_offsets`` (transactional offset commits are applied at commit time)."""
    from kafka.record.memory_records import MemoryRecords

    mr = MemoryRecords(bytes(data))
    while True:
        batch = mr.next_batch()
        if batch is None:
            return
        if getattr(batch, "is_control_batch", False):
            continue
        for rec in batch:
            if rec.key is None:
                continue
            yield bytes(rec.key), None if rec.value is None else bytes(rec.value)


class BatchOffsetsStorage:
    """Adapts a log of v2 record batches to :class:`OffsetsStorage`.

    ``append_batch(partition, batch_bytes) -> base_offset`` appends one batch;
    ``read_batches(partition) -> Iterable[bytes]`` yields the raw batches (any chunking of whole
    batches) from the log start.
    """

    def __init__(self, append_batch: Callable[[int, bytes], Awaitable[int]],
                 read_batches: Callable[[int], Iterable[bytes]]) -> None:
        self._append_batch = append_batch
        self._read_batches = read_batches

    async def append(self, partition: int, records: list[Record]) -> int:
        return await self._append_batch(partition, build_batch(records))

    def read_all(self, partition: int) -> Iterator[Record]:
        for chunk in self._read_batches(partition):
            yield from iter_batch_records(chunk)
