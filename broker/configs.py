"""Topic and broker configs as the admin APIs see them: names, types, defaults, validation,
synonyms, sources, and the dynamic broker configs (KIP-226) persisted beside the topics.

Theory of operation. A *topic* config's value is resolved the way Kafka resolves it:

1. the topic's own override (``DYNAMIC_TOPIC_CONFIG``), kept in the topic registry;
2. else the first of its broker *synonyms* that is set, each looked up as a dynamic
   per-broker config (``DYNAMIC_BROKER_CONFIG``), then the dynamic cluster default
   (``DYNAMIC_DEFAULT_BROKER_CONFIG``), then ``server.properties``/``--override``
   (``STATIC_BROKER_CONFIG``). Synonyms are ordered by precedence and may carry a unit:
   ``retention.ms`` <- ``log.retention.ms``, ``log.retention.minutes`` (x60000),
   ``log.retention.hours`` (x3600000);
3. else Kafka's default (``DEFAULT_CONFIG``).

DescribeConfigs reports that chain as the config's synonyms (v1+). A *broker* config's
value follows steps 2-3 for its own name.

Dynamic broker configs (IncrementalAlterConfigs/AlterConfigs on a BROKER resource, name
"0" or "" for the cluster default) are persisted in ``<log.dirs[0]>/samsa-dynamic-configs.json``
and pushed into the running :class:`~broker.config.BrokerConfig` (its ``props`` and typed
values), after which every topic's LogConfig is rebuilt, so a new ``log.retention.ms``
default applies to topics without an override at once, as in Kafka.

Validation follows Kafka's ConfigDef: a type (Not a number of type LONG), a range (Value
must be at least -1), or a set of strings (String must be one of: compact, delete). Every
failure is an :class:`InvalidConfigError` (INVALID_CONFIG) carrying Kafka's message.

This module owns no sockets; handlers in ``broker/apis`` call it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import ErrorCode, InvalidConfigError, KafkaError

if TYPE_CHECKING:
    from broker.config import BrokerConfig

log = logging.getLogger("samsa.configs")

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ``config_type`` (KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs v1+ ``config_source`` (KIP-226)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    DYNAMIC_CLIENT_METRICS_CONFIG = 7
    DYNAMIC_GROUP_CONFIG = 8


@dataclass(frozen=True)
class ConfigDef:
    """One config: its type, Kafka's default (as the string DescribeConfigs shows), validation."""

    name: str
    type: ConfigType
    default: str | None
    doc: str
    at_least: float | None = None
    at_most: float | None = None
    one_of: tuple[str, ...] | None = None
    # broker synonyms in precedence order: (broker property, multiplier to this config's unit)
    synonyms: tuple[tuple[str, int], ...] = ()
    sensitive: bool = False
    dynamic: bool = True  # for broker configs: may be altered without a restart
    extra_check: Callable[[str], str | None] | None = None

    def parse(self, raw: str | None) -> str:
        """Validate ``raw``; return the normalised string to store. Raises InvalidConfigError."""
        if raw is None:
            raise InvalidConfigError(message=f"Null value not supported for config {self.name}")
        value = raw.strip()

        def bad(reason: str) -> InvalidConfigError:
            return InvalidConfigError(message=f"Invalid value {raw} for configuration {self.name}: {reason}")

        if self.type in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
            try:
                n = int(value)
            except ValueError:
                raise bad(f"Not a number of type {self.type.name}") from None
            limit = {ConfigType.INT: INT_MAX, ConfigType.LONG: LONG_MAX, ConfigType.SHORT: 32767}[self.type]
            if not -limit - 1 <= n <= limit:
                raise bad(f"Not a number of type {self.type.name}")
            self._range(n, bad)
            value = str(n)
        elif self.type is ConfigType.DOUBLE:
            try:
                x = float(value)
            except ValueError:
                raise bad("Not a number of type DOUBLE") from None
            self._range(x, bad)
        elif self.type is ConfigType.BOOLEAN:
            if value.lower() not in ("true", "false"):
                raise bad("Expected value to be either true or false")
            value = value.lower()
        elif self.type is ConfigType.LIST:
            items = [v.strip() for v in value.split(",") if v.strip()]
            # Kafka's ValidList checks each item; an empty list is valid (an empty
            # cleanup.policy means neither delete nor compact: the log is kept).
            if self.one_of is not None:
                for item in items:
                    if item not in self.one_of:
                        raise bad(f"String must be one of: {', '.join(self.one_of)}")
            value = ",".join(items)
        elif self.one_of is not None and value not in self.one_of:
            raise bad(f"String must be one of: {', '.join(self.one_of)}")
        if self.extra_check is not None:
            reason = self.extra_check(value)
            if reason:
                raise bad(reason)
        return value

    def _range(self, n: float, bad: Callable[[str], InvalidConfigError]) -> None:
        if self.at_least is not None and n < self.at_least:
            if self.at_most is not None:
                raise bad(f"Value must be in the range [{_num(self.at_least)}, {_num(self.at_most)}]")
            raise bad(f"Value must be at least {_num(self.at_least)}")
        if self.at_most is not None and n > self.at_most:
            if self.at_least is not None:
                raise bad(f"Value must be in the range [{_num(self.at_least)}, {_num(self.at_most)}]")
            raise bad(f"Value must be no more than {_num(self.at_most)}")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _gzip_level(v: str) -> str | None:
    return None if int(v) == -1 or 1 <= int(v) <= 9 else "Value must be -1 or in the range [1, 9]"


