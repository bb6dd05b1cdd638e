"""Moving a partition's log to another log directory while it keeps serving (KIP-113, JBOD).

Kafka's ``ReplicaAlterLogDirsThread`` + ``LogManager.replaceCurrentWithFutureLog``: an
AlterReplicaLogDirs request starts a *future* copy of the log in the destination directory,
the copy catches up with the current log while that one keeps taking appends and serving
reads, and once it has caught up the two are swapped.

Theory of operation:

1. The future directory is ``<dest>/<topic>-<partition>.<uuid hex>-future`` (Kafka's name),
   so nothing mistakes it for a live log; start-up deletes a leftover one (the move is
   simply asked for again).
2. Catch-up passes run in a worker thread: each copies, per segment ``.log`` file, the bytes
   past what the previous pass copied (segments are append-only); a file whose inode changed
   (the cleaner swapped it in) or that shrank (truncation) is copied again from 0; copies
   of files gone from the source (retention) are removed. Passes repeat until one copies
   less than ``CATCH_UP_BYTES``.
3. The swap runs on the event loop thread, so no append, roll or read interleaves: the
   current log is flushed and its producer state snapshotted, a last pass copies the tail
   and the small files (producer snapshots, ``.txnindex``, ``leader-epoch-checkpoint``,
   ``partition.metadata``); offset and time indexes are never copied (they are preallocated
   and in flux; ``Log.open`` rebuilds a missing index). The current directory is renamed
   ``<topic>-<partition>.<uuid>-delete``, the future one to ``<topic>-<partition>``, the
   latter opened and handed to the partition and the LogManager. The old log is closed and
   removed ``DELETE_DELAY_S`` later, so file regions of in-flight fetches stay readable.

Invariant: the partition serves from exactly one Log throughout; only the swap changes
which, in one step of the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .log import Log
from .manager import FUTURE_DIR_SUFFIX

logger = logging.getLogger("samsa.log")

CATCH_UP_BYTES = 1 << 20
DELETE_DELAY_S = 5.0
_SKIP = (".deleted", ".tmp", ".cleaned", ".swap", ".index", ".timeindex")
_CHUNK = 1 << 20


def future_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def _copy_range(src: Path, dst: Path, start: int, end: int) -> int:
    with open(src, "rb") as fi, open(dst, "r+b" if start and dst.exists() else "wb") as fo:
        fo.truncate(start)
        fo.seek(start)
        fi.seek(start)
        left = end - start
        while left > 0:
            chunk = fi.read(min(_CHUNK, left))
            if not chunk:
                break
            fo.write(chunk)
            left -= len(chunk)
    return end - start - left


@dataclass
class FutureLogCopy:
    """The future copy of one log and what has been copied into it so far."""

    source: Path
    target: Path
    copied: dict[str, tuple[int, int]] = field(default_factory=dict)  # .log name -> (inode, bytes)
    total_copied: int = 0

    def sync_pass(self, *, small_files: bool) -> int:
        """Bring the copy up to the source's current files; return the bytes copied."""
        n = 0
        present = set()
        for name in os.listdir(self.source):
            if name.endswith(_SKIP):
                continue
            p = self.source / name
            try:
                st = os.stat(p)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            present.add(name)
            if name.endswith(".log"):
                prev = self.copied.get(name)
                start = prev[1] if prev is not None and prev[0] == st.st_ino and prev[1] <= st.st_size else 0
                if start < st.st_size or prev is None:
                    n += _copy_range(p, self.target / name, start, st.st_size)
                self.copied[name] = (st.st_ino, st.st_size)
            elif small_files:
                shutil.copyfile(p, self.target / name)
                n += st.st_size
        for name in os.listdir(self.target):
            if name not in present and (name.endswith(".log") or small_files):
                os.unlink(self.target / name)
                self.copied.pop(name, None)
        self.total_copied += n
        return n

    def pending_bytes(self) -> int:
        """Bytes of the source's .log files not yet copied (an estimate while appends go on)."""
        left = 0
        for name in os.listdir(self.source):
            if name.endswith(".log"):
                try:
                    st = os.stat(self.source / name)
                except FileNotFoundError:
                    continue
                prev = self.copied.get(name)
                done = prev[1] if prev is not None and prev[0] == st.st_ino else 0
                left += max(st.st_size - done, 0)
        return left


