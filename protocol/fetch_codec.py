"""A hand-written FetchResponse encoder that leaves the records as file regions.

kafka-python's generic encoder needs every ``records`` field as bytes in memory, which means
reading each fetched region out of its segment, copying it into the encode buffer and copying
the result again into the frame. This encoder writes everything *around* the records (the
response header, topic and partition fields, length prefixes) and leaves each records field as
the region object the log handed out, so the connection can write it with ``sendfile`` or one
``pread`` straight into the socket buffer.

Versions 4-18 (flexible from 12, topic ids from 13). The output is a list of chunks, ``bytes``
or regions (anything with ``size``), whose concatenation is the framed response.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


class Region(Protocol):
    size: int

    def read(self) -> bytes: ...


@dataclass(slots=True)
class PartitionData:
    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None  # (producer_id, first_offset)
    preferred_read_replica: int = -1
    # Never null: Kafka answers every partition, an error partition included, with records
    # (MemoryRecords.EMPTY there). librdkafka reads a null records field in a flexible Fetch as
    # an invalid MessageSetSize and throws away the whole response, error codes and all.
    records: Region | bytes = b""
    # KIP-951 (tag 1 of a partition, v12+): the current leader (id, epoch) when this broker is not it
    current_leader: tuple[int, int] | None = None


@dataclass(slots=True)
class TopicData:
    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[PartitionData] = field(default_factory=list)


_i16 = struct.Struct(">h").pack
_i32 = struct.Struct(">i").pack
_i64 = struct.Struct(">q").pack
_PART_V4 = struct.Struct(">ihqq")  # partition, error, high watermark, last stable offset
_ABORTED = struct.Struct(">qq")


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_fetch_response(version: int, correlation_id: int, topics: Sequence[TopicData], *,
                          throttle_time_ms: int = 0, error_code: int = 0, session_id: int = 0,
                          node_endpoints: Sequence[tuple[int, str, int, str | None]] = (),
                          ) -> tuple[list[Any], int]:
    """Return (chunks, total size) of the framed response; chunks are bytes or regions."""
    flexible = version >= 12
    chunks: list[Any] = []
    buf = bytearray()

    def arr_len(n: int) -> bytes:
        return _uvarint(n + 1) if flexible else _i32(n)

    # response header: correlation id (+ empty tagged fields when flexible)
    buf += _i32(correlation_id)
    if flexible:
        buf += b"\x00"
    buf += _i32(throttle_time_ms)
    if version >= 7:
        buf += _i16(error_code) + _i32(session_id)
    buf += arr_len(len(topics))
    for t in topics:
        if version >= 13:
            buf += (t.topic_id or uuid.UUID(int=0)).bytes
        else:
            name = (t.topic or "").encode()
            buf += (_uvarint(len(name) + 1) if flexible else _i16(len(name))) + name
        buf += arr_len(len(t.partitions))
        for p in t.partitions:
            buf += _PART_V4.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            if version >= 5:
                buf += _i64(p.log_start_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                buf += b"\x00" if flexible else _i32(-1)
            else:
                buf += arr_len(len(aborted))
                for pid, first in aborted:
                    buf += _ABORTED.pack(pid, first)
                    if flexible:
                        buf += b"\x00"
            if version >= 11:
                buf += _i32(p.preferred_read_replica)
            rec = p.records if p.records is not None else b""
            size = len(rec) if isinstance(rec, (bytes, bytearray)) else rec.size
            buf += _uvarint(size + 1) if flexible else _i32(size)
            if size:
                if isinstance(rec, (bytes, bytearray)):
                    buf += rec
                else:
                    chunks.append(bytes(buf))
                    chunks.append(rec)
                    buf = bytearray()
            if flexible:
                if p.current_leader is not None:  # tagged field 1: CurrentLeader {LeaderId, LeaderEpoch}
                    buf += b"\x01\x01\x09" + _i32(p.current_leader[0]) + _i32(p.current_leader[1]) + b"\x00"
                else:
                    buf += b"\x00"  # partition tagged fields
        if flexible:
            buf += b"\x00"  # topic tagged fields
    if flexible:
        if node_endpoints and version >= 16:  # tagged field 0: NodeEndpoints (KIP-951)
            body = bytearray(_uvarint(len(node_endpoints) + 1))
            for node_id, host, port, rack in node_endpoints:
                h = host.encode()
                body += _i32(node_id) + _uvarint(len(h) + 1) + h + _i32(port)
                body += b"\x00" if rack is None else _uvarint(len(rack.encode()) + 1) + rack.encode()
                body += b"\x00"
            buf += b"\x01\x00" + _uvarint(len(body)) + body
        else:
            buf += b"\x00"  # response tagged fields
    if buf:
        chunks.append(bytes(buf))
    total = sum(len(c) if isinstance(c, bytes) else c.size for c in chunks)
    chunks.insert(0, _i32(total))
    return chunks, total + 4
