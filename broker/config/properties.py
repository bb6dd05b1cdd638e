"""Broker configuration with Kafka's property names and defaults.

Read from a ``server.properties``-style file and ``--override key=value`` pairs, exactly as
``kafka-server-start.sh`` does. Unknown keys are kept (and logged) so a Kafka properties file
can be reused as is; keys Samsa acts on are typed and validated here.
"""

from __future__ import annotations

import builtins
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

from protocol.errors import InvalidConfigError

log = logging.getLogger("samsa.config")

# key -> (type, default). Kafka's defaults unless noted.
BROKER_DEFAULTS: dict[str, tuple[type, object]] = {
    "broker.id": (int, 0),
    "node.id": (int, -1),
    "listeners": (str, "PLAINTEXT://127.0.0.1:9092"),
    "advertised.listeners": (str, ""),
    "log.dirs": (str, "./samsa-data"),  # Kafka: /tmp/kafka-logs; ours is local to the checkout
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "auto.create.topics.enable": (bool, True),
    "delete.topic.enable": (bool, True),
    "log.segment.bytes": (int, 1073741824),
    "log.roll.ms": (int, -1),
    "log.roll.hours": (int, 168),
    "log.index.interval.bytes": (int, 4096),
    "log.index.size.max.bytes": (int, 10485760),
    "log.retention.ms": (int, -1),
    "log.retention.minutes": (int, -1),
    "log.retention.hours": (int, 168),
    "log.retention.bytes": (int, -1),
    "log.retention.check.interval.ms": (int, 300000),
    "log.cleanup.policy": (str, "delete"),
    "log.cleaner.enable": (bool, True),
    "log.message.timestamp.type": (str, "CreateTime"),
    "log.segment.delete.delay.ms": (int, 60000),
    "log.flush.interval.messages": (int, 9223372036854775807),
    "log.flush.interval.ms": (int, -1),
    "message.max.bytes": (int, 1048588),
    "compression.type": (str, "producer"),
    "min.insync.replicas": (int, 1),
    "socket.request.max.bytes": (int, 104857600),
    # Connection limits (broker/network/connection_quotas.py); per listener also listener.name.<l>.<key>
    "max.connections": (int, 2147483647),
    "max.connections.per.ip": (int, 2147483647),
    "max.connections.per.ip.overrides": (str, ""),
    "max.connection.creation.rate": (int, 2147483647),
    "max.incremental.fetch.session.cache.slots": (int, 1000),
    "offsets.topic.num.partitions": (int, 50),
    "offsets.topic.replication.factor": (int, 3),
    "offsets.retention.minutes": (int, 10080),
    "offsets.retention.check.interval.ms": (int, 600000),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "group.max.size": (int, 2147483647),
    "transaction.state.log.num.partitions": (int, 50),
    "transaction.max.timeout.ms": (int, 900000),
    "transactional.id.expiration.ms": (int, 604800000),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (int, 10000),
    "producer.id.expiration.ms": (int, 86400000),
    "unclean.leader.election.enable": (bool, False),
    "cluster.id": (str, ""),
    # ZooKeeper mode (a cluster): empty zookeeper.connect keeps the single embedded broker
    "zookeeper.connect": (str, ""),
    "zookeeper.session.timeout.ms": (int, 18000),
    "zookeeper.connection.timeout.ms": (int, 18000),
    "broker.rack": (str, ""),
    "replica.lag.time.max.ms": (int, 30000),
    "replica.fetch.wait.max.ms": (int, 500),
    "replica.fetch.min.bytes": (int, 1),
    "replica.fetch.max.bytes": (int, 1048576),
    "replica.fetch.response.max.bytes": (int, 10485760),
    "replica.fetch.backoff.ms": (int, 1000),
    # Samsa's own: a follower keeps this much of its active segment's tail in the OS page cache
    # and drops the rest as it appends (log/segment.py drop_behind); -1 keeps everything (Kafka)
    "replica.page.cache.retain.bytes": (int, 16777216),
    "replica.socket.timeout.ms": (int, 30000),
    "controller.socket.timeout.ms": (int, 30000),
    "controlled.shutdown.enable": (bool, True),
    "controlled.shutdown.max.retries": (int, 3),
    "controlled.shutdown.retry.backoff.ms": (int, 5000),
    "auto.leader.rebalance.enable": (bool, True),
    "leader.imbalance.check.interval.seconds": (int, 300),
    "leader.imbalance.per.broker.percentage": (int, 10),
    "transaction.state.log.replication.factor": (int, 3),
    "transaction.state.log.min.isr": (int, 2),
    "log.level": (str, "INFO"),
    "metrics.listener": (str, ""),  # http://HOST:PORT of the Prometheus endpoint; empty: off
    "telemetry.max.bytes": (int, 1048576),  # KIP-714: largest PushTelemetry metrics payload
    # Samsa's own: the web console (broker/console/), off when empty.
    "console.listener": (str, ""),
    "console.allow.writes": (bool, False),
    "console.bootstrap.servers": (str, ""),
    "console.metrics.urls": (str, ""),
    "console.schema.registry.url": (str, ""),
    # Samsa's own: how the broker process runs (each measured in bench/; see the modules named).
    "malloc.tuning.enable": (bool, True),  # glibc mmap/trim thresholds raised (broker/malloc_tuning.py)
    "cpu.affinity": (str, ""),  # CPUs the process runs on, taskset's list syntax; empty: any (broker/cpu_affinity.py)
    "fetch.sendfile.enable": (bool, False),  # PLAINTEXT Fetch regions by loop.sendfile, not pread+write
    "ssl.transport": (str, "openssl"),  # TLS listeners on pyOpenSSL ("openssl") or the loop's ssl ("loop")
    "ssl.read.loop": (str, "c"),  # pyOpenSSL's read loop in the C extension ("c") or in Python ("python")
    # Samsa's own: the Schema Registry (broker/schema_registry/), off when empty.
    "schema.registry.listeners": (str, ""),
    "schema.registry.bootstrap.servers": (str, ""),
    "schema.registry.max.request.bytes": (int, 1048576),
    "schema.registry.advertised.listener": (str, ""),
    "schema.registry.leader.eligibility": (bool, True),
    "schema.registry.topic.replication.factor": (int, 3),
    "schema.registry.kafkastore.security.protocol": (str, "PLAINTEXT"),
    "schema.registry.kafkastore.sasl.mechanism": (str, "PLAIN"),
    "schema.registry.kafkastore.sasl.jaas.config": (str, ""),
    "schema.registry.kafkastore.ssl.truststore.location": (str, ""),
    # Tests only: kill the broker at a point of the next transaction commit ("crash-before-prepare" or
    # "crash-after-markers=K") to prove the outcome is all-or-nothing after a restart (txn/coordinator.py).
    "transaction.fault.injection": (str, ""),
    # Authorization and quotas (broker/security)
    "authorizer.class.name": (str, ""),
    "super.users": (str, ""),
    "allow.everyone.if.no.acl.found": (bool, False),
    "quota.window.num": (int, 11),
    "quota.window.size.seconds": (int, 1),
}


