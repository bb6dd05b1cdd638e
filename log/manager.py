"""All partition logs of a broker across its ``log.dirs`` (Kafka's ``LogManager``).

Directory layout per log dir (Kafka's)::

    <log.dir>/.kafka_cleanshutdown                 present only after a clean shutdown
    <log.dir>/recovery-point-offset-checkpoint     topic partition offset, per log
    <log.dir>/log-start-offset-checkpoint          topic partition offset, per log
    <log.dir>/<topic>-<partition>/                 one Log
    <log.dir>/<topic>-<partition>.<uuid>-delete/   a log being deleted
    <log.dir>/<topic>-<partition>.<uuid>-future/   a log being moved here (log/alter_log_dirs.py)

On ``startup`` the clean-shutdown marker decides whether logs are rescanned: without it,
every segment past a log's recovery point is CRC-checked and torn tails are truncated. The
marker is removed once loading is done, so a crash from then on is detected next time.

JBOD (several ``log.dirs``): a new log goes to the online directory holding the fewest logs,
as Kafka's ``nextLogDirs`` does. A directory that cannot be read at start-up, or whose I/O
fails later (``mark_offline``), is *offline*: its logs are dropped from service (their
partitions answer KAFKA_STORAGE_ERROR) while the other directories keep serving; the broker
only gives up when every directory is offline.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from protocol.errors import ErrorCode, KafkaError

from .checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from .config import LogConfig
from .log import Log, parse_topic_partition

logger = logging.getLogger("samsa.log")

DELETE_DIR_SUFFIX = "-delete"
SLOW_LOAD_MS = 1000  # a log that takes this long to load gets its own INFO line
FUTURE_DIR_SUFFIX = "-future"


class LogManager:
    """Owner of every :class:`Log` of this broker. One instance per broker."""

    def __init__(self, log_dirs: list[Path], default_config: LogConfig) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self.logs: dict[tuple[str, int], Log] = {}
        self._dir_of: dict[tuple[str, int], Path] = {}
        self.offline_dirs: set[Path] = set()

    # -- startup / shutdown -----------------------------------------------------------------
    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> dict[tuple[str, int], Log]:
        """Load every ``<topic>-<partition>`` directory of every log dir."""
        t0 = time.monotonic()
        topic_configs = topic_configs or {}
        for log_dir in self.log_dirs:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
                os.listdir(log_dir)
            except OSError as e:
                logger.error("Error while loading log dir %s: %s; it is offline", log_dir, e)
                self.offline_dirs.add(log_dir)
                continue
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            recovery_points = read_offsets_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
            start_offsets = read_offsets_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
            names = sorted(os.listdir(log_dir))
            candidates = []
            for name in names:
                path = log_dir / name
                if not path.is_dir():
                    continue
                if name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX)):
                    # a log being deleted, or an unfinished move (it is asked for again)
                    logger.info("Deleting leftover log directory %s", path)
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                try:
                    tp = parse_topic_partition(name)
                except ValueError:
                    continue
                candidates.append((tp, path))
            total = len(candidates)
            if clean:
                logger.info("Found clean shutdown file %s; skipping recovery for all logs in %s", marker, log_dir)
            elif candidates:  # a brand-new log dir has nothing to recover: say nothing
                logger.info("Attempting recovery for all logs in %s since no clean shutdown file was found",
                            log_dir)
            for n, (tp, path) in enumerate(candidates, 1):
                if tp in self.logs:
                    logger.error("Duplicate log directories for %s-%d: %s and %s; using the first", tp[0], tp[1],
                                 self._dir_of[tp], path)
                    continue
                config = topic_configs.get(tp[0], self.default_config)
                t1 = time.monotonic()
                log = Log.open(path, config, recover=not clean, recovery_point=recovery_points.get(tp, 0),
                               log_start_offset=start_offsets.get(tp))
                self._register(tp, log, log_dir)
                took_ms = (time.monotonic() - t1) * 1000
                # One line per log only when it says something (recovery work, a slow load); the
                # summary below covers the rest (hundreds of lines at start-up would bury what matters).
                noteworthy = (not clean and log.recovered_segments) or took_ms >= SLOW_LOAD_MS
                logger.log(logging.INFO if noteworthy else logging.DEBUG,
                           "Completed load of log %s-%d with %d segments (%s), log start offset %d and log end "
                           "offset %d in %d ms (%d/%d completed in %s)", tp[0], tp[1], len(log.segments),
                           f"recovered {log.recovered_segments}" if not clean else "clean",
                           log.log_start_offset, log.log_end_offset, took_ms, n, total, log_dir)
            if clean:
                os.unlink(marker)
            self._checkpoint_dir(log_dir)
        if self.offline_dirs and len(self.offline_dirs) == len(self.log_dirs):
            raise OSError(f"all log dirs are offline: {', '.join(map(str, self.log_dirs))}")
        topics = sorted({t for t, _ in self.logs})
        shown = ", ".join(topics[:8]) + (f" and {len(topics) - 8} more" if len(topics) > 8 else "")
        logger.info("Loaded %d logs of %d topics in %d ms%s", len(self.logs), len(topics),
                    (time.monotonic() - t0) * 1000, f" ({shown})" if topics else "")
        return dict(self.logs)

    def shutdown(self) -> None:
        """Close every log (flush, producer snapshot), checkpoint, write the clean-shutdown marker."""
        logger.info("Shutting down the log manager")
        failed: set[Path] = set()
        for tp, log in self.logs.items():
            try:
                log.close()
            except OSError:
                logger.exception("Error closing log %s", log.name)
                failed.add(self._dir_of[tp])
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs or not log_dir.is_dir():
                continue
            self._checkpoint_dir(log_dir, use_log_end=log_dir not in failed)
            if log_dir in failed:
                # like Kafka: no marker, so the next start-up runs recovery on this log dir
                logger.warning("Not writing %s in %s: a log failed to close cleanly", CLEAN_SHUTDOWN_FILE, log_dir)
                continue
            (log_dir / CLEAN_SHUTDOWN_FILE).touch()
            _fsync_dir(log_dir)
        logger.info("Shutdown complete")

    # -- logs ---------------------------------------------------------------------------------
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.logs.get((topic, partition))

    def create_log(self, topic: str, partition: int, config: LogConfig) -> Log:
        """Create (or return the existing) log, in the log dir holding the fewest logs."""
        tp = (topic, partition)
        existing = self.logs.get(tp)
        if existing is not None:
            return existing
        log_dir = self.next_log_dir()
        log_dir.mkdir(parents=True, exist_ok=True)
        log = Log.open(log_dir / f"{topic}-{partition}", config, recover=False)
        self._register(tp, log, log_dir)
        defaults = LogConfig().to_properties()
        overrides = {k: v for k, v in config.to_properties().items() if defaults.get(k) != v}
        logger.debug("Created log for partition %s-%d in %s with properties %s", topic, partition,
                    log_dir / f"{topic}-{partition}", overrides or "{}")
        return log

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def next_log_dir(self) -> Path:
        """The online log dir holding the fewest logs (Kafka's ``nextLogDirs``); ties go to the first."""
        online = self.online_dirs()
        if not online:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "no online log dir to create a log in")
        counts = {d: 0 for d in online}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: counts[d])

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def find_log_dir(self, path: str) -> Path | None:
        """The configured log dir that ``path`` names (compared as absolute paths), if any."""
        want = os.path.abspath(path)
        for d in self.log_dirs:
            if os.path.abspath(d) == want:
                return d
        return None

    def replace_log(self, log: Log, log_dir: Path) -> None:
        """A moved log takes over from the current one (``replaceCurrentWithFutureLog``)."""
        tp = (log.topic, log.partition)
        old_dir = self._dir_of.get(tp)
        self._register(tp, log, log_dir)
        for d in {old_dir, log_dir}:
            if d is not None:
                self._checkpoint_dir(d)

    def mark_offline(self, log_dir: Path) -> list[tuple[str, int]]:
        """Take ``log_dir`` out of service after an I/O error; return the partitions it held."""
        if log_dir in self.offline_dirs:
            return []
        self.offline_dirs.add(log_dir)
        lost = [tp for tp, d in self._dir_of.items() if d == log_dir]
        for tp in lost:
            log = self.logs.pop(tp)
            del self._dir_of[tp]
            for seg in log.segments:
                try:
                    seg.close()
                except OSError:
                    pass
        logger.error("Stopped serving %d logs in offline log dir %s", len(lost), log_dir)
        return lost

    def delete_log(self, topic: str, partition: int) -> None:
        """Rename the directory to ``<topic>-<partition>.<uuid>-delete``, then remove it."""
        tp = (topic, partition)
        log = self.logs.pop(tp, None)
        log_dir = self._dir_of.pop(tp, None)
        if log is None or log_dir is None:
            return
        for seg in log.segments:
            seg.close()
        log.delete()
        src = log.dir
        dst = log_dir / f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        try:
            os.rename(src, dst)
        except FileNotFoundError:
            return
        logger.debug("Log for partition %s-%d is renamed to %s and is scheduled for deletion", topic, partition, dst)
        shutil.rmtree(dst, ignore_errors=True)
        logger.debug("Deleted log for partition %s-%d in %s", topic, partition, dst)
        self._checkpoint_dir(log_dir)

    def all_logs(self) -> list[Log]:
        return list(self.logs.values())

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention over all logs (call every ``log.retention.check.interval.ms``); segments deleted."""
        total = 0
        for log in list(self.logs.values()):
            try:
                total += log.delete_old_segments(now_ms)
            except OSError:
                logger.exception("Error applying retention to %s", log.name)
        return total

    def flush_all(self) -> None:
        for log in self.logs.values():
            log.flush()
        self.checkpoint()

    def checkpoint(self) -> None:
        """Write both offset checkpoint files of every log dir."""
        for log_dir in self.log_dirs:
            self._checkpoint_dir(log_dir)

    # -- internals ------------------------------------------------------------------------------
    def _register(self, tp: tuple[str, int], log: Log, log_dir: Path) -> None:
        self.logs[tp] = log
        self._dir_of[tp] = log_dir
        log.on_checkpoint_change = self._on_log_change

    def _on_log_change(self, log: Log) -> None:
        d = self._dir_of.get((log.topic, log.partition))
        if d is not None:
            self._checkpoint_dir(d)

    def _checkpoint_dir(self, log_dir: Path, use_log_end: bool = False) -> None:
        if log_dir in self.offline_dirs or not log_dir.is_dir():
            return
        logs = {tp: lg for tp, lg in self.logs.items() if self._dir_of.get(tp) == log_dir}
        write_offsets_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT,
                                 {tp: (lg.log_end_offset if use_log_end else lg.recovery_point)
                                  for tp, lg in logs.items()})
        write_offsets_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT,
                                 {tp: lg.log_start_offset for tp, lg in logs.items()})


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
