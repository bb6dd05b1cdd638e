"""Security: authentication (listeners, TLS, SASL PLAIN/SCRAM), authorization, quotas.

Theory of operation. Every listener in ``listeners`` maps to one of Kafka's four security
protocols through ``listener.security.protocol.map`` (:mod:`.listeners`). A listener whose
protocol is SSL or SASL_SSL gets an ``ssl.SSLContext`` built from Kafka's ``ssl.*`` settings,
each overridable per listener as ``listener.name.<name>.<setting>`` (:mod:`.tls`); the context
is reloaded in place when AlterConfigs changes a keystore or truststore, so new connections
get the new certificate while open ones keep theirs. A connection on a SASL listener gets a
:class:`~.authenticator.SaslAuthenticator` that owns every frame until authentication
succeeds: only ApiVersions, SaslHandshake and SaslAuthenticate pass; anything else closes the
connection. The mechanisms are sans-io state machines (:mod:`.plain`, :mod:`.scram`); SCRAM
credentials are stored salted by :mod:`.credentials`.

The outcome is one string per connection, ``KafkaConnection.principal`` ("User:alice";
"User:ANONYMOUS" when nothing authenticated the client; the client certificate's distinguished
name mapped by ``ssl.principal.mapping.rules`` on SSL with client auth), which the authorizer
reads through ``RequestContext.principal``.

Invariants: a PLAINTEXT listener's connections carry no authenticator, so the request hot
path pays one ``is None`` test; no password, salted password, key or SASL token is ever
logged (messages name the user and the mechanism only).

Authorization and quotas. What a principal may do is decided by the ACL authorizer
(:mod:`.authorizer`, enabled by ``authorizer.class.name``; ``super.users``,
``allow.everyone.if.no.acl.found``) over Kafka's ACL model (:mod:`.acl`, which also holds the
:class:`~.acl.Requires` declarations each API handler carries), persisted behind
a small store interface in Kafka's ZooKeeper layout (:mod:`.acl_store`). Client quotas
(:mod:`.quotas`: byte rates and request percentage per user / client id) throttle as KIP-219
does. Without an authorizer ``Broker.authorizer`` is None and every check is one attribute test.

Imports: broker/config/, broker/cluster/interbroker.py, broker/cluster/zk_data.py (the ACL and
quota znodes: paths and JSON, no I/O), protocol/; nothing from the replica manager up. What it
calls on the ZooKeeper client is named by Protocols in :mod:`.zk_access`, and of a Kafka connection
by :class:`~.authenticator.SecuredConnection`. Private parts of CPython's ``ssl``, pyOpenSSL and
cryptography are reached in :mod:`.openssl` only (tests/security/test_openssl_internals.py).
"""

from __future__ import annotations

from typing import Protocol

from ..config.properties import BrokerConfig
from .authorizer import AclAuthorizer, configure_authorizer
from .errors import SecurityConfigError
from .manager import BrokerSecurity
from .quotas import ClientQuotaManager, IpConfigs, configure_quotas
from .zk_access import EntityChangeListener, SecurityZk

__all__ = ["SecurityConfigError", "configure"]


class _MetadataSupport(Protocol):
    """The broker's metadata seam (broker/cluster/support.py's MetadataSupport), as security sees it."""

    entity_config_listeners: list[EntityChangeListener]

    @property
    def zookeeper(self) -> SecurityZk | None: ...


class _IpQuotas(Protocol):
    def update_ip_quotas(self, configs: IpConfigs) -> None: ...


class SecuredBroker(Protocol):
    """What :func:`configure` reads and sets on the broker (server.py's Broker)."""

    authorizer: AclAuthorizer | None
    quotas: ClientQuotaManager

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def metadata_support(self) -> _MetadataSupport: ...

    @property
    def connection_quotas(self) -> _IpQuotas: ...

    @property
    def security(self) -> BrokerSecurity | None: ...


def configure(broker: SecuredBroker) -> None:
    """Set ``broker.authorizer`` and ``broker.quotas`` from the config (called once at start)."""
    support = broker.metadata_support
    zk = support.zookeeper
    broker.authorizer = configure_authorizer(broker.config, zk)
    broker.quotas = configure_quotas(broker.config, zk, support.entity_config_listeners)
    # IP quotas (KIP-612) are enforced where connections are accepted
    broker.quotas.ip_listeners.append(broker.connection_quotas.update_ip_quotas)
    broker.connection_quotas.update_ip_quotas(broker.quotas.ip_configs)
    if zk is not None and broker.security is not None:  # SCRAM credentials live in ZooKeeper
        broker.security.credentials.use_zookeeper(zk, support.entity_config_listeners)
