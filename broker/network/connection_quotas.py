"""Connection limits, as Kafka's ``kafka.network.ConnectionQuotas`` (KIP-308, KIP-402, KIP-612).

What it owns: the count of open connections per client address, per listener and for the
broker, and the connection-creation rates; the broker's acceptors (``broker.network.acceptor.Acceptor``)
ask it before each new connection is served and tell it when one closes.

Kafka's rules, which this module keeps:

* ``max.connections.per.ip`` (with ``max.connections.per.ip.overrides=host:count,...``) counts
  an address's connections over every listener. A connection past the limit is accepted and
  closed at once (Kafka's ``TooManyConnectionsException``), logged as
  ``Rejected connection from /1.2.3.4, address already has the configured maximum of 10
  connections``; that address's other connections are untouched.
* ``max.connections`` (broker-wide) and ``listener.name.<l>.max.connections`` do not refuse:
  the acceptor waits for a slot (``waitForConnectionSlot``), so new connections queue in the
  listen backlog and are served in turn when an open one closes. The inter-broker listener is
  *protected* when the broker has more than one listener: only its own listener limit applies
  to it, and if its connections take the broker past ``max.connections`` the other listeners
  close their least recently active connection (``closeExcessConnections``).
* ``max.connection.creation.rate`` (broker-wide) and ``listener.name.<l>.max.connection.creation.rate``
  throttle: each new connection is recorded in a sampled rate (``quota.window.num`` windows of
  ``quota.window.size.seconds``) and, over the bound, the acceptor delays that connection by
  Kafka's throttle time, ``(rate - bound) / bound * window``, at most one window. The
  protected inter-broker listener is exempt from the broker-wide rate, not from its own.

* IP quotas, ``connection_creation_rate`` on an ``ip`` client-quota entity (KIP-612, set with
  AlterClientQuotas or ``samsa configs --entity-type ips``; :mod:`broker.security.quotas`
  stores them and hands them to :meth:`ConnectionQuotas.update_ip_quotas`): an address's own
  quota, else the default IP entity's. After the acceptor has its slot, the new connection is
  recorded in that address's rate (Kafka's ``recordIpConnectionMaybeThrottle``); over the
  bound it is *not* served: its recording is taken back from the address's, the listener's
  and the broker's rates (so a refused connection does not count against anyone), and the
  acceptor keeps the socket unread for the throttle time and then closes it (Kafka's
  ``ConnectionThrottledException`` and delayed close), so a client retrying at once is held
  for that long. While the address stays over its rate every new connection goes the same
  way; other addresses are unaffected.

All of it but the IP quotas is read again from the broker config by
:meth:`ConnectionQuotas.reconfigure` (dynamic broker configs, KIP-226), so limits can be
changed with AlterConfigs.

Everything here runs on the broker's event loop: no locks; waiters are woken through one
``asyncio.Condition``-like event per change.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections.abc import Iterable, Mapping

from protocol.errors import InvalidConfigError

from ..config.properties import BrokerConfig
from ..repeated_warnings import RepeatedWarnings
from ..security.quotas import CONNECTION_CREATION_RATE, DEFAULT, IpConfigs, Rate

log = logging.getLogger("samsa.network")
# A flood from one address must not flood the log: a few lines per cause and minute, then a count.
LIMIT_WARNINGS = RepeatedWarnings(log)

UNLIMITED = 2147483647  # Kafka's Int.MaxValue defaults
# Per-address rate sensors are dropped once idle past their window, checked when there are this many
MAX_IDLE_IP_SENSORS = 1024


def parse_overrides(spec: str) -> dict[str, int]:
    """``host:count,host:count`` -> {ip: count}; host names are resolved, as Kafka's InetAddress.getByName."""
    out: dict[str, int] = {}
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        try:
            n = int(count)
            if not sep or not host or n < 0:
                raise ValueError(item)
            infos = socket.getaddrinfo(host.strip("[]"), None, proto=socket.IPPROTO_TCP)
        except (ValueError, OSError) as e:
            raise InvalidConfigError(
                message=f"Invalid value {spec!r} for configuration max.connections.per.ip.overrides: {e}") from None
        for info in infos:
            out[str(info[4][0])] = n
    return out


