"""Real v2 record batches built with kafka-python's DefaultRecordBatchBuilder."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol.records import ValidatedRecords, validate_batches

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build_batch(values: list[bytes], *, codec: int = 0, timestamps: list[int] | None = None,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                transactional: bool = False, keys: list[bytes | None] | None = None) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    for i, v in enumerate(values):
        ts = timestamps[i] if timestamps is not None else 1_700_000_000_000 + i
        key = keys[i] if keys is not None else f"k{i}".encode()
        b.append(i, timestamp=ts, key=key, value=v, headers=[])
    return bytes(b.build())


def records(*batches: bytes) -> ValidatedRecords:
    return validate_batches(b"".join(batches))


def decode(data: bytes) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record in a region of whole batches."""
    out = []
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos + 8: pos + 12], "big") + 12
        batch = DefaultRecordBatch(bytes(data[pos: pos + size]))
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value))
        pos += size
    assert pos == len(data)
    return out


def build_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int = 0,
                 timestamp: int = 1_700_000_000_000) -> bytes:
    """A transaction marker (control batch) as the transaction coordinator writes it."""
    import struct

    import crc32c

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
                                  producer_epoch=producer_epoch, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=timestamp, key=struct.pack(">hh", 0, 1 if commit else 0),
             value=struct.pack(">hi", 0, coordinator_epoch), headers=[])
    buf = bytearray(b.build())
    attrs = struct.unpack_from(">h", buf, 21)[0] | 0x20
    struct.pack_into(">h", buf, 21, attrs)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)
