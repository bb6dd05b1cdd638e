"""The log cleaner: compaction of ``cleanup.policy=compact`` partitions (Kafka's LogCleaner).

What it guarantees, as Kafka does: after a pass, every key in the cleaned part of the log
keeps only its latest value; offsets never change (removed records leave gaps, and a
batch keeps its base and last offset); tombstones (null values) survive one pass and then
``delete.retention.ms`` more, so a consumer reading from the start has that long to see a
delete (KIP-534: the deadline is written into the batch as its *delete horizon*, attribute
bit 6, base timestamp = horizon, record timestamp deltas rebased); records of aborted
transactions are removed; transaction markers stay while their transaction still has data
and then until their own delete horizon; the last batch of every live producer stays
(emptied if need be) so producer state rebuilt from the log keeps its sequence numbers.

Theory of operation. One pass over one log:

1. *Bounds* (on the broker's event loop): only closed segments are cleaned, and only up to
   the first unstable offset (an open transaction's first offset: its outcome is unknown)
   and the first segment younger than ``min.compaction.lag.ms``.
2. *Header scan*: every batch header from the log start to the log end (61 bytes each, no
   decompression), resolving which transactional batches were aborted (a producer's
   transactional batches up to its ABORT marker) and counting dirty records.
3. *Offset map*: from the first dirty offset (``cleaner-offset-checkpoint``, Kafka's file,
   kept by :mod:`log.cleaner_manager`), record keys are hashed into a fixed-size table
   (:mod:`log.offset_map`, ``log.cleaner.dedupe.buffer.size`` bytes at most). If the dirty
   section has more keys than fit, the map stops at a batch boundary and the next pass
   continues from there: memory is bounded whatever the log's size.
4. *Copy*: each cleanable segment is rewritten to ``NNN.log.cleaned`` keeping a record if
   its offset is at or after the map's end, or its key is not in the map, or it is the
   mapped (latest) offset. Unchanged batches are copied byte for byte; changed ones are
   rebuilt with their original codec, producer id, epoch, base sequence and offsets.
5. *Swap* (back on the event loop): old index files are renamed away, the cleaned log file
   atomically replaces the old one (``os.replace``), then the new indexes take their
   names; a crash at any point leaves a valid log whose missing indexes ``Log.open``
   rebuilds. Segments that end up empty are deleted (except the first, which holds the log
   start offset). Readers holding the old file keep its descriptor for
   ``file.delete.delay.ms``.

Steps 2-4 read only closed, immutable segment files and run in a worker thread; the log's
in-memory structures are touched only in steps 1 and 5, on the event loop, by the log's
single owner. Never cleans the active segment; never reorders or renumbers records.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import crc32c as _crc32c

from protocol.recompress import compress
from protocol.records import (
    ATTR_DELETE_HORIZON,
    COMPRESSION_NONE,
    HEADER_SIZE,
    BatchHeader,
    decompress,
    read_header,
)
from protocol.varint import read_varint, varint

from .cleaner_manager import CHECKPOINT_FILE, dirty_ratio, read_checkpoint, write_checkpoint
from .log import Log
from .offset_map import LOAD_FACTOR, OffsetMap
from .producer_state import control_record_type
from .segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
    scan_headers,
)

logger = logging.getLogger("samsa.cleaner")

CLEANED_SUFFIX = ".cleaned"
DEFAULT_DEDUPE_BUFFER_SIZE = 134217728  # log.cleaner.dedupe.buffer.size
DEFAULT_BACKOFF_MS = 15000  # log.cleaner.backoff.ms
WRITE_CHUNK = 1 << 18
CONTROL_ABORT = 0

_HEADER = struct.Struct(">qiibIhiqqqhii")


# --- records ----------------------------------------------------------------------------------

@dataclass(slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    is_tombstone: bool
    body: bytes  # the record after its length varint: attributes .. headers
    ts_end: int  # position in body after the timestamp delta varint


def parse_records(batch: bytes, h: BatchHeader) -> list[Record]:
    body = memoryview(batch)[HEADER_SIZE:h.size]
    if not len(body):
        return []  # an emptied batch (kept for its producer state) has no records section
    raw = bytes(body) if h.compression == COMPRESSION_NONE else decompress(h.compression, body)
    out = []
    pos, end = 0, len(raw)
    while pos < end:
        length, pos = read_varint(raw, pos)
        rec_end = pos + length
        p = pos + 1
        ts_delta, p = read_varint(raw, p)
        ts_end = p - pos
        off_delta, p = read_varint(raw, p)
        klen, p = read_varint(raw, p)
        key = None if klen < 0 else raw[p:p + klen]
        p += max(klen, 0)
        vlen, p = read_varint(raw, p)
        out.append(Record(off_delta, ts_delta, key, vlen < 0, raw[pos:rec_end], ts_end))
        pos = rec_end
    return out


def build_batch(h: BatchHeader, records: list[Record], *, delete_horizon: int | None) -> bytes:
    """A batch like ``h`` holding ``records`` (possibly none), offsets and producer fields kept.

    ``delete_horizon`` (ms) sets KIP-534's attribute and makes it the base timestamp; record
    timestamp deltas are rebased so every record keeps its timestamp.
    """
    attrs = h.attributes
    if not records:  # no records section at all; no codec, so no client tries to decompress nothing
        attrs &= ~0x07
    base_ts = h.base_timestamp
    if delete_horizon is not None:
        attrs |= ATTR_DELETE_HORIZON
        new_base = delete_horizon
    else:
        new_base = base_ts
    parts = []
    max_ts = -1
    for r in records:
        body = r.body
        if new_base != base_ts:
            body = body[:1] + varint(r.timestamp_delta + base_ts - new_base) + body[r.ts_end:]
        parts.append(varint(len(body)))
        parts.append(body)
        max_ts = max(max_ts, base_ts + r.timestamp_delta)
    if h.timestamp_type == 1 or not records:
        max_ts = h.max_timestamp
    payload = compress(h.compression, b"".join(parts)) if records else b""
    batch_length = HEADER_SIZE - 12 + len(payload)
    head = bytearray(_HEADER.pack(h.base_offset, batch_length, h.partition_leader_epoch, 2, 0, attrs,
                                  h.last_offset_delta, new_base, max_ts, h.producer_id, h.producer_epoch,
                                  h.base_sequence, len(records)))
    out = head + payload
    struct.pack_into(">I", out, 17, _crc32c.crc32c(memoryview(out)[21:]))
    return bytes(out)


def _has_horizon(h: BatchHeader) -> bool:
    return bool(h.attributes & ATTR_DELETE_HORIZON)


# --- one pass ---------------------------------------------------------------------------------

class SegmentReader:
    """A closed segment seen through its own duplicate descriptor, sized at planning time.

    The worker thread must not use ``seg.fd``: the event loop may delete the segment
    (retention, DeleteRecords) and close that descriptor meanwhile, and the number could be
    reused by another file. A ``dup`` taken on the loop keeps the inode readable.
    """

    def __init__(self, seg: LogSegment) -> None:
        self.seg = seg
        self.base_offset = seg.base_offset
        self.next_offset = seg.next_offset
        self.size = seg.size
        self.dir = seg.dir
        self.fd = os.dup(seg.fd)

    def batches(self, start_offset: int | None = None) -> Iterable[BatchHeader]:
        for h in scan_headers(self.fd, 0, self.size, chunk=WRITE_CHUNK):
            if start_offset is not None and h.last_offset < start_offset:
                continue
            yield h

    def read_batch(self, h: BatchHeader) -> bytes:
        out = bytearray()
        while len(out) < h.size:
            chunk = os.pread(self.fd, h.size - len(out), h.position + len(out))
            if not chunk:
                raise OSError(f"short read at {h.position} in segment {self.base_offset}")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

@dataclass
class CleanerStats:
    """What one pass (or all of them, summed) did."""

    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    keys_mapped: int = 0
    tombstones_removed: int = 0
    aborted_removed: int = 0
    markers_removed: int = 0
    segments_cleaned: int = 0
    seconds: float = 0.0
    map_bytes: int = 0

    @property
    def segments(self) -> int:
        """Segments rewritten (log engineer's name for ``segments_cleaned``)."""
        return self.segments_cleaned

    @property
    def records_removed(self) -> int:
        return self.records_read - self.records_kept + self.aborted_removed

    def add(self, other: CleanerStats) -> None:
        for f in self.__dataclass_fields__:
            if f not in ("map_bytes",):
                setattr(self, f, getattr(self, f) + getattr(other, f))
        self.map_bytes = max(self.map_bytes, other.map_bytes)


@dataclass
class PassPlan:
    """Everything a pass needs, captured on the log's owner thread before the work starts."""

    log: Log
    segments: list[SegmentReader]  # the cleanable (closed) segments, oldest first
    all_segments: list[SegmentReader]  # every segment, for the header scan (sizes as planned)
    first_dirty: int
    upper: int  # first uncleanable offset
    now_ms: int
    delete_retention_ms: int
    producer_last_offsets: dict[int, int]  # live producer id -> offset of its last batch


@dataclass
class PassResult:
    plan: PassPlan
    map_end: int
    cleaned: list[tuple[LogSegment, LogSegment | None]] = field(default_factory=list)  # (old, new or None)
    stats: CleanerStats = field(default_factory=CleanerStats)
    next_horizon_ms: int | None = None


def plan_pass(log: Log, first_dirty: int, now_ms: int | None = None) -> PassPlan | None:
    """Step 1 (owner thread): which segments may be cleaned now, or None."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    cfg = log.config
    segs = list(log.segments)
    if len(segs) < 2:
        return None
    upper = segs[-1].base_offset
    fu = log.producer_state.first_unstable_offset() if hasattr(log.producer_state, "first_unstable_offset") \
        else None
    if fu is not None:
        upper = min(upper, fu)
    lag = int(cfg.others.get("min.compaction.lag.ms", "0"))
    cleanable = []
    for i, seg in enumerate(segs[:-1]):
        nxt = segs[i + 1].base_offset
        if nxt > upper:
            break
        if lag > 0 and seg.largest_timestamp > now - lag:
            upper = seg.base_offset
            break
        cleanable.append(seg)
    if not cleanable:
        return None
    upper = min(upper, segs[len(cleanable)].base_offset)
    last_offsets = {pid: e.batch_metadata[-1].last_offset
                    for pid, e in getattr(log.producer_state, "producers", {}).items() if e.batch_metadata}
    readers = {id(s): SegmentReader(s) for s in segs}
    return PassPlan(log, [readers[id(s)] for s in cleanable], [readers[id(s)] for s in segs],
                    max(first_dirty, log.log_start_offset), upper, now,
                    int(cfg.others.get("delete.retention.ms", "86400000")), last_offsets)


def close_plan(plan: PassPlan) -> None:
    for r in plan.all_segments:
        r.close()


def _aborted_batches(segments: Iterable[SegmentReader]) -> tuple[set[int], int]:
    """Base offsets of transactional data batches whose transaction was aborted (step 2)."""
    pending: dict[int, list[int]] = {}
    aborted: set[int] = set()
    scanned = 0
    for seg in segments:
        for h in seg.batches():
            scanned += 1
            if not h.is_transactional:
                continue
            if h.is_control:
                try:
                    ctype = control_record_type(seg.read_batch(h))
                except (IndexError, ValueError):
                    continue
                batches = pending.pop(h.producer_id, [])
                if ctype == CONTROL_ABORT:
                    aborted.update(batches)
            else:
                pending.setdefault(h.producer_id, []).append(h.base_offset)
    return aborted, scanned


def build_offset_map(plan: PassPlan, offset_map: OffsetMap, aborted: set[int], stats: CleanerStats) -> int:
    """Step 3: map keys from the first dirty offset; returns the map's end offset."""
    map_end = plan.first_dirty
    for seg in plan.segments:
        if seg.next_offset <= plan.first_dirty:
            continue
        for h in seg.batches(plan.first_dirty if seg.base_offset < plan.first_dirty else None):
            if h.base_offset >= plan.upper:
                return map_end
            if h.last_offset < plan.first_dirty:
                continue
            if h.is_control or (h.is_transactional and h.base_offset in aborted):
                map_end = h.next_offset
                continue
            if offset_map.entries + h.records_count > offset_map.max_entries:
                if map_end == plan.first_dirty and offset_map.entries == 0:
                    raise MemoryError(f"the offset map ({offset_map.max_entries} entries) cannot hold one batch "
                                      f"of {h.records_count} records; raise log.cleaner.dedupe.buffer.size")
                return map_end
            batch = seg.read_batch(h)
            for r in parse_records(batch, h):
                off = h.base_offset + r.offset_delta
                if r.key is not None and off >= plan.first_dirty:
                    offset_map.put(r.key, off)
            map_end = h.next_offset
    return max(map_end, plan.first_dirty)


def clean_segments(plan: PassPlan, offset_map: OffsetMap, map_end: int, aborted: set[int],
                   result: PassResult) -> None:
    """Step 4: write each cleanable segment below ``map_end`` to ``NNN.log.cleaned``."""
    stats = result.stats
    now = plan.now_ms
    horizon_new = now + plan.delete_retention_ms
    txn_has_data: dict[int, bool] = {}
    for seg in plan.segments:
        if seg.base_offset >= map_end:
            break
        new = LogSegment(seg.dir, seg.base_offset, plan.log.config, file_suffix=CLEANED_SUFFIX,
                         created_ms=seg.seg.created_ms)
        chunk = bytearray()
        chunk_headers: list[BatchHeader] = []
        kept_any = False

        for h in seg.batches():
            batch = seg.read_batch(h)
            stats.bytes_read += len(batch)
            out: bytes | None = batch
            if h.base_offset >= map_end:
                pass  # beyond what the map knows: kept as is
            elif h.is_control:
                if txn_has_data.get(h.producer_id, False):
                    out = batch
                elif _has_horizon(h):
                    if now >= h.base_timestamp:
                        out = None
                        stats.markers_removed += 1
                    else:
                        result.next_horizon_ms = _min(result.next_horizon_ms, h.base_timestamp)
                else:
                    out = build_batch(h, parse_records(batch, h), delete_horizon=horizon_new)
                    result.next_horizon_ms = _min(result.next_horizon_ms, horizon_new)
                txn_has_data[h.producer_id] = False
            elif h.is_transactional and h.base_offset in aborted:
                stats.aborted_removed += h.records_count
                if plan.producer_last_offsets.get(h.producer_id) == h.last_offset:
                    # the producer's last batch: kept, emptied, with its marker, for producer state
                    out = build_batch(h, [], delete_horizon=None)
                    txn_has_data[h.producer_id] = True
                else:
                    out = None
            else:
                records = parse_records(batch, h)
                stats.records_read += len(records)
                keep = []
                expired = _has_horizon(h) and now >= h.base_timestamp
                for r in records:
                    if r.key is None:
                        continue
                    off = h.base_offset + r.offset_delta
                    latest = offset_map.get(r.key)
                    if latest > off:
                        continue
                    if r.is_tombstone and expired:
                        stats.tombstones_removed += 1
                        continue
                    keep.append(r)
                stats.records_kept += len(keep)
                if keep and h.is_transactional:
                    txn_has_data[h.producer_id] = True
                needs_horizon = not _has_horizon(h) and any(r.is_tombstone for r in keep)
                if len(keep) == len(records) and not needs_horizon:
                    out = batch
                elif keep or plan.producer_last_offsets.get(h.producer_id) == h.last_offset:
                    horizon = horizon_new if needs_horizon else (h.base_timestamp if _has_horizon(h) else None)
                    out = build_batch(h, keep, delete_horizon=horizon)
                    if h.is_transactional:
                        txn_has_data[h.producer_id] = True  # an emptied last batch keeps its marker
                else:
                    out = None
                if _has_horizon(h) and not expired and any(r.is_tombstone for r in keep):
                    result.next_horizon_ms = _min(result.next_horizon_ms, h.base_timestamp)
                elif needs_horizon:
                    result.next_horizon_ms = _min(result.next_horizon_ms, horizon_new)
            if out is None:
                continue
            nh = read_header(out, 0)
            nh.position = len(chunk)
            chunk += out
            chunk_headers.append(nh)
            kept_any = True
            if len(chunk) >= WRITE_CHUNK:
                _write_chunk(new, chunk, chunk_headers, stats)
                chunk, chunk_headers = bytearray(), []
        _write_chunk(new, chunk, chunk_headers, stats)
        new.on_become_inactive()
        new.flush()
        new.release_index_files()
        if kept_any:
            result.cleaned.append((seg.seg, new))
        else:
            new.delete_files()
            result.cleaned.append((seg.seg, None))
        stats.segments_cleaned += 1


def _write_chunk(seg: LogSegment, chunk: bytearray, headers: list[BatchHeader], stats: CleanerStats) -> None:
    if headers:
        seg.append(chunk, headers)
        stats.bytes_written += len(chunk)


def _min(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)


def run_pass(plan: PassPlan, offset_map: OffsetMap) -> PassResult:
    """Steps 2-4 (any thread): read closed segments, write cleaned copies; swap not done."""
    try:
        return _run_pass(plan, offset_map)
    finally:
        close_plan(plan)


def _run_pass(plan: PassPlan, offset_map: OffsetMap) -> PassResult:
    t0 = time.monotonic()
    result = PassResult(plan, plan.first_dirty)
    aborted, _ = _aborted_batches(plan.all_segments)
    map_end = build_offset_map(plan, offset_map, aborted, result.stats)
    result.map_end = map_end
    result.stats.keys_mapped = len(offset_map)
    result.stats.map_bytes = offset_map.memory_bytes
    clean_segments(plan, offset_map, map_end, aborted, result)
    result.stats.passes = 1
    result.stats.seconds = time.monotonic() - t0
    return result


def swap_segments(result: PassResult) -> bool:
    """Step 5 (owner thread): put the cleaned segments in place. False if the log moved on."""
    log = result.plan.log
    if getattr(log, "closed", False):
        _discard(result)
        return False
    now = int(time.time() * 1000)
    for old, new in result.cleaned:
        try:
            idx = log.segments.index(old)
        except ValueError:
            idx = -1
        if idx < 0 or idx == len(log.segments) - 1 or old.deleted:
            if new is not None:  # retention or DeleteRecords removed it meanwhile
                new.delete_files()
            continue
        if new is None and idx > 0:
            del log.segments[idx]
            del log._bases[idx]
            log.txn_index.delete_segment(old.base_offset)
            old.rename_for_delete()
            log.schedule_delete(old, now)
            continue
        if new is None:  # the first segment holds the log start offset: keep it, empty
            new = LogSegment(old.dir, old.base_offset, log.config, file_suffix=CLEANED_SUFFIX)
            new.flush()
            new.release_index_files()
        _replace_files(old, new)
        log.segments[idx] = new
        log.schedule_delete(old, now)
    return True


def _replace_files(old: LogSegment, new: LogSegment) -> None:
    """Old indexes away, cleaned log over the old one (atomic), then the new indexes in place."""
    prefix = filename_prefix(old.base_offset)
    d = old.dir
    for idx in (old.index, old.time_index):
        try:
            idx.rename_to(idx.path.with_name(idx.path.name + DELETED_SUFFIX))
        except FileNotFoundError:
            pass
    final_log = d / (prefix + LOG_SUFFIX)
    os.replace(new.log_path, final_log)
    new.log_path = final_log
    new.index.rename_to(d / (prefix + INDEX_SUFFIX))
    new.time_index.rename_to(d / (prefix + TIME_INDEX_SUFFIX))
    # the old log file's name now belongs to the new segment; its inode lives on through old.fd
    old.log_path = d / (prefix + LOG_SUFFIX + DELETED_SUFFIX)
    old.deleted = True


def _discard(result: PassResult) -> None:
    for _, new in result.cleaned:
        if new is not None:
            new.delete_files()


# --- the background task ------------------------------------------------------------------

class BrokerProperties(Protocol):
    """The broker's properties (``server.properties`` and dynamic configs), as read here."""

    def get(self, key: str, default: object = None) -> object: ...


# (topic, partition, log) of every partition the broker hosts.
HostedLogs = Callable[[], Iterable[tuple[str, int, Log]]]


def _int_property(config: BrokerProperties, key: str, default: int) -> int:
    raw = config.get(key)
    if not raw:
        return default
    return int(raw) if isinstance(raw, (int, float)) else int(str(raw))


class BrokerLogCleaner:
    """Cleans every compacted log of a broker in the background, one log at a time.

    Owned by the broker's event loop: planning and swapping run on it; reading and writing
    segment files run in one worker thread, so at most one pass is in flight.
    """

    def __init__(self, config: BrokerProperties, hosted_logs: HostedLogs, *,
                 buffer_bytes: int | None = None, backoff_ms: int | None = None) -> None:
        self.hosted_logs = hosted_logs
        cfg = config
        self.buffer_bytes = buffer_bytes or _int_property(cfg, "log.cleaner.dedupe.buffer.size",
                                                          DEFAULT_DEDUPE_BUFFER_SIZE)
        self.backoff_ms = backoff_ms or _int_property(cfg, "log.cleaner.backoff.ms", DEFAULT_BACKOFF_MS)
        self.enabled = str(cfg.get("log.cleaner.enable", True)).lower() != "false"
        self.checkpoints: dict[Path, dict[tuple[str, int], int]] = {}
        self.next_horizon: dict[tuple[str, int], int] = {}
        self.stats = CleanerStats()
        # Kafka's LogCleaner gauges read the last pass (lastStats) and LogCleanerManager's
        # time of the last run (broker/metrics/collectors.py LogCleanerCollector)
        self.last_stats: CleanerStats | None = None
        self.last_buffer_utilization = 0.0  # keys mapped / slots the dedupe buffer holds
        self.last_run_ms = time.time() * 1000
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    def _checkpoint_path(self, log: Log) -> Path:
        return Path(log.dir).parent / CHECKPOINT_FILE

    def first_dirty(self, log: Log) -> int:
        path = self._checkpoint_path(log)
        if path not in self.checkpoints:
            self.checkpoints[path] = read_checkpoint(path)
        off = self.checkpoints[path].get((log.topic, log.partition), log.log_start_offset)
        return max(off, log.log_start_offset)

    def _set_first_dirty(self, log: Log, offset: int) -> None:
        path = self._checkpoint_path(log)
        cp = self.checkpoints.setdefault(path, read_checkpoint(path))
        cp[(log.topic, log.partition)] = offset
        live = {(topic, partition) for topic, partition, _log in self.hosted_logs()}
        for k in [k for k in cp if k not in live]:
            del cp[k]
        write_checkpoint(path, cp)

    def compacted_logs(self) -> list[Log]:
        out = []
        for _topic, _partition, log in list(self.hosted_logs()):
            policy = log.config.cleanup_policy.split(",")
            if "compact" in policy:
                out.append(log)
        return out

    def needs_cleaning(self, log: Log, now: int) -> bool:
        key = (log.topic, log.partition)
        ratio = float(log.config.others.get("min.cleanable.dirty.ratio", "0.5"))
        if dirty_ratio(log, self.first_dirty(log)) >= max(ratio, 1e-9):
            return True
        horizon = self.next_horizon.get(key)
        return horizon is not None and now >= horizon

    async def clean_log(self, log: Log) -> PassResult | None:
        """One pass over ``log`` (planning and swap here, file work in a thread)."""
        plan = plan_pass(log, self.first_dirty(log))
        if plan is None:
            return None
        dirty_records = sum(s.next_offset - max(s.base_offset, plan.first_dirty)
                            for s in plan.segments if s.next_offset > plan.first_dirty)
        map_bytes = min(self.buffer_bytes, max(1 << 14, int(dirty_records / LOAD_FACTOR) * 16 + 16))
        offset_map = OffsetMap(map_bytes)
        result = await asyncio.to_thread(run_pass, plan, offset_map)
        if not swap_segments(result):
            return None
        key = (log.topic, log.partition)
        if result.next_horizon_ms is None:
            self.next_horizon.pop(key, None)
        else:
            self.next_horizon[key] = result.next_horizon_ms
        self._set_first_dirty(log, result.map_end)
        self.stats.add(result.stats)
        if result.stats.passes:
            self.last_stats = result.stats
            self.last_buffer_utilization = result.stats.keys_mapped * OffsetMap.SLOT_BYTES / self.buffer_bytes
            s = result.stats
            logger.info("Log cleaner cleaned %s-%d up to offset %d: %d segments, %.1f KB read, %.1f KB written, "
                        "%d/%d records kept, %d tombstones and %d aborted records removed in %.2f s",
                        log.topic, log.partition, result.map_end, s.segments_cleaned, s.bytes_read / 1024,
                        s.bytes_written / 1024, s.records_kept, s.records_read, s.tombstones_removed,
                        s.aborted_removed, s.seconds)
        return result

    async def run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.backoff_ms / 1000)
            except TimeoutError:
                pass
            self._wake.clear()
            if not self.enabled:
                continue
            now = int(time.time() * 1000)
            self.last_run_ms = now
            for log in self.compacted_logs():
                try:
                    if self.needs_cleaning(log, now):
                        await self.clean_log(log)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("Log cleaner failed on %s-%d; will retry", log.topic, log.partition)

    def wakeup(self) -> None:
        self._wake.set()

    @property
    def died(self) -> bool:
        """The background task ended by an error (Kafka's LogCleaner DeadThreadCount)."""
        task = self._task
        return task is not None and task.done() and not task.cancelled()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None



