"""What the metrics read from the broker that starts them.

The composition root (broker/server.py, a layer above this package) hands itself to
:func:`broker.metrics.start`; the collectors see it only through :class:`MetricsHost`, whose
members are the broker's typed services. Read-only members are properties, so a broker may hold
a narrower type (a coordinator that is always there) and still be a host.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Protocol

from broker.cluster.metadata import TopicRegistry
from broker.cluster.support import MetadataSupport
from broker.config.properties import BrokerConfig
from broker.network.connection_quotas import ConnectionQuotas
from broker.replica.fetch_session import FetchSessionCache
from broker.replica.replica_manager import ReplicaManager
from groupcoord.coordinator import GroupCoordinator
from log.cleaner import BrokerLogCleaner
from protocol.framing import FrameDecoder
from txn.coordinator import TransactionCoordinator


class MetricsConnection(Protocol):
    """A client connection as the socket-server metrics count it."""

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def decoder(self) -> FrameDecoder: ...


class MetricsHost(Protocol):
    """The broker as its collectors see it: the composition root starts the metrics once the
    services they read (coordinators, log cleaner) are up."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def broker_id(self) -> int: ...

    @property
    def topics(self) -> TopicRegistry: ...

    @property
    def connections(self) -> Collection[MetricsConnection]: ...

    @property
    def connection_quotas(self) -> ConnectionQuotas: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def fetch_sessions(self) -> FetchSessionCache: ...

    @property
    def metadata_support(self) -> MetadataSupport: ...

    @property
    def group_coordinator(self) -> GroupCoordinator: ...

    @property
    def txn_coordinator(self) -> TransactionCoordinator: ...

    @property
    def log_cleaner(self) -> BrokerLogCleaner: ...
