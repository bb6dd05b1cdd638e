"""What a broker in a cluster knows of the whole cluster (Kafka's ``MetadataCache``).

Filled only by the controller's UpdateMetadata requests (and read by Metadata, FindCoordinator,
DescribeCluster and the replica fetchers): the live brokers with their endpoints and racks, the
active controller, and every partition's leader, leader epoch, ISR, replicas and offline
replicas. A request with an older controller epoch than the last one applied is refused by the
handler before it reaches here. The single embedded broker has no cache: it answers from its
own partitions.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.inter_broker import UpdateMetadataRequest

from .zk_data import BrokerEndpoint, BrokerInfo


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline: tuple[int, ...]
    zk_version: int = 0


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.brokers: dict[int, BrokerInfo] = {}
        self.partitions: dict[str, dict[int, PartitionMetadata]] = {}
        self.controller_id = -1
        self.controller_epoch = 0
        self.ready = False  # an UpdateMetadata has been applied

    def apply_update_metadata(self, r: UpdateMetadataRequest) -> None:
        brokers: dict[int, BrokerInfo] = {}
        for b in r.live_brokers:
            eps = tuple(BrokerEndpoint(e.listener or "PLAINTEXT", e.host, e.port) for e in b.endpoints)
            brokers[b.id] = BrokerInfo(b.id, eps, b.rack)
        parts: dict[str, dict[int, PartitionMetadata]] = {}
        for t in r.topic_states:
            tp = parts.setdefault(t.topic_name, {})
            for p in t.partition_states:
                tp[p.partition_index] = PartitionMetadata(p.leader, p.leader_epoch, tuple(p.isr),
                                                          tuple(p.replicas), tuple(p.offline_replicas or ()),
                                                          p.zk_version)
        self.brokers = brokers
        self.partitions = parts
        self.controller_id = r.controller_id
        self.controller_epoch = r.controller_epoch
        self.ready = True

    def partition(self, topic: str, index: int) -> PartitionMetadata | None:
        return self.partitions.get(topic, {}).get(index)

    def leader_endpoint(self, topic: str, index: int, listener: str | None = None) -> BrokerEndpoint | None:
        pm = self.partition(topic, index)
        if pm is None or pm.leader < 0 or pm.leader not in self.brokers:
            return None
        return self.brokers[pm.leader].endpoint(listener)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers
