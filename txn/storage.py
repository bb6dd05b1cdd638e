"""The storage the transaction coordinator needs, as a small interface, and an in-memory version.

The coordinator owns no files. It needs exactly three things from the broker:

* ``append(partition, records, on_appended)``: make ``(key, value)`` records durable in
  partition ``partition`` of ``__transaction_state`` (one batch), calling
  ``on_appended(last offset)`` as soon as they are in the leader's log -- the coordinator
  applies them there, once -- and returning when they are replicated (acks=all). Raises
  :class:`protocol.errors.KafkaError` on failure.
* ``read(partition)``: every ``(key, value)`` record of that partition, in offset order, for
  ``replay()`` at start-up.
* ``write_marker(topic, partition, marker)``: append the control batch of ``marker``
  (:func:`txn.markers.build_marker_batch`) to a data partition, through the same path as
  WriteTxnMarkers, so the partition's producer state closes the transaction, moves its last
  stable offset and, for an abort, records it in the aborted-transaction index. Returns the
  Kafka error code (NONE on success).

:class:`MemoryTransactionStorage` implements it for the pure state-machine tests; the broker
binding lives in ``broker/coordinators/transactions.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Protocol

from log.coordinator_runtime import OnAppended
from protocol.errors import ErrorCode, KafkaError

from .markers import TxnMarker

Record = tuple[bytes, bytes | None]


class TransactionStorage(Protocol):
    async def append(self, partition: int, records: Sequence[Record], *,
                     on_appended: OnAppended | None = None) -> None: ...

    def read(self, partition: int) -> Iterable[Record]: ...

    async def write_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode: ...


class MemoryTransactionStorage:
    """A list per partition; failures can be injected to test the coordinator's error paths.

    ``fail_appends``: the next N appends raise COORDINATOR_NOT_AVAILABLE (as a full disk or a
    lost leadership would). ``commit_gate``: while it is an unset :class:`asyncio.Event`,
    appended records wait for their replication until the test sets it. ``fail_replication``:
    the next N appends reach the log but their replication times out (REQUEST_TIMED_OUT). ``marker_errors[(topic, p)]``: a list of codes returned by the
    next marker writes to that partition, one per attempt.
    """

    def __init__(self) -> None:
        self.partitions: dict[int, list[Record]] = {}
        self.markers: list[tuple[str, int, TxnMarker]] = []
        self.fail_appends = 0
        self.commit_gate: asyncio.Event | None = None
        self.fail_replication = 0
        self.marker_errors: dict[tuple[str, int], list[ErrorCode]] = {}

    async def append(self, partition: int, records: Sequence[Record], *,
                     on_appended: OnAppended | None = None) -> None:
        if self.fail_appends:
            self.fail_appends -= 1
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "injected append failure")
        log = self.partitions.setdefault(partition, [])
        log.extend(records)
        if on_appended is not None:
            on_appended(len(log) - 1)
        if self.commit_gate is not None:
            await self.commit_gate.wait()
        if self.fail_replication:
            self.fail_replication -= 1
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, "injected replication timeout")

    def read(self, partition: int) -> Iterable[Record]:
        return list(self.partitions.get(partition, []))

    async def write_marker(self, topic: str, partition: int, marker: TxnMarker) -> ErrorCode:
        errs = self.marker_errors.get((topic, partition))
        if errs:
            return errs.pop(0)
        self.markers.append((topic, partition, marker))
        return ErrorCode.NONE
