"""One seam between the request layer and the way metadata is kept (Kafka's ``MetadataSupport``).

Kafka's broker had two implementations of one interface, ``ZkSupport`` and ``RaftSupport``, so
that ``KafkaApis`` never asked which mode it ran in. Samsa has the same shape:
:class:`LocalMetadataSupport` is a single broker, a cluster of one whose topic registry is a
local file and whose every partition it leads; :class:`broker.cluster.zk.cluster.ZkMetadataSupport`
is a member of a ZooKeeper-mode cluster, whose metadata comes from ZooKeeper and the
controller's UpdateMetadata. Handlers and services call the operations below and never branch
on the mode.

Rules: nothing here blocks the event loop: ZooKeeper reads and writes run on ZooKeeper request
threads and are awaited for at most 10 s (``KafkaZkClient.call``); a ZooKeeper that does not
answer is ``KafkaError(REQUEST_TIMED_OUT)`` for the one request that needed it, never a stalled
broker. An operation only the controller may perform raises ``KafkaError(NOT_CONTROLLER)`` on a
broker that is not the active controller.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from kafka.protocol.api_message import ApiMessage

from protocol.errors import ErrorCode, KafkaError
from protocol.inter_broker import UpdateMetadataRequest
from txn.producer_ids import BLOCK_FILE, ProducerIdManager

from ..config.properties import BrokerConfig
from ..replica.replica_manager import ReplicaManager, TopicPartition
from ..security.listeners import protocol_map
from .metadata import TopicInfo, TopicRegistry
from .metadata_cache import PartitionMetadata
from .zk_data import BrokerEndpoint, BrokerInfo

if TYPE_CHECKING:  # a single broker imports no ZooKeeper client
    from .zk.client import KafkaZkClient

# (code, message) of one partition's answer
PartitionResult = tuple[ErrorCode, str | None]
# partition -> (replicas, adding replicas, removing replicas): an ongoing reassignment
Reassignment = tuple[list[int], list[int], list[int]]


class ClusterBroker(Protocol):
    """What the cluster's services (the ZooKeeper membership, the controller, the replica
    fetchers, the finalized features) read of the broker they serve."""

    @property
    def broker_id(self) -> int: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def topics(self) -> TopicRegistry: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def inter_broker_listener(self) -> str | None: ...

    @property
    def metadata_support(self) -> MetadataSupport: ...


class MetadataSupport(ABC):
    """The cluster as the request layer sees it; see the module docstring."""

    broker_id: int
    topics: TopicRegistry

    # --- the brokers -------------------------------------------------------------------------
    @abstractmethod
    def live_brokers(self) -> list[BrokerInfo]:
        """The live brokers with their endpoints and racks, by id (this broker alone until a
        cluster member has heard from the controller)."""

    @abstractmethod
    def live_broker(self, broker_id: int) -> BrokerInfo | None:
        """A live broker's endpoints and rack, or None."""

    @abstractmethod
    def controller_id(self) -> int:
        """The active controller's broker id (-1 while there is none)."""

    @abstractmethod
    async def registered_broker_ids(self) -> list[int]:
        """The brokers registered now, for replica placement and validating manual assignments."""

    @abstractmethod
    async def is_cluster_member(self, broker_id: int) -> bool:
        """Inter-broker requests (follower fetches, the controller's requests) are honoured only
        from brokers registered in this cluster; a single broker has no peers."""

    # --- partitions --------------------------------------------------------------------------
    @abstractmethod
    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        """Leader, leader epoch, ISR, replicas and offline replicas of a partition, None if unknown."""

    def leader_of(self, topic: str, partition: int) -> int:
        pm = self.partition(topic, partition)
        return pm.leader if pm is not None else -1

    def leader_endpoint(self, topic: str, partition: int, listener: str | None = None) -> BrokerEndpoint | None:
        pm = self.partition(topic, partition)
        info = self.live_broker(pm.leader) if pm is not None and pm.leader >= 0 else None
        return info.endpoint(listener) if info is not None else None

    @property
    @abstractmethod
    def clustered(self) -> bool:
        """Whether this broker is a member of a multi-broker cluster: partition leadership is
        decided by a controller and moves between brokers (coordinators load and unload with
        the leadership of their partitions instead of owning every partition from start-up),
        partitions may have followers (an acks=all produce waits for them), and internal
        topics are created with their configured replication."""

    @property
    @abstractmethod
    def zookeeper(self) -> KafkaZkClient | None:
        """The ZooKeeper client, when the metadata lives in ZooKeeper: the stores kept there
        (ACLs, client quotas, SCRAM credentials, group configs, finalized features) use it;
        None on a single broker, whose stores are files beside its logs."""

    # (entity type, name) observers of changed dynamic configs of entities other than topics
    # (users, clients, ips, groups): ZooKeeper's /config/changes notices; a single broker's
    # stores change only through this broker, so nothing is announced there.
    entity_config_listeners: list[Callable[[str, str], object]]

    @abstractmethod
    def apply_update_metadata(self, req: UpdateMetadataRequest) -> None:
        """The controller's UpdateMetadata (a request only a cluster member accepts)."""

    @abstractmethod
    def controller_metrics(self) -> tuple[int, int]:
        """(ActiveControllerCount, OfflinePartitionsCount) as Kafka's controller reports them."""

    @abstractmethod
    async def send_to_broker(self, broker_id: int, request: ApiMessage, version: int,
                             timeout: float = 30.0) -> ApiMessage:
        """An inter-broker request to a live broker; ConnectionError when it cannot be reached."""

    # --- topics ------------------------------------------------------------------------------
    @abstractmethod
    async def create_topic(self, name: str, num_partitions: int, configs: dict[str, str], *,
                           replication_factor: int = -1,
                           assignment: dict[int, list[int]] | None = None) -> TopicInfo:
        """Create a topic (KafkaError on a name taken, a bad replication factor or assignment)."""

    @abstractmethod
    async def delete_topic(self, name: str) -> TopicInfo:
        """Delete a topic (in a cluster: queue its deletion for the controller)."""

    @abstractmethod
    async def add_partitions(self, name: str, new_total: int, assignment: dict[int, list[int]] | None) -> None:
        """Grow a topic to ``new_total`` partitions."""

    @abstractmethod
    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a topic's config overrides."""

    @abstractmethod
    async def refresh_topic(self, name: str) -> TopicInfo | None:
        """Re-read a topic that another broker may just have created; None if it does not exist."""

    @abstractmethod
    async def await_topic_metadata(self, topics: dict[str, int], *, present: bool, timeout: float) -> list[int]:
        """Until every live broker lists ``topics`` (name -> partitions) with leaders (``present``)
        or no longer lists them; returns the brokers that had not caught up within ``timeout``."""

    # --- the controller's operations ---------------------------------------------------------
    @abstractmethod
    def require_controller(self) -> None:
        """Raise NOT_CONTROLLER unless this broker may act as the controller."""

    @abstractmethod
    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool,
                            timeout: float) -> dict[tuple[str, int], ErrorCode]:
        """Preferred (or unclean) leader election for ``partitions`` (None: all)."""

    @abstractmethod
    async def alter_reassignments(self, moves: dict[tuple[str, int], list[int] | None], allow_rf_change: bool,
                                  timeout: float) -> dict[tuple[str, int], PartitionResult]:
        """Start (a replica list) or cancel (None) partition reassignments."""

    @abstractmethod
    def list_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        """The ongoing partition reassignments."""

    @abstractmethod
    async def shut_down_broker(self, broker_id: int, timeout: float) -> list[tuple[str, int]]:
        """The controller's part of ``broker_id``'s controlled shutdown: move its leaderships
        away; returns the partitions it still leads (no other in-sync replica to take them)."""

    # --- lifecycle and services --------------------------------------------------------------
    @abstractmethod
    def producer_id_manager(self) -> ProducerIdManager:
        """Where producer-id blocks come from (a local file, or ZooKeeper's shared counter)."""

    @abstractmethod
    async def producer_ids_ready(self) -> None:
        """Until a producer id can be handed out without waiting (KafkaError
        COORDINATOR_LOAD_IN_PROGRESS, which producers retry, when none comes in time)."""

    @abstractmethod
    async def connect(self) -> None:
        """Before the logs are loaded: join the metadata store (and agree on the cluster id)."""

    @abstractmethod
    async def start(self) -> None:
        """After the logs are loaded and the listeners are up."""

    @abstractmethod
    async def controlled_shutdown(self) -> None:
        """Before the listeners close: hand leaderships to other brokers."""

    @abstractmethod
    async def stop(self) -> None:
        """After the services stopped."""


