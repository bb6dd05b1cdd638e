"""AlterReplicaLogDirs (key 34), versions 0-2: move partitions between this broker's log
directories (KIP-113, JBOD).

Each partition named under a ``path`` is moved there while it keeps serving: a future copy
catches up in the background and then replaces the current log (``log/alter_log_dirs.py``).
It needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED on every partition).
Errors, per partition, as Kafka's ``ReplicaManager.alterReplicaLogDirs``: a path that is not
one of ``log.dirs`` is LOG_DIR_NOT_FOUND; an offline destination directory or partition is
KAFKA_STORAGE_ERROR; a partition this broker does not host is REPLICA_NOT_AVAILABLE. A
partition already in the destination answers NONE and nothing happens; asking for another
destination while a move is running cancels it and starts the new one. v2 is flexible.
"""

from __future__ import annotations

from kafka.protocol.admin import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode, KafkaError

from ..replica.log_dirs import alter_replica_log_dir
from ..security.acl import ALTER, CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, Requires
from . import RequestContext, api


@api(ApiKey.ALTER_REPLICA_LOG_DIRS, versions=(0, 2), authz=(
    Requires(ALTER, CLUSTER, CLUSTER_DENIED, "every partition"),))
async def handle_alter_replica_log_dirs(ctx: RequestContext, req: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    rm = ctx.broker.replica_manager
    R = ctx.response_class
    TopicR = R.AlterReplicaLogDirTopicResult
    PartR = TopicR.AlterReplicaLogDirPartitionResult
    allowed = ctx.authorize(ALTER, CLUSTER, CLUSTER_NAME)
    results: dict[str, list[DataContainer]] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                code = ErrorCode.NONE if allowed else CLUSTER_DENIED
                try:
                    if allowed:
                        alter_replica_log_dir(rm, t.name, p, d.path)
                except KafkaError as e:
                    code = e.code
                results.setdefault(t.name, []).append(PartR(partition_index=p, error_code=int(code)))
    return R(throttle_time_ms=0, results=[TopicR(topic_name=n, partitions=ps) for n, ps in results.items()])
