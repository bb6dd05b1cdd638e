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
import signal
import time
import uuid
from typing import Any

from . import apis, security
from .apis import RequestContext
from .cluster.metadata import TopicRegistry
from .cluster.support import LocalMetadataSupport, MetadataSupport
from .cluster.zk.cluster import ZkMetadataSupport
from .config.dynamic import DynamicBrokerConfigs
from .config.properties import BrokerConfig, Listener
from .group_configs import GroupConfigStore
from .hooks import RequestHook
from .network.acceptor import Acceptor
from .network.connection import KafkaConnection
from .network.connection_quotas import ConnectionQuotas
from .network.request_channel import RequestChannel
from .replica.fetch_session import FetchSessionCache
from .replica.replica_manager import ReplicaManager

log = logging.getLogger("samsa.server")

# Modules with ``async start(broker)`` / ``async stop(broker)`` that run beside the partitions,
# started in this order after the logs are loaded and stopped in reverse before they close.
COMPONENTS = ("broker.metrics", "groupcoord.plugin", "broker.share.plugin", "txn.plugin", "log.cleaner", "broker.console",
              "broker.schema_registry")


class Broker:
    """Owns the broker's state: config, topic registry, partitions, coordinators, listeners."""

    def __init__(self, config: BrokerConfig, request_hook: RequestHook | None = None) -> None:
        self.config = config
        # Tests and fault switches reach into the request dispatch here (broker/hooks.py)
        self.request_hook = request_hook
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
        zk_support = ZkMetadataSupport(self) if str(config.get("zookeeper.connect") or "").strip() else None
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
        self.group_coordinator: Any = None
        self.share_coordinator: Any = None  # broker/share/plugin.py
        self.share_partition_manager: Any = None
        self.group_configs: Any = None  # broker/group_configs.py GroupConfigStore
        self.txn_coordinator: Any = None
        self.fetch_sessions = FetchSessionCache(config.int("max.incremental.fetch.session.cache.slots"))
        self.producer_ids: Any = None
        self.metrics: Any = None  # broker.metrics.BrokerMetrics when metrics.listener is set
        self.console: Any = None  # broker/console/, when console.listener is set
        self.schema_registry: Any = None  # broker/schema_registry/, when schema.registry.listeners is set
        self.security: Any = None  # broker.security.manager.BrokerSecurity, built first in start()
        self.authorizer: Any = None  # broker.security: None = no authorizer configured
        self.quotas: Any = None  # broker.security.quotas: None = no client quotas defined
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
        from .security.manager import BrokerSecurity  # noqa: PLC0415

        self.security = BrokerSecurity(self.config)  # a bad certificate or SASL setting stops us here
        for d in self.config.log_dirs:
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass  # the LogManager takes an unusable log dir offline (JBOD)
        await self.metadata_support.connect()
        self.topics.load()
        self._init_meta_properties()
        self.replica_manager.startup()
        DynamicBrokerConfigs.attach(self)  # KIP-226 dynamic broker configs survive restarts
        self.connection_quotas.reconfigure(self.config)  # with the dynamic max.connections* applied
        self.security.reconfigure()  # TLS listeners whose keystores were set dynamically (KIP-226)
        security.configure(self)  # authorizer and client quotas
        GroupConfigStore.attach(self)  # dynamic group configs, read by the coordinators started next
        self.producer_ids = self.metadata_support.producer_id_manager()
        await self._start_components()
        loop = asyncio.get_running_loop()
        for lst in self.config.listeners:
            sec = self.security.listeners[lst.name]
            acceptor = Acceptor(self, self.request_channel, lst.name, sec)
            await acceptor.bind(lst.host, lst.port)
            self.acceptors.append(acceptor)
        self._tasks.append(loop.create_task(self._retention_loop()))
        await self.metadata_support.start()
        self.started.set()
        addrs = ", ".join(f"{lst.host}:{lst.port}" for lst in self.config.listeners)
        log.info("Samsa broker %d started, listening on %s (cluster id %s, log dirs %s) in %.0f ms",
                 self.broker_id, addrs, self.cluster_id,
                 ",".join(str(d) for d in self.config.log_dirs), (time.monotonic() - t0) * 1000)

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

    async def _start_components(self) -> None:
        """Coordinators that live beside the partitions (groups, transactions)."""
        for name in COMPONENTS:
            try:
                mod = __import__(name, fromlist=["start"])
            except ModuleNotFoundError as e:
                if e.name != name:
                    raise
                continue
            start = getattr(mod, "start", None)
            if start is not None:
                await start(self)

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
            from .schema_registry import stop as stop_schema_registry  # noqa: PLC0415

            await stop_schema_registry(self)
        for a in self.acceptors:
            a.close()
        for conn in list(self.connections):
            conn.close("broker shutting down")
        for t in self._tasks:
            t.cancel()
        for name in reversed(COMPONENTS):
            try:
                mod = __import__(name, fromlist=["stop"])
            except ModuleNotFoundError:
                continue
            try:
                stop = getattr(mod, "stop", None)
                if stop is not None:
                    await stop(self)
            except Exception:
                log.exception("Error stopping %s", name)
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
        await self.start()
        await self._stopping.wait()
        await self.stop()