def parse_value(key: str, typ: type, raw: str) -> object:
    """``raw`` as the ``typ`` of ``key`` in BROKER_DEFAULTS, or InvalidConfigError."""
    raw = raw.strip()
    try:
        if typ is bool:
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.lower() == "true"
        return typ(raw)
    except ValueError as e:
        raise InvalidConfigError(message=f"Invalid value {raw!r} for configuration {key}") from e


def read_properties(path: Path) -> dict[str, str]:
    """Parse a Java ``.properties`` file (the subset Kafka's configs use)."""
    props: dict[str, str] = {}
    lines: list[str] = []
    for raw in path.read_text().splitlines():
        # A trailing backslash continues the line (Java properties; Kafka's JAAS examples use it).
        if lines and lines[-1].endswith("\\") and not lines[-1].endswith("\\\\"):
            lines[-1] = lines[-1][:-1] + raw.lstrip()
        else:
            lines.append(raw.strip())
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                props[k.strip()] = v.strip()
                break
    return props


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(spec: str) -> list[Listener]:
    out = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        # Listener names such as SASL_SSL are not URL schemes (underscore): split by hand.
        name, sep, rest = item.partition("://")
        u = urlparse("x://" + rest)
        try:
            port = u.port
        except ValueError:
            port = None
        if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or port is None:
            raise InvalidConfigError(message=f"Invalid listener {item!r}; expected NAME://host:port")
        out.append(Listener(name.upper(), u.hostname or "0.0.0.0", port))
    return out


def parse_listener(spec: str) -> tuple[str, int] | None:
    """``http://HOST:PORT`` -> (host, port); empty -> None; anything else is INVALID_CONFIG."""
    spec = spec.strip()
    if not spec:
        return None
    u = urlparse(spec)
    try:
        port = u.port
    except ValueError:
        port = None
    if u.scheme != "http" or port is None or not u.hostname or u.path not in ("", "/"):
        raise InvalidConfigError(message=f"Invalid metrics.listener {spec!r}; expected http://HOST:PORT")
    return u.hostname, port


