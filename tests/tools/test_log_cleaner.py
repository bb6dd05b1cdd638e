"""The log cleaner on real data: 100,000 updates over 1,000 keys per codec, with tombstones,
committed and aborted transactions, an offset map too small for the keys (several passes),
and a reopen afterwards.

Batches are built by kafka-python's record builder and appended through ``Log.append`` (the
broker's own write path, with producer-state checks), so the cleaner meets exactly what a
broker stores. Every assertion compares against a model computed while writing.
"""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from log.check import check_log
from log.cleaner import LogCleaner, parse_records
from log.cleaner_manager import read_checkpoint
from log.config import LogConfig
from log.log import Log
from log.offset_map import OffsetMap
from protocol.records import iter_headers
from tests.log.helpers import CODECS, build_batch, build_marker, records

pytestmark = pytest.mark.timeout(300)

T0 = 1_700_000_000_000


def cfg(**extra: str) -> LogConfig:
    return LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": "65536",
                                      "delete.retention.ms": "1000", "file.delete.delay.ms": "0", **extra})


def contents(log: Log) -> tuple[list[tuple[int, bytes | None, bytes | None]], list[tuple[int, int, int]]]:
    """(offset, key, value) of every data record, and (offset, producer id, control type) of markers."""
    data, markers = [], []
    for buf in log.read_batch_bytes(0):
        for h in iter_headers(buf):
            if h.is_control:
                rec = parse_records(buf, h)[0]
                markers.append((h.base_offset, h.producer_id, struct.unpack(">hh", rec.key or b"\0\0\0\0")[1]))
                continue
            for r in parse_records(buf, h):
                value = None if r.is_tombstone else _value(r.body)
                data.append((h.base_offset + r.offset_delta, r.key, value))
    return data, markers


def _value(body: bytes) -> bytes:
    from protocol.varint import read_varint as _varint

    p = 1
    _, p = _varint(body, p)
    _, p = _varint(body, p)
    klen, p = _varint(body, p)
    p += max(klen, 0)
    vlen, p = _varint(body, p)
    return body[p:p + vlen]


