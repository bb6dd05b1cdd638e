"""The client side of the inter-broker listener: TLS and SASL for :class:`broker.cluster.interbroker.BrokerClient`.

Built from :func:`.listeners.inter_broker_listener` (``inter.broker.listener.name`` or
``security.inter.broker.protocol``): TLS verifies the other broker against the listener's
truststore (and presents the listener's keystore when that listener asks for client
certificates); SASL uses ``sasl.mechanism.inter.broker.protocol`` (default: the listener's first
enabled mechanism) with the ``username``/``password`` of that mechanism's JAAS entry, as a Kafka
broker does. A PLAINTEXT inter-broker listener needs nothing: :func:`inter_broker_security`
returns None and BrokerClient connects as before.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kafka.net.sasl.scram import ScramClient
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from protocol.messages import ApiMessage

from .errors import SecurityConfigError
from .jaas import parse_jaas
from .listeners import ListenerConfig, inter_broker_listener

if TYPE_CHECKING:
    from broker.config.properties import BrokerConfig


class InterBrokerSecurity:
    def __init__(self, lc: ListenerConfig, config: BrokerConfig, ssl_context: ssl.SSLContext | None) -> None:
        self.listener = lc.name
        self.ssl_context = ssl_context  # tls.client_context's, on an SSL or SASL_SSL listener
        self.mechanism: str | None = None
        self.username = self.password = ""
        if lc.security_protocol.uses_sasl:
            mech = str(config.get("sasl.mechanism.inter.broker.protocol") or lc.enabled_mechanisms()[0]).upper()
            jaas = lc.jaas_config(mech)
            opts = parse_jaas(jaas).options if jaas else {}
            if "username" not in opts or "password" not in opts:
                raise SecurityConfigError(f"The inter-broker listener {lc.name} uses SASL {mech}: its "
                                          f"{lc.prefix}{mech.lower()}.sasl.jaas.config needs username and password")
            self.mechanism, self.username, self.password = mech, opts["username"], opts["password"]

    async def authenticate(self, roundtrip: Callable[[bytes], Awaitable[bytes | memoryview]],
                           client_id: str) -> None:
        """SaslHandshake v1 then SaslAuthenticate v2 until the mechanism completes."""
        if self.mechanism is None:
            return

        async def rt(request: ApiMessage, version: int, resp_cls: type[ApiMessage]) -> ApiMessage:
            request.with_header(correlation_id=0, client_id=client_id)
            payload = await roundtrip(bytes(request.encode(version=version, header=True, framed=True)))
            return resp_cls.decode(bytes(payload), version=version, header=True)

        hs = await rt(SaslHandshakeRequest(mechanism=self.mechanism), 1, SaslHandshakeResponse)
        if hs.error_code:
            raise ConnectionError(f"SaslHandshake {self.mechanism} refused (error {hs.error_code})")
        if self.mechanism == "PLAIN":
            tokens = [f"\0{self.username}\0{self.password}".encode()]
            scram = None
        else:
            scram = ScramClient(self.username, self.password, self.mechanism)
            tokens = [scram.first_message()]
        r = await rt(SaslAuthenticateRequest(auth_bytes=tokens[0]), 2, SaslAuthenticateResponse)
        if r.error_code:
            raise ConnectionError(f"SASL {self.mechanism} authentication failed: {r.error_message}")
        if scram is not None:
            scram.process_server_first_message(r.auth_bytes)
            r = await rt(SaslAuthenticateRequest(auth_bytes=scram.final_message()), 2, SaslAuthenticateResponse)
            if r.error_code:
                raise ConnectionError(f"SASL {self.mechanism} authentication failed: {r.error_message}")
            scram.process_server_final_message(r.auth_bytes)


def inter_broker_security(config: BrokerConfig, client_context: Callable[[ListenerConfig], ssl.SSLContext],
                          ) -> InterBrokerSecurity | None:
    """How this broker reaches the others (None: PLAINTEXT); ``client_context`` builds the TLS context
    of an SSL or SASL_SSL inter-broker listener (tls.client_context)."""
    lc = inter_broker_listener(config)
    if lc.security_protocol.value == "PLAINTEXT":
        return None
    return InterBrokerSecurity(lc, config, client_context(lc) if lc.security_protocol.uses_ssl else None)