class DynamicLayers(Protocol):
    """The dynamic broker configs (KIP-226) over the static properties, as :mod:`.resolution` reads
    them (:class:`~.dynamic.DynamicBrokerConfigs`; Kafka's ``KafkaConfig.dynamicConfig``)."""

    static_props: dict[str, str]
    per_broker: dict[str, str]
    cluster_default: dict[str, str]


@dataclass
class BrokerConfig:
    """Typed view of the broker's properties; ``props`` keeps every key as given."""

    props: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._values: dict[str, object] = {}
        self.dynamic: DynamicLayers | None = None  # set once by DynamicBrokerConfigs.attach
        for key, (typ, default) in BROKER_DEFAULTS.items():
            raw = self.props.get(key)
            self._values[key] = default if raw is None else parse_value(key, typ, raw)
        for key in self.props:
            if key not in BROKER_DEFAULTS:
                log.debug("Configuration %s is not used by Samsa (kept as given)", key)
        self.listeners = parse_listeners(str(self["listeners"]))
        adv = str(self["advertised.listeners"])
        self.advertised_listeners = parse_listeners(adv) if adv else self.listeners
        fault = str(self["transaction.fault.injection"])
        if fault and fault != "crash-before-prepare" and not re.fullmatch(r"crash-after-markers=[1-9][0-9]*", fault):
            raise InvalidConfigError(message=f"Invalid value {fault!r} for configuration transaction.fault.injection; "
                                             "expected crash-before-prepare or crash-after-markers=K")
        for key, allowed in (("ssl.transport", ("openssl", "loop")), ("ssl.read.loop", ("c", "python"))):
            if str(self[key]) not in allowed:
                raise InvalidConfigError(message=f"Invalid value {self[key]!r} for configuration {key}; "
                                                 f"expected one of {', '.join(allowed)}")
        if self["metrics.listener"]:
            parse_listener(str(self["metrics.listener"]))

    @classmethod
    def load(cls, path: Path | None = None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
        props = read_properties(path) if path else {}
        props.update(overrides or {})
        return cls(props)

    def replace_props(self, merged: Mapping[str, str]) -> None:
        """Make ``props`` exactly ``merged`` (the static, cluster-default and per-broker layers of
        :class:`~.dynamic.DynamicBrokerConfigs`), retyping every value that changed."""
        for name in set(self.props) | set(merged):
            if name in merged:
                self.props[name] = merged[name]
            else:
                self.props.pop(name, None)
            if name in BROKER_DEFAULTS:
                typ, default = BROKER_DEFAULTS[name]
                raw = merged.get(name)
                self._values[name] = default if raw is None else parse_value(name, typ, raw)

    def __getitem__(self, key: str) -> object:
        if key in self._values:
            return self._values[key]
        return self.props[key]

    def get(self, key: str, default: object = None) -> object:
        try:
            return self[key]
        except KeyError:
            return default

    def int(self, key: str) -> builtins.int:
        v = self[key]
        assert isinstance(v, int)
        return v

    @property
    def broker_id(self) -> builtins.int:
        node = self.int("node.id")
        return node if node >= 0 else self.int("broker.id")

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(p.strip()) for p in str(self["log.dirs"]).split(",") if p.strip()]

    @property
    def retention_ms(self) -> builtins.int:
        if self.int("log.retention.ms") != -1 or "log.retention.ms" in self.props:
            return self.int("log.retention.ms")
        if self.int("log.retention.minutes") != -1:
            return self.int("log.retention.minutes") * 60_000
        return self.int("log.retention.hours") * 3_600_000

    @property
    def roll_ms(self) -> builtins.int:
        if self.int("log.roll.ms") != -1:
            return self.int("log.roll.ms")
        return self.int("log.roll.hours") * 3_600_000

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level defaults derived from broker properties (Kafka's synonyms)."""
        return {
            "segment.bytes": str(self["log.segment.bytes"]),
            "segment.ms": str(self.roll_ms),
            "segment.index.bytes": str(self["log.index.size.max.bytes"]),
            "index.interval.bytes": str(self["log.index.interval.bytes"]),
            "retention.ms": str(self.retention_ms),
            "retention.bytes": str(self["log.retention.bytes"]),
            "cleanup.policy": str(self["log.cleanup.policy"]),
            "message.timestamp.type": str(self["log.message.timestamp.type"]),
            "max.message.bytes": str(self["message.max.bytes"]),
            "compression.type": str(self["compression.type"]),
            "min.insync.replicas": str(self["min.insync.replicas"]),
            "file.delete.delay.ms": str(self["log.segment.delete.delay.ms"]),
            "unclean.leader.election.enable": str(self["unclean.leader.election.enable"]).lower(),
        }
