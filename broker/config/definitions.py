"""Config definitions: every topic and broker config's name, type, Kafka's default, validation.

Kafka's ConfigDef, as the admin APIs see it. ``TOPIC_CONFIGS`` are Kafka 3.9's topic configs
(TopicConfig / LogConfig) with their broker *synonyms* in precedence order, each with its unit
(``retention.ms`` <- ``log.retention.ms``, ``log.retention.minutes`` (x60000),
``log.retention.hours`` (x3600000)). :func:`broker_configs` is the one broker table: every
property :mod:`.properties` reads, the topic configs' synonyms, and Kafka 4.x's dynamic broker
configs (DynamicBrokerConfig.AllDynamicConfigs: ``KAFKA_DYNAMIC_BROKER_CONFIGS`` below). Which
of them may change dynamically is Kafka's list: the listener and security configs only per
broker (not at the cluster default), the listener configs also as
``listener.name.<listener>.<config>``, validated as the base config; unknown names and static
configs are refused. Configs whose mechanism Samsa lacks (Kerberos, tiered storage, thread
pools) are stored and described all the same (the README lists them).

Validation follows Kafka's ConfigDef: a type (Not a number of type LONG), a range (Value
must be at least -1, Value must be no more than 1.0), or a set of strings (String must be one
of: compact, delete). Every failure is an :class:`InvalidConfigError` (INVALID_CONFIG) carrying
Kafka's message.

How a value is resolved through the layers is :mod:`.resolution`; the dynamic layers themselves
are :mod:`.dynamic`. This module holds tables and pure checks only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from protocol.errors import InvalidConfigError

from .properties import BROKER_DEFAULTS, BrokerConfig

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
    per_broker: bool = False  # a dynamic broker config that only a broker id may set, not the cluster default
    listener: bool = False  # may also be set per listener as listener.name.<listener>.<name>
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
        """Kafka's ConfigDef.Range.ensureValid, bounds printed as Java prints them (a DOUBLE's as 1.0)."""
        def shown(x: float) -> str:
            return str(float(x)) if self.type is ConfigType.DOUBLE else _num(x)

        if self.at_least is not None and n < self.at_least:
            raise bad(f"Value must be at least {shown(self.at_least)}")
        if self.at_most is not None and n > self.at_most:
            raise bad(f"Value must be no more than {shown(self.at_most)}")


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


def _dynamic_def(name: str, typ: ConfigType, default: str | None, doc: str, *, at_least: float | None = None,
                 at_most: float | None = None, one_of: tuple[str, ...] | None = None, per_broker: bool = False,
                 listener: bool = False) -> ConfigDef:
    return ConfigDef(name, typ, default, doc, at_least, at_most, one_of, sensitive=typ is ConfigType.PASSWORD,
                     per_broker=per_broker, listener=listener)


_LISTENER_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
_JMX = "org.apache.kafka.common.metrics.JmxReporter"
_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"


def _listener(name: str, typ: ConfigType, default: str | None, doc: str, *, at_least: float | None = None,
              at_most: float | None = None, one_of: tuple[str, ...] | None = None) -> ConfigDef:
    """DynamicListenerConfig's configs: per broker, and per listener with the listener prefix."""
    return _dynamic_def(name, typ, default, doc, at_least=at_least, at_most=at_most, one_of=one_of,
                        per_broker=True, listener=True)