T = ConfigType
_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")


def _strategy(v: str) -> str | None:
    short = v.rsplit(".", 1)[-1]
    return None if short in _STRATEGIES else f"String must be one of: {', '.join(_STRATEGIES)}"


def _schema_validation_configs() -> list[ConfigDef]:
    """Confluent Server's broker-side schema validation configs, with Redpanda's names beside them."""
    out = []
    for part in ("key", "value"):
        out += [
            ConfigDef(f"confluent.{part}.schema.validation", T.BOOLEAN, "false",
                      f"True if the broker refuses records whose {part} lacks the magic byte and a schema id "
                      "registered under the subject the subject name strategy names (needs schema.registry.listeners)."),
            ConfigDef(f"confluent.{part}.subject.name.strategy", T.STRING,
                      "io.confluent.kafka.serializers.subject.TopicNameStrategy",
                      f"How the subject of a record's {part} schema is named: TopicNameStrategy (<topic>-{part}), "
                      "RecordNameStrategy (<record name>) or TopicRecordNameStrategy (<topic>-<record name>).",
                      extra_check=_strategy),
            ConfigDef(f"redpanda.{part}.schema.id.validation", T.BOOLEAN, "false",
                      f"Redpanda's name for confluent.{part}.schema.validation."),
            ConfigDef(f"redpanda.{part}.subject.name.strategy", T.STRING, "TopicNameStrategy",
                      f"Redpanda's name for confluent.{part}.subject.name.strategy.", extra_check=_strategy),
        ]
    return out


