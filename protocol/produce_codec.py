"""Hand-written Produce codecs for the hot path: the request decoder and the response encoder.

**ProduceRequest decoder.** Every produced batch costs the leader one Produce request, and
kafka-python's generated decoder (plus the header, null-field and bounds checks around it) took
~3 us of broker CPU for a one-batch request. :func:`decode_produce_request` reads versions 3-13
(flexible from 9, topic ids from 13) into the same kafka-python objects the generated decoder
builds (``ProduceRequest``, ``TopicProduceData``, ``PartitionProduceData``: same slots set, same
values, records as ``memoryview`` slices of the body; each made by
``protocol.kafka_python_internals.new_decoded``, as the generated decoder makes them). It reads
only the common shape: anything else (a null where the schema forbids it, a null ``records``, a
tagged field, a negative array length, a length running past the body, a varint over 5 bytes,
bad UTF-8) makes it answer None, and the caller decodes the request with kafka-python, whose
verdict (a value or MalformedRequest) stands. ``tests/protocol/test_request_decoders.py``
compares the two decoders on random requests of every version.

**ProduceResponse encoder** (the common shape: no KIP-951 leader hints).

Every acks=all message costs the leader one Produce response. Building it as kafka-python message
objects and running the generic encoder took ~8 % of a 3-broker cluster's CPU (py-spy, issue
#26); this writes the same bytes straight from a few tuples. kafka-python's ``ProduceResponse``
stays the codec of record: a response that carries a partition's ``CurrentLeader`` or the
``NodeEndpoints`` (v10+, a partition led elsewhere) is built and encoded by it, and
``tests/protocol/test_produce_codec.py`` compares this encoder's bytes with kafka-python's for
every supported version (3-13, flexible from 9, topic ids from 13).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import NamedTuple

from kafka.protocol.data_container import DataContainer
from kafka.protocol.producer import ProduceRequest

from .kafka_python_internals import new_decoded as _new
from .kafka_uuid import read_topic_id
from .varint import read_uvarint, uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I16_NULL = _I16.pack(-1)
_ZERO_UUID = bytes(16)
# partition index, error code, base offset, log append time, log start offset
_PART = struct.Struct(">ihqqq")
_HDR0 = struct.Struct(">ii")  # size, correlation id
_FLEX_HDR = struct.Struct(">iib")  # size, correlation id, no tagged fields


class PartitionResponse(NamedTuple):
    partition: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_errors: Sequence[tuple[int, str | None]]
    error_message: str | None


class TopicResponse(NamedTuple):
    name: str | None  # versions 3-12
    topic_id: uuid.UUID | None  # version 13+
    partitions: Sequence[PartitionResponse]


def _string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else _I16_NULL
    b = s.encode()
    return uvarint(len(b) + 1) + b if flexible else _I16.pack(len(b)) + b


def encode_produce_response(version: int, correlation_id: int, topics: Sequence[TopicResponse],
                            throttle_time_ms: int) -> bytes:
    """The framed ProduceResponse (size, response header, body) at ``version`` (3-13)."""
    flexible = version >= 9
    by_id = version >= 13
    has_errors = version >= 8
    buf = bytearray(uvarint(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for t in topics:
        if by_id:
            buf += t.topic_id.bytes if t.topic_id is not None else _ZERO_UUID
        else:
            buf += _string(t.name, flexible)
        parts = t.partitions
        buf += uvarint(len(parts) + 1) if flexible else _I32.pack(len(parts))
        for p in parts:
            if version >= 5:
                buf += _PART.pack(p.partition, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset)
            else:  # no log start offset before v5
                buf += _PART.pack(p.partition, p.error_code, p.base_offset, p.log_append_time_ms, 0)[:-8]
            if has_errors:
                errs = p.record_errors
                buf += uvarint(len(errs) + 1) if flexible else _I32.pack(len(errs))
                for batch_index, message in errs:
                    buf += _I32.pack(batch_index) + _string(message, flexible)
                    if flexible:
                        buf += b"\x00"
                buf += _string(p.error_message, flexible)
            if flexible:
                buf += b"\x00"  # no CurrentLeader (tagged)
        if flexible:
            buf += b"\x00"
    buf += _I32.pack(throttle_time_ms)
    if flexible:
        buf += b"\x00"  # no NodeEndpoints (tagged)
        return _FLEX_HDR.pack(len(buf) + 5, correlation_id, 0) + buf
    return _HDR0.pack(len(buf) + 4, correlation_id) + buf


# --- ProduceRequest, versions 3-13 ------------------------------------------------------------

_TopicData = ProduceRequest.TopicProduceData
_PartData = _TopicData.PartitionProduceData
_h = struct.Struct(">h").unpack_from
_i = struct.Struct(">i").unpack_from
_ACKS_TIMEOUT = struct.Struct(">hi").unpack_from
_ACKS_TIMEOUT_COUNT = struct.Struct(">hii").unpack_from
_INDEX_LEN = struct.Struct(">ii").unpack_from


def decode_produce_request(body: memoryview, version: int) -> ProduceRequest | None:
    """The request in ``body`` (after the request header), or None when it is not the common
    shape and kafka-python must decode it (see the module docstring)."""
    try:
        req, end = (_decode_flexible if version >= 9 else _decode_classic)(body, version)
    except (IndexError, ValueError, struct.error):  # UnicodeDecodeError is a ValueError
        return None
    return req if end <= len(body) else None


def _decode_classic(data: memoryview, version: int) -> tuple[ProduceRequest | None, int]:
    (ln,) = _h(data, 0)
    pos = 2
    tid = None
    if ln >= 0:
        tid = str(data[2:2 + ln], "utf-8")
        pos += ln
    acks, timeout_ms, n_topics = _ACKS_TIMEOUT_COUNT(data, pos)
    pos += 10
    if n_topics < 0:
        return None, pos
    topics = []
    for _ in range(n_topics):
        (ln,) = _h(data, pos)
        if ln < 0:
            return None, pos
        pos += 2
        name = str(data[pos:pos + ln], "utf-8")
        pos += ln
        (n_parts,) = _i(data, pos)
        pos += 4
        if n_parts < 0:
            return None, pos
        parts = []
        for _ in range(n_parts):
            index, ln = _INDEX_LEN(data, pos)
            if ln < 0:
                return None, pos
            pos += 8
            p = _new(_PartData, version)
            p.index = index
            p.records = data[pos:pos + ln]
            pos += ln
            parts.append(p)
        t = _new(_TopicData, version)
        t.name = name
        t.partition_data = parts
        topics.append(t)
    return _request(version, tid, acks, timeout_ms, topics), pos


def _decode_flexible(data: memoryview, version: int) -> tuple[ProduceRequest | None, int]:
    by_id = version >= 13
    ln = data[0]
    pos = 1
    if ln > 0x7F:
        ln, pos = read_uvarint(data, 0)
    tid = None
    if ln:
        tid = str(data[pos:pos + ln - 1], "utf-8")
        pos += ln - 1
    acks, timeout_ms = _ACKS_TIMEOUT(data, pos)
    pos += 6
    n_topics = data[pos]
    pos += 1
    if n_topics > 0x7F:
        n_topics, pos = read_uvarint(data, pos - 1)
    if not n_topics:
        return None, pos
    topics = []
    for _ in range(n_topics - 1):
        t = _new(_TopicData, version)
        if by_id:
            t.topic_id = read_topic_id(data, pos)
            pos += 16
        else:
            ln = data[pos]
            pos += 1
            if ln > 0x7F:
                ln, pos = read_uvarint(data, pos - 1)
            if not ln:
                return None, pos
            t.name = str(data[pos:pos + ln - 1], "utf-8")
            pos += ln - 1
        n_parts = data[pos]
        pos += 1
        if n_parts > 0x7F:
            n_parts, pos = read_uvarint(data, pos - 1)
        if not n_parts:
            return None, pos
        parts = []
        for _ in range(n_parts - 1):
            (index,) = _i(data, pos)
            ln = data[pos + 4]
            pos += 5
            if ln > 0x7F:
                ln, pos = read_uvarint(data, pos - 1)
            if not ln:
                return None, pos
            ln -= 1
            p = _new(_PartData, version)
            p.index = index
            p.records = data[pos:pos + ln]
            pos += ln
            if data[pos]:  # tagged fields: none are defined, kafka-python keeps unknown ones
                return None, pos
            pos += 1
            parts.append(p)
        t.partition_data = parts
        if data[pos]:
            return None, pos
        pos += 1
        topics.append(t)
    if data[pos]:
        return None, pos
    return _request(version, tid, acks, timeout_ms, topics), pos + 1


def _request(version: int, tid: str | None, acks: int, timeout_ms: int,
             topics: list[DataContainer]) -> ProduceRequest:
    req = _new(ProduceRequest, version)
    req.transactional_id = tid
    req.acks = acks
    req.timeout_ms = timeout_ms
    req.topic_data = topics
    return req