# Kafka 4.x's dynamic broker configs (DynamicBrokerConfig.AllDynamicConfigs: DynamicListenerConfig,
# SslConfigs.RECONFIGURABLE_CONFIGS, LogCleaner, DynamicThreadPool, SocketServer, the producer
# state manager, remote log and replication configs, metric.reporters, config.providers; the log
# configs are the topic configs' broker synonyms above). Types, defaults and validators are
# KafkaConfig's. Which of them change what Samsa does is in the README ("Dynamic broker configs").
KAFKA_DYNAMIC_BROKER_CONFIGS: tuple[ConfigDef, ...] = (
    _listener("listeners", T.STRING, "PLAINTEXT://:9092", "Comma-separated list of URIs to listen on."),
    _listener("listener.security.protocol.map", T.STRING, _LISTENER_MAP,
              "Map between listener names and security protocols."),
    _listener("principal.builder.class", T.CLASS, _PRINCIPAL_BUILDER,
              "The fully qualified name of a class that implements the KafkaPrincipalBuilder interface."),
    _listener("ssl.protocol", T.STRING, "TLSv1.3", "The SSL protocol used to generate the SSLContext."),
    _listener("ssl.provider", T.STRING, None, "The name of the security provider used for SSL connections."),
    _listener("ssl.cipher.suites", T.LIST, "", "A list of cipher suites."),
    _listener("ssl.enabled.protocols", T.LIST, "TLSv1.2,TLSv1.3", "The list of protocols enabled for SSL."),
    _listener("ssl.keystore.type", T.STRING, "JKS", "The file format of the key store file."),
    _listener("ssl.keystore.location", T.STRING, None, "The location of the key store file."),
    _listener("ssl.keystore.password", T.PASSWORD, None, "The store password for the key store file."),
    _listener("ssl.key.password", T.PASSWORD, None, "The password of the private key in the key store file."),
    _listener("ssl.keystore.key", T.PASSWORD, None, "Private key in the format specified by 'ssl.keystore.type'."),
    _listener("ssl.keystore.certificate.chain", T.PASSWORD, None,
              "Certificate chain in the format specified by 'ssl.keystore.type'."),
    _listener("ssl.truststore.type", T.STRING, "JKS", "The file format of the trust store file."),
    _listener("ssl.truststore.location", T.STRING, None, "The location of the trust store file."),
    _listener("ssl.truststore.password", T.PASSWORD, None, "The password for the trust store file."),
    _listener("ssl.truststore.certificates", T.PASSWORD, None,
              "Trusted certificates in the format specified by 'ssl.truststore.type'."),
    _listener("ssl.keymanager.algorithm", T.STRING, "SunX509",
              "The algorithm used by key manager factory for SSL connections."),
    _listener("ssl.trustmanager.algorithm", T.STRING, "PKIX",
              "The algorithm used by trust manager factory for SSL connections."),
    _listener("ssl.endpoint.identification.algorithm", T.STRING, "https",
              "The endpoint identification algorithm to validate server hostname using server certificate."),
    _listener("ssl.secure.random.implementation", T.STRING, None,
              "The SecureRandom PRNG implementation to use for SSL cryptography operations."),
    _listener("ssl.client.auth", T.STRING, "none", "Whether the broker requests or requires client authentication.",
              one_of=("required", "requested", "none")),
    _listener("ssl.engine.factory.class", T.CLASS, None,
              "The class of type org.apache.kafka.common.security.auth.SslEngineFactory."),
    _listener("sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI",
              "SASL mechanism used for inter-broker communication."),
    _listener("sasl.jaas.config", T.PASSWORD, None, "JAAS login context parameters for SASL connections."),
    _listener("sasl.enabled.mechanisms", T.LIST, "GSSAPI", "The list of SASL mechanisms enabled in the server."),
    _listener("sasl.kerberos.service.name", T.STRING, None, "The Kerberos principal name that Kafka runs as."),
    _listener("sasl.kerberos.kinit.cmd", T.STRING, "/usr/bin/kinit", "Kerberos kinit command path."),
    _listener("sasl.kerberos.ticket.renew.window.factor", T.DOUBLE, "0.8",
              "Login thread will sleep until this fraction of the time to the ticket's expiry has been reached."),
    _listener("sasl.kerberos.ticket.renew.jitter", T.DOUBLE, "0.05",
              "Percentage of random jitter added to the renewal time."),
    _listener("sasl.kerberos.min.time.before.relogin", T.LONG, "60000",
              "Login thread sleep time between refresh attempts."),
    _listener("sasl.kerberos.principal.to.local.rules", T.LIST, "DEFAULT",
              "A list of rules for mapping from principal names to short names."),
    _listener("sasl.login.refresh.window.factor", T.DOUBLE, "0.8",
              "Login refresh thread sleeps until this fraction of the credential's lifetime has been reached.",
              at_least=0.5, at_most=1.0),
    _listener("sasl.login.refresh.window.jitter", T.DOUBLE, "0.05",
              "The maximum amount of random jitter relative to the credential's lifetime.",
              at_least=0.0, at_most=0.25),
    _listener("sasl.login.refresh.min.period.seconds", T.SHORT, "60",
              "The desired minimum time for the login refresh thread to wait before refreshing a credential.",
              at_least=0, at_most=900),
    _listener("sasl.login.refresh.buffer.seconds", T.SHORT, "300",
              "The amount of buffer time before credential expiration to maintain when refreshing a credential.",
              at_least=0, at_most=3600),
    # per listener too, but also at the cluster-wide default (ClusterLevelListenerConfigs)
    _dynamic_def("max.connections", T.INT, str(INT_MAX), "The maximum number of connections allowed in the broker.",
                 at_least=0, listener=True),
    _dynamic_def("max.connection.creation.rate", T.INT, str(INT_MAX),
                 "The maximum connection creation rate allowed in the broker at any time.", at_least=0, listener=True),
    _dynamic_def("num.network.threads", T.INT, "3", "The number of threads the server uses for network requests.",
                 at_least=1, listener=True),
    _dynamic_def("max.connections.per.ip", T.INT, str(INT_MAX),
                 "The maximum number of connections allowed from each ip.", at_least=0),
    _dynamic_def("max.connections.per.ip.overrides", T.STRING, "",
                 "A comma-separated list of per-ip or hostname overrides to the default maximum number of "
                 "connections."),
    # DynamicThreadPool
    _dynamic_def("num.io.threads", T.INT, "8", "The number of threads the server uses for processing requests.",
                 at_least=1),
    _dynamic_def("num.replica.fetchers", T.INT, "1", "Number of fetcher threads used to replicate records from each "
                 "source broker."),
    _dynamic_def("num.recovery.threads.per.data.dir", T.INT, "2",
                 "The number of threads per data directory used for log recovery at startup and flushing at shutdown.",
                 at_least=1),
    _dynamic_def("background.threads", T.INT, "10", "The number of threads to use for various background tasks.",
                 at_least=1),
    # LogCleaner (with message.max.bytes, log.cleaner.threads/dedupe.buffer.size/backoff.ms above)
    _dynamic_def("log.cleaner.dedupe.buffer.load.factor", T.DOUBLE, "0.9",
                 "Log cleaner dedupe buffer load factor: the percentage full the dedupe buffer can become."),
    _dynamic_def("log.cleaner.io.buffer.size", T.INT, "524288",
                 "The total memory used for log cleaner I/O buffers across all cleaner threads.", at_least=0),
    _dynamic_def("log.cleaner.io.max.bytes.per.second", T.DOUBLE, "1.7976931348623157E308",
                 "The log cleaner will be throttled so that the sum of its read and write i/o will be less than this "
                 "value on average."),
    _dynamic_def("log.flush.scheduler.interval.ms", T.LONG, str(LONG_MAX),
                 "The frequency in ms that the log flusher checks whether any log needs to be flushed to disk."),
    # the producer state manager
    _dynamic_def("producer.id.expiration.ms", T.INT, "86400000",
                 "The time in ms that a topic partition leader will wait before expiring producer IDs.", at_least=1),
    _dynamic_def("transaction.partition.verification.enable", T.BOOLEAN, "true",
                 "Enable verification that checks that the partition has been added to the transaction before writing "
                 "transactional records to the partition."),
    # remote log (tiered storage) and replication
    _dynamic_def("remote.log.index.file.cache.total.size.bytes", T.LONG, "1073741824",
                 "The total size of the space allocated to store index files fetched from remote storage.", at_least=1),
    _dynamic_def("remote.fetch.max.wait.ms", T.INT, "500",
                 "The maximum amount of time the server will wait before answering a remote fetch request.",
                 at_least=1),
    _dynamic_def("remote.log.manager.copy.max.bytes.per.second", T.LONG, str(LONG_MAX),
                 "The maximum number of bytes that can be copied from local storage to remote storage per second.",
                 at_least=1),
    _dynamic_def("remote.log.manager.fetch.max.bytes.per.second", T.LONG, str(LONG_MAX),
                 "The maximum number of bytes that can be read from remote storage to local storage per second.",
                 at_least=1),
    _dynamic_def("remote.list.offsets.request.timeout.ms", T.LONG, "30000",
                 "The maximum amount of time the server will wait for the remote list offsets request to complete.",
                 at_least=1),
    _dynamic_def("remote.log.manager.copier.thread.pool.size", T.INT, "10",
                 "Size of the thread pool used in scheduling tasks to copy segments.", at_least=1),
    _dynamic_def("remote.log.manager.expiration.thread.pool.size", T.INT, "10",
                 "Size of the thread pool used in scheduling tasks to clean up the expired remote log segments.",
                 at_least=1),
    _dynamic_def("remote.log.manager.follower.thread.pool.size", T.INT, "2",
                 "Size of the thread pool used in scheduling follower tasks to read the highest-uploaded "
                 "remote offset.",
                 at_least=1),
    _dynamic_def("remote.log.reader.threads", T.INT, "10",
                 "Size of the thread pool that is allocated for handling remote log reads.", at_least=1),
    _dynamic_def("follower.fetch.last.tiered.offset.enable", T.BOOLEAN, "false",
                 "If enabled, a follower starts replicating from the leader's last tiered offset (KIP-1023)."),
    _dynamic_def("metric.reporters", T.LIST, _JMX, "A list of classes to use as metrics reporters."),
    _dynamic_def("config.providers", T.LIST, "", "Comma-separated names of ConfigProvider classes."),
)

