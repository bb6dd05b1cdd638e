"""The broker's security: one :class:`BrokerSecurity` per broker, built at start.

It resolves the listeners (:mod:`.listeners`), builds each TLS listener's context
(:mod:`.tls`) and each SASL listener's mechanisms (:mod:`.authenticator`), opens the
credential store (:mod:`.credentials`), and tells each new connection what it needs
(:meth:`BrokerSecurity.on_connection`). Everything that can be wrong in the configuration is
found here, before the first socket is bound, and raised as :class:`SecurityConfigError`.

Dynamic reconfiguration: :meth:`reconfigure` is called after AlterConfigs changed broker
configs; a listener whose ``ssl.*`` key or trust material changed gets its context reloaded
in place (new handshakes use the new certificate; open connections keep theirs). A new
keystore that cannot be loaded leaves the old one in force and is reported to the caller.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from broker.cluster.interbroker import BrokerClient
from broker.config.definitions import RELOADABLE
from broker.config.properties import BrokerConfig
from protocol.errors import InvalidConfigError

from .authenticator import MechanismFactory, SaslAuthenticator, SecuredConnection, mechanism_factory
from .client import inter_broker_security
from .credentials import CredentialStore
from .errors import SecurityConfigError
from .listeners import ListenerConfig, listener_configs
from .principal import parse_mapping_rules

if TYPE_CHECKING:
    from OpenSSL import SSL

log = logging.getLogger("samsa.security")


def _tls_modules() -> tuple[ModuleType, ModuleType]:
    """broker/security/tls.py and openssl_transport.py, loaded by the first TLS listener: they
    import pyOpenSSL and cryptography's x509 and PKCS12, ~50 ms (python -X importtime on a quiet
    machine) that a PLAINTEXT-only broker, such as every embedded test broker (broker/testing),
    does not pay."""
    from . import openssl_transport, tls  # noqa: PLC0415

    return tls, openssl_transport


def _tls() -> ModuleType:
    return _tls_modules()[0]


def _openssl() -> ModuleType:
    return _tls_modules()[1]


class ListenerSecurity:
    """What one listener needs at runtime."""

    def __init__(self, lc: ListenerConfig, credentials: CredentialStore) -> None:
        self.config = lc
        self.name = lc.name
        self.protocol = lc.security_protocol.value
        self.ssl_context: ssl.SSLContext | None = None
        self.openssl_context: SSL.Context | None = None  # when connections use broker/security/openssl_transport.py
        self.rules = parse_mapping_rules(lc.get("ssl.principal.mapping.rules", "DEFAULT") or "DEFAULT")
        self.mechanisms: list[str] = []
        self.factory: MechanismFactory | None = None
        self.reauth_ms = int(lc.get("connections.max.reauth.ms", "0") or 0)
        self.read_loop = "c"  # ssl.read.loop as this process can serve it (TLS listeners)
        if lc.security_protocol.uses_ssl:
            self.ssl_context = _tls().build_server_context(lc)
            self._fingerprint = self.fingerprint()
            transport = lc.get("ssl.transport", "openssl") or "openssl"
            openssl_transport = _openssl()
            self.read_loop = openssl_transport.read_loop(lc.get("ssl.read.loop", "c") or "c")
            if openssl_transport.enabled(transport):
                self.openssl_context = openssl_transport.build_context(lc, self.ssl_context)
                log.info("Listener %s: TLS on %s (pyOpenSSL, read loop in %s)", lc.name,
                         openssl_transport.openssl_version(), "C" if self.read_loop == "c" else "Python")
            elif transport == "loop":
                log.info("Listener %s: TLS on the event loop's transport and Python's ssl (%s; "
                         "ssl.transport=loop)", lc.name, ssl.OPENSSL_VERSION)
            else:
                log.warning("Listener %s: pyOpenSSL is not usable here; TLS on the event loop's transport and "
                            "Python's ssl (%s)", lc.name, ssl.OPENSSL_VERSION)
        if lc.security_protocol.uses_sasl:
            self.mechanisms = lc.enabled_mechanisms()
            self.factory = mechanism_factory(lc, credentials)

    async def accept_tls(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                         protocol_factory: Callable[[], asyncio.BaseProtocol]) -> None:
        """The TLS handshake on an accepted socket through pyOpenSSL (``openssl_context`` is
        set), then ``protocol_factory``'s protocol on top. Raises if the handshake fails."""
        await _openssl().accept(loop, sock, self.openssl_context, protocol_factory, read_loop=self.read_loop)

    def fingerprint(self) -> tuple[object, ...]:
        """The TLS settings plus the key files' mtimes: a change means reload."""
        out: list[object] = [self.config.get(k) for k in RELOADABLE]
        for k in ("ssl.keystore.location", "ssl.truststore.location"):
            p = self.config.get(k)
            try:
                out.append(Path(p).stat().st_mtime_ns if p else None)
            except OSError:
                out.append(None)
        return tuple(out)


class BrokerSecurity:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.credentials = CredentialStore(config.log_dirs[0] / CredentialStore.FILE)
        self.listeners: dict[str, ListenerSecurity] = {}
        for lc in listener_configs(config):
            self.listeners[lc.name] = ListenerSecurity(lc, self.credentials)
        BrokerClient.security = inter_broker_security(config, lambda lc: _tls().client_context(lc))

    def on_connection(self, conn: SecuredConnection, listener: ListenerSecurity) -> bool:
        """Set up a new connection; False if it must be closed (no principal for its cert)."""
        conn.listener_name = listener.name
        conn.security_protocol = listener.protocol
        if listener.ssl_context is not None and listener.factory is None and conn.transport is not None:
            try:
                conn.principal = _tls().peer_principal(conn.transport.get_extra_info("ssl_object"), listener.rules)
            except SecurityConfigError as e:
                conn.close(str(e))
                return False
        if listener.factory is not None:
            conn.authenticator = SaslAuthenticator(conn, listener.config, listener.mechanisms, listener.factory,
                                                   listener.reauth_ms)
        return True

    def validate_reconfiguration(self, props: dict[str, str]) -> None:
        """Build each TLS listener's context from ``props`` (the configs an AlterConfigs would leave);
        a keystore or truststore that does not load is INVALID_CONFIG with the reason."""
        candidate = BrokerConfig(dict(props))
        for lc in listener_configs(candidate):
            if lc.security_protocol.uses_ssl:
                try:
                    ctx = _tls().build_server_context(lc)
                    if _openssl().enabled(lc.get("ssl.transport", "openssl") or "openssl"):
                        _openssl().build_context(lc, ctx)
                except SecurityConfigError as e:
                    raise InvalidConfigError(message=str(e)) from None

    def reconfigure(self) -> None:
        """Reload the certificates of listeners whose TLS settings or files changed."""
        for ls in self.listeners.values():
            if ls.ssl_context is None:
                continue
            fp = ls.fingerprint()
            if fp == ls._fingerprint:
                continue
            fresh = _tls().build_server_context(ls.config)  # validates everything before touching the live one
            if ls.openssl_context is not None:  # new handshakes use the new one; open connections keep theirs
                ls.openssl_context = _openssl().build_context(ls.config, fresh)
            del fresh
            _tls().load_keystore(ls.ssl_context, ls.config)
            _tls().load_truststore(ls.ssl_context, ls.config)
            ls._fingerprint = fp
            log.info("Reloaded TLS keystore and truststore of listener %s", ls.name)
