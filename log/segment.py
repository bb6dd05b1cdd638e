"""One log segment: ``%020d.log`` plus its ``.index`` and ``.timeindex`` (Kafka's LogSegment).

Theory of operation: a segment owns three raw file descriptors and never buffers in user
space. ``append`` writes a whole Produce request's batches with one ``os.write`` (so a
SIGKILL right after it returns loses nothing: the bytes are in the page cache), then adds
sparse index entries. ``read`` never decodes records: it finds the start position through
the offset index plus a short scan of 61-byte batch headers, finds the end the same way, and
hands back a :class:`ReadInfo` naming a file region of whole batches.

Invariants: the file holds whole, CRC-valid v2 batches with strictly increasing offsets, all
``>= base_offset`` and ``< base_offset + 2**31``; ``size`` is the file's length; index
entries point at batch starts inside the file. ``recover`` re-establishes all of this after
a crash by scanning, truncating the first torn or corrupt batch and rebuilding both indexes.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c as _crc32c

from protocol.errors import ErrorCode, KafkaError
from protocol.records import (
    ATTR_TIMESTAMP_TYPE,
    COMPRESSION_NONE,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    decompress,
    read_header,
)
from protocol.varint import read_varint

from .config import LogConfig
from .index import OffsetIndex, TimeIndex

logger = logging.getLogger("samsa.log")

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
INT32_MAX = 2**31 - 1


def filename_prefix(offset: int) -> str:
    return f"{offset:020d}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class TailGeneration:
    """What a segment's cached tail bytes are valid for: cleared (``valid`` False) when the
    segment's file changes under what was appended (truncation, recovery), so a region handed out
    before then reads the file again, exactly as it would have without the cache."""

    __slots__ = ("valid",)

    def __init__(self) -> None:
        self.valid = True


@dataclass(slots=True)
class ReadInfo:
    """A region of one segment file holding whole batches, ready to be sent as is.

    ``fd`` is the segment's open descriptor (kept open for ``file.delete.delay.ms`` after the
    segment is deleted, as Kafka keeps files around, so a region handed out stays readable);
    a sendfile-based fetch path can use ``fd``/``position``/``size`` directly.
    A region within the segment's last append also carries its bytes (``data``, valid while
    ``generation`` is), so reading it back at the log's tail (a follower's fetch) costs no pread.
    """

    path: str
    position: int
    size: int
    first_offset: int
    fd: int = -1
    data: bytes | None = field(default=None, compare=False, repr=False)
    generation: TailGeneration | None = field(default=None, compare=False, repr=False)

    def read(self) -> bytes:
        """The region's bytes. OSError, naming the file and position, if they cannot be read or
        the file no longer holds all of them (cut since the read chose the region): a caller
        framing them behind a length prefix must not send fewer."""
        data = self.data
        if data is not None and self.generation is not None and self.generation.valid:
            return data
        try:
            if self.fd >= 0:
                data = _pread_full(self.fd, self.size, self.position)
            else:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    data = _pread_full(fd, self.size, self.position)
                finally:
                    os.close(fd)
        except OSError as e:
            raise OSError(e.errno, f"{self.path}@{self.position} cannot be read ({e.strerror})") from e
        if len(data) != self.size:
            raise OSError(errno.EIO, f"{self.path}@{self.position} read {len(data)} of its {self.size} bytes")
        return data

    def read_into(self, buf: memoryview, offset: int) -> None:
        """Fill ``buf`` with the region's bytes from ``offset`` on, through the open descriptor
        (a region read in slices, TLS's Fetch path). The same OSError as :meth:`read` when they
        cannot all be read."""
        data = self.data
        if data is not None and self.generation is not None and self.generation.valid \
                and offset + len(buf) <= len(data):
            buf[:] = data[offset:offset + len(buf)]
            return
        at, got = self.position + offset, 0
        try:
            while got < len(buf):
                n = os.preadv(self.fd, [buf[got:]], at + got)
                if n <= 0:
                    break
                got += n
        except OSError as e:
            raise OSError(e.errno, f"{self.path}@{self.position} cannot be read ({e.strerror})") from e
        if got < len(buf):
            raise OSError(errno.EIO, f"{self.path}@{self.position} read {offset + got} of its {self.size} bytes")


def _pread_full(fd: int, size: int, position: int) -> bytes:
    data = os.pread(fd, size, position)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def scan_headers(fd: int, start: int, end: int, chunk: int = 8192) -> Iterator[BatchHeader]:
    """Yield the headers of the batches in ``[start, end)`` of a file, positions absolute.

    Reads ``chunk`` bytes at a time and only headers are decoded, so a scan over a few
    index intervals costs a few syscalls. Stops at a torn or implausible batch.
    """
    buf = b""
    buf_start = start
    pos = start
    while pos + HEADER_SIZE <= end:
        off = pos - buf_start
        if off < 0 or off + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(max(chunk, HEADER_SIZE), end - pos), pos)
            buf_start, off = pos, 0
            if len(buf) < HEADER_SIZE:
                return
        h = read_header(buf, off)
        if h.batch_length < MIN_BATCH_LENGTH or pos + h.size > end:
            return
        h.position = pos
        yield h
        pos += h.size


def record_timestamps(batch: bytes, h: BatchHeader) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of each record of one batch (``batch`` is the whole batch).

    Used only to answer ListOffsets at record precision (as Kafka's
    ``FileRecords.searchForTimestamp`` does), never on the produce/fetch paths.
    """
    if h.attributes & ATTR_TIMESTAMP_TYPE:  # LogAppendTime: every record has max_timestamp
        for i in range(h.last_offset_delta + 1):
            yield h.base_offset + i, h.max_timestamp
        return
    body = batch[HEADER_SIZE:]
    raw = body if h.compression == COMPRESSION_NONE else decompress(h.compression, body)
    pos, end = 0, len(raw)
    while pos < end:
        length, pos = read_varint(raw, pos)
        rec_end = pos + length
        p = pos + 1  # attributes
        ts_delta, p = read_varint(raw, p)
        off_delta, p = read_varint(raw, p)
        yield h.base_offset + off_delta, h.base_timestamp + ts_delta
        pos = rec_end


class LogSegment:
    """``%020d.log`` + ``.index`` + ``.timeindex`` starting at ``base_offset``."""

    def __init__(self, dir: Path, base_offset: int, config: LogConfig, *, created_ms: int | None = None,
                 file_suffix: str = "") -> None:
        self.dir = dir
        self.base_offset = base_offset
        prefix = filename_prefix(base_offset)
        self.log_path = dir / (prefix + LOG_SUFFIX + file_suffix)
        # The indexes are created before the .log: a crash at any instant of a roll leaves no
        # .log without its .index and .timeindex (recovery would rebuild them, but the offline
        # check and an operator listing the directory should never see that state).
        self.index = OffsetIndex(dir / (prefix + INDEX_SUFFIX + file_suffix), base_offset,
                                 config.max_index_entries)
        self.time_index = TimeIndex(dir / (prefix + TIME_INDEX_SUFFIX + file_suffix), base_offset,
                                    config.segment_index_bytes // TimeIndex.ENTRY_SIZE)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.index_interval_bytes = config.index_interval_bytes
        self.bytes_since_last_index_entry = 0
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = base_offset  # base offset of the batch holding it
        self.rolling_based_timestamp: int | None = None
        self.created_ms = now_ms() if created_ms is None else created_ms
        self.next_offset = base_offset  # the offset after this segment's last batch
        self.deleted = False
        self.recovered_epochs: list[tuple[int, int]] = []  # (leader epoch, start offset) seen by recover()
        # drop_behind (follower replicas): writeback was started below the first, pages dropped below the second
        self.writeback_started = 0
        self.dropped_to = 0
        # (last offset, file position, base offset, size) of the last batches appended, contiguous
        # and in file order: a read near the end (a follower's or a tailing consumer's fetch) finds
        # its first batch here without reading the file (no index lookup, no header scan).
        # Forgotten on truncation and recovery; empty once inactive.
        self.recent: deque[tuple[int, int, int, int]] = deque(maxlen=self.RECENT_BATCHES)
        # The bytes of the last append (up to TAIL_BYTES) and their file position: a read of them
        # (the follower's fetch of what was just appended) is served without a pread. A new
        # generation on truncation and recovery; dropped once inactive.
        self.tail_position = -1
        self.tail_bytes = b""
        self.tail_generation = TailGeneration()

    # -- opening --------------------------------------------------------------------------
    @classmethod
    def open(cls, dir: Path, base_offset: int, config: LogConfig) -> tuple[LogSegment, bool]:
        """Open an existing segment; second value False if its indexes must be rebuilt."""
        prefix = filename_prefix(base_offset)
        indexes_exist = (dir / (prefix + INDEX_SUFFIX)).exists() and (dir / (prefix + TIME_INDEX_SUFFIX)).exists()
        seg = cls(dir, base_offset, config)
        ok = seg.index.load(seg.size) and indexes_exist
        ok = seg.time_index.load() and ok
        if ok and seg.size > 0:
            # The end of the segment: scan from the last index entry to the end of the file.
            _, pos = seg.index.lookup(2**63 - 1)
            last = None
            for h in scan_headers(seg.fd, pos, seg.size, chunk=65536):
                last = h
            if last is None or last.position + last.size != seg.size or last.base_offset < base_offset:
                ok = False  # a torn tail, or an index pointing into nowhere: recover it
            else:
                seg.next_offset = last.next_offset
            ts, off = seg.time_index.last_entry()
            seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far = ts, off
            first = next(scan_headers(seg.fd, 0, seg.size), None)
            if first is not None:
                seg.rolling_based_timestamp = first.max_timestamp
        elif ok:
            seg.next_offset = base_offset
        return seg, ok

    # -- writing --------------------------------------------------------------------------
    def should_roll(self, config: LogConfig, messages_size: int, max_timestamp: int, last_offset: int,
                    now: int) -> bool:
        """Kafka's ``LogSegment.shouldRoll``: size, age, full indexes, relative offset overflow."""
        if self.size > config.segment_bytes - messages_size:
            return True
        if self.size > 0 and self.time_waited_for_roll(now, max_timestamp) > config.segment_ms:
            return True
        if self.index.is_full or self.time_index.is_full:
            return True
        return last_offset - self.base_offset > INT32_MAX

    def time_waited_for_roll(self, now: int, message_timestamp: int) -> int:
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return message_timestamp - self.rolling_based_timestamp
        return now - self.created_ms

    def append(self, buf: bytes | bytearray | memoryview, batches: list[BatchHeader]) -> None:
        """Write ``buf`` (whole batches with their final offsets) at the end of the file.

        ``batches`` are the headers of ``buf`` with positions relative to ``buf``.
        """
        start = self.size
        try:
            _write_full(self.fd, buf)
        except OSError as e:
            # e.g. ENOSPC after a partial write: cut the file back so no torn batch stays
            # in front of the next append, and report a storage error for this partition.
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                pass
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"Error while appending to {self.log_path}: {e}") from e
        self.size = start + len(buf)
        if len(buf) <= self.TAIL_BYTES:
            self.tail_position, self.tail_bytes = start, bytes(buf)
        else:
            self.tail_position, self.tail_bytes = -1, b""
        interval = self.index_interval_bytes
        index_out: list[bytes] = []  # one append's index entries: one write per index file
        time_out: list[bytes] = []
        for h in batches:
            if h.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = h.max_timestamp
                self.offset_of_max_timestamp_so_far = h.base_offset
            if self.rolling_based_timestamp is None:
                self.rolling_based_timestamp = h.max_timestamp
            if self.bytes_since_last_index_entry > interval:
                self.index.append(h.last_offset, start + h.position, index_out)
                self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                             time_out)
                self.bytes_since_last_index_entry = 0
            self.bytes_since_last_index_entry += h.batch_length + LOG_OVERHEAD
        if index_out:
            self.index.write_entries(index_out)
        if time_out:
            self.time_index.write_entries(time_out)
        if batches:
            self.next_offset = batches[-1].base_offset + batches[-1].last_offset_delta + 1
            recent = self.recent
            if len(batches) >= self.RECENT_BATCHES:
                recent.clear()  # only the newest are kept: no gap between what stays and what comes
                batches = batches[-self.RECENT_BATCHES:]
            recent.extend([(h.base_offset + h.last_offset_delta, start + h.position, h.base_offset,
                            h.batch_length + LOG_OVERHEAD) for h in batches])

    RECENT_BATCHES = 16
    # Per active segment: a small append's bytes, what a follower reads at once. Small, because
    # every partition with appends holds one (10,000 partitions: up to 40 MiB); a larger append is
    # throughput-bound, where one pread per fetch costs nothing next to the bytes.
    TAIL_BYTES = 4 << 10
    DROP_CHUNK = 4 << 20
    DROP_RETRY = 16 << 20  # behind the drop point, advised again at every chunk (pages dirty before)

    def drop_behind(self, keep: int) -> None:
        """Keep only about the last ``keep`` bytes of this file in the OS page cache.

        For a follower replica, whose log is read back only if it becomes the leader. Each whole
        4 MiB chunk behind the end of the file is advised once as it completes
        (``posix_fadvise(DONTNEED)`` starts writeback of its dirty pages); once the end is more
        than ``keep`` bytes past a chunk, the chunk is advised again, by when it is normally
        written back, and its clean pages leave the cache. Dirty pages are never dropped, so
        nothing unwritten can be lost; the last ``max(keep, DROP_RETRY)`` bytes behind the drop
        point are advised again at every new chunk, so a page that was still dirty gets more
        chances. After a truncation below what was advised it starts again from the new end.
        Without ``posix_fadvise`` this does nothing.
        """
        if self.fd < 0:
            return
        chunk = self.DROP_CHUNK
        done = self.size // chunk * chunk
        if self.writeback_started > self.size:  # truncated since (a follower's divergent tail)
            self.writeback_started = self.dropped_to = done
        if done <= self.writeback_started:
            return
        drop = max(0, (self.size - keep) // chunk * chunk)
        try:
            os.posix_fadvise(self.fd, self.writeback_started, done - self.writeback_started, os.POSIX_FADV_DONTNEED)
            self.writeback_started = done
            if drop > 0:
                lo = max(0, min(self.dropped_to, drop - max(keep, self.DROP_RETRY)))
                os.posix_fadvise(self.fd, lo, drop - lo, os.POSIX_FADV_DONTNEED)
                self.dropped_to = drop
        except (AttributeError, OSError):  # no posix_fadvise here: the page cache keeps everything
            pass

    def on_become_inactive(self) -> None:
        """Kafka's ``onBecomeInactiveSegment``: record the final max timestamp in the time index."""
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)

    def _forget_tail(self) -> None:
        """The file changes under what was appended: no cached position or bytes may serve a read,
        not even through a region already handed out."""
        self.recent.clear()
        self.tail_position, self.tail_bytes = -1, b""
        self.tail_generation.valid = False
        self.tail_generation = TailGeneration()

    def release_index_files(self) -> None:
        """Close the index descriptors (reopened on the next write): inactive segments need none."""
        self.index.close()
        self.time_index.close()
        self.recent.clear()
        self.tail_position, self.tail_bytes = -1, b""

    # -- reading --------------------------------------------------------------------------
    def _recent_batch(self, offset: int) -> tuple[int, int, int, int] | None:
        """The entry of :attr:`recent` for the batch holding ``offset``, if it is one of them."""
        recent = self.recent
        if recent and recent[0][0] < offset <= recent[-1][0]:
            # the batch after the last one that ends below it
            i = len(recent) - 1
            while recent[i - 1][0] >= offset:
                i -= 1
            return recent[i]
        return None

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """Header of the first batch whose last offset >= ``offset`` (index lookup + short scan)."""
        entry = self._recent_batch(offset)
        pos = entry[1] if entry is not None else self.index.lookup(offset)[1]
        for h in scan_headers(self.fd, max(pos, start_position), self.size):
            if h.base_offset + h.last_offset_delta >= offset:
                return h
        return None

    def _locate(self, offset: int) -> tuple[int, int, int] | None:
        """(base offset, file position, size) of the first batch whose last offset >= ``offset``."""
        entry = self._recent_batch(offset)
        if entry is not None:
            return entry[2], entry[1], entry[3]
        h = self.translate_offset(offset)
        return None if h is None else (h.base_offset, h.position, h.batch_length + LOG_OVERHEAD)

    def position_bound(self, max_offset: int) -> int:
        """File position of the first batch whose base offset >= ``max_offset`` (or the size)."""
        if max_offset >= self.next_offset:
            return self.size
        found = self._locate(max_offset)
        if found is None:
            return self.size
        base, position, size = found
        return position if base >= max_offset else position + size

    def _last_boundary(self, start: int, limit: int) -> int:
        """The largest batch boundary in ``[start, limit]``."""
        _, pos = self.index.lookup_by_position(limit)
        pos = max(pos, start)
        end = pos
        for h in scan_headers(self.fd, pos, self.size):
            if h.position + h.size > limit:
                break
            end = h.position + h.size
        return end

    def read(self, start_offset: int, max_size: int, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadInfo | None:
        """Whole batches from the one holding ``start_offset``, up to ``max_size`` bytes.

        Returns None if no batch in this segment has a last offset >= ``start_offset`` or the
        first one starts at or beyond ``max_offset``.
        """
        first = self._locate(start_offset)
        if first is None:
            return None
        first_base, start, first_size = first
        if max_offset is not None and first_base >= max_offset:
            return None
        max_position = self.size if max_offset is None else self.position_bound(max_offset)
        limit = min(start + max(max_size, 0), max_position)
        if limit >= max_position:
            end = max_position
        elif limit >= start + first_size:
            end = self._last_boundary(start, limit)
        else:
            end = start
        if end <= start:
            if not min_one_batch:
                return None
            end = start + first_size
        tail = self.tail_position
        if 0 <= tail <= start and end <= tail + len(self.tail_bytes):
            data = self.tail_bytes
            if start != tail or end - start != len(data):
                data = data[start - tail:end - tail]
            return ReadInfo(str(self.log_path), start, end - start, first_base, self.fd, data, self.tail_generation)
        return ReadInfo(str(self.log_path), start, end - start, first_base, self.fd)

    def batches(self, start_offset: int | None = None, chunk: int = 1 << 20) -> Iterator[BatchHeader]:
        """Headers of every batch (from the one holding ``start_offset``)."""
        pos = 0
        if start_offset is not None and start_offset > self.base_offset:
            h = self.translate_offset(start_offset)
            if h is None:
                return
            pos = h.position
        yield from scan_headers(self.fd, pos, self.size, chunk=chunk)

    def read_batch(self, h: BatchHeader) -> bytes:
        return _pread_full(self.fd, h.size, h.position)

    def batches_with_bytes(self, start_offset: int | None = None, chunk: int = 1 << 20,
                           ) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, whole batch bytes) of every batch, reading the file ``chunk`` bytes at a time.

        For start-up replays of coordinator topics: one read per chunk, not per batch.
        """
        pos = 0
        if start_offset is not None and start_offset > self.base_offset:
            first = self.translate_offset(start_offset)
            if first is None:
                return
            pos = first.position
        end = self.size
        buf = b""
        buf_start = pos
        while pos + HEADER_SIZE <= end:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = _pread_full(self.fd, min(chunk, end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            h = read_header(buf, off)
            total = h.batch_length + LOG_OVERHEAD
            if h.batch_length < MIN_BATCH_LENGTH or pos + total > end:
                return
            if off + total > len(buf):
                buf = _pread_full(self.fd, max(chunk, total), pos)
                buf_start, off = pos, 0
                if len(buf) < total:
                    return
            h.position = pos
            yield h, buf[off: off + total]
            pos += total

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` and offset >= start."""
        _, ts_offset = self.time_index.lookup(timestamp)
        _, pos = self.index.lookup(max(ts_offset, start_offset))
        for h in scan_headers(self.fd, pos, self.size, chunk=65536):
            if h.max_timestamp >= timestamp and h.base_offset + h.last_offset_delta >= start_offset:
                for off, ts in record_timestamps(self.read_batch(h), h):
                    if ts >= timestamp and off >= start_offset:
                        return off, ts
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record holding this segment's max timestamp."""
        if self.max_timestamp_so_far < 0:
            return None
        _, pos = self.index.lookup(self.offset_of_max_timestamp_so_far)
        for h in scan_headers(self.fd, pos, self.size, chunk=65536):
            if h.max_timestamp == self.max_timestamp_so_far:
                for off, ts in record_timestamps(self.read_batch(h), h):
                    if ts == h.max_timestamp:
                        return ts, off
                return h.max_timestamp, h.last_offset
        return None

    @property
    def largest_timestamp(self) -> int:
        """Kafka's ``largestTimestamp``: max record timestamp, else the file's mtime (retention)."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        try:
            return os.fstat(self.fd).st_mtime_ns // 1_000_000
        except OSError:
            return now_ms()

    # -- recovery and truncation -------------------------------------------------------------
    def recover(self, max_message_size: int | None = None) -> int:
        """Rescan the file: keep the valid prefix, rebuild both indexes. Returns bytes truncated.

        A batch is valid if it is v2, its length is sane, its CRC-32C matches and its offsets
        increase and fit this segment (Kafka's ``LogSegment.recover`` + ``ensureValid``).
        """
        self._forget_tail()
        entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        valid = 0
        since_index = 0
        max_ts, max_ts_off = -1, self.base_offset
        next_offset = self.base_offset
        epochs: list[tuple[int, int]] = []
        self.rolling_based_timestamp = None
        pos, size, fd = 0, self.size, self.fd
        buf = b""
        buf_start = 0
        chunk = 1 << 20
        while pos + HEADER_SIZE <= size:
            off = pos - buf_start
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(chunk, size - pos), pos)
                buf_start, off = pos, 0
            h = read_header(buf, off)
            total = h.batch_length + LOG_OVERHEAD
            if (h.batch_length < MIN_BATCH_LENGTH or pos + total > size or h.magic != MAGIC_V2
                    or (max_message_size is not None and total > max(max_message_size, 1 << 20) * 2)):
                break
            if off + total > len(buf):
                buf = os.pread(fd, max(chunk, total), pos)
                buf_start, off = pos, 0
                if len(buf) < total:
                    break
            if _crc32c.crc32c(memoryview(buf)[off + 21: off + total]) != h.crc:
                break
            if h.base_offset < next_offset or h.last_offset_delta < 0 \
                    or h.base_offset + h.last_offset_delta - self.base_offset > INT32_MAX:
                break
            if h.max_timestamp > max_ts:
                max_ts, max_ts_off = h.max_timestamp, h.base_offset
            if h.partition_leader_epoch >= 0 and (not epochs or h.partition_leader_epoch > epochs[-1][0]):
                epochs.append((h.partition_leader_epoch, h.base_offset))
            if self.rolling_based_timestamp is None:
                self.rolling_based_timestamp = h.max_timestamp
            if since_index > self.index_interval_bytes:
                entries.append((h.base_offset + h.last_offset_delta, pos))
                if not time_entries or max_ts > time_entries[-1][0]:
                    time_entries.append((max_ts, max_ts_off))
                since_index = 0
            since_index += total
            next_offset = h.base_offset + h.last_offset_delta + 1
            pos += total
            valid = pos
        truncated = self.size - valid
        if truncated:
            os.ftruncate(fd, valid)
            self.size = valid
        if max_ts >= 0 and (not time_entries or max_ts > time_entries[-1][0]):
            time_entries.append((max_ts, max_ts_off))
        self.index.rewrite(entries[: self.index.max_entries])
        self.time_index.rewrite(time_entries[: self.time_index.max_entries])
        self.bytes_since_last_index_entry = since_index
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = max_ts, max_ts_off
        self.next_offset = next_offset
        self.recovered_epochs = epochs
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding ``offset`` and everything after it; returns bytes removed.

        Like Kafka, a batch straddling ``offset`` goes entirely (the new end is its base offset).
        """
        h = self.translate_offset(offset)
        if h is None:
            return 0
        self._forget_tail()
        position = h.position
        removed = self.size - position
        self.index.truncate_to(offset)
        self.time_index.truncate_to(h.base_offset)
        os.ftruncate(self.fd, position)
        self.size = position
        self.bytes_since_last_index_entry = 0
        self.next_offset = h.base_offset if position else self.base_offset
        if position == 0:
            self.rolling_based_timestamp = None
        if self.offset_of_max_timestamp_so_far >= h.base_offset:
            # The max timestamp went with the truncated batches: the time index's last entry
            # covers everything up to its batch; scan the rest.
            ts, off = self.time_index.last_entry()
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = ts, off
            _, ipos = self.index.lookup(off)
            for hh in scan_headers(self.fd, ipos, self.size, chunk=65536):
                if hh.max_timestamp > self.max_timestamp_so_far:
                    self.max_timestamp_so_far = hh.max_timestamp
                    self.offset_of_max_timestamp_so_far = hh.base_offset
        return removed

    # -- files ----------------------------------------------------------------------------
    def flush(self) -> None:
        os.fsync(self.fd)
        self.index.flush()
        self.time_index.flush()

    def dup_fds(self) -> list[int]:
        """Second descriptors of the data and index files, for an fsync off the event loop that
        must not race with this segment being closed or deleted meanwhile."""
        fds = [os.dup(self.fd)]
        for ix in (self.index, self.time_index):
            fd = ix.dup_fd()
            if fd is not None:
                fds.append(fd)
        return fds

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.index.close()
        self.time_index.close()

    def rename_for_delete(self) -> None:
        """Kafka's async delete: add ``.deleted`` to the three files; descriptors stay open."""
        self.deleted = True
        for attr in ("log_path",):
            p: Path = getattr(self, attr)
            new = p.with_name(p.name + DELETED_SUFFIX)
            try:
                os.rename(p, new)
            except FileNotFoundError:
                pass
            setattr(self, attr, new)
        for idx in (self.index, self.time_index):
            try:
                idx.rename_to(idx.path.with_name(idx.path.name + DELETED_SUFFIX))
            except FileNotFoundError:
                pass

    def delete_files(self) -> None:
        self.close()
        for p in (self.log_path, self.index.path, self.time_index.path):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return (f"LogSegment(baseOffset={self.base_offset}, size={self.size}, "
                f"lastModifiedTime={self.last_modified_ms if self.fd >= 0 else -1}, "
                f"largestRecordTimestamp={self.max_timestamp_so_far})")


def _write_full(fd: int, buf: bytes | bytearray | memoryview) -> None:
    n = os.write(fd, buf)
    if n == len(buf):
        return
    mv = memoryview(buf)
    while n < len(mv):
        n += os.write(fd, mv[n:])
