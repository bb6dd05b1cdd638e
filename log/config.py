"""Topic-level log configuration, with Kafka's property names and defaults.

``LogConfig`` is what one partition's :class:`log.Log` obeys. It is built from a topic's
config overrides (``segment.bytes``...) layered over a broker-wide default, which in turn
comes from the broker's ``log.*`` properties (``log.segment.bytes``...). A ``Log``'s config
may be replaced live (IncrementalAlterConfigs); everything reads it at the moment of use.

Unknown topic config names are rejected with INVALID_CONFIG, as Kafka's
``LogConfig.validate`` does; names Kafka knows but Samsa does not act on are kept in
``others`` so DescribeConfigs can echo them back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar, cast

from protocol.errors import InvalidConfigError

# Topic config names Kafka accepts (TopicConfig.java) that do not map onto a field below.
_OTHER_TOPIC_CONFIGS: dict[str, str] = {
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "min.insync.replicas": "1",
    "unclean.leader.election.enable": "false",
    "segment.jitter.ms": "0",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.cleanable.dirty.ratio": "0.5",
    "delete.retention.ms": "86400000",
    "preallocate": "false",
    "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1",
    "message.timestamp.difference.max.ms": "9223372036854775807",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "9223372036854775807",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
    "remote.storage.enable": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    # broker-side schema validation (broker/schema_registry/validation.py): Confluent Server's
    # names and Redpanda's synonyms
    "confluent.key.schema.validation": "false",
    "confluent.value.schema.validation": "false",
    "confluent.key.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicNameStrategy",
    "confluent.value.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicNameStrategy",
    "redpanda.key.schema.id.validation": "false",
    "redpanda.value.schema.id.validation": "false",
    "redpanda.key.subject.name.strategy": "TopicNameStrategy",
    "redpanda.value.subject.name.strategy": "TopicNameStrategy",
}

# topic config name -> (field name, minimum value or None for strings)
_FIELDS: dict[str, tuple[str, int | None]] = {
    "segment.bytes": ("segment_bytes", 14),  # Kafka: at least LegacyRecord.RECORD_OVERHEAD_V0
    "segment.ms": ("segment_ms", 1),
    "segment.index.bytes": ("segment_index_bytes", 4),
    "index.interval.bytes": ("index_interval_bytes", 0),
    "retention.ms": ("retention_ms", -1),
    "retention.bytes": ("retention_bytes", -1),
    "file.delete.delay.ms": ("file_delete_delay_ms", 0),
    "message.timestamp.type": ("message_timestamp_type", None),
    "max.message.bytes": ("max_message_bytes", 0),
    "cleanup.policy": ("cleanup_policy", None),
}

# broker property -> topic config name (KafkaConfig's log.* defaults for topics)
BROKER_TO_TOPIC: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.retention.ms": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.message.timestamp.type": "message.timestamp.type",
    "message.max.bytes": "max.message.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "compression.type": "compression.type",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
}

TOPIC_CONFIG_NAMES: frozenset[str] = frozenset(_FIELDS) | frozenset(_OTHER_TOPIC_CONFIGS)


_T = TypeVar("_T")


@dataclass
class LogConfig:
    """One topic's log settings. Field names are Kafka's topic config names, dots to underscores."""

    segment_bytes: int = 1073741824          # segment.bytes
    segment_ms: int = 604800000              # segment.ms
    segment_index_bytes: int = 10485760      # segment.index.bytes
    index_interval_bytes: int = 4096         # index.interval.bytes
    retention_ms: int = 604800000            # retention.ms (-1 = forever)
    retention_bytes: int = -1                # retention.bytes (-1 = unlimited)
    file_delete_delay_ms: int = 60000        # file.delete.delay.ms
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    max_message_bytes: int = 1048588         # max.message.bytes
    cleanup_policy: str = "delete"           # cleanup.policy
    others: dict[str, str] = field(default_factory=dict)  # other known topic configs, as strings
    # What derived() computed from this object (not a config: no name, not compared, not copied)
    _derived: dict[Callable[[LogConfig], object], object] = field(default_factory=dict, init=False, repr=False,
                                                                  compare=False)

    def derived(self, compute: Callable[[LogConfig], _T]) -> _T:
        """``compute(self)``, computed once per object. A topic's config is replaced by a new
        LogConfig when it is altered (ReplicaManager.apply_topic_config), never changed in place,
        so a value derived from one stays right; this spares the Produce path parsing the same
        strings in ``others`` on every request (issue #26)."""
        try:
            return cast(_T, self._derived[compute])
        except KeyError:
            value = self._derived[compute] = compute(self)
            return value

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_entries(self) -> int:
        return self.segment_index_bytes // 8

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Apply topic config overrides (``segment.bytes``...) on top of ``base`` (or defaults).

        Raises :class:`InvalidConfigError` naming the bad property, like Kafka's
        ``LogConfig.validate``.
        """
        cfg = dataclasses.replace(base) if base is not None else cls()
        cfg.others = dict(cfg.others)
        for name, raw in props.items():
            if raw is None:
                continue
            value = str(raw).strip()
            if name in _FIELDS:
                attr, minimum = _FIELDS[name]
                if minimum is None:
                    setattr(cfg, attr, _check_string(name, value))
                else:
                    try:
                        n = int(value)
                    except ValueError:
                        raise InvalidConfigError(
                            message=f"Invalid value {value} for configuration {name}: Not a number of type LONG"
                        ) from None
                    if n < minimum:
                        raise InvalidConfigError(
                            message=f"Invalid value {value} for configuration {name}: Value must be at least {minimum}")
                    if n > 2**31 - 1 and attr in ("segment_bytes", "segment_index_bytes",
                                                  "index_interval_bytes", "max_message_bytes"):
                        raise InvalidConfigError(
                            message=f"Invalid value {value} for configuration {name}: Not a number of type INT")
                    setattr(cfg, attr, n)
            elif name in _OTHER_TOPIC_CONFIGS:
                cfg.others[name] = value
            else:
                raise InvalidConfigError(message=f"Unknown topic config name: {name}")
        return cfg

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, str]) -> LogConfig:
        """The broker-wide default topic config from ``server.properties`` names.

        Honours Kafka's unit variants: ``log.retention.{ms,minutes,hours}`` (ms wins) and
        ``log.roll.{ms,hours}``; other names are ignored (they belong to the broker).
        """
        topic: dict[str, str] = {}
        for bname, tname in BROKER_TO_TOPIC.items():
            if bname in props:
                topic[tname] = str(props[bname])
        if "log.retention.ms" not in props:
            if "log.retention.minutes" in props:
                topic["retention.ms"] = str(_scaled(props, "log.retention.minutes", 60_000))
            elif "log.retention.hours" in props:
                topic["retention.ms"] = str(_scaled(props, "log.retention.hours", 3_600_000))
        if "log.roll.ms" not in props and "log.roll.hours" in props:
            topic["segment.ms"] = str(_scaled(props, "log.roll.hours", 3_600_000))
        return cls.from_properties(topic)

    def to_properties(self) -> dict[str, str]:
        """Every topic config with its current value, as strings (DescribeConfigs)."""
        out = dict(_OTHER_TOPIC_CONFIGS)
        out.update(self.others)
        for name, (attr, _) in _FIELDS.items():
            out[name] = str(getattr(self, attr))
        return out


def _scaled(props: Mapping[str, str], name: str, factor: int) -> int:
    try:
        n = int(props[name])
    except ValueError:
        raise InvalidConfigError(message=f"Invalid value {props[name]} for configuration {name}") from None
    return -1 if n < 0 else n * factor


def _check_string(name: str, value: str) -> str:
    if name == "message.timestamp.type":
        if value not in ("CreateTime", "LogAppendTime"):
            raise InvalidConfigError(
                message=f"Invalid value {value} for configuration {name}: String must be one of: CreateTime, LogAppendTime")
    elif name == "cleanup.policy":
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if any(p not in ("delete", "compact") for p in parts):  # empty: neither, the log is kept
            raise InvalidConfigError(
                message=f"Invalid value {value} for configuration {name}: String must be one of: compact, delete")
        value = ",".join(parts)
    return value
