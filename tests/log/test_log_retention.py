"""Retention by time and size, DeleteRecords, delayed file deletion."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from log import Log, LogConfig, check_log
from protocol.errors import OffsetOutOfRangeError
from tests.log.helpers import build_batch, decode, records

T0 = 1_700_000_000_000
DAY = 86_400_000


def fill(log: Log, n: int, ts: int = T0) -> None:
    for i in range(n):
        log.append(records(build_batch([b"x" * 100], timestamps=[ts + i])), now_ms=ts + i)


def log_files(d: Path, suffix: str = ".log") -> list[str]:
    return sorted(n for n in os.listdir(d) if n.endswith(suffix))


@pytest.fixture
def d(tmp_path: Path) -> Path:
    return tmp_path / "r-0"


def test_retention_by_time_never_deletes_the_active_segment(d: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, retention_ms=DAY, file_delete_delay_ms=0)
    log = Log.open(d, cfg)
    fill(log, 40)
    nseg = len(log.segments)
    assert nseg > 3
    assert log.delete_old_segments(T0 + DAY // 2) == 0
    assert log.delete_old_segments(T0 + 10 * DAY) == nseg - 1
    assert len(log.segments) == 1
    assert log.log_start_offset == log.active_segment.base_offset
    assert log_files(d) == [f"{log.log_start_offset:020d}.log"]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    info = log.read(log.log_start_offset, 1 << 20)
    assert info is not None and decode(info.read())[0][0] == log.log_start_offset
    assert check_log(d) == []
    log.close()


def test_retention_by_time_stops_at_first_young_segment(d: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, retention_ms=DAY, file_delete_delay_ms=0)
    log = Log.open(d, cfg)
    fill(log, 10)
    fill(log, 10, ts=T0 + 5 * DAY)
    fill(log, 10)  # old timestamps again, but behind young segments
    young = [s for s in log.segments if s.max_timestamp_so_far >= T0 + 5 * DAY]
    assert young
    deleted = log.delete_old_segments(T0 + 3 * DAY)
    assert deleted >= 1
    assert log.segments[0].max_timestamp_so_far >= T0 + 5 * DAY
    log.close()


def test_retention_by_size(d: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, retention_ms=-1, retention_bytes=2500, file_delete_delay_ms=0)
    log = Log.open(d, cfg)
    fill(log, 60)
    before = log.size_bytes
    n = log.delete_old_segments(T0)
    assert n > 0
    assert log.size_bytes <= 2500 + 1024
    assert before - log.size_bytes >= before - 2500 - 1024
    # deleting one more segment would go below retention.bytes
    assert log.size_bytes - log.segments[0].size < 2500
    assert log.delete_old_segments(T0) == 0
    log.close()


def test_delete_policy_only(d: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, retention_ms=0, cleanup_policy="compact", file_delete_delay_ms=0)
    log = Log.open(d, cfg)
    fill(log, 30)
    assert log.delete_old_segments(T0 + DAY) == 0
    log.config = LogConfig(segment_bytes=1024, retention_ms=0, cleanup_policy="compact,delete", file_delete_delay_ms=0)
    assert log.delete_old_segments(T0 + DAY) > 0
    log.close()


def test_delayed_file_deletion_keeps_handed_out_regions_readable(d: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, retention_ms=DAY, file_delete_delay_ms=60_000)
    log = Log.open(d, cfg)
    fill(log, 30)
    info = log.read(0, 1 << 20)
    assert info is not None
    now = T0 + 10 * DAY
    assert log.delete_old_segments(now) > 0
    assert f"{0:020d}.log.deleted" in os.listdir(d)
    assert decode(info.read())[0][0] == 0  # the fd is still open
    log.delete_old_segments(now + 59_000)
    assert f"{0:020d}.log.deleted" in os.listdir(d)
    log.delete_old_segments(now + 60_000)
    assert not [n for n in os.listdir(d) if n.endswith(".deleted")]
    log.close()


def test_delete_records(d: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, file_delete_delay_ms=0)
    log = Log.open(d, cfg)
    fill(log, 40)
    bases = [s.base_offset for s in log.segments]
    target = bases[2] + 3
    assert log.delete_records(target) == target
    assert log.log_start_offset == target
    assert [s.base_offset for s in log.segments] == bases[2:]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 100)
    info = log.read(target, 1 << 20)
    assert info is not None and decode(info.read())[0][0] == target
    assert log.delete_records(5) == target  # never backwards
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(log.log_end_offset + 1)
    assert log.offset_for_timestamp(0) == (target, T0 + target)
    # up to the end: the active segment stays, empty of readable data
    assert log.delete_records(log.log_end_offset) == 40
    assert log.read(40, 100) is None
    assert log.max_timestamp_offset() == (-1, -1)
    log.close()
    log = Log.open(d, cfg, recover=False, log_start_offset=40)
    assert log.log_start_offset == 40
    log.close()


def test_log_start_offset_survives_reopen_through_manager(tmp_path: Path) -> None:
    from log import LogManager

    cfg = LogConfig(segment_bytes=1024, file_delete_delay_ms=0)
    m = LogManager([tmp_path], cfg)
    m.startup()
    log = m.create_log("r", 0, cfg)
    fill(log, 40)
    log.delete_records(17)
    m.shutdown()
    m = LogManager([tmp_path], cfg)
    logs = m.startup()
    assert logs[("r", 0)].log_start_offset == 17
    m.shutdown()
