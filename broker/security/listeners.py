"""Listeners, their security protocols, per-listener settings and the inter-broker listener.

``listeners=PLAINTEXT://:9092,SASL_SSL://:9093`` names each listener; its security protocol
comes from ``listener.security.protocol.map`` (``NAME:PROTOCOL,...``), whose default maps each
of the four protocol names to itself, as Kafka's does. A setting for one listener is looked up
as ``listener.name.<name lower-cased>.<setting>`` before the unprefixed ``<setting>`` (Kafka's
per-listener overrides); SASL JAAS settings add the mechanism:
``listener.name.<name>.<mechanism lower-cased>.sasl.jaas.config``.

``inter.broker.listener.name`` (or, exclusively, ``security.inter.broker.protocol``) names the
listener brokers use to reach each other; :func:`inter_broker_client_config` returns the client
properties that reach it (Kafka client names: ``security.protocol``, ``ssl.*``,
``sasl.mechanism``, ``sasl.jaas.config``), and :func:`kafka_python_kwargs` turns such
properties into kafka-python keyword arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from .errors import SecurityConfigError
from .jaas import client_jaas_config, parse_jaas

if TYPE_CHECKING:
    from broker.config.properties import BrokerConfig

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_ssl(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


def _protocol(name: str, where: str) -> SecurityProtocol:
    try:
        return SecurityProtocol(name.strip().upper())
    except ValueError:
        raise SecurityConfigError(f"Invalid security protocol {name!r} in {where}; expected one of "
                                  + ", ".join(p.value for p in SecurityProtocol)) from None


def protocol_map(config: BrokerConfig) -> dict[str, SecurityProtocol]:
    raw = str(config.get("listener.security.protocol.map") or "")
    out = {p.value: p for p in SecurityProtocol}
    if raw.strip():
        out = {}
        for item in filter(None, (s.strip() for s in raw.split(","))):
            if ":" not in item:
                raise SecurityConfigError(f"Invalid listener.security.protocol.map entry {item!r}; "
                                          "expected LISTENER_NAME:SECURITY_PROTOCOL")
            name, proto = item.split(":", 1)
            out[name.strip().upper()] = _protocol(proto, "listener.security.protocol.map")
    return out


@dataclass(frozen=True)
class ListenerConfig:
    """One listener: where it binds, its security protocol, and its view of the config."""

    name: str
    host: str
    port: int
    security_protocol: SecurityProtocol
    config: BrokerConfig

    @property
    def prefix(self) -> str:
        return f"listener.name.{self.name.lower()}."

    def get(self, setting: str, default: str | None = None) -> str | None:
        """``listener.name.<name>.<setting>``, else ``<setting>``, else ``default``."""
        v = self.config.get(self.prefix + setting)
        if v is None:
            v = self.config.get(setting)
        return default if v is None else str(v)

    def enabled_mechanisms(self) -> list[str]:
        # Kafka's default is GSSAPI, which Samsa does not implement: it is refused at start.
        raw = self.get("sasl.enabled.mechanisms", "GSSAPI") or ""
        mechs = [m.strip().upper() for m in raw.split(",") if m.strip()]
        for m in mechs:
            if m not in SUPPORTED_MECHANISMS:
                raise SecurityConfigError(
                    f"SASL mechanism {m} enabled on listener {self.name} is not supported by Samsa "
                    f"(supported: {', '.join(SUPPORTED_MECHANISMS)}); set {self.prefix}sasl.enabled.mechanisms")
        if not mechs:
            raise SecurityConfigError(f"No SASL mechanism enabled on listener {self.name}")
        return mechs

    def jaas_config(self, mechanism: str) -> str | None:
        """``listener.name.<l>.<mech>.sasl.jaas.config`` (then the listener's, then the global)."""
        v = self.config.get(f"{self.prefix}{mechanism.lower()}.sasl.jaas.config")
        if v is None:
            v = self.get("sasl.jaas.config")
        return None if v is None else str(v)


def listener_configs(config: BrokerConfig) -> list[ListenerConfig]:
    """Every configured listener with its security protocol; a name without one is an error."""
    pmap = protocol_map(config)
    out = []
    for lst in config.listeners:
        proto = pmap.get(lst.name)
        if proto is None:
            raise SecurityConfigError(f"No security protocol defined for listener {lst.name} "
                                      "(add it to listener.security.protocol.map)")
        out.append(ListenerConfig(lst.name, lst.host, lst.port, proto, config))
    return out


def inter_broker_listener(config: BrokerConfig) -> ListenerConfig:
    name = config.get("inter.broker.listener.name")
    proto = config.get("security.inter.broker.protocol")
    if name and proto:
        raise SecurityConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol "
                                  "should be set.")
    wanted = str(name).upper() if name else _protocol(str(proto or "PLAINTEXT"), "security.inter.broker.protocol").value
    for lc in listener_configs(config):
        if lc.name == wanted:
            return lc
    if not name and not proto:
        return listener_configs(config)[0]  # no inter-broker setting: the first listener, as before
    raise SecurityConfigError(f"inter.broker.listener.name {wanted} must be a listener name in listeners "
                              f"({', '.join(lst.name for lst in config.listeners)})")


