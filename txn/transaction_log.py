"""The records of ``__transaction_state``: Kafka's TransactionLogKey v0 and TransactionLogValue v0-1.

Byte-exact with Kafka (``transaction-coordinator/src/main/resources/common/message``), so a
Kafka operator's tools read our internal topic and we could read theirs:

* key:   int16 version (0), then ``TransactionalId`` as a non-flexible string.
* value: int16 version, then ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs
  int32, TransactionStatus int8, TransactionPartitions nullable ``[]{Topic, []PartitionIds}``,
  TransactionLastUpdateTimestampMs int64, TransactionStartTimestampMs int64. Version 1 is
  flexible (compact strings/arrays, tagged fields: 0 PreviousProducerId, 1 NextProducerId,
  2 ClientTransactionVersion).
* a null value is a tombstone: the transactional id expired (state Dead).

We write version 0 for transactions v1, and version 1 (with its tagged fields) once a client
ends its transactions with transactions v2 (KIP-890 part 2), as Kafka 4 does; we read both. The partition of a transactional id is
``abs(java String.hashCode(transactional_id)) % transaction.state.log.num.partitions``.

This module does no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from protocol.varint import put_uvarint, read_uvarint

from .metadata import TransactionMetadata, TransactionState

TRANSACTION_STATE_TOPIC = "__transaction_state"
DEFAULT_NUM_PARTITIONS = 50
KEY_VERSION = 0
VALUE_VERSION = 0

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, wrapping at 32 bits (signed)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``abs`` but ``Integer.MIN_VALUE`` maps to 0, not to itself."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(transactional_id: str, num_partitions: int = DEFAULT_NUM_PARTITIONS) -> int:
    """The ``__transaction_state`` partition that owns ``transactional_id`` (same for groups)."""
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions


# --- key ---------------------------------------------------------------------------------

def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _H.pack(KEY_VERSION) + _H.pack(len(raw)) + raw


def decode_key(key: bytes) -> str:
    (version,) = _H.unpack_from(key, 0)
    if version != KEY_VERSION:
        raise ValueError(f"unknown transaction log key version {version}")
    (n,) = _H.unpack_from(key, 2)
    return bytes(key[4:4 + n]).decode()


# --- value -------------------------------------------------------------------------------

def _group_partitions(partitions: set[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        by_topic.setdefault(topic, []).append(p)
    return list(by_topic.items())


def encode_value(m: TransactionMetadata) -> bytes:
    """TransactionLogValue for ``m``: v1 for transactions v2, else v0. Empty carries a null
    partition list, as Kafka writes it."""
    _check_writable(m)
    if m.client_transaction_version >= 2 or m.next_producer_id != -1:
        return encode_value_v1(m, m.next_producer_id, m.client_transaction_version)
    out = bytearray(_VALUE_HEAD.pack(VALUE_VERSION, m.producer_id, m.producer_epoch, m.txn_timeout_ms,
                                     m.state.value))
    if m.state is TransactionState.EMPTY:
        out += _I.pack(-1)
    else:
        groups = _group_partitions(m.partitions)
        out += _I.pack(len(groups))
        for topic, ids in groups:
            raw = topic.encode()
            out += _H.pack(len(raw)) + raw + _I.pack(len(ids))
            for p in ids:
                out += _I.pack(p)
    out += _Q.pack(m.txn_last_update_timestamp) + _Q.pack(m.txn_start_timestamp)
    return bytes(out)


def _check_writable(m: TransactionMetadata) -> None:
    if m.state in (TransactionState.DEAD, TransactionState.PREPARE_EPOCH_FENCE):
        raise ValueError(f"state {m.state.wire_name} is never written to the transaction log")
    if m.state is TransactionState.EMPTY and m.partitions:
        raise ValueError("an Empty transaction cannot have partitions")


@dataclass(slots=True)
class DecodedValue:
    """A TransactionLogValue of either version, with v1's tagged fields (defaults for v0)."""

    version: int
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: set[tuple[str, int]]
    txn_last_update_timestamp: int
    txn_start_timestamp: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0

    def to_metadata(self, transactional_id: str) -> TransactionMetadata:
        return TransactionMetadata(
            transactional_id=transactional_id, producer_id=self.producer_id,
            last_producer_id=self.previous_producer_id, producer_epoch=self.producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms, state=self.state,
            partitions=set() if self.state is TransactionState.EMPTY else set(self.partitions),
            txn_start_timestamp=self.txn_start_timestamp,
            txn_last_update_timestamp=self.txn_last_update_timestamp,
            client_transaction_version=self.client_transaction_version, next_producer_id=self.next_producer_id)


