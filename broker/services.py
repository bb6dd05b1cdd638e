"""What the request layer sees of the broker: the services the composition root built.

``broker/apis/`` handlers reach the broker through ``ctx.broker``, typed as
:class:`BrokerServices`, never as the concrete ``broker.server.Broker`` (which imports the
handler registry: typing the handlers against it was an import circle). The root satisfies this
Protocol structurally; mypy checks that where it hands itself to a ``RequestContext``.

Imports: the services' own modules (replica manager, coordinators, cluster, security, config,
metrics, schema registry) for their types; never the request layer, the network layer or the
root.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

from groupcoord.coordinator import GroupCoordinator
from groupcoord.share.state import ShareCoordinator
from txn.coordinator import TransactionCoordinator
from txn.producer_ids import ProducerIdManager

from .cluster.metadata import TopicRegistry
from .cluster.support import MetadataSupport
from .config.properties import BrokerConfig, Listener
from .coordinators.transactions import TransactionMarkerWriter, TransactionVerifier
from .group_configs import GroupConfigStore
from .metrics import BrokerMetrics
from .network.connection_quotas import ConnectionQuotas
from .replica.fetch_session import FetchSessionCache
from .replica.replica_manager import ReplicaManager
from .security.authorizer import AclAuthorizer
from .security.manager import BrokerSecurity
from .security.quotas import ClientQuotaManager
from .share.manager import SharePartitionManager

if TYPE_CHECKING:  # loaded only by a broker that serves the registry
    from .schema_registry.server import SchemaRegistry


class BrokerServices(Protocol):
    """The broker's services, as handlers use them. Optional parts are None when configured off."""

    config: BrokerConfig
    broker_id: int
    topics: TopicRegistry
    replica_manager: ReplicaManager
    fetch_sessions: FetchSessionCache
    connection_quotas: ConnectionQuotas
    security: BrokerSecurity
    authorizer: AclAuthorizer | None  # authorizer.class.name
    quotas: ClientQuotaManager
    group_configs: GroupConfigStore
    producer_ids: ProducerIdManager
    metrics: BrokerMetrics | None  # metrics.listener
    group_coordinator: GroupCoordinator
    share_coordinator: ShareCoordinator
    share_partition_manager: SharePartitionManager
    txn_coordinator: TransactionCoordinator
    txn_markers: TransactionMarkerWriter
    txn_verifier: TransactionVerifier
    schema_registry: SchemaRegistry | None  # schema.registry.listeners
    started: asyncio.Event  # set once the listeners are open
    # Single broker or cluster member behind one interface (Kafka's MetadataSupport)
    metadata_support: MetadataSupport
    inter_broker_listener: str | None  # inter.broker.listener.name (or security.inter.broker.protocol)

    @property
    def cluster_id(self) -> str: ...

    @property
    def advertised(self) -> Listener: ...
