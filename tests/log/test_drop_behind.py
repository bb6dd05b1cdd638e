"""LogSegment.drop_behind: a follower replica keeps only the tail of its active segment in the
OS page cache (``replica.page.cache.retain.bytes``), loses nothing, and reads back intact.

Residency is what the kernel says (``mincore(2)`` on a mapping of the file), so the test skips
where there is no ``posix_fadvise`` or ``mincore``. Each append is made durable first
(``fdatasync``), so every page is clean when it is advised and the outcome does not depend on
how fast the disk writes back.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import pytest

from log import Log, LogConfig
from tests.log.helpers import build_batch, decode, records

MB = 1 << 20
PAGE = mmap.PAGESIZE

pytestmark = pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise on this platform")


def resident_fraction(path: Path, start: int, end: int) -> float:
    """Share of the file's pages in [start, end) that are in the page cache (mincore)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if not hasattr(libc, "mincore"):
        pytest.skip("no mincore")
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    start, end = start // PAGE * PAGE, end // PAGE * PAGE
    pages = (end - start) // PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, end - start, mmap.PROT_READ, mmap.MAP_SHARED, fd, start)
        if addr in (None, ctypes.c_void_p(-1).value):
            pytest.skip(f"mmap failed: errno {ctypes.get_errno()}")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, end - start, vec) != 0:
                pytest.skip(f"mincore failed: errno {ctypes.get_errno()}")
            return sum(v & 1 for v in vec) / max(1, pages)
        finally:
            libc.munmap(addr, end - start)
    finally:
        os.close(fd)


def follower_append(log: Log, base_offset: int, n: int, size: int) -> None:
    """Append a batch with the leader's offsets, as Partition.append_as_follower does."""
    batch = bytearray(build_batch([bytes([base_offset % 251]) * size for _ in range(n)],
                                  timestamps=[1_700_000_000_000 + base_offset + i for i in range(n)]))
    batch[0:8] = base_offset.to_bytes(8, "big")  # the leader's base offset (not in the CRC)
    log.append(records(bytes(batch)), assign_offsets=False)


def test_only_the_tail_stays_cached_and_everything_reads_back(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 30))
    keep = 8 * MB
    offset = 0
    for _ in range(40):  # 40 x ~1 MB
        follower_append(log, offset, 100, 10_000)
        offset += 100
        seg = log.segments[-1]
        os.fdatasync(seg.fd)
        seg.drop_behind(keep)
    seg = log.segments[-1]
    size = seg.size
    dropped_below = (size - keep) // seg.DROP_CHUNK * seg.DROP_CHUNK
    assert dropped_below >= 24 * MB
    assert resident_fraction(seg.log_path, 0, dropped_below) < 0.05
    # the tail a follower may be asked for next is still there
    assert resident_fraction(seg.log_path, size - 2 * MB, size) > 0.5
    # nothing was lost: every record reads back, from disk where it had to
    got = []
    o = 0
    while o < log.log_end_offset:
        info = log.read(o, 4 * MB)
        assert info is not None
        recs = decode(info.read())
        got += recs
        o = recs[-1][0] + 1
    assert [r[0] for r in got] == list(range(offset))
    assert all(r[3] == bytes([(r[0] // 100 * 100) % 251]) * 10_000 for r in got)
    log.close()


def test_without_it_the_page_cache_keeps_everything(tmp_path: Path) -> None:
    """The same appends with no drop_behind (a leader, or replica.page.cache.retain.bytes=-1)."""
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 30))
    for i in range(12):
        follower_append(log, i * 100, 100, 10_000)
        os.fdatasync(log.segments[-1].fd)
    seg = log.segments[-1]
    assert resident_fraction(seg.log_path, 0, seg.size) > 0.9
    log.close()


def test_dirty_pages_are_never_dropped(tmp_path: Path) -> None:
    """Advice on pages not yet written back loses none of their bytes; a later advice, once
    they are clean, drops them (the chunks within 16 MiB behind the drop point get it again)."""
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 30))
    for i in range(20):  # ~20 MB, none of it synced
        follower_append(log, i * 100, 100, 10_000)
    seg = log.segments[-1]
    seg.drop_behind(0)  # writeback starts; whatever is still dirty stays
    data_before = os.pread(seg.fd, seg.size, 0)
    assert len(data_before) == seg.size
    os.fdatasync(seg.fd)
    for i in range(5):  # past the next 4 MiB boundary
        follower_append(log, 2000 + i * 100, 100, 10_000)
    os.fdatasync(seg.fd)
    seg.drop_behind(0)
    assert resident_fraction(seg.log_path, 8 * MB, 16 * MB) < 0.05
    assert os.pread(seg.fd, len(data_before), 0) == data_before
    log.close()


def test_after_a_truncation_new_appends_are_dropped_too(tmp_path: Path) -> None:
    """A follower truncating its divergent tail (OffsetForLeaderEpoch) below what was already
    advised goes on dropping what it appends afterwards."""
    log = Log.open(tmp_path / "t-0", LogConfig(segment_bytes=1 << 30))
    for i in range(30):
        follower_append(log, i * 100, 100, 10_000)
        os.fdatasync(log.segments[-1].fd)
        log.segments[-1].drop_behind(4 * MB)
    log.truncate_to(500)  # back to ~5 MB
    seg = log.segments[-1]
    assert seg.size < 6 * MB
    for i in range(5, 45):
        follower_append(log, i * 100, 100, 10_000)
        os.fdatasync(seg.fd)
        seg.drop_behind(4 * MB)
    assert resident_fraction(seg.log_path, 8 * MB, seg.size - 12 * MB) < 0.05
    assert log.log_end_offset == 4500
    log.close()
