"""Offline consistency check of one partition directory (for crash tests and operators).

``check_log(dir)`` reads the files only (it never repairs) and lists every problem found:
batches failing their CRC or size bounds, offsets that are not contiguous across batches and
segments, index entries that do not point at a batch start, time index entries out of order.
Run ``python -m log.check <partition dir>...`` to print them.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import crc32c as _crc32c

from protocol.records import HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, read_header

from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX


def check_log(dir: str | Path, *, allow_torn_tail: bool = False) -> list[str]:
    """Problems found in ``dir``; [] if it is consistent.

    ``dir`` is a partition directory (``<topic>-<partition>``) or a whole log dir, in which
    case every partition directory in it is checked and problems are prefixed by its name.
    """
    dir = Path(dir)
    names = os.listdir(dir)
    if not any(n.endswith(LOG_SUFFIX) for n in names):
        out: list[str] = []
        for n in sorted(names):
            sub = dir / n
            if sub.is_dir() and not n.endswith("-delete") and _is_partition_dir(n):
                out += [f"{n}/{p}" for p in check_log(sub, allow_torn_tail=allow_torn_tail)]
        return out
    problems: list[str] = []
    compacted_below = _cleaner_point(dir)  # compaction legitimately leaves offset gaps below it
    bases = sorted(int(n[: -len(LOG_SUFFIX)]) for n in os.listdir(dir)
                   if n.endswith(LOG_SUFFIX) and n[: -len(LOG_SUFFIX)].isdigit())
    expected_next: int | None = None
    for base in bases:
        name = f"{base:020d}"
        data = (dir / (name + LOG_SUFFIX)).read_bytes()
        pos = 0
        starts: dict[int, tuple[int, int, int]] = {}  # position -> (base, last, max_ts)
        max_ts = -1
        while pos < len(data):
            if len(data) - pos < HEADER_SIZE:
                if not allow_torn_tail:
                    problems.append(f"{name}.log: {len(data) - pos} trailing bytes at position {pos} (torn batch header)")
                break
            h = read_header(data, pos)
            if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > len(data):
                if not allow_torn_tail:
                    problems.append(f"{name}.log: batch at position {pos} has length {h.batch_length} "
                                    f"beyond the end of the file ({len(data)} bytes)")
                break
            if h.magic != MAGIC_V2:
                problems.append(f"{name}.log: batch at position {pos} has magic {h.magic}")
            elif _crc32c.crc32c(memoryview(data)[pos + 21: pos + h.size]) != h.crc:
                problems.append(f"{name}.log: batch at position {pos} (offset {h.base_offset}) fails its CRC check")
            if h.base_offset < base:
                problems.append(f"{name}.log: batch at position {pos} has offset {h.base_offset} below the "
                                f"segment base offset {base}")
            if expected_next is not None and h.base_offset != expected_next and not (
                    expected_next < h.base_offset and expected_next < compacted_below):
                problems.append(f"{name}.log: batch at position {pos} starts at offset {h.base_offset}, "
                                f"expected {expected_next} (offsets not contiguous)")
            if h.last_offset_delta < 0:
                problems.append(f"{name}.log: batch at position {pos} has negative last offset delta")
            starts[pos] = (h.base_offset, h.last_offset, h.max_timestamp)
            max_ts = max(max_ts, h.max_timestamp)
            expected_next = h.next_offset
            pos += h.size
        if expected_next is None or (not starts and expected_next < base):
            expected_next = base if not starts else expected_next
        elif not starts and base > expected_next:
            problems.append(f"{name}.log: empty segment at {base} leaves a gap after offset {expected_next - 1}")
        problems += _check_index(dir / (name + INDEX_SUFFIX), base, starts)
        problems += _check_time_index(dir / (name + TIME_INDEX_SUFFIX), base, starts, max_ts)
    return problems


def _cleaner_point(dir: Path) -> int:
    """The log cleaner's checkpoint for this partition (0 if never compacted)."""
    topic, _, part = dir.name.rpartition("-")
    try:
        lines = (dir.parent / "cleaner-offset-checkpoint").read_text().splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return 0
    for line in lines[2:]:
        f = line.split()
        if len(f) == 3 and f[0] == topic and f[1] == part:
            try:
                return int(f[2])
            except ValueError:
                return 0
    return 0


def _is_partition_dir(name: str) -> bool:
    topic, _, part = name.rpartition("-")
    return bool(topic) and part.isdigit()


def _check_index(path: Path, base: int, starts: dict[int, tuple[int, int, int]]) -> list[str]:
    if not path.exists():
        return [f"{path.name}: missing"]
    data = path.read_bytes()
    out = []
    if len(data) % 8:
        out.append(f"{path.name}: size {len(data)} is not a multiple of 8")
    prev = (-1, -1)
    for i, (rel, p) in enumerate(struct.iter_unpack(">ii", data[: len(data) // 8 * 8])):
        if rel <= prev[0] or p <= prev[1]:
            out.append(f"{path.name}: entry {i} ({base + rel}, {p}) does not increase")
        if p not in starts:
            out.append(f"{path.name}: entry {i} points at position {p}, which is not a batch start")
        else:
            b, last, _ = starts[p]
            if not b <= base + rel <= last:
                out.append(f"{path.name}: entry {i} offset {base + rel} is not in the batch at {p} ({b}-{last})")
        prev = (rel, p)
    return out


def _check_time_index(path: Path, base: int, starts: dict[int, tuple[int, int, int]], max_ts: int) -> list[str]:
    if not path.exists():
        return [f"{path.name}: missing"]
    data = path.read_bytes()
    out = []
    if len(data) % 12:
        out.append(f"{path.name}: size {len(data)} is not a multiple of 12")
    offsets = {b for b, _, _ in starts.values()} | {last for _, last, _ in starts.values()}
    ranges = sorted((b, last) for b, last, _ in starts.values())
    prev_ts, prev_off = None, -1
    for i, (ts, rel) in enumerate(struct.iter_unpack(">qi", data[: len(data) // 12 * 12])):
        off = base + rel
        if prev_ts is not None and (ts <= prev_ts or off < prev_off):
            out.append(f"{path.name}: entry {i} ({ts}, {off}) does not increase")
        if ts > max_ts:
            out.append(f"{path.name}: entry {i} timestamp {ts} above the segment's max timestamp {max_ts}")
        if off not in offsets and not any(b <= off <= last for b, last in ranges):
            out.append(f"{path.name}: entry {i} offset {off} is not in any batch of the segment")
        prev_ts, prev_off = ts, off
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    bad = 0
    for d in argv:
        for p in check_log(d):
            print(f"{d}: {p}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
