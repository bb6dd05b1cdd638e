"""What the log cleaner remembers between passes and how it picks a log (Kafka's LogCleanerManager).

Theory of operation: for each partition the cleaner keeps its *first dirty offset*, the end
of the part it has already cleaned, in ``cleaner-offset-checkpoint`` in each log directory
(Kafka's OffsetCheckpointFile format, read and written by :mod:`log.checkpoint`: a version line
``0``, a count line, then ``topic partition offset`` lines). A log is worth a pass when the dirty share of its closed
segments, by bytes, reaches ``min.cleanable.dirty.ratio`` (:func:`dirty_ratio`).

Invariants: the checkpoint is replaced atomically (written to a temporary file, fsynced,
renamed), so a crash leaves the old or the new file, never a torn one; an unreadable,
truncated or unknown-version file reads as empty, which only means cleaning starts again from the log
start (cleaning twice is safe, it never loses the latest value of a key).
"""

from __future__ import annotations

# The file and its format are log.checkpoint's (Kafka's OffsetCheckpointFile), as for the
# recovery points and log start offsets.
from .checkpoint import CLEANER_OFFSET_CHECKPOINT as CHECKPOINT_FILE
from .checkpoint import read_offsets_checkpoint as read_checkpoint
from .checkpoint import write_offsets_checkpoint as write_checkpoint
from .log import Log

__all__ = ["CHECKPOINT_FILE", "dirty_ratio", "read_checkpoint", "write_checkpoint"]


def dirty_ratio(log: Log, first_dirty: int) -> float:
    """Bytes of the closed segments that hold offsets at or past ``first_dirty``, over all of them."""
    segs = list(log.segments)[:-1]
    total = sum(s.size for s in segs)
    if total == 0:
        return 0.0
    dirty = sum(s.size for s in segs if s.next_offset > first_dirty)
    return dirty / total
