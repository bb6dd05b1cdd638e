"""Client quotas: produce/fetch byte rates and request percentage per user / client id.

Kafka's model (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546):

* Quotas are configs on entities: a user, a client id, or a user + client id, each of which
  may be the default (``<default>``) instead of a name. For a connection with user ``u`` and
  client id ``c`` the first entity that defines the quota key wins, in Kafka's order::

      (u, c)  (u, <default>)  (u)  (<default>, c)  (<default>, <default>)  (<default>)  (c)  (<default> client)

  Each key (``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``) is
  resolved on its own. The usage is metered per *matched* entity with the connection's
  names filled in for defaults, so a user quota is shared by all that user's clients, and
  a default quota gives each user (or client) its own allowance.
* Usage is Kafka's sampled ``Rate``: ``quota.window.num`` (11) samples of
  ``quota.window.size.seconds`` (1 s); the rate divides by at least ``num - 1`` full windows,
  which is why a fresh client can burst before being held.
* A request that takes the rate over the bound gets
  ``throttle_time_ms = (rate - bound) / bound * window`` in its response, and the broker
  mutes the connection for that time after sending it (KIP-219): no further request from
  that socket is read or served until the time is up. Produce records the request size;
  Fetch the response size (a fetch that would be throttled returns no records instead, and
  its bytes are not counted, as Kafka does); request_percentage the handler's wall time
  as a percentage of one thread.

IP quotas (KIP-612): the ``ip`` entity (a host or address, or the default IP ``<default>``)
takes one key, ``connection_creation_rate`` (an INT, new connections per second), valid for no
other entity, and an ``ip`` entity combines with no other type. This module only stores them;
they are enforced at accept by :mod:`broker.network.connection_quotas`, which every load and alter
hands the IP configs to (``ClientQuotaManager.ip_listeners``), as Kafka's IpConfigHandler
hands them to ConnectionQuotas.

Quota configs are persisted with the broker's metadata (:class:`FileQuotaStore`, in Kafka's
ZooKeeper layout ``/config/users/<u>/clients/<c>``, ``/config/ips/<ip>`` ->
``{"version":1,"config":{...}}``). ``ClientQuotaManager.enabled`` is false until some user or
client quota exists: the hot paths then pay one attribute test.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, unquote

from protocol.api_keys import ApiKey

from ..cluster.zk_data import CONFIG_IPS
from ..config.properties import BrokerConfig
from .zk_access import EntityChangeListener, EntityConfigs, ZkSequencer, zk_request

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE})
CONNECTION_CREATION_RATE = "connection_creation_rate"  # the only key of an ip entity (Kafka's INT type)
IP_QUOTA_KEYS = frozenset({CONNECTION_CREATION_RATE})
# Requests that wait in a purgatory (Fetch's long poll, a rebalance, leaders being elected):
# Kafka's request time excludes that wait, and the handler's wall time here would not, so they
# are not metered for request_percentage (nor is Produce in a cluster, waiting for the ISR).
WAITING_APIS = frozenset({ApiKey.FETCH, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.CREATE_TOPICS,
                          ApiKey.DELETE_TOPICS, ApiKey.ELECT_LEADERS, ApiKey.CONTROLLED_SHUTDOWN})
DEFAULT = "<default>"  # Kafka's ZooKeeper name for a default entity; real names are URL-encoded

# An entity: (user, client_id); each None (not part of the entity), DEFAULT, or a name.
Entity = tuple[str | None, str | None]
# IP quota configs: {ip or host name as given, or DEFAULT: {"connection_creation_rate": n}}
IpConfigs = dict[str, dict[str, float]]
IPS_PREFIX = CONFIG_IPS + "/"


class QuotaError(ValueError):
    """An invalid entity or quota: answered as INVALID_REQUEST with this message."""


@dataclass(frozen=True, slots=True)
class IpEntity:
    """The ``ip`` quota entity: an address or host name as given, or DEFAULT."""

    ip: str


# Kafka's names for the filter components in DescribeClientQuotas' errors
_FILTER_NAMES = {USER: "user", CLIENT_ID: "client", IP: "ip"}


def entity_path(e: Entity) -> str:
    parts = []
    if e[0] is not None:
        parts.append("users/" + (DEFAULT if e[0] == DEFAULT else quote(e[0], safe="")))
    if e[1] is not None:
        parts.append("clients/" + (DEFAULT if e[1] == DEFAULT else quote(e[1], safe="")))
    return "/config/" + "/".join(parts)


def entity_from_path(path: str) -> Entity:
    bits = path.removeprefix("/config/").split("/")
    user = client = None
    for kind, name in zip(bits[::2], bits[1::2], strict=True):
        value = DEFAULT if name == DEFAULT else unquote(name)
        if kind == "users":
            user = value
        elif kind == "clients":
            client = value
        else:
            raise ValueError(f"not a quota entity path: {path}")
    return (user, client)


def ip_entity_path(ip: str) -> str:
    return IPS_PREFIX + (DEFAULT if ip == DEFAULT else quote(ip, safe=""))


def ip_from_path(path: str) -> str:
    name = path.removeprefix(IPS_PREFIX)
    return DEFAULT if name == DEFAULT else unquote(name)


def is_valid_ip_entity(ip: str) -> bool:
    """Kafka's DynamicConfig.Ip.isValidIpEntity: the default, an address, or a resolvable host."""
    if ip == DEFAULT:
        return True
    try:
        ipaddress.ip_address(ip)
        return True
    except ValueError:
        pass
    try:
        return bool(socket.getaddrinfo(ip, None, proto=socket.IPPROTO_TCP))
    except (OSError, UnicodeError):
        return False