def advertised_broker_info(config: BrokerConfig) -> BrokerInfo:
    """This broker as others see it: its advertised listeners with their security protocols
    (``listener.security.protocol.map``) and its ``broker.rack``, as Kafka registers it."""
    protocols = protocol_map(config)
    eps = tuple(BrokerEndpoint(lst.name, lst.host, lst.port,
                               protocols[lst.name].value if lst.name in protocols else "PLAINTEXT")
                for lst in config.advertised_listeners)
    return BrokerInfo(config.broker_id, eps, str(config.get("broker.rack") or "") or None)


class LocalMetadataSupport(MetadataSupport):
    """A single broker: a cluster of one. The topic registry is a local file, this broker is the
    controller and leads every partition it has."""

    def __init__(self, config: BrokerConfig, topics: TopicRegistry, replica_manager: ReplicaManager) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.topics = topics
        self.replica_manager = replica_manager
        self.entity_config_listeners = []
        self._producer_id_block = config.log_dirs[0] / BLOCK_FILE
        self._producer_ids: ProducerIdManager | None = None

    def live_brokers(self) -> list[BrokerInfo]:
        return [advertised_broker_info(self.config)]

    def live_broker(self, broker_id: int) -> BrokerInfo | None:
        return advertised_broker_info(self.config) if broker_id == self.broker_id else None

    def controller_id(self) -> int:
        return self.broker_id

    async def registered_broker_ids(self) -> list[int]:
        return [self.broker_id]

    async def is_cluster_member(self, broker_id: int) -> bool:
        return False

    def partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        """From the local replica; a partition without one (its log dir failed, JBOD) has no
        leader and names this broker as its offline replica."""
        info = self.topics.get(topic)
        rm = self.replica_manager
        if info is None or not 0 <= partition < info.num_partitions:
            return None
        tp = TopicPartition(topic, partition)
        part = rm.partitions.get(tp)
        if part is None:
            offline = (self.broker_id,) if tp in rm.offline_partitions else ()
            return PartitionMetadata(-1, -1, (), offline, offline)
        return PartitionMetadata(part.leader_id, part.leader_epoch, tuple(part.isr), tuple(part.replicas), ())

    def leader_of(self, topic: str, partition: int) -> int:
        return self.broker_id  # the only broker leads every partition (a missing one fails where it is used)

    @property
    def clustered(self) -> bool:
        return False

    @property
    def zookeeper(self) -> KafkaZkClient | None:
        return None

    def apply_update_metadata(self, req: UpdateMetadataRequest) -> None:
        return None  # refused before: a single broker has no controller but itself

    def controller_metrics(self) -> tuple[int, int]:
        return 0, 0

    async def send_to_broker(self, broker_id: int, request: ApiMessage, version: int,
                             timeout: float = 30.0) -> ApiMessage:
        raise ConnectionError(f"broker {broker_id} is not alive (a single broker has no peers)")

    async def create_topic(self, name: str, num_partitions: int, configs: dict[str, str], *,
                           replication_factor: int = -1,
                           assignment: dict[int, list[int]] | None = None) -> TopicInfo:
        return self.topics.create(name, num_partitions, configs)

    async def delete_topic(self, name: str) -> TopicInfo:
        return self.topics.delete(name)

    async def add_partitions(self, name: str, new_total: int, assignment: dict[int, list[int]] | None) -> None:
        self.topics.add_partitions(name, new_total, assignment)

    async def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.topics.set_configs(name, configs)

    async def refresh_topic(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    async def await_topic_metadata(self, topics: dict[str, int], *, present: bool, timeout: float) -> list[int]:
        return []  # the only broker applied the change before answering

    def require_controller(self) -> None:
        return None

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None, unclean: bool,
                            timeout: float) -> dict[tuple[str, int], ErrorCode]:
        out: dict[tuple[str, int], ErrorCode] = {}
        for topic, p in partitions or ():
            info = self.topics.get(topic)
            out[(topic, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None or \
                not 0 <= p < info.num_partitions else ErrorCode.ELECTION_NOT_NEEDED
        return out

    async def alter_reassignments(self, moves: dict[tuple[str, int], list[int] | None], allow_rf_change: bool,
                                  timeout: float) -> dict[tuple[str, int], PartitionResult]:
        out: dict[tuple[str, int], PartitionResult] = {}
        me = self.broker_id
        for (topic, p), replicas in moves.items():
            info = self.topics.get(topic)
            if info is None or not 0 <= p < info.num_partitions:
                out[(topic, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unknown partition {topic}-{p}"
            elif replicas is None:
                out[(topic, p)] = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment is in progress."
            elif replicas != [me]:
                out[(topic, p)] = ErrorCode.INVALID_REPLICA_ASSIGNMENT, \
                    f"Replica assignment {replicas} names brokers that are not registered (only {me} is)"
            else:
                out[(topic, p)] = ErrorCode.NONE, None
        return out

    def list_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        return {}

    async def shut_down_broker(self, broker_id: int, timeout: float) -> list[tuple[str, int]]:
        return []  # nobody to hand leaderships to

    async def producer_ids_ready(self) -> None:
        return None  # a local file

    async def connect(self) -> None:
        return None

    async def start(self) -> None:
        return None

    async def controlled_shutdown(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def producer_id_manager(self) -> ProducerIdManager:
        if self._producer_ids is None:
            self._producer_ids = ProducerIdManager(self._producer_id_block)
        return self._producer_ids


def not_controller() -> KafkaError:
    return KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the active controller.")


