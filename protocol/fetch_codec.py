"""Hand-written Fetch codecs for the two hot paths: the leader's responses and the replica fetcher.

The FetchResponse encoder leaves the records as file regions.

kafka-python's generic encoder needs every ``records`` field as bytes in memory, which means
reading each fetched region out of its segment, copying it into the encode buffer and copying
the result again into the frame. This encoder writes everything *around* the records (the
response header, topic and partition fields, length prefixes) and leaves each records field as
the region object the log handed out, so the connection can write it with ``sendfile`` or one
``pread`` straight into the socket buffer.

Versions 4-18 (flexible from 12, topic ids from 13). The output is a list of chunks, ``bytes``
or regions (anything with ``size``), whose concatenation is the framed response.

The replica fetcher (``broker/cluster/replication/fetcher.py``) sends a Fetch request and reads its
response many hundred times a second per leader. kafka-python's message objects cost ~270 us to
build and encode such a request and copy every records field while decoding the response;
:func:`encode_fetch_request` writes the v12 request straight from a few tuples and
:func:`decode_fetch_response` returns each partition's records as a ``memoryview`` into the
response frame (no copy, no record decoding: the follower appends the batches as they are).
Both are checked field for field against kafka-python's schema classes in
``tests/protocol/test_fetch_codec.py``.

The FetchRequest decoder serves the leader's side of the same traffic (every follower fetch,
every consumer fetch). kafka-python's generated decoder, with the header, null-field and bounds
checks around it, took ~3.5-4.5 us of broker CPU per request; :func:`decode_fetch_request` reads
versions 4-18 into the same kafka-python objects (``FetchRequest``, ``FetchTopic``,
``FetchPartition``, ``ForgottenTopic``: same slots set, same values; each made by
``protocol.kafka_python_internals.new_decoded``, as the generated decoder makes them). It reads
only the common shape: any tagged field (a follower's KIP-903 ``ReplicaState`` or KIP-853
directory id, a ``ClusterId``), a null where the schema forbids one, a negative array length, a
length running past the body, a varint over 5 bytes or bad UTF-8 makes it answer None, and the
caller decodes the request with kafka-python, whose verdict (a value or MalformedRequest)
stands. ``tests/protocol/test_request_decoders.py`` compares the two decoders on random requests
of every version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kafka.protocol.consumer import FetchRequest
from kafka.protocol.data_container import DataContainer

from .kafka_python_internals import new_decoded as _new
from .kafka_uuid import read_topic_id
from .varint import read_uvarint, uvarint


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
    records: Region | bytes | memoryview = b""
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
_PART_V5 = struct.Struct(">ihqqq")  # ... and log start offset (v5+)
_ERROR_SESSION = struct.Struct(">hi")  # v7+: top-level error code, session id
_NULL_ARRAY = _i32(-1)
_ZERO_UUID = uuid.UUID(int=0)
_ABORTED = struct.Struct(">qq")


def encode_fetch_response(version: int, correlation_id: int, topics: Sequence[TopicData], *,
                          throttle_time_ms: int = 0, error_code: int = 0, session_id: int = 0,
                          node_endpoints: Sequence[tuple[int, str, int, str | None]] = (),
                          ) -> tuple[list[bytes | Region], int]:
    """Return (chunks, total size) of the framed response; chunks are bytes or regions.

    Every Fetch a follower or consumer gets is framed here (two per replicated acks=all message
    on its leader), so the version's choices are taken once, not per partition (issue #26)."""
    flexible = version >= 12
    by_id = version >= 13
    with_start = version >= 5
    with_replica = version >= 11
    no_aborted = b"\x00" if flexible else _NULL_ARRAY
    chunks: list[bytes | Region] = []
    total = 0
    # response header: correlation id (+ empty tagged fields when flexible)
    buf = bytearray(_i32(correlation_id))
    if flexible:
        buf += b"\x00"
    buf += _i32(throttle_time_ms)
    if version >= 7:
        buf += _ERROR_SESSION.pack(error_code, session_id)
    buf += uvarint(len(topics) + 1) if flexible else _i32(len(topics))
    for t in topics:
        if by_id:
            buf += (t.topic_id or _ZERO_UUID).bytes
        else:
            name = (t.topic or "").encode()
            buf += (uvarint(len(name) + 1) if flexible else _i16(len(name))) + name
        parts = t.partitions
        buf += uvarint(len(parts) + 1) if flexible else _i32(len(parts))
        for p in parts:
            if with_start:
                buf += _PART_V5.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                     p.log_start_offset)
            else:
                buf += _PART_V4.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                buf += no_aborted
            else:
                buf += uvarint(len(aborted) + 1) if flexible else _i32(len(aborted))
                for pid, first in aborted:
                    buf += _ABORTED.pack(pid, first)
                    if flexible:
                        buf += b"\x00"
            if with_replica:
                buf += _i32(p.preferred_read_replica)
            rec = p.records
            if rec is None:
                rec = b""
            if isinstance(rec, (bytes, bytearray, memoryview)):
                size = len(rec)
                buf += uvarint(size + 1) if flexible else _i32(size)
                if size:
                    buf += rec
            else:
                size = rec.size
                buf += uvarint(size + 1) if flexible else _i32(size)
                if size:
                    chunks.append(bytes(buf))
                    chunks.append(rec)
                    total += len(buf) + size
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
            body = bytearray(uvarint(len(node_endpoints) + 1))
            for node_id, host, port, rack in node_endpoints:
                h = host.encode()
                body += _i32(node_id) + uvarint(len(h) + 1) + h + _i32(port)
                body += b"\x00" if rack is None else uvarint(len(rack.encode()) + 1) + rack.encode()
                body += b"\x00"
            buf += b"\x01\x00" + uvarint(len(body)) + body
        else:
            buf += b"\x00"  # response tagged fields
    if buf:
        chunks.append(bytes(buf))
        total += len(buf)
    chunks.insert(0, _i32(total))
    return chunks, total + 4


# --- the replica fetcher's side: FetchRequest v12 out, FetchResponse v12 in -------------------

FETCHER_VERSION = 12  # flexible, topics by name: what the replica fetcher speaks
_REQ_HEADER = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
# the request header's (empty) tagged fields; replica id, max wait, min bytes, max bytes,
# isolation, session id, session epoch
_REQ_TOP_TAGGED = struct.Struct(">biiiibii")
# partition, current epoch, fetch offset, last fetched epoch, log start offset, partition max
# bytes; (empty) tagged fields
_REQ_PART_TAGGED = struct.Struct(">iiqiqib")
_RESP_PART = struct.Struct(">ihqqq")  # partition, error, high watermark, last stable, log start
_RESP_TOP = struct.Struct(">ihi")  # throttle time, error code, session id
_u32 = struct.Struct(">i")


@dataclass(slots=True)
class FetchPartitionRequest:
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    log_start_offset: int
    partition_max_bytes: int
    last_fetched_epoch: int = -1


def encode_fetch_request(correlation_id: int, client_id: str, topics: Sequence[tuple[str, Sequence[FetchPartitionRequest]]],
                         *, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                         isolation_level: int = 0, session_id: int = 0, session_epoch: int = -1,
                         forgotten: Sequence[tuple[str, Sequence[int]]] = (), rack_id: str = "") -> bytes:
    """The framed FetchRequest v12 (request header v2) that kafka-python would encode.

    ``forgotten``: (topic, [partition]) an incremental fetch drops from its session (KIP-227).
    (Chunks joined once, the size prefix filled in last: this runs once per replication round.)"""
    cid = client_id.encode()
    chunks = [b"", _REQ_HEADER.pack(1, FETCHER_VERSION, correlation_id, len(cid)), cid,
              _REQ_TOP_TAGGED.pack(0, replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id,
                                   session_epoch),
              uvarint(len(topics) + 1)]
    append = chunks.append
    for name, parts in topics:
        t = name.encode()
        append(uvarint(len(t) + 1))
        append(t)
        append(uvarint(len(parts) + 1))
        for p in parts:  # each with its empty tagged fields
            append(_REQ_PART_TAGGED.pack(p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch,
                                         p.log_start_offset, p.partition_max_bytes, 0))
        append(b"\x00")  # topic tagged fields
    append(uvarint(len(forgotten) + 1))
    for name, indexes in forgotten:
        t = name.encode()
        append(uvarint(len(t) + 1))
        append(t)
        append(uvarint(len(indexes) + 1))
        for index in indexes:
            append(_u32.pack(index))
        append(b"\x00")  # forgotten topic tagged fields
    r = rack_id.encode()
    append(uvarint(len(r) + 1))
    append(r)
    append(b"\x00")  # rack id; tagged fields
    chunks[0] = _u32.pack(sum(map(len, chunks)))
    return b"".join(chunks)


