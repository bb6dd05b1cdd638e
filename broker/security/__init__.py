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

from .errors import SecurityConfigError

__all__ = ["SecurityConfigError"]