def resolution_order(user: str, client: str) -> list[tuple[Entity, Entity]]:
    """(configured entity, metered entity) pairs in Kafka's precedence order."""
    return [((user, client), (user, client)), ((user, DEFAULT), (user, client)), ((user, None), (user, None)),
            ((DEFAULT, client), (user, client)), ((DEFAULT, DEFAULT), (user, client)),
            ((DEFAULT, None), (user, None)), ((None, client), (None, client)), ((None, DEFAULT), (None, client))]


class Rate:
    """Kafka's sampled Rate (``SampledStat`` + ``Rate``): per-second over the live samples."""

    __slots__ = ("num", "window_ms", "samples")

    def __init__(self, num: int, window_ms: int) -> None:
        self.num, self.window_ms = num, window_ms
        self.samples: list[list[float]] = []  # [start_ms, value], oldest first

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        if not self.samples or now_ms - self.samples[-1][0] >= self.window_ms:
            self.samples.append([now_ms, 0.0])
            if len(self.samples) > self.num:
                del self.samples[0]
        self.samples[-1][1] += value

    def _purge(self, now_ms: float) -> None:
        horizon = now_ms - self.num * self.window_ms
        while self.samples and self.samples[0][0] <= horizon:
            del self.samples[0]

    def window_size_ms(self, now_ms: float) -> float:
        elapsed = now_ms - self.samples[0][0] if self.samples else 0.0
        full = int(elapsed // self.window_ms)
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: float) -> float:
        self._purge(now_ms)
        total = sum(s[1] for s in self.samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)


class QuotaStore(Protocol):
    """Where quota configs are kept: a file beside the logs, or ZooKeeper in a cluster."""

    def load(self) -> tuple[dict[Entity, dict[str, float]], IpConfigs]:
        """Every quota config (blocking: at start-up, before any client is served)."""
        ...

    async def read(self) -> tuple[dict[Entity, dict[str, float]], IpConfigs]:
        """:meth:`load` without blocking the event loop (a reload after a change notice)."""
        ...

    async def save(self, quotas: dict[Entity, dict[str, float]], ips: IpConfigs) -> None:
        """Store every config; KafkaError (REQUEST_TIMED_OUT, ...) when the store could not be written."""
        ...