@dataclass(slots=True)
class FetchResponseData:
    correlation_id: int
    throttle_time_ms: int
    error_code: int
    session_id: int
    topics: list[TopicData]


def _skip_tags(buf: memoryview, pos: int,
               on_tag: Callable[[int, memoryview], None] | None = None) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if on_tag is not None:
            on_tag(tag, buf[pos:pos + size])
        pos += size
    return pos


def decode_fetch_response(payload: bytes | bytearray | memoryview) -> FetchResponseData:
    """Decode a FetchResponse v12 frame (without its size prefix, with its response header v1).

    Records come back as ``memoryview`` slices of ``payload``; KIP-951's current leader (partition
    tag 1) fills ``current_leader``; other tagged fields are skipped. Raises ValueError when a
    length runs past the frame.

    This runs once per replication round: the common one-byte lengths and counts and the empty
    tagged-field sections are read in line; anything longer goes through ``read_uvarint`` and
    ``_skip_tags``.
    """
    buf = memoryview(payload)
    end = len(buf)
    (corr,) = _u32.unpack_from(buf, 0)
    pos = 5 if buf[4] == 0 else _skip_tags(buf, 4)  # response header v1
    throttle, error_code, session_id = _RESP_TOP.unpack_from(buf, pos)
    pos += 10  # _RESP_TOP.size
    n_topics = buf[pos]
    pos += 1
    if n_topics & 0x80:
        n_topics, pos = read_uvarint(buf, pos - 1)
    topics: list[TopicData] = []
    for _ in range(n_topics - 1):
        ln = buf[pos]
        pos += 1
        if ln & 0x80:
            ln, pos = read_uvarint(buf, pos - 1)
        name = str(buf[pos:pos + ln - 1], "utf-8")
        pos += ln - 1
        n_parts = buf[pos]
        pos += 1
        if n_parts & 0x80:
            n_parts, pos = read_uvarint(buf, pos - 1)
        parts: list[PartitionData] = []
        for _ in range(n_parts - 1):
            index, code, hw, lso, start = _RESP_PART.unpack_from(buf, pos)
            pos += 30  # _RESP_PART.size
            n_aborted = buf[pos]
            pos += 1
            if n_aborted & 0x80:
                n_aborted, pos = read_uvarint(buf, pos - 1)
            aborted: list[tuple[int, int]] | None = None
            if n_aborted:
                aborted = []
                for _ in range(n_aborted - 1):
                    aborted.append(_ABORTED.unpack_from(buf, pos))
                    pos = _skip_tags(buf, pos + _ABORTED.size)
            (preferred,) = _u32.unpack_from(buf, pos)
            pos += 4
            ln = buf[pos]
            pos += 1
            if ln & 0x80:
                ln, pos = read_uvarint(buf, pos - 1)
            size = ln - 1 if ln else 0
            if pos + size > end:
                raise ValueError(f"records of partition {name}-{index} run past the frame")
            p = PartitionData(index, code, hw, lso, start, aborted, preferred, buf[pos:pos + size])
            pos += size
            if buf[pos] == 0:
                pos += 1
            else:
                def on_tag(tag: int, value: memoryview, p: PartitionData = p) -> None:
                    if tag == 1:  # CurrentLeader {LeaderId int32, LeaderEpoch int32, tagged fields}
                        p.current_leader = (_u32.unpack_from(value, 0)[0], _u32.unpack_from(value, 4)[0])
                pos = _skip_tags(buf, pos, on_tag)
            parts.append(p)
        pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos)
        topics.append(TopicData(name, None, parts))
    pos = pos + 1 if buf[pos] == 0 else _skip_tags(buf, pos)
    if pos > end:
        raise ValueError(f"FetchResponse fields end at {pos}, past the frame ({end} bytes)")
    return FetchResponseData(corr, throttle, error_code, session_id, topics)


