"""log.check.check_log finds what it must: CRC failures, offset gaps, bad index entries."""

from __future__ import annotations

import struct
from pathlib import Path

from log import Log, LogConfig, check_log
from protocol.records import patch_base_offset
from tests.log.helpers import build_batch, records


def make(tmp_path: Path, n: int = 20) -> tuple[Path, Log]:
    d = tmp_path / "c-0"
    log = Log.open(d, LogConfig(segment_bytes=1024, index_interval_bytes=100))
    for i in range(n):
        log.append(records(build_batch([b"r%d" % i, b"s%d" % i])))
    return d, log


def test_clean_log_passes_and_data_dir_is_walked(tmp_path: Path) -> None:
    d, log = make(tmp_path)
    log.close()
    assert check_log(d) == []
    assert check_log(tmp_path) == []


def test_crc_failure(tmp_path: Path) -> None:
    d, log = make(tmp_path)
    log.close()
    p = d / "00000000000000000000.log"
    data = bytearray(p.read_bytes())
    data[100] ^= 1
    p.write_bytes(bytes(data))
    problems = check_log(tmp_path)
    assert any("c-0/" in x and "CRC" in x for x in problems)


def test_offset_gap(tmp_path: Path) -> None:
    d, log = make(tmp_path, 3)
    v = records(build_batch([b"x"]))
    patch_base_offset(v.buffer, 0, 10)
    v.batches[0].base_offset = 10
    log.append(v, assign_offsets=False)
    assert log.log_end_offset == 11
    log.close()
    assert any("not contiguous" in x for x in check_log(d))


def test_bad_index_entries(tmp_path: Path) -> None:
    d, log = make(tmp_path)
    log.close()
    p = d / "00000000000000000000.index"
    entries = list(struct.iter_unpack(">ii", p.read_bytes()))
    assert len(entries) >= 2
    rel, pos = entries[1]
    p.write_bytes(struct.pack(">ii", *entries[0]) + struct.pack(">ii", rel, pos + 3))
    assert any("not a batch start" in x for x in check_log(d))
    p.write_bytes(struct.pack(">ii", *entries[1]) + struct.pack(">ii", *entries[0]))
    assert any("does not increase" in x for x in check_log(d))
    t = d / "00000000000000000000.timeindex"
    t.write_bytes(struct.pack(">qi", 10**15, 0))
    assert any("above the segment's max timestamp" in x for x in check_log(d))


def test_torn_tail(tmp_path: Path) -> None:
    d, log = make(tmp_path)
    path = log.active_segment.log_path
    log.close()
    with open(path, "ab") as f:
        f.write(b"\x00" * 30)
    assert any("trailing bytes" in x for x in check_log(d))
    assert check_log(d, allow_torn_tail=True) == []