def decode_value(value: bytes) -> DecodedValue:
    version, pid, epoch, timeout, status = _VALUE_HEAD.unpack_from(value, 0)
    if version not in (0, 1):
        raise ValueError(f"unknown transaction log value version {version}")
    state = TransactionState(status)
    pos = _VALUE_HEAD.size
    partitions: set[tuple[str, int]] = set()
    if version == 0:
        (n,) = _I.unpack_from(value, pos)
        pos += 4
        for _ in range(max(n, 0)):
            (tl,) = _H.unpack_from(value, pos)
            topic = bytes(value[pos + 2: pos + 2 + tl]).decode()
            pos += 2 + tl
            (k,) = _I.unpack_from(value, pos)
            pos += 4
            for _ in range(k):
                partitions.add((topic, _I.unpack_from(value, pos)[0]))
                pos += 4
    else:
        n, pos = read_uvarint(value, pos)
        for _ in range(max(n - 1, 0)):
            tl, pos = read_uvarint(value, pos)
            topic = bytes(value[pos: pos + tl - 1]).decode()
            pos += tl - 1
            k, pos = read_uvarint(value, pos)
            for _ in range(max(k - 1, 0)):
                partitions.add((topic, _I.unpack_from(value, pos)[0]))
                pos += 4
            tags, pos = read_uvarint(value, pos)
            for _ in range(tags):  # no tagged fields are defined inside PartitionsSchema
                _, pos = read_uvarint(value, pos)
                size, pos = read_uvarint(value, pos)
                pos += size
    (last_update,) = _Q.unpack_from(value, pos)
    (start,) = _Q.unpack_from(value, pos + 8)
    pos += 16
    d = DecodedValue(version, pid, epoch, timeout, state, partitions, last_update, start)
    if version >= 1 and pos < len(value):
        tags, pos = read_uvarint(value, pos)
        for _ in range(tags):
            tag, pos = read_uvarint(value, pos)
            size, pos = read_uvarint(value, pos)
            if tag == 0:
                d.previous_producer_id = _Q.unpack_from(value, pos)[0]
            elif tag == 1:
                d.next_producer_id = _Q.unpack_from(value, pos)[0]
            elif tag == 2:
                d.client_transaction_version = _H.unpack_from(value, pos)[0]
            pos += size  # unknown tags (newer Kafka) are skipped, as Kafka's readers do
    return d


def encode_value_v1(m: TransactionMetadata, next_producer_id: int = -1,
                    client_transaction_version: int = 0) -> bytes:
    """TransactionLogValue v1 (flexible): written for transactions v2 (see :func:`encode_value`)."""
    out = bytearray(_VALUE_HEAD.pack(1, m.producer_id, m.producer_epoch, m.txn_timeout_ms, m.state.value))
    if m.state is TransactionState.EMPTY:
        out.append(0)
    else:
        groups = _group_partitions(m.partitions)
        put_uvarint(out, len(groups) + 1)
        for topic, ids in groups:
            raw = topic.encode()
            put_uvarint(out, len(raw) + 1)
            out += raw
            put_uvarint(out, len(ids) + 1)
            for p in ids:
                out += _I.pack(p)
            out.append(0)
    out += _Q.pack(m.txn_last_update_timestamp) + _Q.pack(m.txn_start_timestamp)
    tagged: list[tuple[int, bytes]] = []
    if m.last_producer_id != -1:
        tagged.append((0, _Q.pack(m.last_producer_id)))
    if next_producer_id != -1:
        tagged.append((1, _Q.pack(next_producer_id)))
    if client_transaction_version != 0:
        tagged.append((2, _H.pack(client_transaction_version)))
    put_uvarint(out, len(tagged))
    for tag, data in tagged:
        put_uvarint(out, tag)
        put_uvarint(out, len(data))
        out += data
    return bytes(out)