class FileQuotaStore:
    """``{"/config/users/alice": {"version": 1, "config": {"producer_byte_rate": "1024"}}, ...}``."""

    FILE = "samsa-quotas.json"

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> tuple[dict[Entity, dict[str, float]], IpConfigs]:
        if not self.path.exists():
            return {}, {}
        doc = json.loads(self.path.read_text() or "{}")
        quotas: dict[Entity, dict[str, float]] = {}
        ips: IpConfigs = {}
        for p, node in doc.items():
            cfg = {k: float(v) for k, v in node.get("config", {}).items()}
            if p.startswith(IPS_PREFIX):
                ips[ip_from_path(p)] = cfg
            else:
                quotas[entity_from_path(p)] = cfg
        return quotas, ips

    async def read(self) -> tuple[dict[Entity, dict[str, float]], IpConfigs]:
        return self.load()

    async def save(self, quotas: dict[Entity, dict[str, float]], ips: IpConfigs) -> None:
        doc = {entity_path(e): {"version": 1, "config": {k: _fmt(v) for k, v in sorted(cfg.items())}}
               for e, cfg in quotas.items() if cfg}
        doc.update({ip_entity_path(ip): {"version": 1, "config": {k: _fmt(v) for k, v in sorted(cfg.items())}}
                    for ip, cfg in ips.items() if cfg})
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class ZkQuotaStore:
    """Quota configs in ZooKeeper, shared by the cluster's brokers, where Kafka keeps them:
    ``/config/users/<u>[/clients/<c>]``, ``/config/clients/<c>`` and ``/config/ips/<ip>``, each a
    config znode (``{"version":1,"config":{...}}``; other keys there, e.g. SCRAM credentials, are
    left alone), announced on ``/config/changes`` so that every broker reloads."""

    def __init__(self, zk: EntityConfigs) -> None:
        self.zk = zk
        self._written: set[Entity] = set()
        self._written_ips: set[str] = set()

    def _entity_nodes(self) -> list[tuple[Entity, str, str]]:
        """(entity, entity type, name below it) of every user / client config node."""
        out: list[tuple[Entity, str, str]] = []
        for user in self.zk.children("/config/users"):
            out.append((entity_from_path(f"/config/users/{user}"), "users", user))
            for client in self.zk.children(f"/config/users/{user}/clients"):
                out.append((entity_from_path(f"/config/users/{user}/clients/{client}"), "users",
                            f"{user}/clients/{client}"))
        for client in self.zk.children("/config/clients"):
            out.append((entity_from_path(f"/config/clients/{client}"), "clients", client))
        return out

    def load(self) -> tuple[dict[Entity, dict[str, float]], IpConfigs]:
        return self._remember(*self._read())

    async def read(self) -> tuple[dict[Entity, dict[str, float]], IpConfigs]:
        """On a ZooKeeper request thread; remembered (what a later save clears) on the loop."""
        return self._remember(*await zk_request(self.zk, self._read))

    def _remember(self, quotas: dict[Entity, dict[str, float]],
                  ips: IpConfigs) -> tuple[dict[Entity, dict[str, float]], IpConfigs]:
        self._written = set(quotas)
        self._written_ips = set(ips)
        return quotas, ips

    def _read(self) -> tuple[dict[Entity, dict[str, float]], IpConfigs]:  # blocking
        out: dict[Entity, dict[str, float]] = {}
        for entity, etype, name in self._entity_nodes():
            cfg = {k: float(v) for k, v in self.zk.get_entity_config(etype, name).items() if k in QUOTA_KEYS}
            if cfg:
                out[entity] = cfg
        ips: IpConfigs = {}
        etype = CONFIG_IPS.removeprefix("/config/")
        for name in self.zk.children(CONFIG_IPS):
            cfg = {k: float(v) for k, v in self.zk.get_entity_config(etype, name).items() if k in IP_QUOTA_KEYS}
            if cfg:
                ips[ip_from_path(IPS_PREFIX + name)] = cfg
        return out, ips

    async def save(self, quotas: dict[Entity, dict[str, float]], ips: IpConfigs) -> None:
        """Written on a ZooKeeper request thread (each changed node, then its change notice);
        what this broker wrote is remembered on the loop once ZooKeeper took all of it."""
        await zk_request(self.zk, self._save, quotas, ips, set(self._written), set(self._written_ips))
        self._written_ips = {ip for ip, cfg in ips.items() if cfg}
        self._written = {e for e, cfg in quotas.items() if cfg}

    def _save(self, quotas: dict[Entity, dict[str, float]], ips: IpConfigs, written: set[Entity],
              written_ips: set[str]) -> None:  # a ZooKeeper request thread
        for ip in set(ips) | written_ips:
            etype, _, name = ip_entity_path(ip).removeprefix("/config/").partition("/")
            current = self.zk.get_entity_config(etype, name)
            merged = {k: v for k, v in current.items() if k not in IP_QUOTA_KEYS}
            merged.update({k: _fmt(v) for k, v in ips.get(ip, {}).items()})
            if merged != current:
                self.zk.set_entity_config(etype, name, merged, notify=True)
        for entity in set(quotas) | written:
            path = entity_path(entity).removeprefix("/config/")
            etype, _, name = path.partition("/")
            current = self.zk.get_entity_config(etype, name)
            merged = {k: v for k, v in current.items() if k not in QUOTA_KEYS}
            merged.update({k: _fmt(v) for k, v in quotas.get(entity, {}).items()})
            if merged != current:
                self.zk.set_entity_config(etype, name, merged, notify=True)


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(v)


