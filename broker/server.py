"""The composition root: the Broker that owns the broker's state and assembles its parts.

The network layer is :mod:`broker.network`: an :class:`~broker.network.acceptor.Acceptor` per
listener (connection quotas, TLS handshake), a :class:`~broker.network.connection.KafkaConnection`
per client (framing, the per-connection request pipeline, responses in request order), and the
:class:`~broker.network.request_channel.RequestChannel` that turns each frame into a response by
calling the handlers of :mod:`broker.apis`. The Broker builds them and passes itself as what they
read (``NetworkHost``, ``RequestHost``); they never import this module.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import logging
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from groupcoord.coordinator import GroupCoordinator
from groupcoord.share.state import SHARE_STATE_TOPIC, ShareCoordinator
from log.cleaner import BrokerLogCleaner
from txn.coordinator import TransactionCoordinator
from txn.producer_ids import ProducerIdManager

from . import apis
from .apis import RequestContext
from .auto_topic_creation import ensure_internal_topic
from .cluster.metadata import TopicRegistry
from .cluster.support import LocalMetadataSupport, MetadataSupport
from .config.dynamic import DynamicBrokerConfigs
from .config.properties import BrokerConfig, Listener
from .coordinators.groups import start_group_coordinator
from .coordinators.share import ShareLeadership, start_share_coordinator
from .coordinators.transactions import (
    TransactionMarkerWriter,
    TransactionVerifier,
    start_transaction_coordinator,
)
from .group_configs import GroupConfigStore
from .hooks import RequestHook
from .metrics import BrokerMetrics, start_metrics
from .network.acceptor import Acceptor
from .network.connection import KafkaConnection
from .network.connection_quotas import ConnectionQuotas
from .network.request_channel import RequestChannel
from .replica import trace
from .replica.fetch_session import FetchSessionCache
from .replica.replica_manager import ReplicaManager
from .schema_registry.validation import stop_schema_view
from .security.authorizer import AclAuthorizer, configure_authorizer
from .security.manager import BrokerSecurity
from .security.quotas import ClientQuotaManager, configure_quotas
from .share.manager import ShareConfig, SharePartitionManager

if TYPE_CHECKING:
    from .cluster.zk.cluster import ZkMetadataSupport
    from .schema_registry.server import SchemaRegistry

log = logging.getLogger("samsa.server")


class Sidecar(Protocol):
    """A service that shares the broker's lifetime but reads it only over the Kafka protocol (the
    web console, ``broker/console/``): handed in by whoever runs the broker."""

    async def start(self, kafka_ready: asyncio.Event) -> None: ...

    async def stop(self) -> None: ...


class Broker:
    """The composition root (Kafka's ``BrokerServer``): builds the broker's services from its
    config, starts them in order and stops them in reverse.

    Built here, before anything runs: the topic registry (ZooKeeper's in a cluster), the replica
    manager, the fetch sessions, the connection quotas and security (listeners' TLS and SASL).
    Built by :meth:`start`, in this order: the logs, dynamic configs, authorizer and client quotas,
    group configs, producer ids, the group coordinator, the share coordinator and its partition
    manager, the transaction coordinator (with its marker writer and KIP-890 verifier), the log
    cleaner, metrics, the sidecars, the schema registry, then the listeners. A part
    that is off by configuration (metrics, authorizer, schema registry, the cluster) is None.
    """

    def __init__(self, config: BrokerConfig, request_hook: RequestHook | None = None,
                 sidecars: Sequence[Sidecar] = ()) -> None:
        self.config = config
        # Tests and fault switches reach into the request dispatch here (broker/hooks.py)
        self.request_hook = request_hook
        self.sidecars = list(sidecars)
        self.broker_id = config.broker_id
        self.registry = apis.load_all()
        # Frames to responses for every connection; handlers see this broker in their RequestContext.
        self.request_channel = RequestChannel(self, functools.partial(RequestContext, self))
        first_dir = config.log_dirs[0]
        self.inter_broker_listener: str | None = str(config.get("inter.broker.listener.name") or "") or None
        if self.inter_broker_listener is None and config.get("security.inter.broker.protocol"):
            # Kafka: security.inter.broker.protocol=X means the listener named X
            self.inter_broker_listener = str(config.get("security.inter.broker.protocol")).strip().upper()
        # The one seam between single broker and cluster (Kafka's MetadataSupport). Cluster mode
        # (zookeeper.connect set): ZooKeeper holds the metadata and the controller decides leaders
        # (broker.cluster.zk.cluster); otherwise a single broker, a cluster of one.
        zk_support: ZkMetadataSupport | None = None
        if str(config.get("zookeeper.connect") or "").strip():
            # Only a cluster broker loads the ZooKeeper implementation (kazoo, the controller, the
            # replica fetchers): ~15 ms of CPU at import that every single broker's start would pay.
            from .cluster.zk.cluster import ZkMetadataSupport  # noqa: PLC0415

            zk_support = ZkMetadataSupport(self)
        self.topics: TopicRegistry = zk_support.topics if zk_support is not None else \
            TopicRegistry(first_dir / "samsa-metadata.json")
        self.replica_manager = ReplicaManager(config, self.topics)
        self.metadata_support: MetadataSupport = zk_support if zk_support is not None else \
            LocalMetadataSupport(config, self.topics, self.replica_manager)
        self.topics.listeners.append(self.replica_manager.on_topic_event)
        self.connections: set[KafkaConnection] = set()
        self.acceptors: list[Acceptor] = []
        self.connection_quotas = ConnectionQuotas(config, [lst.name for lst in config.listeners],
                                                  self.inter_broker_listener)
        self.fetch_sessions = FetchSessionCache(config.int("max.incremental.fetch.session.cache.slots"))
        # the listeners' TLS and SASL: a bad certificate or SASL setting stops us here
        self.security = BrokerSecurity(config)
        # Built by start(), in this order, once the logs are loaded (as Kafka's BrokerServer
        # assigns its services in startup()); requests arrive only after, the listeners open last.
        # Optional by configuration: None when off.
        self.authorizer: AclAuthorizer | None = None  # authorizer.class.name
        self.metrics: BrokerMetrics | None = None  # metrics.listener; None: nothing is counted
        self.schema_registry: SchemaRegistry | None = None  # schema.registry.listeners
        # Always there once started.
        self.quotas: ClientQuotaManager
        self.group_configs: GroupConfigStore
        self.producer_ids: ProducerIdManager
        self.group_coordinator: GroupCoordinator
        self.share_coordinator: ShareCoordinator
        self.share_partition_manager: SharePartitionManager
        self.txn_markers: TransactionMarkerWriter
        self.txn_coordinator: TransactionCoordinator
        self.txn_verifier: TransactionVerifier
        self.log_cleaner: BrokerLogCleaner
        # what stop() undoes, in reverse: (what, how), pushed as each service starts
        self._running: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        self.started = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = asyncio.Event()

    @property
    def cluster_id(self) -> str:
        return self.topics.cluster_id

    @property
    def advertised(self) -> Listener:
        return self.config.advertised_listeners[0]

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        t0 = time.monotonic()
        config = self.config
        security = self.security
        for d in config.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass  # the LogManager takes an unusable log dir offline (JBOD)
        await self.metadata_support.connect()
        self.topics.load()
        self._init_meta_properties()
        self.replica_manager.startup()
        DynamicBrokerConfigs.attach(self)  # KIP-226 dynamic broker configs survive restarts
        self.connection_quotas.reconfigure(config)  # with the dynamic max.connections* applied
        security.reconfigure()  # TLS listeners whose keystores were set dynamically (KIP-226)
        self._start_authorizer_and_quotas(security)
        self.group_configs = GroupConfigStore.load(config.log_dirs[0], self.metadata_support)  # read by the coordinators
        self.producer_ids = self.metadata_support.producer_id_manager()
        await self._start_services()
        loop = asyncio.get_running_loop()
        for lst in config.listeners:
            acceptor = Acceptor(self, self.request_channel, lst.name, security.listeners[lst.name])
            await acceptor.bind(lst.host, lst.port)
            self.acceptors.append(acceptor)
        self._tasks.append(loop.create_task(self._retention_loop()))
        await self.metadata_support.start()
        self.started.set()
        addrs = ", ".join(f"{lst.host}:{lst.port}" for lst in config.listeners)
        log.info("Samsa broker %d started, listening on %s (cluster id %s, log dirs %s) in %.0f ms",
                 self.broker_id, addrs, self.cluster_id,
                 ",".join(str(d) for d in config.log_dirs), (time.monotonic() - t0) * 1000)

    def _start_authorizer_and_quotas(self, security: BrokerSecurity) -> None:
        support = self.metadata_support
        zk = support.zookeeper  # ACLs, quotas and SCRAM credentials live in ZooKeeper in a cluster
        self.authorizer = configure_authorizer(self.config, zk)
        self.quotas = quotas = configure_quotas(self.config, zk, support.entity_config_listeners)
        # IP quotas (KIP-612) are enforced where connections are accepted
        quotas.ip_listeners.append(self.connection_quotas.update_ip_quotas)
        self.connection_quotas.update_ip_quotas(quotas.ip_configs)
        if zk is not None:
            security.credentials.use_zookeeper(zk, support.entity_config_listeners)

    async def _start_services(self) -> None:
        """The services beside the partitions, in dependency order (stopped in reverse by
        :meth:`_stop_services`)."""
        config, rm, topics = self.config, self.replica_manager, self.topics
        clustered = self.metadata_support.clustered
        running = self._running
        self.group_coordinator = groups = await start_group_coordinator(
            config, rm, topics, self.group_configs.overrides, clustered)
        running.append(("the group coordinator", groups.shutdown))
        self.share_coordinator = share = await start_share_coordinator(
            config, rm, topics, lambda: ensure_internal_topic(self, SHARE_STATE_TOPIC), clustered)
        share_config = ShareConfig.from_broker(config)
        share_config.group_overrides = self.group_configs.overrides
        self.share_partition_manager = manager = SharePartitionManager(rm, self.metadata_support, share, share_config)
        manager.start()
        running.append(("the share partition manager", manager.stop))
        if clustered:
            rm.leadership_listeners.append(ShareLeadership(share, manager))
        groups.share_member_removed.append(manager.on_member_removed)
        groups.share_group_deleted.append(manager.on_group_deleted)
        self.txn_markers = markers = TransactionMarkerWriter(rm, self.broker_id, self.metadata_support, groups)
        self.txn_coordinator = txn = await start_transaction_coordinator(
            config, rm, topics, self.producer_ids, markers, groups.config.offsets_topic_num_partitions, clustered)
        running.append(("the transaction coordinator", txn.stop))
        self.txn_verifier = TransactionVerifier(txn, self.broker_id, self.metadata_support)
        self.log_cleaner = cleaner = BrokerLogCleaner(
            config, lambda: [(p.tp.topic, p.tp.partition, p.log) for p in rm.partitions.values()])
        cleaner.start()
        running.append(("the log cleaner", cleaner.stop))
        # metrics read the services above (a scrape always finds them); counting starts here,
        # before any listener opens
        self.metrics = metrics = await start_metrics(self)
        if metrics is not None:
            running.append(("the metrics", metrics.close))
        for sidecar in self.sidecars:
            await sidecar.start(self.started)
            running.append((type(sidecar).__name__, sidecar.stop))
        # Produce's schema id checks read _schemas through a view when no registry runs here
        running.append(("the schema validation view", lambda: stop_schema_view(self)))
        if str(config.get("schema.registry.listeners") or "").strip():
            # Only a broker that serves the registry loads it: its libraries (aiokafka, h11, fastavro,
            # jsonschema, protobuf) cost ~100 ms of CPU at import, paid by every broker's start otherwise.
            from .schema_registry.server import start_schema_registry  # noqa: PLC0415

            self.schema_registry = await start_schema_registry(self)

    async def _stop_services(self) -> None:
        """:meth:`_start_services`' services, in reverse (the schema registry is stopped first,
        by :meth:`stop`, while the listeners still answer its clients)."""
        while self._running:
            what, stop = self._running.pop()
            try:
                await stop()
            except Exception:
                log.exception("Error stopping %s", what)

    def _init_meta_properties(self) -> None:
        if not self.topics.cluster_id:
            self.topics.cluster_id = str(self.config.get("cluster.id") or "") or \
                base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            self.topics._persist()
        for d in self.config.log_dirs:
            mp = d / "meta.properties"
            try:
                if not mp.exists():
                    mp.write_text(f"version=1\ncluster.id={self.cluster_id}\nnode.id={self.broker_id}\n")
            except OSError as e:
                log.error("Cannot write %s: %s", mp, e)

    async def _retention_loop(self) -> None:
        interval = self.config.int("log.retention.check.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.replica_manager.retention_pass()
            except Exception:
                log.exception("Retention pass failed")

    async def stop(self) -> None:
        log.info("Samsa broker %d shutting down", self.broker_id)
        await self.metadata_support.controlled_shutdown()
        if self.schema_registry is not None:
            # its Kafka clients talk to this broker: they leave the group while it still answers
            registry, self.schema_registry = self.schema_registry, None
            await registry.stop()
        for a in self.acceptors:
            a.close()
        for conn in list(self.connections):
            conn.close("broker shutting down")
        for t in self._tasks:
            t.cancel()
        await self._stop_services()
        await self.metadata_support.stop()
        self.replica_manager.shutdown()
        log.info("Samsa broker %d shut down completed", self.broker_id)

    async def serve_forever(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, self._stopping.set)
            except (NotImplementedError, RuntimeError):
                pass
        if os.environ.get("SAMSA_REPLICATION_TRACE"):  # a measuring tool: broker/replica/trace.py
            trace.start(os.environ["SAMSA_REPLICATION_TRACE"])
        await self.start()
        await self._stopping.wait()
        if trace.ON:
            trace.flush()  # what was traced is on disk even if the shutdown is cut short (SIGKILL)
        await self.stop()
