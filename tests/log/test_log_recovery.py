"""Recovery after an unclean shutdown: torn tails, corrupt batches, broken or missing indexes."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from log import Log, LogConfig, check_log
from protocol.errors import DuplicateSequenceError
from tests.log.helpers import build_batch, decode, records

T0 = 1_700_000_000_000
CFG = LogConfig(segment_bytes=2048, index_interval_bytes=128)


def write(log: Log, n: int, start: int = 0, pid: int = -1, seq0: int = 0) -> None:
    for i in range(start, start + n):
        kw = {} if pid < 0 else dict(producer_id=pid, producer_epoch=0, base_sequence=seq0 + (i - start) * 2)
        log.append(records(build_batch([f"v{i}a".encode(), f"v{i}b".encode()], timestamps=[T0 + i, T0 + i],
                                       **kw)))


def values(log: Log) -> list[bytes | None]:
    out: list[bytes | None] = []
    for b in log.read_batch_bytes(log.log_start_offset):
        out += [r[3] for r in decode(b)]
    return out


def crash(log: Log) -> None:
    """Drop the log without closing it cleanly (no final snapshot, no final time index entry)."""
    for s in log.segments:
        os.close(s.fd)
        s.index.close()
        s.time_index.close()


def seg_path(d: Path, base: int, suffix: str = ".log") -> Path:
    return d / f"{base:020d}{suffix}"


@pytest.fixture
def d(tmp_path: Path) -> Path:
    return tmp_path / "t-0"


@pytest.mark.parametrize("garbage", [b"\x00" * 7, b"\x00" * 100, os.urandom(61), os.urandom(3000)])
def test_garbage_tail_is_truncated(d: Path, garbage: bytes) -> None:
    log = Log.open(d, CFG)
    write(log, 30)
    active = log.active_segment.base_offset
    crash(log)
    with open(seg_path(d, active), "ab") as f:
        f.write(garbage)
    assert check_log(d) != []
    log = Log.open(d, CFG, recover=True)
    assert log.log_end_offset == 60
    assert values(log) == [f"v{i}{c}".encode() for i in range(30) for c in "ab"]
    assert check_log(d) == []
    assert log.append(records(build_batch([b"next"]))).first_offset == 60
    log.close()


@pytest.mark.parametrize("chop", [1, 20, 61, 70])
def test_chopped_last_batch(d: Path, chop: int) -> None:
    log = Log.open(d, CFG)
    write(log, 30)
    active = log.active_segment.base_offset
    crash(log)
    p = seg_path(d, active)
    os.truncate(p, p.stat().st_size - chop)
    log = Log.open(d, CFG, recover=True)
    assert log.log_end_offset == 58  # the last batch (2 records) is gone
    assert len(values(log)) == 58
    assert check_log(d) == []
    log.close()


def test_corrupt_batch_in_middle_of_active_segment(d: Path) -> None:
    log = Log.open(d, LogConfig(index_interval_bytes=128))
    write(log, 20)
    positions = [h.position for h in log.iter_batches()]
    crash(log)
    p = seg_path(d, 0)
    data = bytearray(p.read_bytes())
    data[positions[10] + 70] ^= 0x55  # inside batch 10's records: CRC fails
    p.write_bytes(bytes(data))
    assert any("CRC" in x for x in check_log(d))
    log = Log.open(d, LogConfig(index_interval_bytes=128), recover=True)
    assert log.log_end_offset == 20
    assert check_log(d) == []
    log.close()


def test_corruption_in_an_older_segment_drops_later_segments(d: Path) -> None:
    log = Log.open(d, CFG)
    write(log, 60)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    crash(log)
    p = seg_path(d, bases[1])
    data = bytearray(p.read_bytes())
    data[200] ^= 0xFF
    p.write_bytes(bytes(data))
    log = Log.open(d, CFG, recover=True)  # recovery point 0: every segment is rescanned
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert not seg_path(d, bases[2]).exists()
    assert log.log_end_offset < bases[2]
    assert check_log(d) == []
    log.close()


def test_recovery_point_limits_the_scan(d: Path) -> None:
    log = Log.open(d, CFG)
    write(log, 60)
    bases = [s.base_offset for s in log.segments]
    crash(log)
    # corrupt an old, flushed segment: with a recovery point past it, it is not rescanned
    p = seg_path(d, bases[0])
    data = bytearray(p.read_bytes())
    data[300] ^= 0xFF
    p.write_bytes(bytes(data))
    log = Log.open(d, CFG, recover=True, recovery_point=bases[-1])
    assert log.recovered_segments == 1
    assert [s.base_offset for s in log.segments] == bases
    log.close()


@pytest.mark.parametrize("damage", ["missing", "torn", "decreasing", "beyond", "garbage"])
@pytest.mark.parametrize("which", [".index", ".timeindex"])
def test_bad_index_is_rebuilt_even_after_clean_shutdown(d: Path, damage: str, which: str) -> None:
    log = Log.open(d, CFG)
    write(log, 60)
    seg = log.segments[1]
    base = seg.base_offset
    entries_before = seg.index.entries()
    time_before = seg.time_index.entries()
    assert len(entries_before) >= 3
    log.close()
    p = seg_path(d, base, which)
    size = 8 if which == ".index" else 12
    if damage == "missing":
        p.unlink()
    elif damage == "torn":
        os.truncate(p, p.stat().st_size - 3)
    elif damage == "decreasing":
        data = p.read_bytes()
        p.write_bytes(data[size: 2 * size] + data[:size] + data[2 * size:])
    elif damage == "beyond":
        with open(p, "ab") as f:
            f.write((2**30).to_bytes(4, "big") + (2**30).to_bytes(4, "big") + (b"\0" * 4 if size == 12 else b""))
    else:
        p.write_bytes(os.urandom(size * 5 + 1))
    log = Log.open(d, CFG, recover=False)
    seg = log.segments[1]
    assert seg.index.entries() == entries_before
    assert seg.time_index.entries() == time_before
    for off in range(base, base + 10):
        info = log.read(off, 1)
        assert info is not None and decode(info.read())[0][0] == off - off % 2
    assert check_log(d) == []
    log.close()


def test_producer_state_rebuilt_from_snapshot_plus_tail(d: Path) -> None:
    log = Log.open(d, CFG)
    write(log, 40, pid=9)
    snaps = log.producer_state.list_snapshots()
    assert snaps and snaps[-1] < log.log_end_offset  # rolls took snapshots, the tail is newer
    leo = log.log_end_offset
    crash(log)
    log = Log.open(d, CFG, recover=True)
    assert log.log_end_offset == leo
    e = log.producer_state.last_entry(9)
    assert e is not None and e.last_seq == 79 and e.last_data_offset == leo - 1
    with pytest.raises(DuplicateSequenceError) as err:
        log.append(records(build_batch([b"x", b"y"], producer_id=9, producer_epoch=0, base_sequence=78)))
    assert err.value.first_offset == leo - 2
    log.close()


def test_snapshots_above_the_recovered_end_are_deleted(d: Path) -> None:
    log = Log.open(d, CFG)
    write(log, 40, pid=9)
    log.close()
    snaps = log.producer_state.list_snapshots()
    assert snaps[-1] == 80
    # lose the whole active segment's content: LEO drops below the newest snapshot
    active = max(int(n[:20]) for n in os.listdir(d) if n.endswith(".log"))
    os.truncate(seg_path(d, active), 0)
    log = Log.open(d, CFG, recover=True)
    assert log.log_end_offset == active
    assert all(s <= active for s in log.producer_state.list_snapshots())
    assert log.producer_state.last_entry(9).last_data_offset == active - 1  # type: ignore[union-attr]
    # the producer continues from the recovered state: the next seq after the last kept batch
    kept_last_seq = log.producer_state.last_entry(9).last_seq  # type: ignore[union-attr]
    info = log.append(records(build_batch([b"z"], producer_id=9, producer_epoch=0, base_sequence=kept_last_seq + 1)))
    assert info.first_offset == active
    log.close()


def test_leftover_files_are_cleaned(d: Path) -> None:
    log = Log.open(d, CFG)
    write(log, 5)
    log.close()
    (d / "00000000000000000000.log.deleted").write_bytes(b"x")
    (d / "00000000000000000099.index").write_bytes(b"")
    (d / "00000000000000000099.timeindex").write_bytes(b"")
    (d / "00000000000000000010.snapshot.tmp").write_bytes(b"")
    log = Log.open(d, CFG, recover=False)
    assert sorted(n for n in os.listdir(d) if "99" in n or n.endswith((".deleted", ".tmp"))) == []
    assert log.log_end_offset == 10
    log.close()


def test_torn_tail_detected_even_without_recovery_flag(d: Path) -> None:
    log = Log.open(d, CFG)
    write(log, 3)
    log.close()
    with open(seg_path(d, 0), "ab") as f:
        f.write(b"\x00\x00\x00")
    log = Log.open(d, CFG, recover=False)
    assert log.log_end_offset == 6
    assert log.append(records(build_batch([b"z"]))).first_offset == 6
    assert check_log(d) == []
    log.close()


def test_sigkill_right_after_append(tmp_path: Path) -> None:
    """A child appends and is SIGKILLed; the parent reopens and finds every acknowledged batch."""
    import signal
    import subprocess
    import sys
    import textwrap

    d = tmp_path / "k-0"
    script = textwrap.dedent(f"""
        import os, sys, signal
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from log import Log, LogConfig
        from tests.log.helpers import build_batch, records
        log = Log.open(__import__('pathlib').Path({str(d)!r}), LogConfig(segment_bytes=4096, index_interval_bytes=64))
        for i in range(200):
            log.append(records(build_batch([b'%d' % i], producer_id=1, producer_epoch=0, base_sequence=i)))
        sys.stdout.write('appended\\n'); sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert "appended" in p.stdout
    log = Log.open(d, LogConfig(segment_bytes=4096, index_interval_bytes=64), recover=True)
    assert log.log_end_offset == 200
    assert values(log) == [b"%d" % i for i in range(200)]
    assert log.producer_state.last_entry(1).last_seq == 199  # type: ignore[union-attr]
    assert check_log(d) == []
    log.close()