# --- one log, synchronously (tests, benchmarks, tools) ----------------------------------------

class LogCleaner:
    """Compaction of one log, synchronously (tests, ``bench/compaction.py``).

    ``clean`` runs a whole pass on the calling thread, which must be the log's owner.
    """

    def __init__(self, log: Log, buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_SIZE) -> None:
        self.log = log
        self.buffer_bytes = buffer_bytes
        self.checkpoint_path = Path(log.dir).parent / CHECKPOINT_FILE
        self.first_dirty = read_checkpoint(self.checkpoint_path).get((log.topic, log.partition), 0)

    def dirty_ratio(self) -> float:
        return dirty_ratio(self.log, max(self.first_dirty, self.log.log_start_offset))

    def clean(self, now_ms: int | None = None, *, force: bool = False) -> CleanerStats:
        """One pass; ``force`` ignores ``min.cleanable.dirty.ratio``. Updates the checkpoint file."""
        log = self.log
        first_dirty = max(self.first_dirty, log.log_start_offset)
        if not force:
            ratio = float(log.config.others.get("min.cleanable.dirty.ratio", "0.5"))
            if dirty_ratio(log, first_dirty) < max(ratio, 1e-9):
                return CleanerStats()
        plan = plan_pass(log, first_dirty, now_ms)
        if plan is None:
            return CleanerStats()
        dirty_records = sum(s.next_offset - max(s.base_offset, plan.first_dirty)
                            for s in plan.segments if s.next_offset > plan.first_dirty)
        map_bytes = min(self.buffer_bytes, max(1 << 14, int(dirty_records / LOAD_FACTOR) * 16 + 16))
        result = run_pass(plan, OffsetMap(map_bytes))
        if not swap_segments(result):
            return CleanerStats()
        self.first_dirty = result.map_end
        cp = read_checkpoint(self.checkpoint_path)
        cp[(log.topic, log.partition)] = result.map_end
        write_checkpoint(self.checkpoint_path, cp)
        return result.stats
