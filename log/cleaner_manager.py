"""What the log cleaner remembers between passes and how it picks a log (Kafka's LogCleanerManager).

Theory of operation: for each partition the cleaner keeps its *first dirty offset*, the end
of the part it has already cleaned, in ``cleaner-offset-checkpoint`` in each log directory
(Kafka's OffsetCheckpointFile format: a version line ``0``, a count line, then
``topic partition offset`` lines). A log is worth a pass when the dirty share of its closed
segments, by bytes, reaches ``min.cleanable.dirty.ratio`` (:func:`dirty_ratio`).

Invariants: the checkpoint is replaced atomically (written to a temporary file, fsynced,
renamed), so a crash leaves the old or the new file, never a torn one; an unreadable or
unknown-version file reads as empty, which only means cleaning starts again from the log
start (cleaning twice is safe, it never loses the latest value of a key).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

CHECKPOINT_FILE = "cleaner-offset-checkpoint"


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Kafka's OffsetCheckpointFile: version, count, then ``topic partition offset`` lines."""
    out: dict[tuple[str, int], int] = {}
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return out
    if len(lines) < 2 or lines[0].strip() != "0":
        return out
    for line in lines[2:]:
        parts = line.split()
        if len(parts) == 3:
            try:
                out[(parts[0], int(parts[1]))] = int(parts[2])
            except ValueError:
                continue
    return out


def write_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(offsets.items()))
    with open(tmp, "w") as f:
        f.write(f"0\n{len(offsets)}\n{body}")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def dirty_ratio(log: Any, first_dirty: int) -> float:
    segs = list(log.segments)[:-1]
    total = sum(s.size for s in segs)
    if total == 0:
        return 0.0
    dirty = sum(s.size for s in segs if s.next_offset > first_dirty)
    return dirty / total
