"""One partition's log: an ordered list of segments in ``<log.dirs>/<topic>-<partition>``.

This is Kafka's ``UnifiedLog`` + ``LocalLog``. It owns the partition's segments, its producer
state (idempotence and open transactions) and its leader epoch cache, and is changed by one
writer only (the broker's partition owner); it never blocks on anything but file syscalls.

Theory of operation:

* ``append`` checks producer state first (a duplicate, fenced or out-of-order batch writes
  nothing), then rewrites the batches' base offsets and leader epoch in the request buffer
  (the CRC does not cover them), stamps LogAppendTime if configured, rolls a new segment if
  needed and writes the whole buffer with one ``os.write``.
* ``read`` finds the segment by binary search on base offsets, then the batch through the
  segment's sparse offset index, and returns a file region of whole batches.
* On ``open`` after an unclean shutdown every segment from the recovery point on is rescanned
  (CRC-checked batch by batch); the first torn or corrupt batch and everything after it is
  dropped, indexes are rebuilt, and producer state is rebuilt from the newest snapshot plus
  the batches after it.
* Deleted segments (retention, DeleteRecords) get a ``.deleted`` suffix and are unlinked
  ``file.delete.delay.ms`` later, so a fetch holding a region of them can still read it.
* A roll fsyncs the old segment's data in the background (Kafka's ``flush-log`` task scheduled
  by ``roll``): an fsync of a full 256 MB segment takes most of a second, and on the event loop
  it would stall every produce, fetch and replica fetcher of the broker. The recovery point
  moves past the segment only once that fsync has returned (checked whenever it is read, and
  on the next append, which then writes the recovery-point checkpoint), so it never claims more
  than is on disk; a truncation below the segment forgets the pending flush.
"""

from __future__ import annotations

import logging
import os
import re
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ErrorCode, KafkaError, OffsetOutOfRangeError
from protocol.records import (
    LOG_OVERHEAD,
    BatchHeader,
    ValidatedRecords,
    patch_base_offset,
    patch_leader_epoch,
    set_log_append_time,
)

from .checkpoint import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from .config import LogConfig
from .producer_state import CompletedTxn, ProducerStateManager, read_end_txn_marker
from .segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    ReadInfo,
    now_ms,
)
from .txn_index import LogTransactionIndex

logger = logging.getLogger("samsa.log")

_DIR_RE = re.compile(r"^(.+)-(\d+)$")


def parse_topic_partition(name: str) -> tuple[str, int]:
    """``foo-bar-3`` -> ("foo-bar", 3). Raises ValueError for other names."""
    m = _DIR_RE.match(name)
    if not m:
        raise ValueError(f"not a partition directory name: {name!r}")
    return m.group(1), int(m.group(2))