class HostedPartition(Protocol):
    """A partition of the replica manager, as a move sees it: the log it serves from, which
    the move's swap replaces."""

    log: Log


class LogDirMove:
    """One partition's move to ``dest_root``; ``run()`` copies, catches up and swaps."""

    def __init__(self, partition: HostedPartition, dest_root: Path, swap_in: Callable[[Log, Path], None]) -> None:
        self.partition = partition
        self.dest_root = dest_root
        self.swap_in = swap_in  # (new log, its log dir): the LogManager's bookkeeping
        lg: Log = partition.log
        self.future = dest_root / future_dir_name(lg.topic, lg.partition)
        self.copy = FutureLogCopy(lg.dir, self.future)
        self.done = False
        self.cancelled = False
        self.task: asyncio.Task[None] | None = None

    def offset_lag(self) -> int:
        """The future log's lag behind the current one, estimated from the bytes left to copy."""
        lg = self.partition.log
        total = max(int(lg.size_bytes), 1)
        left = self.copy.pending_bytes()
        return 0 if left == 0 else max(1, int(lg.log_end_offset * min(left / total, 1.0)))

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        lg = self.partition.log
        logger.info("Moving log of %s-%d from %s to %s (future dir %s)", lg.topic, lg.partition, lg.dir.parent,
                    self.dest_root, self.future.name)
        try:
            self.future.mkdir(parents=True)
            while not self.cancelled:
                n = await loop.run_in_executor(None, lambda: self.copy.sync_pass(small_files=False))
                if n < CATCH_UP_BYTES:
                    break
            if self.cancelled:
                shutil.rmtree(self.future, ignore_errors=True)
                return
            self._swap()
        except Exception:
            logger.exception("Moving the log of %s-%d to %s failed; it stays in %s", lg.topic, lg.partition,
                             self.dest_root, lg.dir.parent)
            shutil.rmtree(self.future, ignore_errors=True)
        finally:
            self.done = True

    def _swap(self) -> None:
        """On the event loop: last copy, rename both directories, open and swap in the new log."""
        old: Log = self.partition.log
        old.flush()
        ps = old.producer_state
        ps.map_end_offset = old.log_end_offset
        if ps.last_snapshot_offset != old.log_end_offset:
            ps.take_snapshot(old.log_end_offset)
        self.copy.source = old.dir
        self.copy.sync_pass(small_files=True)
        name = f"{old.topic}-{old.partition}"
        trash = old.dir.parent / f"{name}.{uuid.uuid4().hex}-delete"
        final = self.dest_root / name
        os.rename(old.dir, trash)
        os.rename(self.future, final)
        try:
            new = Log.open(final, old.config, recover=False, log_start_offset=old.log_start_offset)
            if new.log_end_offset != old.log_end_offset:
                new.close()
                raise RuntimeError(f"future log of {name} ends at {new.log_end_offset}, "
                                   f"the current one at {old.log_end_offset}")
        except Exception:
            os.rename(final, self.future)  # put both back: the current log never stopped serving
            os.rename(trash, old.dir)
            raise
        self.partition.log = new
        self.swap_in(new, self.dest_root)
        logger.info("The current replica of %s is replaced by the future replica in %s (%d bytes copied)", name,
                    self.dest_root, self.copy.total_copied)

        def drop_old() -> None:
            try:
                old.close()
            except OSError:
                pass
            shutil.rmtree(trash, ignore_errors=True)
            logger.info("Deleted the previous log of %s in %s", name, trash.parent)

        asyncio.get_running_loop().call_later(DELETE_DELAY_S, drop_old)