_CLIENT_SSL = ("ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
               "ssl.truststore.certificates", "ssl.keystore.location", "ssl.keystore.type",
               "ssl.keystore.password", "ssl.key.password", "ssl.keystore.certificate.chain",
               "ssl.keystore.key", "ssl.enabled.protocols", "ssl.cipher.suites",
               "ssl.endpoint.identification.algorithm")


def inter_broker_client_config(config: BrokerConfig) -> dict[str, str]:
    """Client properties (Kafka's names) that reach this broker's inter-broker listener.

    The address is the advertised listener of the same name (``bootstrap.servers``). SSL
    settings are the listener's own (its truststore, and its keystore for mutual TLS); the
    SASL mechanism is ``sasl.mechanism.inter.broker.protocol`` (default: the listener's first
    enabled one) with the JAAS ``username``/``password`` of that mechanism's server entry.
    """
    lc = inter_broker_listener(config)
    adv = next((a for a in config.advertised_listeners if a.name == lc.name), None)
    host, port = (adv.host, adv.port) if adv else (lc.host, lc.port)
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    out = {"bootstrap.servers": f"{host}:{port}", "security.protocol": lc.security_protocol.value}
    if lc.security_protocol.uses_ssl:
        for key in _CLIENT_SSL:
            v = lc.get(key)
            if v is not None:
                out[key] = v
    if lc.security_protocol.uses_sasl:
        mech = str(config.get("sasl.mechanism.inter.broker.protocol") or lc.enabled_mechanisms()[0]).upper()
        out["sasl.mechanism"] = mech
        jaas = lc.jaas_config(mech)
        if jaas:
            out["sasl.jaas.config"] = client_jaas_config(parse_jaas(jaas))
    return out


def kafka_python_kwargs(props: dict[str, str]) -> dict[str, str | bool | None]:
    """kafka-python keyword arguments for Kafka client properties (PEM files only): what
    ``--command-config client.properties`` means to the ``samsa`` tools."""
    kw: dict[str, str | bool | None] = {"security_protocol": props.get("security.protocol", "PLAINTEXT").upper()}
    if "bootstrap.servers" in props:
        kw["bootstrap_servers"] = props["bootstrap.servers"]
    if "ssl.truststore.location" in props:
        kw["ssl_cafile"] = props["ssl.truststore.location"]
    if props.get("ssl.keystore.location"):
        kw["ssl_certfile"] = props["ssl.keystore.location"]
        kw["ssl_keyfile"] = props["ssl.keystore.location"]
    if props.get("ssl.key.password"):
        kw["ssl_password"] = props["ssl.key.password"]
    if props.get("ssl.endpoint.identification.algorithm", "https") == "":
        kw["ssl_check_hostname"] = False
    if "sasl.mechanism" in props:
        kw["sasl_mechanism"] = props["sasl.mechanism"]
        opts = parse_jaas(props.get("sasl.jaas.config", "")).options if props.get("sasl.jaas.config") else {}
        kw["sasl_plain_username"] = opts.get("username")
        kw["sasl_plain_password"] = opts.get("password")
    return kw
