"""What the registry uses of the broker it runs in, as Protocols: the composition root
(broker/server.py) hands itself to :func:`~broker.schema_registry.server.start_schema_registry`
and to the produce path's validation, and the registry reads only these parts of it."""

from __future__ import annotations

import asyncio
from typing import Protocol

from ..cluster.support import MetadataSupport
from ..config.properties import BrokerConfig, Listener
from ..metrics import BrokerMetrics
from ..replica.replica_manager import ReplicaManager
from ..security.authorizer import AclAuthorizer
from ..security.manager import BrokerSecurity
from .state import RegistryState
from .store import ClientOptions, KafkaStore, client_options


class RunningRegistry(Protocol):
    """A registry served by this broker (:class:`~broker.schema_registry.server.SchemaRegistry`)."""

    state: RegistryState
    store: KafkaStore

    async def stop(self) -> None: ...


class BrokerHost(Protocol):
    config: BrokerConfig
    security: BrokerSecurity
    authorizer: AclAuthorizer | None
    metrics: BrokerMetrics | None
    replica_manager: ReplicaManager
    started: asyncio.Event

    @property
    def schema_registry(self) -> RunningRegistry | None: ...  # this broker's registry, if it runs one

    @property
    def metadata_support(self) -> MetadataSupport: ...  # clustered: replication factor 3 for _schemas

    @property
    def advertised(self) -> Listener: ...


def kafka_client_settings(broker: BrokerHost) -> tuple[str, ClientOptions]:
    """(bootstrap servers, aiokafka options) of the registry's own Kafka clients on a broker:
    ``schema.registry.bootstrap.servers`` (default: the broker's own advertised listener) and the
    ``schema.registry.kafkastore.*`` properties. ValueError names a property it cannot use."""
    prefix = "schema.registry.kafkastore."
    try:
        options = client_options({k[len(prefix):]: str(v) for k, v in broker.config.props.items()
                                  if k.startswith(prefix) and v not in (None, "")})
    except ValueError as e:
        raise ValueError(f"{prefix}{e}") from None
    bootstrap = str(broker.config.get("schema.registry.bootstrap.servers") or "").strip()
    if not bootstrap:
        adv = broker.advertised
        bootstrap = f"{'127.0.0.1' if adv.host in ('0.0.0.0', '::', '') else adv.host}:{adv.port}"
    return bootstrap, options
