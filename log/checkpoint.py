"""Kafka's small text checkpoint files, and the leader epoch cache.

Format of every checkpoint file (Kafka's ``CheckpointFile``)::

    0                 <- version
    2                 <- number of entries
    foo 0 1234        <- one entry per line (recovery-point-offset-checkpoint,
    foo 1 99             log-start-offset-checkpoint: "topic partition offset";
                         leader-epoch-checkpoint: "epoch start_offset")

Files are replaced atomically (write ``.tmp``, fsync, rename), so a crash leaves either the
old or the new content.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from pathlib import Path

logger = logging.getLogger("samsa.log")

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def write_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write ``data`` to ``path`` through a ``.tmp`` file renamed over it, so a crash leaves the
    old file or the new one, never a torn one (fsynced first unless ``sync`` is False)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        n = 0
        while n < len(data):
            n += os.write(fd, data[n:])
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_checkpoint(path: Path, lines: list[str], *, sync: bool = True) -> None:
    write_atomically(path, (f"0\n{len(lines)}\n" + "".join(line + "\n" for line in lines)).encode(), sync=sync)


def read_checkpoint(path: Path) -> list[list[str]]:
    """Entries of a checkpoint file, split on whitespace; [] if missing or malformed."""
    try:
        text = path.read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return []
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != 0:
            raise ValueError("bad header")
        n = int(lines[1])
        entries = [ln.split() for ln in lines[2: 2 + n]]
        if len(entries) != n:
            raise ValueError("truncated")
        return entries
    except ValueError as e:
        logger.warning("Ignoring malformed checkpoint file %s: %s", path, e)
        return []


def write_offsets_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    write_checkpoint(path, [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())])


def read_offsets_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for e in read_checkpoint(path):
        if len(e) == 3:
            try:
                out[(e[0], int(e[1]))] = int(e[2])
            except ValueError:
                continue
    return out


class LeaderEpochFileCache:
    """(leader epoch, start offset) pairs of a partition, Kafka's ``LeaderEpochFileCache``.

    Invariant: epochs and start offsets both strictly increase. Persisted in
    ``leader-epoch-checkpoint`` in the partition directory whenever it changes (rarely: on
    leader changes and truncation).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[tuple[int, int]] = []
        for e in read_checkpoint(path):
            try:
                epoch, start = int(e[0]), int(e[1])
            except (ValueError, IndexError):
                continue
            if not self.entries or (epoch > self.entries[-1][0] and start >= self.entries[-1][1]):
                self.entries.append((epoch, start))

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Note that ``epoch`` starts at ``start_offset`` (called when a batch of a new epoch is appended)."""
        if epoch < 0 or (self.entries and epoch <= self.entries[-1][0]):
            return
        # an older epoch that started at or after this offset never really happened here
        while self.entries and self.entries[-1][1] >= start_offset:
            self.entries.pop()
        self.entries.append((epoch, start_offset))
        self._flush()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: (largest epoch <= ``epoch``, the offset where it ended)."""
        if not self.entries or epoch < 0:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch < self.entries[0][0]:
            # older than anything this log knows: that epoch ended where the earliest known one
            # starts (Kafka's endOffsetFor); a follower truncates there (unclean-election divergence)
            return epoch, self.entries[0][1]
        if epoch == self.entries[-1][0] or epoch > self.entries[-1][0]:
            return self.entries[-1][0], log_end_offset
        i = bisect_right([e for e, _ in self.entries], epoch)
        # entries[i] is the first epoch greater than the requested one
        return self.entries[i - 1][0], self.entries[i][1]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries that start at or after ``end_offset`` (log truncated there)."""
        n = len(self.entries)
        while self.entries and self.entries[-1][1] >= end_offset:
            self.entries.pop()
        if len(self.entries) != n:
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: the epoch holding it now starts there."""
        i = bisect_right([s for _, s in self.entries], start_offset) - 1
        if i < 0:
            return
        kept = [(self.entries[i][0], max(self.entries[i][1], start_offset))] + self.entries[i + 1:]
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def clear(self) -> None:
        self.entries = []
        self._flush()

    def _flush(self) -> None:
        try:
            write_checkpoint(self.path, [f"{e} {s}" for e, s in self.entries])
        except FileNotFoundError:
            pass  # the directory is being deleted