# --- the leader's side: FetchRequest in, versions 4-18 ----------------------------------------

_FetchTopic = FetchRequest.FetchTopic
_FetchPartition = _FetchTopic.FetchPartition
_ForgottenTopic = FetchRequest.ForgottenTopic
_h = struct.Struct(">h").unpack_from
_i = _u32.unpack_from
# replica id (to v14), max wait, min bytes, max bytes, isolation level, session id, epoch (v7+)
_TOP_V4 = struct.Struct(">iiiib").unpack_from
_TOP_V7 = struct.Struct(">iiiibii").unpack_from
_TOP_V15 = struct.Struct(">iiibii").unpack_from
# partition, [current leader epoch v9+], fetch offset, [last fetched epoch v12+],
# [log start offset v5+], partition max bytes
_PARTITION_V4 = struct.Struct(">iqi").unpack_from
_PARTITION_V5 = struct.Struct(">iqqi").unpack_from
_PARTITION_V9 = struct.Struct(">iiqqi").unpack_from
_PARTITION_V12 = struct.Struct(">iiqiqi").unpack_from


class _Unusual(Exception):
    """Not the common shape: kafka-python decodes this request."""


def decode_fetch_request(body: memoryview, version: int) -> FetchRequest | None:
    """The request in ``body`` (after the request header), or None when it is not the common
    shape and kafka-python must decode it (see the module docstring)."""
    try:
        req, end = (_decode_flexible if version >= 12 else _decode_classic)(body, version)
    except (_Unusual, IndexError, ValueError, struct.error):  # UnicodeDecodeError is a ValueError
        return None
    return req if end <= len(body) else None


def _request(version: int, top: tuple[int, ...]) -> FetchRequest:
    req = _new(FetchRequest, version)
    if version >= 15:
        req.max_wait_ms, req.min_bytes, req.max_bytes, req.isolation_level, req.session_id, \
            req.session_epoch = top
    elif version >= 7:
        req.replica_id, req.max_wait_ms, req.min_bytes, req.max_bytes, req.isolation_level, \
            req.session_id, req.session_epoch = top
    else:
        req.replica_id, req.max_wait_ms, req.min_bytes, req.max_bytes, req.isolation_level = top
    return req


def _partition(version: int, data: memoryview, pos: int) -> tuple[DataContainer, int]:
    """A partition of versions 4-11 (12+ is read in line)."""
    p = _new(_FetchPartition, version)
    if version >= 9:
        p.partition, p.current_leader_epoch, p.fetch_offset, p.log_start_offset, p.partition_max_bytes = \
            _PARTITION_V9(data, pos)
        return p, pos + 28
    if version >= 5:
        p.partition, p.fetch_offset, p.log_start_offset, p.partition_max_bytes = _PARTITION_V5(data, pos)
        return p, pos + 24
    p.partition, p.fetch_offset, p.partition_max_bytes = _PARTITION_V4(data, pos)
    return p, pos + 16