_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Kafka's topic configs (TopicConfig / LogConfig), in Kafka 3.9 with its defaults.
TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    ConfigDef("cleanup.policy", T.LIST, "delete",
              "A string that is either \"delete\" or \"compact\" or both. The \"delete\" policy discards old "
              "segments when their retention time or size limit has been reached. The \"compact\" policy "
              "enables log compaction, which retains the latest value for each key.",
              one_of=("compact", "delete"), synonyms=(("log.cleanup.policy", 1),)),
    ConfigDef("compression.type", T.STRING, "producer",
              "Final compression type for a given topic: 'gzip', 'snappy', 'lz4', 'zstd', 'uncompressed' "
              "(no compression) or 'producer' (retain the codec set by the producer).",
              one_of=_COMPRESSION, synonyms=(("compression.type", 1),)),
    ConfigDef("compression.gzip.level", T.INT, "-1", "The compression level to use if compression.type is gzip.",
              extra_check=_gzip_level, synonyms=(("compression.gzip.level", 1),)),
    ConfigDef("compression.lz4.level", T.INT, "9", "The compression level to use if compression.type is lz4.",
              at_least=1, at_most=17, synonyms=(("compression.lz4.level", 1),)),
    ConfigDef("compression.zstd.level", T.INT, "3", "The compression level to use if compression.type is zstd.",
              at_least=-131072, at_most=22, synonyms=(("compression.zstd.level", 1),)),
    ConfigDef("delete.retention.ms", T.LONG, "86400000",
              "The amount of time to retain tombstone markers for log compacted topics. A consumer reading "
              "from offset 0 must finish within this time to see the final stage of a deleted key.",
              at_least=0, synonyms=(("log.cleaner.delete.retention.ms", 1),)),
    ConfigDef("file.delete.delay.ms", T.LONG, "60000", "The time to wait before deleting a file from the filesystem.",
              at_least=0, synonyms=(("log.segment.delete.delay.ms", 1),)),
    ConfigDef("flush.messages", T.LONG, str(LONG_MAX),
              "The number of messages written to a log partition before we force an fsync on the log.",
              at_least=1, synonyms=(("log.flush.interval.messages", 1),)),
    ConfigDef("flush.ms", T.LONG, str(LONG_MAX), "The time interval after which we force an fsync of the log.",
              at_least=0, synonyms=(("log.flush.interval.ms", 1),)),
    ConfigDef("follower.replication.throttled.replicas", T.LIST, "",
              "Replicas for which log replication should be throttled on the follower side."),
    ConfigDef("index.interval.bytes", T.INT, "4096",
              "How frequently Kafka adds an index entry to its offset index (bytes between entries).",
              at_least=0, synonyms=(("log.index.interval.bytes", 1),)),
    ConfigDef("leader.replication.throttled.replicas", T.LIST, "",
              "Replicas for which log replication should be throttled on the leader side."),
    ConfigDef("local.retention.bytes", T.LONG, "-2", "Local log size retained before deletion (tiered storage).",
              at_least=-2, synonyms=(("log.local.retention.bytes", 1),)),
    ConfigDef("local.retention.ms", T.LONG, "-2", "Local log age retained before deletion (tiered storage).",
              at_least=-2, synonyms=(("log.local.retention.ms", 1),)),
    ConfigDef("max.compaction.lag.ms", T.LONG, str(LONG_MAX),
              "The maximum time a message will remain ineligible for compaction in the log.",
              at_least=1, synonyms=(("log.cleaner.max.compaction.lag.ms", 1),)),
    ConfigDef("max.message.bytes", T.INT, "1048588",
              "The largest record batch size allowed by Kafka (after compression if compression is enabled).",
              at_least=0, synonyms=(("message.max.bytes", 1),)),
    ConfigDef("message.downconversion.enable", T.BOOLEAN, "true",
              "Whether down-conversion of message formats is enabled to satisfy consume requests.",
              synonyms=(("log.message.downconversion.enable", 1),)),
    ConfigDef("message.format.version", T.STRING, "3.0-IV1",
              "[DEPRECATED] The message format version; ignored for inter.broker.protocol.version 3.0+.",
              synonyms=(("log.message.format.version", 1),)),
    ConfigDef("message.timestamp.after.max.ms", T.LONG, str(LONG_MAX),
              "The maximum allowed difference between a record's timestamp in the future and the broker's.",
              at_least=0, synonyms=(("log.message.timestamp.after.max.ms", 1),)),
    ConfigDef("message.timestamp.before.max.ms", T.LONG, str(LONG_MAX),
              "The maximum allowed difference between a record's timestamp in the past and the broker's.",
              at_least=0, synonyms=(("log.message.timestamp.before.max.ms", 1),)),
    ConfigDef("message.timestamp.difference.max.ms", T.LONG, str(LONG_MAX),
              "[DEPRECATED] The maximum difference allowed between a record's timestamp and the broker's.",
              at_least=0, synonyms=(("log.message.timestamp.difference.max.ms", 1),)),
    ConfigDef("message.timestamp.type", T.STRING, "CreateTime",
              "Whether the timestamp in the message is message create time or log append time.",
              one_of=("CreateTime", "LogAppendTime"), synonyms=(("log.message.timestamp.type", 1),)),
    ConfigDef("min.cleanable.dirty.ratio", T.DOUBLE, "0.5",
              "How frequently the log compactor will attempt to clean the log: the ratio of dirty log to total.",
              at_least=0, at_most=1, synonyms=(("log.cleaner.min.cleanable.ratio", 1),)),
    ConfigDef("min.compaction.lag.ms", T.LONG, "0",
              "The minimum time a message will remain uncompacted in the log.",
              at_least=0, synonyms=(("log.cleaner.min.compaction.lag.ms", 1),)),
    ConfigDef("min.insync.replicas", T.INT, "1",
              "When a producer sets acks to \"all\", the minimum number of replicas that must acknowledge a write.",
              at_least=1, synonyms=(("min.insync.replicas", 1),)),
    ConfigDef("preallocate", T.BOOLEAN, "false", "True if we should preallocate the file on disk for a new segment.",
              synonyms=(("log.preallocate", 1),)),
    ConfigDef("remote.log.copy.disable", T.BOOLEAN, "false", "Disable copying of log segments to remote storage."),
    ConfigDef("remote.log.delete.on.disable", T.BOOLEAN, "false",
              "Whether remote log segments are deleted when tiered storage is disabled."),
    ConfigDef("remote.storage.enable", T.BOOLEAN, "false", "Enable tiered storage for the topic."),
    ConfigDef("retention.bytes", T.LONG, "-1",
              "The maximum size a partition can grow to before old log segments are discarded (-1: no limit).",
              synonyms=(("log.retention.bytes", 1),)),
    ConfigDef("retention.ms", T.LONG, "604800000",
              "The maximum time a log segment is retained before it is discarded (-1: no time limit).",
              at_least=-1, synonyms=(("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                                     ("log.retention.hours", 3_600_000))),
    ConfigDef("segment.bytes", T.INT, "1073741824", "The segment file size for the log.",
              at_least=14, synonyms=(("log.segment.bytes", 1),)),
    ConfigDef("segment.index.bytes", T.INT, "10485760", "The size of the index that maps offsets to file positions.",
              at_least=4, synonyms=(("log.index.size.max.bytes", 1),)),
    ConfigDef("segment.jitter.ms", T.LONG, "0", "The maximum random jitter subtracted from segment.ms.",
              at_least=0, synonyms=(("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000))),
    ConfigDef("segment.ms", T.LONG, "604800000",
              "The period of time after which Kafka will force the log to roll even if the segment is not full.",
              at_least=1, synonyms=(("log.roll.ms", 1), ("log.roll.hours", 3_600_000))),
    *_schema_validation_configs(),
    ConfigDef("unclean.leader.election.enable", T.BOOLEAN, "false",
              "Whether replicas not in the ISR may be elected as leader as a last resort (data loss possible).",
              synonyms=(("unclean.leader.election.enable", 1),)),
]}


def _broker_defs() -> dict[str, ConfigDef]:
    """Broker configs: every property the broker reads, plus the topic defaults' synonyms."""
    from broker.config import BROKER_DEFAULTS

    static_only = {"broker.id", "node.id", "listeners", "advertised.listeners", "log.dirs", "cluster.id",
                   "offsets.topic.num.partitions", "offsets.topic.replication.factor",
                   "transaction.state.log.num.partitions", "delete.topic.enable", "log.level",
                   "log.retention.check.interval.ms", "socket.request.max.bytes",
                   "metrics.listener", "console.listener", "console.allow.writes", "console.bootstrap.servers",
                   "console.metrics.urls", "replica.page.cache.retain.bytes", "schema.registry.listeners",
                   "schema.registry.bootstrap.servers", "schema.registry.max.request.bytes",
                   "schema.registry.advertised.listener", "schema.registry.leader.eligibility",
                   "schema.registry.topic.replication.factor", "console.schema.registry.url",
                   "schema.registry.kafkastore.security.protocol", "schema.registry.kafkastore.sasl.mechanism",
                   "schema.registry.kafkastore.sasl.jaas.config",
                   "schema.registry.kafkastore.ssl.truststore.location"}
    types = {bool: T.BOOLEAN, int: T.LONG, str: T.STRING}
    out: dict[str, ConfigDef] = {}
    for name, (typ, default) in BROKER_DEFAULTS.items():
        shown: str | None = str(default).lower() if typ is bool else str(default)
        if name in ("log.retention.ms", "log.retention.minutes", "log.roll.ms") and default == -1:
            shown = None  # Kafka shows these as null: the coarser synonym applies
        out[name] = ConfigDef(name, types[typ], shown, f"Broker property {name}.", dynamic=name not in static_only)
    # Topic-config synonyms not in BrokerConfig's table, with the topic config's type/validation.
    for tdef in TOPIC_CONFIGS.values():
        for syn, mult in tdef.synonyms:
            if syn in out:
                old = out[syn]
                out[syn] = ConfigDef(syn, tdef.type if mult == 1 else T.LONG, old.default, tdef.doc,
                                     tdef.at_least if mult == 1 else None, tdef.at_most if mult == 1 else None,
                                     tdef.one_of, dynamic=old.dynamic)
            else:
                default = tdef.default if mult == 1 else None
                out[syn] = ConfigDef(syn, tdef.type if mult == 1 else T.LONG, default, tdef.doc,
                                     tdef.at_least if mult == 1 else None, tdef.at_most if mult == 1 else None,
                                     tdef.one_of)
    out["log.retention.hours"] = ConfigDef("log.retention.hours", T.INT, "168",
                                           "The number of hours to keep a log file before deleting it.")
    out["log.roll.hours"] = ConfigDef("log.roll.hours", T.INT, "168",
                                      "The maximum time before a new log segment is rolled out (in hours).",
                                      at_least=1)
    out["log.cleaner.enable"] = ConfigDef("log.cleaner.enable", T.BOOLEAN, "true",
                                          "Enable the log cleaner process to run on the server.", dynamic=False)
    out["log.cleaner.dedupe.buffer.size"] = ConfigDef(
        "log.cleaner.dedupe.buffer.size", T.LONG, "134217728",
        "The total memory used for log deduplication (the cleaner's offset map).", at_least=0)
    out["log.cleaner.backoff.ms"] = ConfigDef("log.cleaner.backoff.ms", T.LONG, "15000",
                                              "The amount of time to sleep when there are no logs to clean.",
                                              at_least=0)
    out["log.cleaner.threads"] = ConfigDef("log.cleaner.threads", T.INT, "1",
                                           "The number of background threads to use for log cleaning.", at_least=0)
    return out


_BROKER_CONFIGS: dict[str, ConfigDef] | None = None


def broker_configs() -> dict[str, ConfigDef]:
    global _BROKER_CONFIGS
    if _BROKER_CONFIGS is None:
        _BROKER_CONFIGS = _broker_defs()
    return _BROKER_CONFIGS


# --- validation ---------------------------------------------------------------------------

def validate_topic_config(name: str, value: str | None) -> str:
    """One topic config: normalised value, or InvalidConfigError with Kafka's message."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        raise InvalidConfigError(message=f"Unknown topic config name: {name}")
    return d.parse(value)


def validate_topic_configs(configs: Mapping[str, str | None], broker_config: BrokerConfig | None = None,
                           ) -> dict[str, str]:
    """A topic's whole override map; also checks cross-field rules and that the log accepts it."""
    out = {name: validate_topic_config(name, value) for name, value in configs.items()}
    from log.config import LogConfig

    base = effective_topic_config(broker_config, {}) if broker_config is not None else {}
    LogConfig.from_properties({**base, **out})
    return out


def validate_broker_config(name: str, value: str | None) -> str:
    d = broker_configs().get(name)
    if d is None:
        from broker.security.tls import is_reconfigurable

        if is_reconfigurable(name) and value is not None:
            return value  # a listener's keystore/truststore (dynamic listener reconfiguration)
        if value is not None and re.fullmatch(r"listener\.name\.[a-z0-9_.-]+?\.max\.connection(s|\.creation\.rate)",
                                              name):
            return value  # a listener's connection limits (broker/connection_quotas.py checks the number)
        raise InvalidConfigError(message=f"Unknown broker config name: {name}")
    if not d.dynamic:
        raise InvalidConfigError(message=f"Cannot update these configs dynamically: [{name}]")
    return d.parse(value)


# --- resolution ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Resolved:
    name: str
    value: str | None
    source: ConfigSource
    synonyms: tuple[tuple[str, str | None, ConfigSource], ...]


def _dyn(broker_config: BrokerConfig | None) -> DynamicBrokerConfigs | None:
    return getattr(broker_config, "_samsa_dynamic", None)


def _broker_chain(broker_config: BrokerConfig | None, name: str) -> list[tuple[str, str | None, ConfigSource]]:
    """(name, value, source) of every place ``name`` is set for this broker, by precedence."""
    out: list[tuple[str, str | None, ConfigSource]] = []
    if broker_config is None:
        return out
    dyn = _dyn(broker_config)
    if dyn is not None:
        if name in dyn.per_broker:
            out.append((name, dyn.per_broker[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in dyn.cluster_default:
            out.append((name, dyn.cluster_default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        static = dyn.static_props
    else:
        static = broker_config.props
    if name in static:
        out.append((name, str(static[name]), ConfigSource.STATIC_BROKER_CONFIG))
    return out


def resolve_topic_config(broker_config: BrokerConfig | None, overrides: Mapping[str, str], name: str) -> Resolved:
    d = TOPIC_CONFIGS[name]
    chain: list[tuple[str, str | None, ConfigSource]] = []
    if name in overrides:
        chain.append((name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
    value: str | None = None
    for syn, mult in d.synonyms:
        for sname, sval, src in _broker_chain(broker_config, syn):
            if sval is not None and mult != 1:
                try:
                    n = int(sval)
                    sval_conv = str(n * mult if n >= 0 else n)
                except ValueError:
                    sval_conv = sval
                chain.append((sname, sval, src))
                if value is None:
                    value = sval_conv
            else:
                chain.append((sname, sval, src))
                if value is None:
                    value = sval
    if d.synonyms:
        first = d.synonyms[-1][0] if d.name == "retention.ms" or d.name == "segment.ms" else d.synonyms[0][0]
        bdef = broker_configs().get(first)
        chain.append((first, bdef.default if bdef else d.default, ConfigSource.DEFAULT_CONFIG))
    if name in overrides:
        return Resolved(name, overrides[name], ConfigSource.DYNAMIC_TOPIC_CONFIG, tuple(chain))
    if value is not None:
        src = next(s for n_, v, s in chain if s != ConfigSource.DYNAMIC_TOPIC_CONFIG)
        return Resolved(name, value, src, tuple(chain))
    return Resolved(name, d.default, ConfigSource.DEFAULT_CONFIG, tuple(chain))


def effective_topic_config(broker_config: BrokerConfig | None, overrides: Mapping[str, str]) -> dict[str, str]:
    """Every topic config's value for a topic with these overrides (what its LogConfig obeys)."""
    out: dict[str, str] = {}
    for name in TOPIC_CONFIGS:
        r = resolve_topic_config(broker_config, overrides, name)
        if r.value is not None:
            out[name] = r.value
    for name, value in overrides.items():  # names log/ knows that we do not (kept as given)
        out.setdefault(name, value)
    return out


def resolve_broker_config(broker_config: BrokerConfig, name: str, *, default_entity: bool = False) -> Resolved:
    d = broker_configs()[name]
    chain = _broker_chain(broker_config, name)
    if default_entity:  # the cluster-wide default resource shows only the dynamic default layer
        chain = [c for c in chain if c[2] == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    if chain:
        return Resolved(name, chain[0][1], chain[0][2], tuple(chain + [(name, d.default, ConfigSource.DEFAULT_CONFIG)]))
    return Resolved(name, d.default, ConfigSource.DEFAULT_CONFIG, ((name, d.default, ConfigSource.DEFAULT_CONFIG),))


# --- dynamic broker configs ---------------------------------------------------------------

class DynamicBrokerConfigs:
    """Per-broker and cluster-default dynamic configs of one broker: persisted, then applied.

    Invariant: ``BrokerConfig.props`` equals ``static_props`` overlaid with ``cluster_default``
    and then ``per_broker`` (broker's own wins), so every reader of the broker config sees the
    dynamic value without knowing about this class.
    """

    FILE = "samsa-dynamic-configs.json"

    def __init__(self, broker_config: BrokerConfig, path: Path) -> None:
        self.config = broker_config
        self.path = path
        self.static_props = dict(broker_config.props)
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}

    @classmethod
    def attach(cls, broker: Any) -> DynamicBrokerConfigs:
        """The broker's instance, created (and the persisted file applied) on first use."""
        existing = getattr(broker.config, "_samsa_dynamic", None)
        if existing is not None:
            return existing  # type: ignore[no-any-return]
        dyn = cls(broker.config, broker.config.log_dirs[0] / cls.FILE)
        dyn.load()
        broker.config._samsa_dynamic = dyn
        if dyn.per_broker or dyn.cluster_default:
            dyn.apply(broker)
        return dyn

    def load(self) -> None:
        """Read the file; password configs are decoded (broker/security/password_encoder.py)."""
        if not self.path.exists():
            return
        data = json.loads(self.path.read_text())
        self.per_broker = self._decoded({k: str(v) for k, v in data.get("broker", {}).items()})
        self.cluster_default = {k: str(v) for k, v in data.get("default", {}).items()}

    def _decoded(self, stored: dict[str, str]) -> dict[str, str]:
        """Kafka's DynamicBrokerConfig: decode with password.encoder.secret, else with
        password.encoder.old.secret (and store again under the new secret); a value neither
        decodes is dropped with an error (the static config, if any, applies)."""
        from broker.security.password_encoder import OLD_SECRET, PasswordEncoder, PasswordEncoderError
        from broker.security.password_encoder import is_password_config as is_pw

        out, reencode = {}, False
        encoders = [PasswordEncoder.from_config(self.config), PasswordEncoder.from_config(self.config, OLD_SECRET)]
        for k, v in stored.items():
            if not is_pw(k):
                out[k] = v
                continue
            for i, enc in enumerate(encoders):
                if enc is None:
                    continue
                try:
                    out[k] = enc.decode(v)
                    reencode |= i == 1
                    break
                except PasswordEncoderError:
                    continue
            else:
                log.error("Dynamic password config %s of %s could not be decoded with password.encoder.secret "
                          "(or password.encoder.old.secret); ignoring it", k, self.path)
        if reencode and encoders[0] is not None:
            self.per_broker = out
            self._persist()
            log.info("Dynamic password configs re-encoded with the new password.encoder.secret")
        return out

    def _persist(self) -> None:
        from broker.security.password_encoder import NO_SECRET, PasswordEncoder
        from broker.security.password_encoder import is_password_config as is_pw

        stored = dict(self.per_broker)
        if any(is_pw(k) for k in stored):
            enc = PasswordEncoder.from_config(self.config)
            if enc is None:
                raise KafkaError(ErrorCode.INVALID_REQUEST, NO_SECRET)
            stored = {k: enc.encode(v) if is_pw(k) else v for k, v in stored.items()}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"version": 1, "broker": stored, "default": self.cluster_default}, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def replace(self, default_entity: bool, configs: Mapping[str, str]) -> None:
        if default_entity:
            self.cluster_default = dict(configs)
        else:
            self.per_broker = dict(configs)
        self._persist()

    def apply(self, broker: Any) -> None:
        """Push the layers into BrokerConfig and rebuild every topic's LogConfig."""
        from broker import config as bc

        cfg = self.config
        merged = {**self.static_props, **self.cluster_default, **self.per_broker}
        for name in set(cfg.props) | set(merged):
            if name in merged:
                cfg.props[name] = merged[name]
            else:
                cfg.props.pop(name, None)
            if name in bc.BROKER_DEFAULTS:
                typ, default = bc.BROKER_DEFAULTS[name]
                raw = merged.get(name)
                cfg._values[name] = default if raw is None else bc._parse(name, typ, raw)
        for name in broker.topics.names():
            try:
                broker.replica_manager.apply_topic_config(name)
            except Exception:
                log.exception("Could not apply new broker defaults to topic %s", name)
        log.info("Dynamic broker configs now %s (cluster default %s)", _masked(self.per_broker),
                 _masked(self.cluster_default))


def is_sensitive(name: str) -> bool:
    """Passwords, private keys, JAAS configs (which hold passwords) and the password encoder's
    secrets: never logged or described."""
    return name.endswith((".password", "ssl.keystore.key", "sasl.jaas.config", "password.encoder.secret",
                          "password.encoder.old.secret"))


def _masked(configs: Mapping[str, str]) -> dict[str, str]:
    return {k: "[hidden]" if is_sensitive(k) else v for k, v in configs.items()}


def topic_log_config_properties(broker: Any, topic: str) -> dict[str, str]:
    info = broker.topics.get(topic)
    return effective_topic_config(broker.config, info.configs if info else {})