def test_leader_epoch_cache_rebuilt_by_recovery(d: Path) -> None:
    log = Log.open(d, CFG)
    for epoch, n in ((0, 5), (2, 5), (7, 5)):
        for _ in range(n):
            log.append(records(build_batch([b"e"])), leader_epoch=epoch)
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 5), (7, 10)]
    crash(log)
    (d / "leader-epoch-checkpoint").unlink()
    log = Log.open(d, CFG, recover=True)
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 5), (7, 10)]
    assert log.end_offset_for_epoch(2) == (2, 10)
    log.truncate_to(7)
    assert log.leader_epoch_cache.entries == [(0, 0), (2, 5)]
    assert log.end_offset_for_epoch(2) == (2, 7)
    log.close()


def test_roll_flushes_in_the_background_and_then_moves_the_recovery_point(d: Path) -> None:
    """Kafka's roll schedules the old segment's fsync; the recovery point follows only when it is done."""
    from concurrent.futures import Future

    import log.log as log_module

    log = Log.open(d, CFG)
    write(log, 60)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 2
    log_module._flusher().submit(lambda: None).result(10)  # the flusher thread is FIFO: all done now
    assert log.recovery_point == bases[-1]
    # a flush still running does not count, and a truncation below it forgets it
    gate: Future[None] = Future()
    log._flushes.append((gate, log.log_end_offset))
    assert log.recovery_point == bases[-1]
    log.truncate_to(bases[-1] - 1)
    gate.set_result(None)
    assert log.recovery_point <= log.log_end_offset < bases[-1]
    log.close()


def test_a_multi_batch_appends_index_entries_are_all_on_disk(d: Path) -> None:
    """One append of many batches writes its index entries together: the files then hold exactly
    the entries in memory (each index's file is entries * entry size bytes, in order)."""
    log = Log.open(d, LogConfig(index_interval_bytes=64))
    log.append(records(*[build_batch([b"v%d" % i * 20], timestamps=[1000 + i]) for i in range(12)]))
    seg = log.segments[-1]
    offsets, times = seg.index.entries(), seg.time_index.entries()
    assert len(offsets) >= 10 and len(times) >= 10
    assert (d / (seg.log_path.stem + ".index")).read_bytes() == b"".join(
        struct.pack(">ii", o - seg.base_offset, p) for o, p in offsets)
    assert (d / (seg.log_path.stem + ".timeindex")).read_bytes() == b"".join(
        struct.pack(">qi", t, o - seg.base_offset) for t, o in times)
    log.close()