@dataclass(slots=True)
class _Resolved:
    bound: float
    sensor: Rate


class ClientQuotaManager:
    """All client quotas of the broker: configs, resolution, sensors, throttle times."""

    def __init__(self, store: QuotaStore, window_num: int = 11, window_size_s: int = 1) -> None:
        self.store = store
        self.window_num, self.window_ms = window_num, window_size_s * 1000
        self.max_throttle_ms = window_num * window_size_s * 1000
        self.configs: dict[Entity, dict[str, float]] = {}
        self.ip_configs: IpConfigs = {}
        # called with ip_configs after every load and alter (the broker's ConnectionQuotas enforce them)
        self.ip_listeners: list[Callable[[IpConfigs], None]] = []
        self.enabled = False
        self._sensors: dict[tuple[str, Entity], Rate] = {}
        self._resolved: dict[tuple[str, str, str], _Resolved | None] = {}
        self.sequencer = ZkSequencer("client quotas")

    def load(self) -> None:
        """At start-up, before any client is served."""
        self.configs, self.ip_configs = self.store.load()
        self._changed()
        self._ips_changed()

    def reload_soon(self) -> None:
        """Another broker changed a quota: read them all off the loop, apply them here, in turn."""
        async def reload() -> None:
            self.configs, self.ip_configs = await self.store.read()
            self._changed()
            self._ips_changed()
        self.sequencer.reload_soon(reload)

    def _changed(self) -> None:
        self.configs = {e: c for e, c in self.configs.items() if c}
        self.enabled = bool(self.configs)
        self._resolved.clear()

    def _ips_changed(self) -> None:
        self.ip_configs = {ip: c for ip, c in self.ip_configs.items() if c}
        for fn in self.ip_listeners:
            fn(dict(self.ip_configs))

    # --- enforcement ----------------------------------------------------------------------

    def _resolve(self, key: str, principal: str, client_id: str) -> _Resolved | None:
        ck = (key, principal, client_id)
        try:
            return self._resolved[ck]
        except KeyError:
            pass
        user = principal.partition(":")[2] or principal
        found: _Resolved | None = None
        for configured, metered in resolution_order(user, client_id):
            cfg = self.configs.get(configured)
            if cfg is not None and key in cfg:
                sk = (key, metered)
                sensor = self._sensors.get(sk)
                if sensor is None:
                    sensor = self._sensors[sk] = Rate(self.window_num, self.window_ms)
                found = _Resolved(cfg[key], sensor)
                break
        self._resolved[ck] = found
        return found

    def record(self, key: str, principal: str, client_id: str | None, value: float,
               now_ms: float | None = None) -> int:
        """Record ``value`` against the client's ``key`` quota; the throttle time in ms (0 if none)."""
        r = self._resolve(key, principal, client_id or "")
        if r is None:
            return 0
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        r.sensor.record(value, now)
        return self._throttle(r, now)

    def throttle_time(self, key: str, principal: str, client_id: str | None, value: float = 0.0,
                      now_ms: float | None = None) -> int:
        """What recording ``value`` would cost, without recording it (Fetch decides before reading)."""
        r = self._resolve(key, principal, client_id or "")
        if r is None:
            return 0
        now = time.monotonic() * 1000 if now_ms is None else now_ms
        r.sensor._purge(now)
        total = sum(s[1] for s in r.sensor.samples) + value
        rate = total / (r.sensor.window_size_ms(now) / 1000.0)
        return self._throttle_for(rate, r.bound, r.sensor.window_size_ms(now))

    def _throttle(self, r: _Resolved, now: float) -> int:
        return self._throttle_for(r.sensor.measure(now), r.bound, r.sensor.window_size_ms(now))

    def _throttle_for(self, rate: float, bound: float, window_ms: float) -> int:
        if rate <= bound:
            return 0
        if bound <= 0:
            return self.max_throttle_ms
        return min(int(round((rate - bound) / bound * window_ms)), self.max_throttle_ms)

    # --- administration (DescribeClientQuotas / AlterClientQuotas) -------------------------

    def describe(self, components: list[tuple[str, int, str | None]],
                 strict: bool) -> list[tuple[list[tuple[str, str | None]], dict[str, float]]]:
        """Entities matching the filter, each as [(entity type, name or None for the default)] with
        its quotas. ``components``: (entity type, match type, match) with match type 0 = exact
        name, 1 = the default, 2 = any entity of that type. As Kafka's ZooKeeper-mode
        AdminManager: an ``ip`` component excludes user / client-id components, and a filter
        without components (and not strict) matches every entity of every type."""
        want: dict[str, tuple[int, str | None]] = {}
        for etype, mtype, match in components:
            if etype not in _FILTER_NAMES:
                raise QuotaError(f"Custom entity type '{etype}' not supported" if etype else
                                 "Unexpected empty filter component entity type")
            if etype in want:
                raise QuotaError(f"Duplicate {_FILTER_NAMES[etype]} filter component entity type")
            if mtype not in (0, 1, 2):
                raise QuotaError(f"Unknown match type {mtype}")
            if mtype == 0 and match is None:
                raise QuotaError("An exact match needs an entity name")
            want[etype] = (mtype, match)
        if IP in want and (USER in want or CLIENT_ID in want):
            raise QuotaError("Invalid entity filter component combination, IP filter component should not be "
                             "used with user or clientId filter component.")
        out: list[tuple[list[tuple[str, str | None]], dict[str, float]]] = []
        if IP not in want:
            for e, cfg in sorted(self.configs.items(), key=lambda x: entity_path(x[0])):
                present = {USER: e[0], CLIENT_ID: e[1]}
                ok = True
                for etype, (mtype, match) in want.items():
                    v = present[etype]
                    if v is None or (mtype == 0 and v != match) or (mtype == 1 and v != DEFAULT):
                        ok = False
                if ok and strict and any(present[t] is not None and t not in want for t in (USER, CLIENT_ID)):
                    ok = False
                if ok:
                    out.append(([(t, None if v == DEFAULT else v) for t, v in present.items() if v is not None],
                                dict(cfg)))
        if USER not in want and CLIENT_ID not in want and (IP in want or not strict):
            mtype, match = want.get(IP, (2, None))
            for ip, cfg in sorted(self.ip_configs.items()):
                if (mtype == 0 and ip != match) or (mtype == 1 and ip != DEFAULT):
                    continue
                out.append(([(IP, None if ip == DEFAULT else ip)], dict(cfg)))
        return out

    @staticmethod
    def entity_from_wire(pairs: list[tuple[str, str | None]]) -> Entity | IpEntity:
        """The entity of an AlterClientQuotas entry, with Kafka's (ZooKeeper mode) messages."""
        if not pairs:
            raise QuotaError("Invalid empty client quota entity")
        named: dict[str, str] = {}
        for etype, name in pairs:
            if etype not in _FILTER_NAMES:
                raise QuotaError(f"Unhandled client quota entity type: {etype}")
            if etype in named:
                raise QuotaError(f"Duplicate entity type {etype}")
            if name is not None and not name:
                raise QuotaError(f"Empty {etype} not supported")
            named[etype] = DEFAULT if name is None else name
        if IP in named:
            if len(named) > 1:
                raise QuotaError("Invalid quota entity combination, IP entity should not be used with user/client "
                                 "ID entity.")
            if not is_valid_ip_entity(named[IP]):
                raise QuotaError(f"{named[IP]} is not a valid IP or resolvable host.")
            return IpEntity(named[IP])
        return (named.get(USER), named.get(CLIENT_ID))

    def validate(self, ops: list[tuple[str, float, bool]], entity: Entity | IpEntity = (None, DEFAULT)) -> None:
        """Kafka's checks of the keys set on an entity: an ip entity takes only
        ``connection_creation_rate`` (an INT), a user / client-id entity only the byte rates,
        request_percentage and controller_mutation_rate. Removing is not checked (as Kafka)."""
        ip = isinstance(entity, IpEntity)
        keys = IP_QUOTA_KEYS if ip else QUOTA_KEYS
        for key, value, remove in ops:
            if remove:
                continue
            if key not in keys:
                raise QuotaError(f"Invalid configuration key {key}")
            if ip and abs(round(value) - value) > 1e-6:
                raise QuotaError(f"Configuration {key} must be a INT value")
            if not value > 0:
                raise QuotaError(f"Quota {key} must be greater than 0")

    async def alter(self, changes: list[tuple[Entity | IpEntity, list[tuple[str, float, bool]]]]) -> None:
        """Store the changes, then enforce them; KafkaError (nothing changed) when the store failed."""
        async with self.sequencer.lock:  # computed from, and applied over, the previous change
            configs = {e: dict(c) for e, c in self.configs.items()}
            ip_configs = {ip: dict(c) for ip, c in self.ip_configs.items()}
            ips = False
            for entity, ops in changes:
                if isinstance(entity, IpEntity):
                    ips = True
                    cfg = ip_configs.setdefault(entity.ip, {})
                    ops = [(k, float(round(v)), r) for k, v, r in ops]  # INT, as Kafka stores it
                else:
                    cfg = configs.setdefault(entity, {})
                for key, value, remove in ops:
                    if remove:
                        cfg.pop(key, None)
                    else:
                        cfg[key] = value
            configs = {e: c for e, c in configs.items() if c}
            ip_configs = {ip: c for ip, c in ip_configs.items() if c}
            await self.store.save(configs, ip_configs)  # durable first, then in force
            self.configs, self.ip_configs = configs, ip_configs
            self._changed()
            if ips:
                self._ips_changed()


def configure_quotas(config: BrokerConfig, zk: EntityConfigs | None = None,
                     change_listeners: list[EntityChangeListener] | None = None) -> ClientQuotaManager:
    """The broker's quota manager: configs in ZooKeeper in a cluster (reloaded on every
    ``/config/changes`` notice for users, clients or ips), else in a file beside the logs."""
    store: QuotaStore = FileQuotaStore(config.log_dirs[0] / FileQuotaStore.FILE) if zk is None \
        else ZkQuotaStore(zk)
    q = ClientQuotaManager(store, config.int("quota.window.num"), config.int("quota.window.size.seconds"))
    q.load()
    if change_listeners is not None:
        def changed(kind: str, _name: str) -> None:
            if kind in ("users", "clients", "ips"):
                q.reload_soon()
        change_listeners.append(changed)
    return q
