"""Several log directories (JBOD): moving partitions between them and surviving a failed one.

Kafka's ``ReplicaManager.alterReplicaLogDirs`` and its ``LogDirFailureChannel`` handling,
beside :mod:`broker.replica.replica_manager` so that the partition path stays small:

* :func:`alter_replica_log_dir` (AlterReplicaLogDirs, KIP-113) starts a
  :class:`log.alter_log_dirs.LogDirMove`: a future copy in the destination catches up while
  the partition keeps serving from its current log, then the two are swapped. Errors as
  Kafka gives them: a path that is not one of ``log.dirs`` is LOG_DIR_NOT_FOUND, an offline
  destination or partition KAFKA_STORAGE_ERROR, a partition this broker does not host
  REPLICA_NOT_AVAILABLE; the partition's own directory is a no-op (a running move to
  elsewhere is cancelled); another destination replaces a running move.
* :func:`on_storage_error`: an I/O error in a partition's log takes its whole directory
  offline (Kafka cannot tell a failing disk from a failing file), and with it only the
  partitions stored there: they answer KAFKA_STORAGE_ERROR, the others keep serving.
"""

from __future__ import annotations

import asyncio
import logging

from log.alter_log_dirs import LogDirMove
from protocol.errors import ErrorCode, KafkaError

from .replica_manager import ReplicaManager, TopicPartition

log = logging.getLogger("samsa.replica")


def alter_replica_log_dir(rm: ReplicaManager, topic: str, partition: int, path: str) -> None:
    """Move ``topic-partition`` to the log dir ``path``; raises KafkaError with Kafka's codes."""
    lm = rm.log_manager
    dest = lm.find_log_dir(path)
    if dest is None:
        raise KafkaError(ErrorCode.LOG_DIR_NOT_FOUND, f"Log dir {path} is not found in the config.")
    if dest in lm.offline_dirs:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Log directory {path} is offline")
    tp = TopicPartition(topic, partition)
    if tp in rm.offline_partitions:
        raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"Partition {tp} is offline")
    part = rm.partitions.get(tp)
    if part is None:
        raise KafkaError(ErrorCode.REPLICA_NOT_AVAILABLE, f"Replica for {tp} is not available")
    running = rm.log_dir_moves.get(tp)
    if running is not None and not running.done:
        if running.dest_root == dest:
            return
        running.cancelled = True
        rm.log_dir_moves.pop(tp, None)
    if lm.dir_of(topic, partition) == dest:
        return

    def swap_in(new_log: object, log_dir: object) -> None:
        lm.replace_log(new_log, log_dir)  # type: ignore[arg-type]

    move = LogDirMove(part, dest, swap_in)
    rm.log_dir_moves[tp] = move

    async def run() -> None:
        try:
            await move.run()
        finally:
            if rm.log_dir_moves.get(tp) is move:
                del rm.log_dir_moves[tp]

    move.task = asyncio.get_running_loop().create_task(run())


def future_offset_lag(rm: ReplicaManager, topic: str, partition: int) -> tuple[str, int] | None:
    """(destination dir, offset lag) of a running move of ``topic-partition``, else None."""
    move = rm.log_dir_moves.get(TopicPartition(topic, partition))
    if move is None or move.done:
        return None
    return str(move.dest_root), move.offset_lag()