def _decode_flexible(data: memoryview, version: int) -> tuple[FetchRequest, int]:
    if version >= 15:
        req = _request(version, _TOP_V15(data, 0))
        pos = 21
    else:
        req = _request(version, _TOP_V7(data, 0))
        pos = 25
    by_id = version >= 13
    n_topics = data[pos]
    pos += 1
    if n_topics > 0x7F:
        n_topics, pos = read_uvarint(data, pos - 1)
    if not n_topics:
        raise _Unusual
    topics = []
    for _ in range(n_topics - 1):
        t = _new(_FetchTopic, version)
        if by_id:
            t.topic_id = read_topic_id(data, pos)
            pos += 16
        else:
            ln = data[pos]
            pos += 1
            if ln > 0x7F:
                ln, pos = read_uvarint(data, pos - 1)
            if not ln:
                raise _Unusual
            t.topic = str(data[pos:pos + ln - 1], "utf-8")
            pos += ln - 1
        n_parts = data[pos]
        pos += 1
        if n_parts > 0x7F:
            n_parts, pos = read_uvarint(data, pos - 1)
        if not n_parts:
            raise _Unusual
        parts = []
        for _ in range(n_parts - 1):
            p = _new(_FetchPartition, version)
            p.partition, p.current_leader_epoch, p.fetch_offset, p.last_fetched_epoch, p.log_start_offset, \
                p.partition_max_bytes = _PARTITION_V12(data, pos)
            if data[pos + 32]:  # tagged fields (v17+: the follower's directory id, v18+: high watermark)
                raise _Unusual
            pos += 33
            parts.append(p)
        t.partitions = parts
        if data[pos]:
            raise _Unusual
        pos += 1
        topics.append(t)
    req.topics = topics
    n_topics = data[pos]
    pos += 1
    if n_topics > 0x7F:
        n_topics, pos = read_uvarint(data, pos - 1)
    if not n_topics:
        raise _Unusual
    forgotten = []
    for _ in range(n_topics - 1):
        f = _new(_ForgottenTopic, version)
        if by_id:
            f.topic_id = read_topic_id(data, pos)
            pos += 16
        else:
            ln, pos = read_uvarint(data, pos)
            if not ln:
                raise _Unusual
            f.topic = str(data[pos:pos + ln - 1], "utf-8")
            pos += ln - 1
        n_parts, pos = read_uvarint(data, pos)
        if not n_parts:
            raise _Unusual
        f.partitions = [_i(data, pos + 4 * k)[0] for k in range(n_parts - 1)]
        pos += 4 * (n_parts - 1)
        if data[pos]:
            raise _Unusual
        pos += 1
        forgotten.append(f)
    req.forgotten_topics_data = forgotten
    ln = data[pos]
    pos += 1
    if ln > 0x7F:
        ln, pos = read_uvarint(data, pos - 1)
    if not ln:
        raise _Unusual
    req.rack_id = str(data[pos:pos + ln - 1], "utf-8")
    pos += ln - 1
    if data[pos]:  # tagged fields: ClusterId, the follower's ReplicaState (v15+)
        raise _Unusual
    return req, pos + 1


def _string16(data: memoryview, pos: int) -> tuple[str, int]:
    (ln,) = _h(data, pos)
    if ln < 0:
        raise _Unusual
    return str(data[pos + 2:pos + 2 + ln], "utf-8"), pos + 2 + ln


def _count32(data: memoryview, pos: int) -> int:
    (n,) = _i(data, pos)
    if n < 0:
        raise _Unusual
    return n


def _decode_classic(data: memoryview, version: int) -> tuple[FetchRequest, int]:
    if version >= 7:
        req = _request(version, _TOP_V7(data, 0))
        pos = 25
    else:
        req = _request(version, _TOP_V4(data, 0))
        pos = 17
    topics = []
    n_topics = _count32(data, pos)
    pos += 4
    for _ in range(n_topics):
        t = _new(_FetchTopic, version)
        t.topic, pos = _string16(data, pos)
        n_parts = _count32(data, pos)
        pos += 4
        parts = []
        for _ in range(n_parts):
            p, pos = _partition(version, data, pos)
            parts.append(p)
        t.partitions = parts
        topics.append(t)
    req.topics = topics
    if version >= 7:
        forgotten = []
        n_topics = _count32(data, pos)
        pos += 4
        for _ in range(n_topics):
            f = _new(_ForgottenTopic, version)
            f.topic, pos = _string16(data, pos)
            n_parts = _count32(data, pos)
            f.partitions = [_i(data, pos + 4 + 4 * k)[0] for k in range(n_parts)]
            pos += 4 + 4 * n_parts
            forgotten.append(f)
        req.forgotten_topics_data = forgotten
    if version >= 11:
        req.rack_id, pos = _string16(data, pos)
    return req, pos