# listener.name.<listener>.<mechanism>.<config> (Kafka's ListenerMechanismConfigs)
LISTENER_MECHANISM_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in (
    _dynamic_def("sasl.jaas.config", T.PASSWORD, None, "JAAS login context parameters for SASL connections."),
    _dynamic_def("sasl.login.callback.handler.class", T.CLASS, None, "The fully qualified name of a SASL login "
                 "callback handler class."),
    _dynamic_def("sasl.login.class", T.CLASS, None, "The fully qualified name of a class that implements the Login "
                 "interface."),
    _dynamic_def("sasl.server.callback.handler.class", T.CLASS, None, "The fully qualified name of a SASL server "
                 "callback handler class."),
    _dynamic_def("connections.max.reauth.ms", T.LONG, "0", "The maximum session lifetime of a SASL connection, after "
                 "which it must re-authenticate (0: none)."),
)}
_LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]+)\.(.+)")
THREAD_POOL_CONFIGS = ("num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                       "background.threads")


def _broker_defs() -> dict[str, ConfigDef]:
    """Broker configs: every property the broker reads, plus the topic defaults' synonyms."""
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
    # Every config Kafka 4.x may change dynamically (DynamicBrokerConfig.AllDynamicConfigs), with
    # KafkaConfig's type, default and validator; where Samsa's table above already has the name,
    # Kafka's definition replaces it but Samsa's default stays (the value the broker really uses).
    for d in KAFKA_DYNAMIC_BROKER_CONFIGS:
        prior = out.get(d.name)
        out[d.name] = d if prior is None else dataclasses.replace(d, default=prior.default)
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



def _broker_config_defs(name: str) -> tuple[ConfigDef, ConfigDef] | None:
    """(the definition ``name`` is described with, the one its value is checked with): the same for
    a plain broker config; for ``listener.name.<listener>.<config>`` (or ``.<mechanism>.<config>``
    for Kafka's listener mechanism configs such as ``sasl.jaas.config``) the listener config's,
    under the prefixed name for describing and the base name for messages, as Kafka validates the
    base config."""
    d = broker_configs().get(name)
    if d is not None:
        return d, d
    m = _LISTENER_PREFIX.fullmatch(name)
    if m is None:
        return None
    base = m.group(2)
    bd = broker_configs().get(base)
    if bd is not None and bd.listener:
        return dataclasses.replace(bd, name=name), bd
    mechanism, _, config = base.partition(".")
    md = LISTENER_MECHANISM_CONFIGS.get(config)
    if mechanism and md is not None:
        return dataclasses.replace(md, name=name, per_broker=True), md
    return None


def broker_config_def(name: str) -> ConfigDef | None:
    """The definition of a broker config name, listener-prefixed names included (None: unknown)."""
    defs = _broker_config_defs(name)
    return defs[0] if defs else None


def validate_broker_config(name: str, value: str | None) -> str:
    """One dynamic broker config: normalised value, or InvalidConfigError with Kafka's message."""
    defs = _broker_config_defs(name)
    if defs is None:
        if is_reconfigurable(name) and value is not None:
            return value  # a listener's keystore/truststore (dynamic listener reconfiguration)
        raise InvalidConfigError(message=f"Unknown broker config name: {name}")
    d, base = defs
    if not d.dynamic:
        raise InvalidConfigError(message=f"Cannot update these configs dynamically: [{name}]")
    return base.parse(value)


def check_update_mode(names: Iterable[str], default_entity: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs: the listener and security configs (and every
    listener-prefixed one but max.connections, max.connection.creation.rate, num.network.threads)
    are per broker, refused at the cluster-wide default."""
    if not default_entity:
        return
    per_broker = sorted(n for n in names if (d := broker_config_def(n)) is not None and d.per_broker)
    if per_broker:
        raise InvalidConfigError(message="Cannot update these configs at default cluster level, broker id must be "
                                         f"specified: [{', '.join(per_broker)}]")


def check_thread_pools(broker_config: BrokerConfig, new: Mapping[str, str]) -> None:
    """Kafka's DynamicThreadPool.validateReconfiguration: a thread count changes by at most half
    or double its current value at a time."""
    for name in THREAD_POOL_CONFIGS:
        if name not in new:
            continue
        value = int(new[name])
        current = int(str(broker_config.props.get(name) or broker_configs()[name].default))
        if value == current:
            continue
        failed = f"Dynamic thread count update validation failed for {name}={value}"
        if value <= 0:
            raise InvalidConfigError(message=f"{failed}, value should be at least 1")
        if value < current / 2:
            raise InvalidConfigError(message=f"{failed}, value should be at least half the current value {current}")
        if value > current * 2:
            raise InvalidConfigError(
                message=f"{failed}, value should not be greater than double the current value {current}")


# Settings whose change (AlterConfigs) rebuilds a listener's TLS context (broker/security/tls.py).
RELOADABLE = ("ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
              "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.location",
              "ssl.truststore.type", "ssl.truststore.password", "ssl.truststore.certificates")


def is_reconfigurable(name: str) -> bool:
    """``ssl.keystore.location``, ``listener.name.ssl.ssl.keystore.location`` ...: AlterConfigs may set these."""
    m = re.fullmatch(r"(?:listener\.name\.[a-z0-9_.-]+?\.)?(ssl\.[a-z.]+)", name)
    return m is not None and m.group(1) in RELOADABLE


def is_sensitive(name: str) -> bool:
    """Passwords, private keys, JAAS configs (which hold passwords) and the password encoder's
    secrets: never logged or described."""
    return name.endswith((".password", "ssl.keystore.key", "sasl.jaas.config", "password.encoder.secret",
                          "password.encoder.old.secret"))