@dataclass(slots=True)
class AppendInfo:
    """What an append did (Kafka's ``LogAppendInfo``)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 for CreateTime
    log_start_offset: int
    completed_txns: list[CompletedTxn] | None = None  # transactions closed by markers in this append


class Log:
    """The segments of one partition.

    Invariants: segments are sorted by base offset and do not overlap; only the last (active)
    segment is appended to; ``log_start_offset <= log_end_offset``; every offset in
    ``[log_start_offset, log_end_offset)`` that exists is in exactly one segment.
    """

    def __init__(self, dir: Path, config: LogConfig, topic: str, partition: int) -> None:
        self.dir = dir
        self.config = config
        self.topic = topic
        self.partition = partition
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.log_end_offset = 0
        self._recovery_point = 0
        self._flushes: list[tuple[Future[None], int]] = []  # background fsyncs: (done?, recovery point after)
        self.producer_state = ProducerStateManager(dir)
        self.leader_epoch_cache = LeaderEpochFileCache(dir / LEADER_EPOCH_CHECKPOINT)
        self.txn_index = LogTransactionIndex(dir)
        self._pending_deletes: list[tuple[int, LogSegment]] = []  # (unlink at ms, segment)
        self.on_checkpoint_change: Callable[[Log], None] | None = None  # set by LogManager
        self.closed = False

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def recovery_point(self) -> int:
        """Offset below which everything is fsynced (restarts rescan from here)."""
        self._collect_flushes()
        return self._recovery_point

    @recovery_point.setter
    def recovery_point(self, offset: int) -> None:
        self._recovery_point = offset
        # a truncation below a segment whose fsync is still running: that flush no longer counts
        self._flushes = [(f, upto) for f, upto in self._flushes if upto <= offset]

    def _collect_flushes(self) -> bool:
        """Move the recovery point past the background flushes that are done; True if it moved."""
        before = self._recovery_point
        while self._flushes and self._flushes[0][0].done():
            fut, upto = self._flushes.pop(0)
            error = fut.exception()
            if error is not None:
                logger.error("[Log partition=%s, dir=%s] Background flush up to offset %d failed: %s", self.name,
                             self.dir.parent, upto, error)
                self._flushes.clear()  # the recovery point stays where it is: restarts rescan more
                break
            self._recovery_point = max(self._recovery_point, upto)
        return self._recovery_point != before

    # ------------------------------------------------------------------------------------
    # opening and recovery
    # ------------------------------------------------------------------------------------
    @classmethod
    def open(cls, dir: Path, config: LogConfig, *, recover: bool = True, recovery_point: int | None = None,
             log_start_offset: int | None = None) -> Log:
        """Open (or create) the log in ``dir`` (``<log.dirs>/<topic>-<partition>``).

        ``recover``: the broker did not shut down cleanly, so rescan every segment from
        ``recovery_point`` (default 0: all of them). Indexes that fail their sanity check are
        rebuilt either way.
        """
        t0 = time.monotonic()
        dir = Path(dir)
        topic, partition = parse_topic_partition(dir.name)
        dir.mkdir(parents=True, exist_ok=True)
        log = cls(dir, config, topic, partition)
        log._load_segments(recover, recovery_point or 0)
        log.txn_index.load(log._bases)
        if log_start_offset is not None:
            log.log_start_offset = max(log.log_start_offset, min(log_start_offset, log.log_end_offset))
        log.leader_epoch_cache.truncate_from_end(log.log_end_offset)
        for seg in log.segments:  # epochs seen while rescanning (Kafka assigns them during recovery)
            for epoch, start in seg.recovered_epochs:
                log.leader_epoch_cache.assign(epoch, start)
            seg.recovered_epochs = []
        log.leader_epoch_cache.truncate_from_start(log.log_start_offset)
        log._rebuild_producer_state(log.log_end_offset, clean=not recover)
        log.recovery_point = log.log_end_offset if not recover else log.recovery_point
        logger.debug("[Log partition=%s, dir=%s] Loaded log with %d segments, log start offset %d and "
                    "log end offset %d in %d ms", log.name, dir.parent, len(log.segments),
                    log.log_start_offset, log.log_end_offset, (time.monotonic() - t0) * 1000)
        return log

    def _load_segments(self, recover: bool, recovery_point: int) -> None:
        dir = self.dir
        bases: list[int] = []
        for name in os.listdir(dir):
            path = dir / name
            if name.endswith((DELETED_SUFFIX, ".tmp", ".cleaned", ".swap")):
                # leftovers of an interrupted delete / atomic write / log cleaner pass (the
                # cleaner replaces a .log atomically; a missing index is rebuilt below)
                _unlink(path)
                continue
            if name.endswith(LOG_SUFFIX):
                try:
                    bases.append(int(name[: -len(LOG_SUFFIX)]))
                except ValueError:
                    continue
        bases.sort()
        base_set = set(bases)
        for name in os.listdir(dir):  # index files without a log file are orphans
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                if name.endswith(suffix):
                    try:
                        b = int(name[: -len(suffix)])
                    except ValueError:
                        continue
                    if b not in base_set:
                        _unlink(dir / name)
        recovered = 0
        for i, base in enumerate(bases):
            seg, ok = LogSegment.open(dir, base, self.config)
            # segment i holds [bases[i], bases[i+1]): rescan it if it may hold unflushed data
            unflushed = i == len(bases) - 1 or bases[i + 1] > recovery_point
            must_recover = not ok or (recover and unflushed)
            if must_recover:
                size_before = seg.size
                truncated = seg.recover(self.config.max_message_bytes)
                recovered += 1
                if not ok and not recover:
                    logger.warning("[Log partition=%s] Rebuilt the indexes of segment %d (missing or "
                                   "corrupt)", self.name, base)
                if truncated:
                    logger.warning("[Log partition=%s] Recovering unflushed segment %d: found invalid "
                                   "messages, truncated %d invalid bytes of %d", self.name, base, truncated,
                                   size_before)
                    self.segments.append(seg)
                    for later in bases[i + 1:]:
                        logger.warning("[Log partition=%s] Deleting segment %d after the corrupt "
                                       "segment %d", self.name, later, base)
                        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                            _unlink(dir / f"{later:020d}{suffix}")
                    break
            if self.segments and seg.base_offset < self.segments[-1].next_offset:
                # overlapping segments: keep the earlier data, drop the rest (should not happen)
                logger.error("[Log partition=%s] Segment %d overlaps the previous one; deleting it and "
                             "everything after", self.name, base)
                seg.delete_files()
                for later in bases[i + 1:]:
                    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                        _unlink(dir / f"{later:020d}{suffix}")
                break
            self.segments.append(seg)
        if not self.segments:
            self.segments.append(LogSegment(dir, 0, self.config))
        for seg in self.segments[:-1]:
            seg.release_index_files()  # written by recovery; inactive segments keep no index fds
        # an empty non-active segment is harmless but pointless; keep Kafka's behaviour (keep it)
        self._bases = [s.base_offset for s in self.segments]
        self.log_start_offset = self.segments[0].base_offset
        active = self.segments[-1]
        self.log_end_offset = max(active.next_offset, active.base_offset)
        self.recovery_point = min(recovery_point, self.log_end_offset) if recover else self.log_end_offset
        if recovered and recover:
            logger.info("[Log partition=%s] Recovered %d segments, log end offset %d", self.name, recovered,
                        self.log_end_offset)
        self.recovered_segments = recovered

    def _rebuild_producer_state(self, end_offset: int, clean: bool) -> None:
        """Newest snapshot <= ``end_offset`` plus a replay of the batches after it."""
        psm = self.producer_state
        snap = psm.load_latest_snapshot(end_offset)
        # Replay every batch still on disk after the snapshot, even below the log start offset
        # (DeleteRecords leaves them in place): more producer history means better dedup.
        first_on_disk = self.segments[0].base_offset
        start = first_on_disk if snap is None else max(snap, first_on_disk)
        replayed = 0
        txn_index = self.txn_index
        if start < end_offset:
            txn_index.truncate_to(start)  # the replay below re-adds aborts from here on
            for seg, h in self._iter_segment_batches(start):
                if h.base_offset >= end_offset:
                    break
                if h.producer_id >= 0:
                    ctype = coordinator_epoch = None
                    if h.is_control:
                        try:
                            ctype, coordinator_epoch = read_end_txn_marker(seg.read_batch(h))
                        except (IndexError, ValueError):
                            pass
                    completed = psm.replay(h, ctype, coordinator_epoch)
                    if completed is not None:
                        txn_index.on_completed([completed], psm, seg.base_offset)
                    replayed += 1
        psm.map_end_offset = end_offset
        if replayed:
            logger.info("[Log partition=%s] Producer state recovered from %s, replayed %d batches up to %d",
                        self.name, f"snapshot {snap}" if snap is not None else "the log", replayed, end_offset)

    # ------------------------------------------------------------------------------------
    # properties
    # ------------------------------------------------------------------------------------
    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def latest_epoch(self) -> int:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest known epoch <= ``epoch``, its end offset)."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # ------------------------------------------------------------------------------------
    # append
    # ------------------------------------------------------------------------------------
    def append(self, records: ValidatedRecords, *, leader_epoch: int = 0, now_ms: int | None = None,
               assign_offsets: bool = True) -> AppendInfo:
        """Append validated batches; see the module docstring. Raises before writing anything
        on duplicate / out-of-order / fenced producer batches from a client.

        ``assign_offsets=False`` is a follower's append of what its leader wrote (Kafka's
        ``appendAsFollower``, origin REPLICATION): the leader's offsets are kept and its producer
        checks are not made again (``ProducerStateManager.validate_append(origin_client=False)``)."""
        batches = records.batches
        if not batches:
            raise KafkaError(ErrorCode.INVALID_RECORD, "empty append")
        if self._flushes and self._flushes[0][0].done() and self._collect_flushes() and \
                self.on_checkpoint_change is not None:
            self.on_checkpoint_change(self)  # a roll's background flush is done: checkpoint the recovery point
        now = _now_ms() if now_ms is None else now_ms
        config = self.config
        buf = records.buffer
        size = len(buf)
        if size > config.segment_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"record set of {size} bytes exceeds segment.bytes {config.segment_bytes}")
        infos = None
        for h in batches:
            if h.producer_id >= 0:
                infos = self.producer_state.validate_append(batches, buffer=buf, origin_client=assign_offsets)
                break
        leo = self.log_end_offset
        offset = leo
        max_ts, offset_of_max_ts = -1, leo
        append_time = config.log_append_time
        max_message_bytes = config.max_message_bytes
        for h in batches:
            if h.batch_length + LOG_OVERHEAD > max_message_bytes:  # (h.size, read in line)
                raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                                 f"batch of {h.size} bytes exceeds max.message.bytes {max_message_bytes}")
            if assign_offsets:
                patch_base_offset(buf, h.position, offset)
                h.base_offset = offset
                if h.partition_leader_epoch != leader_epoch:
                    patch_leader_epoch(buf, h.position, leader_epoch)
                    h.partition_leader_epoch = leader_epoch
            elif h.base_offset < offset:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"unexpected append offset {h.base_offset} below log end offset {offset}")
            if append_time and assign_offsets:  # a follower keeps the leader's timestamps
                set_log_append_time(buf, h, now)
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max_ts = h.max_timestamp, h.base_offset
            offset = h.base_offset + h.last_offset_delta + 1
        first_offset = batches[0].base_offset
        last_offset = offset - 1
        seg = self.segments[-1]
        if seg.should_roll(config, size, max_ts, last_offset, now):
            seg = self.roll(first_offset, now=now)
        seg.append(buf, batches)
        self.log_end_offset = offset
        epoch = batches[-1].partition_leader_epoch
        if epoch > self.leader_epoch_cache.latest_epoch:
            self.leader_epoch_cache.assign(epoch, first_offset)
        completed = None
        if infos:
            completed = self.producer_state.commit(infos, buf) or None
            if completed:
                self.txn_index.on_completed(completed, self.producer_state, seg.base_offset)
        self.producer_state.map_end_offset = offset
        return AppendInfo(first_offset, last_offset, max_ts, offset_of_max_ts, now if append_time else -1,
                          self.log_start_offset, completed)

    def roll(self, expected_next_offset: int | None = None, *, now: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (Kafka's ``roll``)."""
        t0 = time.monotonic()
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments[-1]
        if active.base_offset == new_base and active.size == 0:
            return active  # an empty active segment at that offset already exists
        active.on_become_inactive()
        fds = active.dup_fds()
        active.release_index_files()
        seg = LogSegment(self.dir, new_base, self.config, created_ms=now)
        self.segments.append(seg)
        self._bases.append(new_base)
        self.producer_state.map_end_offset = self.log_end_offset
        # Kafka's roll: the producer snapshot is written without fsync, then one background task
        # fsyncs it and the old segment (see the module docstring) before the recovery point moves
        snapshot = self.producer_state.take_snapshot(self.log_end_offset, sync=False)
        self._flushes.append((_flusher().submit(_flush_files, snapshot, fds), active.next_offset))
        logger.info("[Log partition=%s, dir=%s] Rolled new log segment at offset %d in %d ms.", self.name,
                    self.dir.parent, new_base, (time.monotonic() - t0) * 1000)
        if self.on_checkpoint_change is not None:
            self.on_checkpoint_change(self)
        return seg

    # ------------------------------------------------------------------------------------
    # read
    # ------------------------------------------------------------------------------------
    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadInfo | None:
        """Whole batches from the one holding ``start_offset``, within one segment.

        Raises OffsetOutOfRangeError outside [log_start_offset, log_end_offset]; returns None
        at the log end offset, or when nothing below ``max_offset`` (exclusive) is readable.
        """
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                message=f"Received request for offset {start_offset} for partition {self.name}, but we only "
                        f"have log segments in the range {self.log_start_offset} to {self.log_end_offset}.")
        if start_offset == self.log_end_offset:
            return None
        if max_offset is not None and start_offset >= max_offset:
            return None
        i = bisect_right(self._bases, start_offset) - 1
        if i < 0:
            i = 0
        segments = self.segments
        while i < len(segments):
            info = segments[i].read(start_offset, max_bytes, max_offset, min_one_batch)
            if info is not None:
                return info
            if max_offset is not None and i + 1 < len(segments) and segments[i + 1].base_offset >= max_offset:
                return None
            i += 1
        return None

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions overlapping [fetch_offset, upper_bound)."""
        return self.txn_index.collect_aborted_transactions(fetch_offset, upper_bound)

    def _iter_segment_batches(self, start_offset: int = 0) -> Iterator[tuple[LogSegment, BatchHeader]]:
        i = max(bisect_right(self._bases, start_offset) - 1, 0)
        for seg in self.segments[i:]:
            for h in seg.batches(start_offset if seg.base_offset < start_offset else None):
                yield seg, h

    def iter_batches(self, start_offset: int = 0) -> Iterator[BatchHeader]:
        """Headers of every batch from the one holding ``start_offset`` (positions are per file)."""
        start_offset = max(start_offset, self.log_start_offset)
        for _, h in self._iter_segment_batches(start_offset):
            if h.base_offset + h.last_offset_delta < start_offset:
                continue
            yield h

    def read_batch_bytes(self, start_offset: int = 0) -> Iterator[bytes]:
        """Each whole batch's bytes from ``start_offset`` on (tools and tests; not the fetch path)."""
        start_offset = max(start_offset, self.log_start_offset)
        i = max(bisect_right(self._bases, start_offset) - 1, 0)
        for seg in self.segments[i:]:
            for h, data in seg.batches_with_bytes(start_offset if seg.base_offset < start_offset else None):
                if h.base_offset + h.last_offset_delta >= start_offset:
                    yield data

    # ------------------------------------------------------------------------------------
    # timestamps
    # ------------------------------------------------------------------------------------
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` (ListOffsets)."""
        for seg in self.segments:
            if seg.max_timestamp_so_far >= timestamp and seg.next_offset > self.log_start_offset:
                r = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if r is not None:
                    return r
        return None

    def max_timestamp_offset(self) -> tuple[int, int]:
        """(offset, timestamp) of the record with the largest timestamp; (-1, -1) if empty."""
        best: LogSegment | None = None
        for seg in self.segments:
            if seg.next_offset <= self.log_start_offset:
                continue
            if seg.max_timestamp_so_far >= 0 and (best is None or seg.max_timestamp_so_far > best.max_timestamp_so_far):
                best = seg
        if best is None:
            return -1, -1
        r = best.max_timestamp_and_offset()
        if r is None:
            return -1, -1
        ts, off = r
        return off, ts

    # ------------------------------------------------------------------------------------
    # truncation and deletion
    # ------------------------------------------------------------------------------------
    def drop_behind(self, keep: int) -> None:
        """Keep only about the last ``keep`` bytes of the active segment in the page cache
        (a follower replica; see :meth:`LogSegment.drop_behind`)."""
        self.segments[-1].drop_behind(keep)

    def truncate_to(self, offset: int) -> None:
        """Drop everything at or after ``offset`` (a follower's truncation; Kafka's ``truncateTo``)."""
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {offset}")
        if offset >= self.log_end_offset:
            return
        logger.info("[Log partition=%s] Truncating to offset %d (log end offset was %d)", self.name, offset,
                    self.log_end_offset)
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        while len(self.segments) > 1 and self.segments[-1].base_offset >= offset:
            seg = self.segments.pop()
            self._bases.pop()
            seg.delete_files()
            self.txn_index.delete_segment(seg.base_offset)
        seg = self.segments[-1]
        seg.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.log_end_offset = max(seg.next_offset, seg.base_offset)
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
        self._rebuild_producer_state(self.log_end_offset, clean=True)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at ``offset``."""
        for seg in self.segments:
            seg.delete_files()
            self.txn_index.delete_segment(seg.base_offset)
        self.segments = [LogSegment(self.dir, offset, self.config)]
        self._bases = [offset]
        self.log_start_offset = self.log_end_offset = self.recovery_point = offset
        self.leader_epoch_cache.clear()
        self.producer_state.truncate()
        self.producer_state.delete_snapshots_above(-1)
        self.producer_state.map_end_offset = offset
        if self.on_checkpoint_change is not None:
            self.on_checkpoint_change(self)

    def delete_records(self, new_log_start_offset: int) -> int:
        """DeleteRecords: move the log start offset forward, dropping whole segments below it."""
        if new_log_start_offset > self.log_end_offset or new_log_start_offset < 0:
            raise OffsetOutOfRangeError(
                message=f"Cannot increment the log start offset to {new_log_start_offset} of partition "
                        f"{self.name} since it is larger than the log end offset {self.log_end_offset}")
        if new_log_start_offset <= self.log_start_offset:
            return self.log_start_offset
        logger.info("[Log partition=%s] Incremented log start offset to %d due to client delete records request",
                    self.name, new_log_start_offset)
        self.log_start_offset = new_log_start_offset
        self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
        self._delete_segments(lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
                              "log start offset breach", _now_ms())
        if self.on_checkpoint_change is not None:
            self.on_checkpoint_change(self)
        return self.log_start_offset

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: delete old segments by time, size and log start offset; never the active one.

        As Kafka's ``deleteOldSegments``: time and size retention apply only with
        ``cleanup.policy`` delete; segments wholly below the log start offset (DeleteRecords)
        go whatever the policy (compact, or empty: neither deleted nor compacted).
        """
        now = _now_ms() if now_ms is None else now_ms
        self._finish_pending_deletes(now)
        cfg = self.config
        deleted = 0
        if "delete" not in cfg.cleanup_policy.split(","):
            return self._delete_segments(
                lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
                "log start offset breach", now)
        if cfg.retention_ms >= 0:
            deleted += self._delete_segments(
                lambda seg, nxt: now - seg.largest_timestamp > cfg.retention_ms,
                f"retention time {cfg.retention_ms}ms breach", now)
        if cfg.retention_bytes >= 0:
            excess = self.size_bytes - cfg.retention_bytes

            def size_breach(seg: LogSegment, nxt: LogSegment | None) -> bool:
                nonlocal excess
                if excess - seg.size >= 0:
                    excess -= seg.size
                    return True
                return False
            deleted += self._delete_segments(size_breach, f"retention size in bytes {cfg.retention_bytes} breach", now)
        deleted += self._delete_segments(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset,
            "log start offset breach", now)
        return deleted

    def _delete_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool], reason: str,
                         now: int) -> int:
        """Delete the oldest segments while ``predicate`` holds (Kafka's ``deleteOldSegments``)."""
        victims: list[LogSegment] = []
        segs = self.segments
        for i, seg in enumerate(segs[:-1]):  # never the active segment
            nxt = segs[i + 1]
            if not predicate(seg, nxt):
                break
            victims.append(seg)
        if not victims:
            return 0
        for seg in victims:
            logger.info("[Log partition=%s, dir=%s] Deleting segment %r due to %s", self.name, self.dir.parent,
                        seg, reason)
        del self.segments[: len(victims)]
        del self._bases[: len(victims)]
        new_start = self.segments[0].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
            if self.on_checkpoint_change is not None:
                self.on_checkpoint_change(self)
        for seg in victims:
            self.txn_index.delete_segment(seg.base_offset)
            seg.rename_for_delete()
            self.schedule_delete(seg, now)
        self._finish_pending_deletes(now)
        # producer snapshots below the new start are useless
        for off in self.producer_state.list_snapshots():
            if off < self.log_start_offset and off != self.producer_state.last_snapshot_offset:
                self.producer_state._unlink(off)
        return len(victims)

    def schedule_delete(self, seg: LogSegment, now: int) -> None:
        """Unlink ``seg`` (already renamed ``.deleted``) ``file.delete.delay.ms`` from ``now``
        (retention here, the cleaner for the segments its pass replaced)."""
        self._pending_deletes.append((now + self.config.file_delete_delay_ms, seg))

    def _finish_pending_deletes(self, now: int) -> None:
        if not self._pending_deletes:
            return
        keep = []
        for due, seg in self._pending_deletes:
            if due <= now:
                logger.info("[Log partition=%s] Deleted log segment %d (files %s)", self.name, seg.base_offset,
                            seg.log_path.name)
                seg.delete_files()
            else:
                keep.append((due, seg))
        self._pending_deletes = keep

    # ------------------------------------------------------------------------------------
    # lifecycle
    # ------------------------------------------------------------------------------------
    def flush(self) -> None:
        """fsync the active segment (the older ones were flushed when they rolled)."""
        for seg in self.segments:
            if seg.base_offset >= self.recovery_point or seg is self.segments[-1]:
                seg.flush()
        self.txn_index.flush()
        self.recovery_point = self.log_end_offset

    def close(self) -> None:
        """Flush, write the final time index entry and a producer snapshot, close the files."""
        if self.closed:
            return
        self.segments[-1].on_become_inactive()
        self.flush()
        self.producer_state.map_end_offset = self.log_end_offset
        if self.producer_state.last_snapshot_offset != self.log_end_offset:
            self.producer_state.take_snapshot(self.log_end_offset)
        for seg in self.segments:
            seg.close()
        self.txn_index.close()
        for _, seg in self._pending_deletes:
            seg.delete_files()
        self._pending_deletes = []
        self.closed = True

    def delete(self) -> None:
        """Close and remove every file of this log (the directory itself is the caller's)."""
        for seg in self.segments:
            seg.delete_files()
            self.txn_index.delete_segment(seg.base_offset)
        for _, seg in self._pending_deletes:
            seg.delete_files()
        self._pending_deletes = []
        self.closed = True

    def __repr__(self) -> str:
        return (f"Log({self.name}, segments={len(self.segments)}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self.log_end_offset})")


def _now_ms() -> int:
    return now_ms()


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        pass


_FLUSHER: ThreadPoolExecutor | None = None


def _flusher() -> ThreadPoolExecutor:
    """One thread for every log's background segment fsyncs (Kafka's scheduler runs them too)."""
    global _FLUSHER
    if _FLUSHER is None:
        _FLUSHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="samsa-log-flusher")
    return _FLUSHER


def _flush_files(snapshot: Path | None, fds: list[int]) -> None:
    """The flusher thread's part of a roll: fsync the producer snapshot, then the old segment's
    files (descriptors duplicated for this, closed here)."""
    try:
        if snapshot is not None:
            try:
                fd = os.open(snapshot, os.O_RDONLY)
            except FileNotFoundError:
                pass  # already superseded and deleted
            else:
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)
