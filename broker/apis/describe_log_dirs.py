"""DescribeLogDirs (key 35), versions 0-5: the log directories and each partition's size.

One result per ``log.dirs`` entry: every partition stored there (or only those asked for;
``topics = null`` means all) with its size in bytes (the sum of its segment files),
``offset_lag`` 0 (a single broker's logs are never behind a leader); a partition being moved
by AlterReplicaLogDirs (KIP-113) is also listed under its destination with ``is_future_key``
true and the future copy's estimated ``offset_lag``. An offline directory (JBOD) answers
KAFKA_STORAGE_ERROR and lists nothing. v3 adds a top-level
``error_code``; v4 (KIP-827) adds ``total_bytes`` and ``usable_bytes`` of the directory's
file system, from ``os.statvfs``. A directory that cannot be read answers
KAFKA_STORAGE_ERROR for itself only. v2 is flexible. v5 adds ``is_cordoned`` (KIP-1066: a
directory that takes no new partitions); Samsa has no cordoning, so it is always false.
"""

from __future__ import annotations

import os

from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.data_container import DataContainer

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode

from ..replica.log_dirs import future_offset_lag
from ..security.acl import CLUSTER, CLUSTER_DENIED, CLUSTER_NAME, DESCRIBE, Requires
from . import RequestContext, api


@api(ApiKey.DESCRIBE_LOG_DIRS, versions=(0, 5), authz=(
    Requires(DESCRIBE, CLUSTER, CLUSTER_DENIED, "v3+ top-level error; before v3 an empty answer"),))
async def handle_describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    broker = ctx.broker
    R = ctx.response_class
    Result = R.DescribeLogDirsResult
    TopicR = Result.DescribeLogDirsTopic
    PartR = TopicR.DescribeLogDirsPartition
    if not ctx.authorize(DESCRIBE, CLUSTER, CLUSTER_NAME):
        extra_err: dict[str, object] = {"error_code": int(CLUSTER_DENIED)} if ctx.version >= 3 else {}
        return R(throttle_time_ms=0, results=[], **extra_err)
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {}
        for t in req.topics:
            wanted.setdefault(t.topic, set()).update(t.partitions)
    rm = broker.replica_manager
    by_dir: dict[str, dict[str, list[DataContainer]]] = {str(d): {} for d in broker.config.log_dirs}
    for tp, part in sorted(rm.partitions.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        if wanted is not None and tp.partition not in wanted.get(tp.topic, ()):
            continue
        parent = str(part.log.dir.parent)
        size = int(part.log.size_bytes)
        by_dir.setdefault(parent, {}).setdefault(tp.topic, []).append(
            PartR(partition_index=tp.partition, partition_size=size, offset_lag=0, is_future_key=False))
        future = future_offset_lag(rm, tp.topic, tp.partition)
        if future is not None:  # KIP-113: the copy being moved in, with its lag
            by_dir.setdefault(future[0], {}).setdefault(tp.topic, []).append(
                PartR(partition_index=tp.partition, partition_size=size, offset_lag=future[1], is_future_key=True))
    offline = {str(d) for d in rm.log_manager.offline_dirs}
    results = []
    for d, topics in by_dir.items():
        code = ErrorCode.NONE
        total = usable = -1
        try:
            if d in offline:
                raise OSError(f"log dir {d} is offline")
            st = os.statvfs(d)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            code = ErrorCode.KAFKA_STORAGE_ERROR
            topics = {}
        fields: dict[str, object] = {"error_code": int(code), "log_dir": d,
                                  "topics": [TopicR(name=n, partitions=ps) for n, ps in sorted(topics.items())]}
        if ctx.version >= 4:
            fields.update(total_bytes=total, usable_bytes=usable)
        if ctx.version >= 5:
            fields.update(is_cordoned=False)
        results.append(Result(**fields))
    extra: dict[str, object] = {"error_code": 0} if ctx.version >= 3 else {}
    return R(throttle_time_ms=0, results=results, **extra)
