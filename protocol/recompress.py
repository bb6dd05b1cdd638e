"""Re-encode batches for a topic whose ``compression.type`` is not ``producer``.

Kafka recompresses on the broker when a topic names a codec. The records section of a v2
batch is the same bytes whether compressed or not, so this works on that section alone:
decompress, compress with the topic's codec, and rebuild the header (attributes, length, CRC).
Offsets, sequences and timestamps are untouched, and no record is decoded.
"""

from __future__ import annotations

import struct

import crc32c as _crc32c
from kafka import codec as kc

from .records import (
    ATTR_COMPRESSION_MASK,
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
    HEADER_SIZE,
    LOG_OVERHEAD,
    ValidatedRecords,
    decompress,
    read_header,
)


def compress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_NONE:
        return data
    if codec == COMPRESSION_GZIP:
        return bytes(kc.gzip_encode(data))
    if codec == COMPRESSION_SNAPPY:
        return bytes(kc.snappy_encode(data))  # xerial framing, as the Java client writes
    if codec == COMPRESSION_LZ4:
        return bytes(kc.lz4_encode(data))
    if codec == COMPRESSION_ZSTD:
        return bytes(kc.zstd_encode(data))
    raise ValueError(f"unknown codec {codec}")


def recompress_to(records: ValidatedRecords, codec: int) -> ValidatedRecords:
    """Return ``records`` with every non-control batch's payload in ``codec``."""
    if all(h.compression == codec or h.is_control for h in records.batches):
        return records
    src = records.buffer
    out = bytearray()
    batches = []
    for h in records.batches:
        batch = src[h.position: h.position + h.size]
        if h.compression != codec and not h.is_control:
            body = bytes(batch[HEADER_SIZE:])
            raw = body if h.compression == COMPRESSION_NONE else decompress(h.compression, body)
            body = compress(codec, raw)
            attrs = (h.attributes & ~ATTR_COMPRESSION_MASK) | codec
            batch = bytearray(batch[:HEADER_SIZE]) + body
            struct.pack_into(">i", batch, 8, len(batch) - LOG_OVERHEAD)
            struct.pack_into(">h", batch, 21, attrs)
            struct.pack_into(">I", batch, 17, _crc32c.crc32c(memoryview(batch)[21:]))
        pos = len(out)
        out += batch
        batches.append(read_header(out, pos))
    return ValidatedRecords(out, batches)
