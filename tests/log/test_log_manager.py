"""LogManager start-up (clean and unclean), checkpoints, create/delete; LogConfig parsing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from log import LogConfig, LogManager, check_log
from protocol.errors import InvalidConfigError
from tests.log.helpers import build_batch, records

CFG = LogConfig(segment_bytes=1024, index_interval_bytes=128)


def fill(log, n: int, pid: int = -1) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        kw = {} if pid < 0 else dict(producer_id=pid, producer_epoch=0, base_sequence=i)
        log.append(records(build_batch([b"m%d" % i], **kw)))


def test_create_shutdown_startup_clean(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    m = LogManager([tmp_path], CFG)
    assert m.startup() == {}
    a = m.create_log("foo", 0, CFG)
    b = m.create_log("foo-bar", 1, CFG)
    assert m.create_log("foo", 0, CFG) is a
    fill(a, 50, pid=3)
    fill(b, 5)
    m.shutdown()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text().splitlines()[:2] == ["0", "2"]
    m = LogManager([tmp_path], CFG)
    with caplog.at_level("INFO", logger="samsa.log"):
        logs = m.startup()
    assert "Found clean shutdown file" in caplog.text
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    assert sorted(logs) == [("foo", 0), ("foo-bar", 1)]
    assert logs[("foo", 0)].log_end_offset == 50 and logs[("foo-bar", 1)].log_end_offset == 5
    assert logs[("foo", 0)].recovered_segments == 0
    assert logs[("foo", 0)].producer_state.last_entry(3).last_seq == 49  # type: ignore[union-attr]
    assert m.get_log("foo", 0) is logs[("foo", 0)] and m.get_log("foo", 9) is None
    m.shutdown()
    assert check_log(tmp_path) == []


def test_unclean_startup_recovers_from_the_recovery_point(tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    m = LogManager([tmp_path], CFG)
    m.startup()
    log = m.create_log("foo", 0, CFG)
    fill(log, 100)
    nseg = len(log.segments)
    assert nseg > 3
    # rolls fsync the old segments in the background; the checkpoint follows once that is done
    # (on the next append or checkpoint, here the explicit one)
    import log.log as log_module

    log_module._flusher().submit(lambda: None).result(10)
    m.checkpoint()
    # simulate a crash: no shutdown; garbage at the end of the active segment
    with open(log.active_segment.log_path, "ab") as f:
        f.write(b"\x01" * 33)
    m2 = LogManager([tmp_path], CFG)
    with caplog.at_level("INFO", logger="samsa.log"):
        logs = m2.startup()
    assert "Attempting recovery" in caplog.text
    assert "truncated 33 invalid bytes" in caplog.text
    log2 = logs[("foo", 0)]
    assert log2.log_end_offset == 100
    # the recovery-point checkpoint lets recovery skip the flushed segments
    assert log2.recovered_segments == 1
    m2.shutdown()
    assert check_log(tmp_path) == []


def test_delete_log(tmp_path: Path) -> None:
    m = LogManager([tmp_path], CFG)
    m.startup()
    log = m.create_log("gone", 0, CFG)
    fill(log, 20)
    m.delete_log("gone", 0)
    assert m.get_log("gone", 0) is None
    assert not [n for n in os.listdir(tmp_path) if n.startswith("gone")]
    m.delete_log("gone", 0)  # idempotent
    # a leftover -delete directory from a crash is removed on start-up
    (tmp_path / "x-0.abc-delete").mkdir()
    m.shutdown()
    m = LogManager([tmp_path], CFG)
    assert m.startup() == {}
    assert not (tmp_path / "x-0.abc-delete").exists()
    m.shutdown()


def test_several_log_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = LogManager(dirs, CFG)
    m.startup()
    for p in range(4):
        fill(m.create_log("t", p, CFG), 3)
    assert {lg.dir.parent for lg in m.all_logs()} == set(dirs)
    m.shutdown()
    m = LogManager(dirs, CFG)
    logs = m.startup()
    assert sorted(logs) == [("t", p) for p in range(4)]
    assert all(lg.log_end_offset == 3 for lg in logs.values())
    assert m.cleanup_logs() == 0
    m.shutdown()


def test_config_from_properties() -> None:
    c = LogConfig.from_properties({"segment.bytes": "1000", "retention.ms": "-1", "cleanup.policy": "compact, delete",
                                   "message.timestamp.type": "LogAppendTime", "min.insync.replicas": "2"})
    assert (c.segment_bytes, c.retention_ms, c.cleanup_policy, c.log_append_time) == (1000, -1, "compact,delete", True)
    assert c.others["min.insync.replicas"] == "2"
    d = LogConfig.from_properties({"retention.bytes": "5"}, base=c)
    assert (d.segment_bytes, d.retention_bytes) == (1000, 5)
    assert c.retention_bytes == -1  # the base is not modified
    assert d.to_properties()["segment.bytes"] == "1000"
    for bad in ({"segment.bytes": "abc"}, {"segment.bytes": "1"}, {"retention.ms": "-2"}, {"no.such": "1"},
                {"cleanup.policy": "keep"}, {"message.timestamp.type": "Now"}):
        with pytest.raises(InvalidConfigError):
            LogConfig.from_properties(bad)


def test_config_from_broker_properties() -> None:
    c = LogConfig.from_broker_properties({"log.segment.bytes": "2048", "log.retention.hours": "1",
                                          "log.roll.hours": "2", "num.partitions": "3"})
    assert (c.segment_bytes, c.retention_ms, c.segment_ms) == (2048, 3_600_000, 7_200_000)
    c = LogConfig.from_broker_properties({"log.retention.ms": "5", "log.retention.hours": "1"})
    assert c.retention_ms == 5
