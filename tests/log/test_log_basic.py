"""Log: append/read round trips, index lookups, timestamps, truncation, reopen."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from log import Log, LogConfig, check_log
from protocol.errors import DuplicateSequenceError, KafkaError, OffsetOutOfRangeError, OutOfOrderSequenceError
from protocol.records import iter_headers
from tests.log.helpers import CODECS, build_batch, decode, records

T0 = 1_700_000_000_000


def small_config(**kw: int | str) -> LogConfig:
    base = dict(segment_bytes=4096, index_interval_bytes=256)
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def fill(log: Log, n_batches: int, per_batch: int = 3, codec: int = 0, ts0: int = T0) -> list[bytes]:
    values = []
    for i in range(n_batches):
        vals = [f"value-{i}-{j}".encode() * 3 for j in range(per_batch)]
        log.append(records(build_batch(vals, codec=codec,
                                       timestamps=[ts0 + i * 10 + j for j in range(per_batch)])))
        values += vals
    return values


def read_all(log: Log, start: int = 0, max_bytes: int = 1 << 20) -> list[tuple[int, int, bytes | None, bytes | None]]:
    out = []
    offset = start
    while offset < log.log_end_offset:
        info = log.read(offset, max_bytes)
        assert info is not None
        recs = decode(info.read())
        assert recs, "a read must return at least one record"
        out += recs
        offset = recs[-1][0] + 1
    return out


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_append_read_round_trip_every_codec(log_dir: Path, codec: str) -> None:
    log = Log.open(log_dir, small_config())
    values = fill(log, 40, codec=CODECS[codec])
    assert log.log_end_offset == 120
    assert len(log.segments) > 1, "small segment.bytes must roll"
    got = read_all(log)
    assert [r[0] for r in got] == list(range(120))
    assert [r[3] for r in got] == values
    assert check_log(log_dir) == []
    log.close()


def test_append_info_and_offsets(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig())
    info = log.append(records(build_batch([b"a", b"b"], timestamps=[T0 + 5, T0 + 1])))
    assert (info.first_offset, info.last_offset, info.max_timestamp, info.log_append_time) == (0, 1, T0 + 5, -1)
    info = log.append(records(build_batch([b"c"]), build_batch([b"d", b"e", b"f"])))
    assert (info.first_offset, info.last_offset) == (2, 5)
    assert log.log_end_offset == 6
    headers = list(log.iter_batches())
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 1), (2, 2), (3, 5)]
    assert [h.base_offset for h in log.iter_batches(4)] == [3]
    log.close()


def test_log_append_time(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(records(build_batch([b"a", b"b"], timestamps=[1, 2])), now_ms=T0 + 42)
    assert info.log_append_time == T0 + 42 and info.max_timestamp == T0 + 42
    recs = decode(log.read(0, 1000).read())
    assert [r[1] for r in recs] == [T0 + 42, T0 + 42]  # the CRC was recomputed (decode checks it)
    assert log.offset_for_timestamp(T0 + 42) == (0, T0 + 42)
    log.close()


def test_leader_epoch_is_stamped(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig())
    log.append(records(build_batch([b"a"])), leader_epoch=3)
    log.append(records(build_batch([b"b"])), leader_epoch=5)
    assert [h.partition_leader_epoch for h in log.iter_batches()] == [3, 5]
    assert log.end_offset_for_epoch(3) == (3, 1)
    assert log.end_offset_for_epoch(4) == (3, 1)
    assert log.end_offset_for_epoch(5) == (5, 2)
    assert log.end_offset_for_epoch(1) == (1, 0)  # older than any known epoch: it ended where epoch 3 starts (Kafka)
    log.close()
    log = Log.open(log_dir, LogConfig(), recover=False)
    assert log.end_offset_for_epoch(3) == (3, 1)
    log.close()


def test_read_every_offset_with_many_segments_and_index_entries(log_dir: Path) -> None:
    cfg = small_config(segment_bytes=2048, index_interval_bytes=100)
    log = Log.open(log_dir, cfg)
    fill(log, 60, per_batch=2)
    assert len(log.segments) > 3
    assert all(len(s.index) > 0 for s in log.segments[:-1])
    for off in range(log.log_end_offset):
        info = log.read(off, 1)  # min_one_batch: exactly the batch holding off
        assert info is not None
        recs = decode(info.read())
        assert recs[0][0] == off - off % 2 and len(recs) == 2
        assert info.first_offset == off - off % 2
    log.close()


def test_read_bounds(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig())
    fill(log, 10, per_batch=1)
    batch_size = next(log.iter_batches()).size
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 1000)
    assert log.read(10, 1000) is None
    # whole batches only, up to max_bytes
    info = log.read(0, batch_size * 3 + batch_size // 2)
    assert info is not None and info.size == batch_size * 3
    # min_one_batch
    info = log.read(2, 5)
    assert info is not None and info.size == batch_size and info.first_offset == 2
    assert log.read(2, 5, min_one_batch=False) is None
    # max_offset: exclusive upper bound
    info = log.read(0, 1 << 20, max_offset=4)
    assert info is not None and [r[0] for r in decode(info.read())] == [0, 1, 2, 3]
    assert log.read(4, 1 << 20, max_offset=4) is None
    assert log.read(5, 1 << 20, max_offset=4) is None
    log.close()


def test_max_offset_across_segments(log_dir: Path) -> None:
    log = Log.open(log_dir, small_config(segment_bytes=1024))
    fill(log, 30, per_batch=1)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    b = bases[1]
    info = log.read(b - 1, 1 << 20, max_offset=b)
    assert info is not None and [r[0] for r in decode(info.read())] == [b - 1]
    assert log.read(b, 1 << 20, max_offset=b) is None
    log.close()


def test_offsets_for_timestamp(log_dir: Path) -> None:
    log = Log.open(log_dir, small_config(segment_bytes=1500, index_interval_bytes=64))
    # batch i holds records with timestamps T0 + 10*i + {0, 1, 2}
    fill(log, 40, per_batch=3)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, T0)
    for i in (0, 7, 21, 39):
        assert log.offset_for_timestamp(T0 + 10 * i) == (3 * i, T0 + 10 * i)
        assert log.offset_for_timestamp(T0 + 10 * i + 2) == (3 * i + 2, T0 + 10 * i + 2)
        assert log.offset_for_timestamp(T0 + 10 * i + 5) == (3 * i + 3, T0 + 10 * i + 10) if i < 39 else True
    assert log.offset_for_timestamp(T0 + 10 * 39 + 3) is None
    assert log.max_timestamp_offset() == (119, T0 + 392)
    log.close()


def test_out_of_order_timestamps(log_dir: Path) -> None:
    log = Log.open(log_dir, small_config(index_interval_bytes=0))
    log.append(records(build_batch([b"a", b"b"], timestamps=[T0 + 100, T0 + 50])))
    log.append(records(build_batch([b"c"], timestamps=[T0 + 10])))
    log.append(records(build_batch([b"d", b"e"], timestamps=[T0 + 60, T0 + 200])))
    assert log.max_timestamp_offset() == (4, T0 + 200)
    assert log.offset_for_timestamp(T0 + 55) == (0, T0 + 100)
    assert log.offset_for_timestamp(T0 + 150) == (4, T0 + 200)
    log.close()


def test_empty_log(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig())
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.read(0, 100) is None
    assert log.offset_for_timestamp(0) is None
    assert log.max_timestamp_offset() == (-1, -1)
    assert list(log.iter_batches()) == []
    log.close()
    assert sorted(os.listdir(log_dir))[:3] == ["00000000000000000000.index", "00000000000000000000.log",
                                               "00000000000000000000.snapshot"]


def test_truncate_to(log_dir: Path) -> None:
    log = Log.open(log_dir, small_config(segment_bytes=1024))
    fill(log, 30, per_batch=2)
    nseg = len(log.segments)
    log.truncate_to(31)  # mid-batch: the whole batch [30, 31] goes
    assert log.log_end_offset == 30
    assert len(log.segments) < nseg
    assert [r[0] for r in read_all(log)] == list(range(30))
    info = log.append(records(build_batch([b"x"])))
    assert info.first_offset == 30
    assert check_log(log_dir) == []
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.read(0, 100) is None
    log.close()


def test_reopen_clean_and_unclean(log_dir: Path) -> None:
    cfg = small_config(segment_bytes=2048)
    log = Log.open(log_dir, cfg)
    values = fill(log, 50)
    nseg = len(log.segments)
    log.close()
    for recover in (False, True):
        log = Log.open(log_dir, cfg, recover=recover)
        assert log.log_end_offset == 150 and len(log.segments) == nseg
        assert [r[3] for r in read_all(log)] == values
        assert log.offset_for_timestamp(T0 + 100) == (30, T0 + 100)
        log.close()
    assert check_log(log_dir) == []


def test_roll_on_segment_ms(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig(segment_ms=1000))
    log.append(records(build_batch([b"a"], timestamps=[T0])), now_ms=T0)
    log.append(records(build_batch([b"b"], timestamps=[T0 + 500])), now_ms=T0 + 500)
    assert len(log.segments) == 1
    log.append(records(build_batch([b"c"], timestamps=[T0 + 1500])), now_ms=T0 + 1500)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_on_full_index(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig(segment_index_bytes=8 * 3, index_interval_bytes=0))
    fill(log, 12, per_batch=1)
    assert len(log.segments) >= 3
    assert all(len(s.index) <= 3 for s in log.segments)
    assert [r[0] for r in read_all(log)] == list(range(12))
    log.close()


def test_too_large(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig(max_message_bytes=100))
    with pytest.raises(KafkaError):
        log.append(records(build_batch([b"x" * 200])))
    assert log.log_end_offset == 0
    log.close()


def test_idempotent_append_dedup_and_gap(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig())
    b0 = build_batch([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    b1 = build_batch([b"c"], producer_id=7, producer_epoch=0, base_sequence=2)
    log.append(records(b"x" and build_batch([b"plain"])))
    assert log.append(records(b0)).first_offset == 1
    assert log.append(records(b1)).first_offset == 3
    with pytest.raises(DuplicateSequenceError) as e:
        log.append(records(b0))
    assert (e.value.first_offset, e.value.last_offset) == (1, 2)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(records(build_batch([b"d"], producer_id=7, producer_epoch=0, base_sequence=5)))
    assert log.log_end_offset == 4
    log.close()
    # the state survives a clean reopen (snapshot) and an unclean one (replay)
    for recover in (False, True):
        log = Log.open(log_dir, LogConfig(), recover=recover)
        with pytest.raises(DuplicateSequenceError):
            log.append(records(b1))
        assert log.append(records(build_batch([b"d"], producer_id=7, producer_epoch=0, base_sequence=3))).first_offset == 4
        log.truncate_to(4)
        log.close()


def test_iter_batches_positions(log_dir: Path) -> None:
    log = Log.open(log_dir, LogConfig())
    fill(log, 5)
    data = log.read(0, 1 << 20).read()
    assert [h.base_offset for h in iter_headers(data)] == [h.base_offset for h in log.iter_batches()]
    log.close()


def test_failed_write_leaves_no_torn_bytes(log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import log.segment as segment_mod

    log = Log.open(log_dir, LogConfig())
    fill(log, 3)
    size = log.active_segment.size
    real_write = os.write

    def short_write(fd: int, data: bytes) -> int:
        if len(data) > 30:
            real_write(fd, bytes(data)[:30])
            raise OSError(28, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(segment_mod.os, "write", short_write)
    with pytest.raises(KafkaError) as e:
        log.append(records(build_batch([b"x" * 100])))
    assert e.value.code == 56  # KAFKA_STORAGE_ERROR
    monkeypatch.setattr(segment_mod.os, "write", real_write)
    assert os.path.getsize(log.active_segment.log_path) == size
    assert log.append(records(build_batch([b"y"]))).first_offset == 9
    assert check_log(log_dir) == []
    log.close()


def test_read_batch_bytes_matches_reads(log_dir: Path) -> None:
    log = Log.open(log_dir, small_config(segment_bytes=1500))
    fill(log, 40, per_batch=2)
    big = build_batch([b"B" * 1200])
    log.append(records(big))
    fill(log, 3, per_batch=1)
    via_read = []
    off = 0
    while off < log.log_end_offset:
        data = log.read(off, 1 << 20).read()  # type: ignore[union-attr]
        via_read += list(iter_headers(data))
        recs = decode(data)
        off = recs[-1][0] + 1
    chunks = list(log.read_batch_bytes(0))
    assert b"".join(chunks) == b"".join(log.read(h.base_offset, 1).read() for h in via_read)  # type: ignore[union-attr]
    assert [decode(c)[0][0] for c in log.read_batch_bytes(33)] == [32] + [h.base_offset for h in via_read if h.base_offset > 33]
    from log.segment import LogSegment
    seg: LogSegment = log.segments[0]
    assert [h.base_offset for h, _ in seg.batches_with_bytes(chunk=100)] == [h.base_offset for h in seg.batches()]
    log.close()