class ListenerQuota:
    """One listener's connection limit and creation rate, and its counters."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.max_connections = UNLIMITED
        self.max_rate = UNLIMITED
        self.rate: Rate | None = None  # creation rate sensor, present only when bounded
        self.created = 0  # connections accepted, for the creation-rate metric
        self.created_rate = Rate(2, 30_000)  # what the metric shows (Kafka's 30 s meter window)
        self.throttle_ms_total = 0.0  # time the acceptor spent throttling for this listener's rate
        self.blocked_ms_total = 0.0  # time the acceptor waited for a slot or a rate (AcceptorBlockedPercent)
        self.rejected = 0  # closed by max.connections.per.ip
        self.ip_throttled = 0  # closed (after the throttle time) by an IP's connection_creation_rate
        self.closed_excess = 0  # closed to make room for the protected listener


class ConnectionQuotas:
    """Counters and limits for every listener of one broker (see the module docstring)."""

    def __init__(self, config: BrokerConfig, listener_names: Iterable[str], inter_broker_listener: str | None) -> None:
        self.listeners = {name: ListenerQuota(name) for name in listener_names}
        self.inter_broker_listener = inter_broker_listener
        self.counts: dict[str, int] = {}  # client address -> open connections, over every listener
        self.total = 0
        self._changed = asyncio.Event()
        self.broker_rate: Rate | None = None
        self.max_rate = UNLIMITED
        # KIP-612 IP quotas: address -> connection_creation_rate, and the default IP entity's
        self.ip_rates: dict[str, int] = {}
        self.default_ip_rate = UNLIMITED
        self.ip_sensors: dict[str, Rate] = {}
        self.reconfigure(config)

    def reconfigure(self, config: BrokerConfig) -> None:
        """(Re)read every limit from the broker config; an invalid value raises InvalidConfigError."""
        props = config.props
        window_num = self.window_num = max(int(config.int("quota.window.num")), 1)
        self.window_ms = max(int(config.int("quota.window.size.seconds")), 1) * 1000
        # Kafka: maxThrottleTimeMs = quota.window.size.seconds
        self.max_throttle_ms = self.window_ms
        self.max_per_ip = _int(props, "max.connections.per.ip")
        self.per_ip_overrides = parse_overrides(str(props.get("max.connections.per.ip.overrides", "") or ""))
        if self.max_per_ip == 0 and not self.per_ip_overrides:
            raise InvalidConfigError(message="max.connections.per.ip.overrides must be set when "
                                             "max.connections.per.ip is 0")
        self.max_connections = _int(props, "max.connections")
        old = self.max_rate
        self.max_rate = _int(props, "max.connection.creation.rate")
        if self.max_rate < UNLIMITED:
            if self.broker_rate is None or old != self.max_rate:
                self.broker_rate = Rate(window_num, self.window_ms)
        else:
            self.broker_rate = None
        for lq in self.listeners.values():
            prefix = f"listener.name.{lq.name.lower()}."
            lq.max_connections = _int(props, prefix + "max.connections")
            rate = _int(props, prefix + "max.connection.creation.rate")
            if rate < UNLIMITED and (lq.rate is None or rate != lq.max_rate):
                lq.rate = Rate(window_num, self.window_ms)
            elif rate >= UNLIMITED:
                lq.rate = None
            lq.max_rate = rate
        self._changed.set()  # raised limits may free waiting acceptors

    # --- the acceptor's side ---------------------------------------------------------------

    def protected(self, listener: str) -> bool:
        """Kafka's protectedListener: the inter-broker listener, when there is another one."""
        return listener == self.inter_broker_listener and len(self.listeners) > 1

    def slot_available(self, listener: str) -> bool:
        lq = self.listeners[listener]
        if lq.count >= lq.max_connections:
            return False
        return self.protected(listener) or self.total < self.max_connections

    def max_for(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_per_ip)

    def record_and_throttle_ms(self, listener: str, now_ms: float) -> int:
        """Record one new connection in the broker's and the listener's rates; the delay owed."""
        throttle = 0
        if not self.protected(listener) and self.broker_rate is not None:
            throttle = self._record(self.broker_rate, self.max_rate, now_ms)
        lq = self.listeners[listener]
        if lq.rate is not None:
            throttle = max(throttle, self._record(lq.rate, lq.max_rate, now_ms))
        return throttle

    def _record(self, rate: Rate, bound: float, now_ms: float) -> int:
        rate.record(1.0, now_ms)
        value = rate.measure(now_ms)
        if value <= bound:
            return 0
        if bound <= 0:
            return self.max_throttle_ms
        return min(int(round((value - bound) / bound * rate.window_size_ms(now_ms))), self.max_throttle_ms)

    async def wait_for_slot(self, listener: str) -> None:
        """Kafka's waitForConnectionSlot: the rate's delay, then until a connection slot is free."""
        lq = self.listeners[listener]
        start = time.monotonic()
        throttle_ms = self.record_and_throttle_ms(listener, start * 1000)
        if throttle_ms > 0:
            lq.throttle_ms_total += throttle_ms
            await asyncio.sleep(throttle_ms / 1000)
        if not self.slot_available(listener):
            which = (f"listener {listener} has reached listener.name.{listener.lower()}.max.connections="
                     f"{lq.max_connections}" if lq.count >= lq.max_connections
                     else f"the broker has reached max.connections={self.max_connections}")
            LIMIT_WARNINGS.warning(which, "", "Not accepting new connections: %s; they wait in the listen "
                                   "backlog until a connection closes", which)
        while not self.slot_available(listener):
            self._changed.clear()
            await self._changed.wait()
        if throttle_ms > 0 or time.monotonic() - start > 0.001:
            lq.blocked_ms_total += (time.monotonic() - start) * 1000

    def update_ip_quotas(self, configs: IpConfigs) -> None:
        """Kafka's updateIpConnectionRateQuota for every ip entity at once: ``configs`` maps an
        address or host name (resolved here, as Kafka's InetAddress.getByName) or DEFAULT to its
        quota configs. The addresses' rate sensors, and what they have recorded, are kept."""
        rates: dict[str, int] = {}
        default = UNLIMITED
        for name, cfg in configs.items():
            rate = cfg.get(CONNECTION_CREATION_RATE)
            if rate is None:
                continue
            if name == DEFAULT:
                default = int(rate)
            else:
                for addr in _addresses(name):
                    rates[addr] = int(rate)
        if default != self.default_ip_rate:
            log.info("Updated default max IP connection rate to %s",
                     "unlimited" if default >= UNLIMITED else default)
        for addr in sorted(set(rates) | set(self.ip_rates)):
            if rates.get(addr) != self.ip_rates.get(addr):
                if addr in rates:
                    log.info("Updating max connection rate override for /%s to %d", addr, rates[addr])
                else:
                    log.info("Removing max connection rate override for /%s", addr)
        self.ip_rates, self.default_ip_rate = rates, default

    def connection_rate_for_ip(self, ip: str) -> int:
        return self.ip_rates.get(ip, self.default_ip_rate)

    def record_ip_connection_maybe_throttle(self, listener: str, ip: str, now_ms: float) -> int:
        """Record a new connection from ``ip`` against its connection_creation_rate; the throttle
        time in ms if that takes it over (the caller then closes the connection after that time
        and does not count it), else 0. See the module docstring."""
        bound = self.connection_rate_for_ip(ip)
        if bound >= UNLIMITED:
            return 0
        sensor = self.ip_sensors.get(ip)
        if sensor is None:
            if len(self.ip_sensors) >= MAX_IDLE_IP_SENSORS:
                self._drop_idle_ip_sensors(now_ms)
            sensor = self.ip_sensors[ip] = Rate(self.window_num, self.window_ms)
        throttle = self._record(sensor, bound, now_ms)
        if throttle <= 0:
            return 0
        # not accepted, so not counted: un-record it for the address, the listener and the broker
        sensor.record(-1.0, now_ms)
        lq = self.listeners[listener]
        if not self.protected(listener) and self.broker_rate is not None:
            self.broker_rate.record(-1.0, now_ms)
        if lq.rate is not None:
            lq.rate.record(-1.0, now_ms)
        lq.ip_throttled += 1
        LIMIT_WARNINGS.warning(f"ip rate {bound}", ip, "Throttled connection from /%s on listener %s: the address "
                               "is over its connection_creation_rate quota of %d/s; the connection is closed in "
                               "%d ms", ip, listener, bound, throttle)
        return throttle

    def _drop_idle_ip_sensors(self, now_ms: float) -> None:
        horizon = now_ms - self.window_num * self.window_ms
        for ip in [ip for ip, r in self.ip_sensors.items() if not r.samples or r.samples[-1][0] <= horizon]:
            del self.ip_sensors[ip]

    def inc(self, listener: str, ip: str) -> bool:
        """Count a connection the acceptor is about to serve; False (and not counted) if its address
        already has its maximum, when the caller must close it."""
        n = self.counts.get(ip, 0)
        limit = self.max_for(ip)
        lq = self.listeners[listener]
        if n >= limit:
            lq.rejected += 1
            LIMIT_WARNINGS.warning(f"per-ip {limit}", ip, "Rejected connection from /%s on listener %s, address "
                                   "already has the configured maximum of %d connections (max.connections.per.ip)",
                                   ip, listener, limit)
            return False
        self.counts[ip] = n + 1
        self.total += 1
        lq.count += 1
        lq.created += 1
        lq.created_rate.record(1.0, time.monotonic() * 1000)
        return True

    def dec(self, listener: str, ip: str) -> None:
        n = self.counts.get(ip, 0) - 1
        if n > 0:
            self.counts[ip] = n
        else:
            self.counts.pop(ip, None)
        self.total -= 1
        self.listeners[listener].count -= 1
        self._changed.set()

    def max_connections_exceeded(self, listener: str) -> bool:
        """Kafka's maxConnectionsExceeded: a non-protected listener must shed a connection."""
        return self.total > self.max_connections and not self.protected(listener)

    def creation_rate(self, listener: str) -> float:
        """New connections per second over the last ~30 s (the connection-creation-rate metric)."""
        return self.listeners[listener].created_rate.measure(time.monotonic() * 1000)


def _addresses(name: str) -> list[str]:
    """The addresses an ip quota entity names: itself if an address, else what it resolves to."""
    try:
        return [str(ipaddress.ip_address(name))]
    except ValueError:
        pass
    try:
        return sorted({str(info[4][0]) for info in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)})
    except (OSError, UnicodeError) as e:
        log.warning("IP quota for %s not applied: it does not resolve (%s)", name, e)
        return []


def _int(props: Mapping[str, object], key: str) -> int:
    raw = props.get(key)
    if raw is None or str(raw).strip() == "":
        return UNLIMITED
    try:
        v = int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(message=f"Invalid value {raw!r} for configuration {key}") from None
    if v < 0:
        raise InvalidConfigError(message=f"Invalid value {raw!r} for configuration {key}: must be at least 0")
    return v


class ConnectionSlot:
    """A connection's place in :class:`ConnectionQuotas`, given back exactly once."""

    __slots__ = ("quotas", "listener", "ip", "released")

    def __init__(self, quotas: ConnectionQuotas, listener: str, ip: str) -> None:
        self.quotas, self.listener, self.ip, self.released = quotas, listener, ip, False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.quotas.dec(self.listener, self.ip)