def write_workload(log: Log, codec: int, *, updates: int = 100_000, keys: int = 1000, per_batch: int = 100,
                   seed: int = 7) -> tuple[dict[bytes, bytes | None], set[tuple[int, bytes, bytes | None]],
                                            set[int], dict[int, int]]:
    """Random updates; every 10th batch transactional (alternately committed and aborted);
    the last 100 keys written end with a tombstone. Returns the model."""
    rng = random.Random(seed)
    latest: dict[bytes, bytes | None] = {}
    written: set[tuple[int, bytes, bytes | None]] = set()
    aborted_offsets: set[int] = set()
    seqs: dict[int, int] = {}
    tombstoned = [b"key-%d" % k for k in range(keys - 100, keys)]
    n = 0
    batch_no = 0
    while n < updates:
        ks = [b"key-%d" % rng.randrange(keys - 100) for _ in range(per_batch)]
        vs: list[bytes | None] = [b"v%d-%s" % (n + i, k) for i, k in enumerate(ks)]
        ts = [T0 + n + i for i in range(per_batch)]
        if batch_no % 10 == 9:
            pid = 1000 + batch_no % 3
            seq = seqs.get(pid, 0)
            batch = build_batch(vs, keys=ks, codec=codec, timestamps=ts, producer_id=pid, producer_epoch=0,  # type: ignore[arg-type]
                                base_sequence=seq, transactional=True)
            info = log.append(records(batch))
            seqs[pid] = seq + per_batch
            commit = batch_no % 20 == 19
            log.append(records(build_marker(pid, 0, commit, timestamp=T0 + n)))
            for i, (k, v) in enumerate(zip(ks, vs, strict=True)):
                off = info.first_offset + i
                if commit:
                    latest[k] = v
                    written.add((off, k, v))
                else:
                    aborted_offsets.add(off)
        else:
            info = log.append(records(build_batch(vs, keys=ks, codec=codec, timestamps=ts)))  # type: ignore[arg-type]
            for i, (k, v) in enumerate(zip(ks, vs, strict=True)):
                latest[k] = v
                written.add((info.first_offset + i, k, v))
        n += per_batch
        batch_no += 1
    for i, k in enumerate(tombstoned):  # a live value first, then its tombstone
        for v in (b"doomed-%d" % i, None):
            info = log.append(records(build_batch([v], keys=[k], codec=codec, timestamps=[T0 + n])))  # type: ignore[list-item]
            latest[k] = v
            written.add((info.first_offset, k, v))
            n += 1
    log.roll()  # everything written is now in closed segments
    return latest, written, aborted_offsets, seqs


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_compaction_of_100k_updates_over_1000_keys(tmp_path: Path, codec: str) -> None:
    d = tmp_path / "compacted-0"
    log = Log.open(d, cfg())
    latest, written, aborted, seqs = write_workload(log, CODECS[codec])
    leo = log.log_end_offset
    size_before = log.size_bytes
    markers_before = contents(log)[1]

    # A map of 16 KiB holds 921 keys: fewer than the 1,000 live keys, so it takes several passes.
    cleaner = LogCleaner(log, buffer_bytes=16 * 1024)
    assert OffsetMap(16 * 1024).max_entries < 1000
    now = T0 + 10**6
    passes = 0
    while True:
        stats = cleaner.clean(now, force=True)
        passes += 1
        if cleaner.first_dirty >= log.segments[-1].base_offset or passes > 50:
            break
    assert passes >= 2, "a map smaller than the key set must need more than one pass"
    assert read_checkpoint(tmp_path / "cleaner-offset-checkpoint")[("compacted", 0)] == cleaner.first_dirty

    data, markers = contents(log)
    assert log.log_end_offset == leo and log.size_bytes < size_before / 20
    offsets = [o for o, _, _ in data]
    assert offsets == sorted(offsets) and len(offsets) == len(set(offsets))
    assert set(data) <= written, "every surviving record is unchanged, at its original offset"
    assert not set(offsets) & aborted, "records of aborted transactions are gone"
    keys = [k for _, k, _ in data]
    assert len(keys) == len(set(keys)), "exactly one record per key"
    assert {k: v for _, k, v in data} == latest, "and it is the latest value (tombstones still there)"
    # Markers of transactions whose data survives are kept; the others wait for their horizon.
    assert set(markers) <= set(markers_before)

    # After delete.retention.ms, a pass removes the tombstones and the empty transactions' markers.
    stats = cleaner.clean(now + 5000, force=True)
    assert stats.tombstones_removed == 100
    data, markers = contents(log)
    assert {k: v for _, k, v in data} == {k: v for k, v in latest.items() if v is not None}
    assert len(markers) < len(markers_before)

    # Producer state survives the rewrite: reopen from the files, rebuild from the log.
    log.close()
    for snap in d.glob("*.snapshot"):
        snap.unlink()
    log = Log.open(d, cfg(), recover=True)
    assert {k: v for _, k, v in contents(log)[0]} == {k: v for k, v in latest.items() if v is not None}
    assert log.log_end_offset == leo
    for pid, next_seq in seqs.items():
        entry = log.producer_state.producers[pid]
        assert entry.batch_metadata[-1].last_seq == next_seq - 1
    assert check_log(tmp_path) == []
    log.close()


def test_active_segment_open_transactions_and_min_lag_are_not_cleaned(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "c-0", cfg(**{"segment.bytes": "2000"}))
    for i in range(30):
        log.append(records(build_batch([b"old-%d" % i], keys=[b"k"], timestamps=[T0 + i])))
    # an open transaction: nothing from its first offset on may be cleaned
    open_first = log.append(records(build_batch([b"txn"], keys=[b"k"], producer_id=9, producer_epoch=0,
                                                base_sequence=0, transactional=True))).first_offset
    for i in range(30):
        log.append(records(build_batch([b"new-%d" % i], keys=[b"k"], timestamps=[T0 + 100 + i])))
    before = contents(log)[0]
    LogCleaner(log).clean(T0 + 10**6, force=True)
    after = contents(log)[0]
    assert [r for r in before if r[0] >= open_first] == [r for r in after if r[0] >= open_first]
    below = [r for r in after if r[0] < open_first]
    assert (29, b"k", b"old-29") in below and len(below) < 10  # closed segments below it were compacted
    # min.compaction.lag.ms keeps young segments as they are
    log.append(records(build_marker(9, 0, True)))
    log.config = cfg(**{"segment.bytes": "2000", "min.compaction.lag.ms": str(10**9)})
    before = contents(log)[0]
    LogCleaner(log).clean(T0 + 10**6, force=True)
    assert contents(log)[0] == before
    log.close()


def test_offset_map_is_bounded_and_exact() -> None:
    m = OffsetMap(1024)
    assert m.memory_bytes == 1024 and m.max_entries == 57
    for i in range(57):
        m.put(b"key-%d" % i, i)
        m.put(b"key-%d" % i, i + 1000)
    assert all(m.get(b"key-%d" % i) == i + 1000 for i in range(57))
    assert m.get(b"absent") == -1
    with pytest.raises(OverflowError):
        m.put(b"one-too-many", 1)
