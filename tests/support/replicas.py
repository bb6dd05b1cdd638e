"""What the cluster tests check about replicas: leaders and ISRs as clients see them, and the
bytes each replica holds on disk.

``replica_bytes`` concatenates a partition's ``.log`` segments in offset order: followers roll
their segments on their own (their appends group batches differently), so segment boundaries
may differ between replicas, but the batches, offsets and bytes must not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import SamsaCluster


def admin(cluster: SamsaCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.timeout.ms": 10000})


def create_topic(cluster: SamsaCluster, name: str, partitions: int = 3, rf: int = 3,
                 config: dict[str, str] | None = None) -> None:
    a = admin(cluster)  # must outlive the futures
    fs = a.create_topics([NewTopic(name, partitions, rf, config=config or {})], request_timeout=30)
    for f in fs.values():
        f.result(30)


def partitions(cluster: SamsaCluster, topic: str) -> dict[int, Any]:
    """partition -> confluent PartitionMetadata (leader, replicas, isrs)."""
    md = admin(cluster).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    return dict(t.partitions) if t is not None and t.error is None else {}


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as e:  # a broker restarting may refuse a connection
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def wait_full_isr(cluster: SamsaCluster, topic: str, rf: int, timeout: float = 60) -> dict[int, Any]:
    def full() -> dict[int, Any] | None:
        ps = partitions(cluster, topic)
        ok = ps and all(p.leader >= 0 and len(p.isrs) == rf for p in ps.values())
        return ps if ok else None
    return wait_for(full, timeout, f"every partition of {topic} to have {rf} in-sync replicas")  # type: ignore[no-any-return]


def replica_bytes(data_dir: Path, topic: str, partition: int) -> bytes:
    d = Path(data_dir) / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def assert_replicas_identical(cluster: SamsaCluster, topic: str, parts: int, replicas: dict[int, list[int]],
                              timeout: float = 30) -> None:
    """Every replica of every partition holds the same bytes (waits for followers to catch up)."""
    for p in range(parts):
        def same(p: int = p) -> bool:
            blobs = {b: replica_bytes(cluster[b].data_dir, topic, p) for b in replicas[p]}
            return len(set(blobs.values())) == 1 and len(next(iter(blobs.values()))) > 0
        wait_for(same, timeout, f"the replicas {replicas[p]} of {topic}-{p} to hold identical logs")


def find_coordinator(cluster: SamsaCluster, key: str, key_type: int = 0) -> int:
    """The coordinator broker of a group (key_type 0) or transactional id (1), asking any running
    broker; -1 while none answers."""
    from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

    from .rawclient import RawClient

    for i in cluster.running():
        b = cluster[i]
        try:
            with RawClient(b.host, b.port) as c:
                r = c.roundtrip(FindCoordinatorRequest(key=key, key_type=key_type), 2, FindCoordinatorResponse)
            if r.error_code == 0:
                return int(r.node_id)
        except OSError:
            continue
    return -1
