"""`samsa-kafka`: a PySpark Python data source that reads and writes Kafka topics.

Why it exists: Spark's own Kafka connector (`format("kafka")`, the JVM artifact
`spark-sql-kafka-0-10`) is not inside pyspark. Offline machines and Spark Connect clients
cannot load it, yet the pipeline must still run there. This source speaks to the broker
from Python workers with kafka-python, and mirrors the connector's contract so the pipeline
runs unchanged on either (`--source kafka|samsa-kafka`):

* the same schema: ``key binary, value binary, topic string, partition int, offset long,
  timestamp timestamp, timestampType int`` (+ ``headers array<struct<key string, value
  binary>>`` with ``includeHeaders=true``);
* the same core options: ``kafka.bootstrap.servers``, one of ``subscribe`` /
  ``subscribePattern`` / ``assign``, ``startingOffsets`` / ``endingOffsets`` (``earliest``,
  ``latest`` or JSON ``{"topic": {"0": 23, "1": -2}}`` with -2 = earliest, -1 = latest),
  ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp``, ``startingTimestamp``,
  ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``includeHeaders``, ``topic`` (sink default),
  and any ``kafka.<client property>`` that kafka-python understands
  (``kafka.isolation.level`` -> ``isolation_level``);
* the same offset JSON in the checkpoint, so an offset log reads the same way.

Theory of operation. Like the JVM connector it never joins a consumer group: the driver lists
partitions and offsets, each Spark task reads one topic-partition's ``[start, end)`` with
``assign`` + ``seek`` + ``poll``, and the offsets of each micro-batch are what Spark writes
to its checkpoint before the batch runs. A restarted query therefore replays the same
ranges, which (with an idempotent sink such as the file sink) gives exactly-once output.

Spark 4.0's Python streaming API has no admission control (``latestOffset()`` gets no start
offset), so ``maxOffsetsPerTrigger`` is applied against the position the reader last planned.
On restart Spark hands the reader the last offsets from its offset log (it calls
``partitions(latest, latest)`` through ``setLatestSeenOffset``), which is where that position
comes from. Under ``Trigger.AvailableNow`` Spark asks for the latest offset exactly once, so a
rate limit there would end the query early: the reader therefore ignores
``maxOffsetsPerTrigger`` when the option ``samsa.availableNow=true`` is set (the pipeline sets
it for that trigger).

Writes are at-least-once, as with the JVM sink: each task sends its rows with an idempotent
producer (acks=all) and flushes before reporting success; a retried batch may send again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTP
from kafka.consumer.fetcher import ConsumerRecord
from pyspark.sql import Row, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from broker.security.listeners import kafka_python_kwargs

FORMAT_NAME = "samsa-kafka"

BASE_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"

EARLIEST = -2
LATEST = -1

TopicPartition = tuple[str, int]
PartitionOffsets = dict[TopicPartition, int]


class KafkaSourceError(Exception):
    """A configuration or data-loss error, worded like the JVM connector's."""


# ---------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------


def _bool(value: str | None, default: bool) -> bool:
    if value is None:
        return default
    return str(value).strip().lower() == "true"


def offsets_to_json(offsets: PartitionOffsets) -> dict[str, dict[str, int]]:
    """{(t, p): o} -> {"t": {"p": o}}, the connector's checkpoint form (partitions as strings)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def offsets_from_json(obj: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {(t, int(p)): int(o) for t, parts in obj.items() for p, o in parts.items()}


class KafkaOptions:
    """The reader/writer options, parsed once, case-insensitively, as the connector does."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.raw = {str(k).lower(): str(v) for k, v in options.items()}
        self.bootstrap = self.raw.get("kafka.bootstrap.servers")
        if not self.bootstrap:
            raise KafkaSourceError("Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
        strategies = [k for k in ("subscribe", "subscribepattern", "assign") if k in self.raw]
        self.strategy = strategies[0] if len(strategies) == 1 else None
        self._strategy_count = len(strategies)
        self.include_headers = _bool(self.raw.get("includeheaders"), False)
        self.fail_on_data_loss = _bool(self.raw.get("failondataloss"), True)
        limit = self.raw.get("maxoffsetspertrigger")
        self.max_offsets_per_trigger = int(limit) if limit else None
        self.available_now = _bool(self.raw.get("samsa.availablenow"), False)
        self.poll_timeout_ms = int(self.raw.get("kafkaconsumer.polltimeoutms", "120000"))
        self.default_topic = self.raw.get("topic")

    def require_strategy(self) -> None:
        if self._strategy_count != 1:
            raise KafkaSourceError(
                "One of the following options must be specified for Kafka source: "
                "subscribe, subscribePattern, assign. See the docs for more details.")

    def client_config(self, role: str) -> dict[str, object]:
        """`kafka.*` options mapped onto kafka-python's config names where it knows them.

        The security settings are the Java client's, as given to Spark's connector
        (``kafka.security.protocol``, ``kafka.sasl.mechanism``, ``kafka.sasl.jaas.config``,
        ``kafka.ssl.truststore.location`` of type PEM, ``kafka.ssl.keystore.location`` ...), and
        are translated as the ``samsa`` tools translate ``--command-config``."""
        known = KafkaProducer.DEFAULT_CONFIG if role == "producer" else KafkaConsumer.DEFAULT_CONFIG
        config: dict[str, object] = {"bootstrap_servers": self.bootstrap.split(",")}  # type: ignore[union-attr]
        security = {k[len("kafka."):]: v for k, v in self.raw.items()
                    if k.startswith(("kafka.security.", "kafka.sasl.", "kafka.ssl."))}
        if security:
            for k in ("ssl.truststore.type", "ssl.keystore.type"):
                if security.get(k, "PEM").upper() != "PEM":
                    raise KafkaSourceError(f"kafka.{k}={security[k]} is not supported by the {FORMAT_NAME} "
                                           "source: use PEM files")
            kw = kafka_python_kwargs({**security, "security.protocol": security.get("security.protocol",
                                                                                   "PLAINTEXT")})
            config.update({k: v for k, v in kw.items() if v is not None and k != "bootstrap_servers"})
        for key, value in self.raw.items():
            if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
                continue
            if key.startswith(("kafka.security.", "kafka.sasl.", "kafka.ssl.")):
                continue
            name = key[len("kafka."):].replace(".", "_")
            if name not in known:
                continue
            default = known[name]
            if isinstance(default, bool):
                config[name] = value.lower() == "true"
            elif isinstance(default, int):
                config[name] = int(value)
            else:
                config[name] = value
        return config

    def schema(self) -> str:
        return BASE_SCHEMA + (", " + HEADERS_FIELD if self.include_headers else "")


# ---------------------------------------------------------------------------------------------
# Driver-side metadata: partitions and offsets (the connector's KafkaOffsetReader)
# ---------------------------------------------------------------------------------------------


class OffsetReader:
    """Lists the partitions the strategy selects and resolves offset specs, with no group.

    One kafka-python consumer, created lazily and kept for the reader's life: the streaming
    reader lives in one long-running Python worker on the driver, so reuse avoids a fresh
    connection and metadata round trip per micro-batch.
    """

    def __init__(self, opts: KafkaOptions) -> None:
        self.opts = opts
        self._consumer: KafkaConsumer | None = None

    @property
    def consumer(self) -> KafkaConsumer:
        if self._consumer is None:
            config = self.opts.client_config("consumer")
            config.update(group_id=None, enable_auto_commit=False, client_id="samsa-kafka-driver")
            self._consumer = KafkaConsumer(**config)
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def topic_partitions(self) -> list[TopicPartition]:
        opts = self.opts
        opts.require_strategy()
        c = self.consumer
        if opts.strategy == "assign":
            wanted = json.loads(opts.raw["assign"])
            return sorted((t, int(p)) for t, ps in wanted.items() for p in ps)
        if opts.strategy == "subscribe":
            topics = [t.strip() for t in opts.raw["subscribe"].split(",") if t.strip()]
        else:
            pattern = re.compile(opts.raw["subscribepattern"])
            topics = sorted(t for t in c.topics() if pattern.search(t) and not t.startswith("__"))
        out: list[TopicPartition] = []
        for topic in topics:
            parts = c.partitions_for_topic(topic)
            if parts:
                out.extend((topic, p) for p in parts)
        return sorted(out)

    def _tps(self, tps: Sequence[TopicPartition]) -> list[KTP]:
        return [KTP(t, p) for t, p in tps]

    def earliest(self, tps: Sequence[TopicPartition]) -> PartitionOffsets:
        if not tps:
            return {}
        res = self.consumer.beginning_offsets(self._tps(tps))
        return {(k.topic, k.partition): int(v) for k, v in res.items()}

    def latest(self, tps: Sequence[TopicPartition]) -> PartitionOffsets:
        if not tps:
            return {}
        res = self.consumer.end_offsets(self._tps(tps))
        return {(k.topic, k.partition): int(v) for k, v in res.items()}

    def for_timestamps(self, stamps: Mapping[TopicPartition, int]) -> PartitionOffsets:
        """First offset with timestamp >= ts, or latest when none (the connector's rule)."""
        if not stamps:
            return {}

        res = self.consumer.offsets_for_times({KTP(t, p): int(ts) for (t, p), ts in stamps.items()})
        out: PartitionOffsets = {}
        missing = []
        for (t, p) in stamps:
            found = res.get(KTP(t, p))
            if found is None:
                missing.append((t, p))
            else:
                out[(t, p)] = int(found.offset)
        out.update(self.latest(missing))
        return out

    def resolve(self, spec_name: str, default: str, tps: Sequence[TopicPartition]) -> PartitionOffsets:
        """Resolve startingOffsets/endingOffsets (and their ByTimestamp forms) to numbers."""
        raw = self.opts.raw
        by_ts = raw.get(spec_name.lower() + "bytimestamp")
        if by_ts:
            stamps = offsets_from_json(json.loads(by_ts))
            unknown = set(stamps) - set(tps)
            if set(stamps) != set(tps):
                raise KafkaSourceError(
                    f"If {spec_name}ByTimestamp contains specific offsets, you must specify all "
                    f"topics. Specified: {sorted(stamps)} Assigned: {sorted(tps)} ({sorted(unknown)})")
            return self.for_timestamps(stamps)
        if spec_name == "startingOffsets" and raw.get("startingtimestamp"):
            ts = int(raw["startingtimestamp"])
            return self.for_timestamps({tp: ts for tp in tps})
        spec = raw.get(spec_name.lower(), default).strip()
        if spec == "earliest":
            return self.earliest(tps)
        if spec == "latest":
            return self.latest(tps)
        given = offsets_from_json(json.loads(spec))
        if set(given) != set(tps):
            raise KafkaSourceError(
                f"If {spec_name} contains specific offsets, you must specify all TopicPartitions.\n"
                f"Use -1 for latest, -2 for earliest.\nSpecified: {sorted(given)} Assigned: {sorted(tps)}")
        need_e = [tp for tp, o in given.items() if o == EARLIEST]
        need_l = [tp for tp, o in given.items() if o == LATEST]
        given.update(self.earliest(need_e))
        given.update(self.latest(need_l))
        return given


# ---------------------------------------------------------------------------------------------
# Executor-side reading of one offset range (the connector's KafkaDataConsumer)
# ---------------------------------------------------------------------------------------------


class KafkaInputPartition(InputPartition):
    """One topic-partition's half-open offset range [from_offset, until_offset)."""

    def __init__(self, topic: str, partition: int, from_offset: int, until_offset: int) -> None:
        super().__init__((topic, partition, from_offset, until_offset))
        self.topic = topic
        self.partition = partition
        self.from_offset = from_offset
        self.until_offset = until_offset


def _timestamp(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, tz=UTC)


def fetch_chunks(opts: KafkaOptions, part: KafkaInputPartition) -> Iterator[list[ConsumerRecord]]:
    """Yield the records of one range as lists (one per poll), in offset order, each once.

    Offsets missing inside the range (compaction, transaction markers, aborted records under
    read_committed) are skipped by following the consumer's position, as the connector does.
    If the range starts below the log start offset (retention or DeleteRecords removed it),
    that is data loss: an error with failOnDataLoss=true, else reading resumes at the
    earliest available offset.
    """
    if part.until_offset <= part.from_offset:
        return
    config = opts.client_config("consumer")
    config.update(group_id=None, enable_auto_commit=False, auto_offset_reset="none",
                  client_id="samsa-kafka-executor")
    consumer = KafkaConsumer(**config)
    tp = KTP(part.topic, part.partition)
    try:
        consumer.assign([tp])
        start = part.from_offset
        earliest = int(consumer.beginning_offsets([tp])[tp])
        if start < earliest:
            if opts.fail_on_data_loss:
                raise KafkaSourceError(
                    f"Cannot fetch offset {start} (GroupId: none, TopicPartition: {part.topic}-{part.partition}). "
                    "Some data may have been lost because they are not available in Kafka any more; "
                    "either the data was aged out by Kafka or the topic may have been deleted before all "
                    "the data in the topic was processed. If you don't want your streaming query to fail "
                    "on such cases, set the source option \"failOnDataLoss\" to \"false\".")
            start = earliest
        if start >= part.until_offset:
            return
        consumer.seek(tp, start)
        position = start
        idle_ms = 0
        while position < part.until_offset:
            batch = consumer.poll(timeout_ms=500, max_records=5000, update_offsets=True)
            chunk = [r for r in batch.get(tp, []) if position <= r.offset < part.until_offset]
            if chunk:
                yield chunk
                position = chunk[-1].offset + 1
            new_pos = max(position, min(int(consumer.position(tp)), part.until_offset))
            if chunk or new_pos > position:
                idle_ms = 0
            else:
                idle_ms += 500
                if idle_ms >= opts.poll_timeout_ms:
                    raise KafkaSourceError(
                        f"Cannot fetch record for offset {position} in {opts.poll_timeout_ms} milliseconds")
            position = new_pos
    finally:
        consumer.close()


def read_range(opts: KafkaOptions, part: KafkaInputPartition) -> Iterator[tuple[object, ...]]:
    """The range as Python tuples in the source schema's column order."""
    for chunk in fetch_chunks(opts, part):
        for rec in chunk:
            row: tuple[object, ...] = (rec.key, rec.value, rec.topic, rec.partition, rec.offset,
                                    _timestamp(rec.timestamp), rec.timestamp_type)
            if opts.include_headers:
                row += ([(k, v) for k, v in (rec.headers or [])] or None,)
            yield row


def arrow_schema(include_headers: bool) -> pa.Schema:
    fields = [("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
              ("partition", pa.int32()), ("offset", pa.int64()),
              ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32())]
    if include_headers:
        fields.append(("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    return pa.schema(fields)


def read_arrow(opts: KafkaOptions, part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """The range as Arrow record batches, one per poll.

    Spark's Python data source accepts Arrow batches as they are, which skips the per-row
    type checks and conversions of the tuple path (several times faster on these rows).
    """
    schema = arrow_schema(opts.include_headers)
    for chunk in fetch_chunks(opts, part):
        cols = [
            pa.array([r.key for r in chunk], pa.binary()),
            pa.array([r.value for r in chunk], pa.binary()),
            pa.array([r.topic for r in chunk], pa.string()),
            pa.array([r.partition for r in chunk], pa.int32()),
            pa.array([r.offset for r in chunk], pa.int64()),
            pa.array([r.timestamp * 1000 for r in chunk], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array([r.timestamp_type for r in chunk], pa.int32()),
        ]
        if opts.include_headers:
            cols.append(pa.array([[{"key": k, "value": v} for k, v in (r.headers or [])] or None for r in chunk],
                                 schema.field("headers").type))
        yield pa.RecordBatch.from_arrays(cols, schema=schema)


# ---------------------------------------------------------------------------------------------
# Readers
# ---------------------------------------------------------------------------------------------


def _ranges(start: PartitionOffsets, end: PartitionOffsets, fallback_start: PartitionOffsets
            ) -> list[KafkaInputPartition]:
    parts = []
    for tp, until in sorted(end.items()):
        frm = start.get(tp, fallback_start.get(tp, 0))
        if until > frm:
            parts.append(KafkaInputPartition(tp[0], tp[1], frm, until))
    return parts


class KafkaBatchReader(DataSourceReader):
    """`spark.read.format("samsa-kafka")`: one task per topic-partition with data."""

    def __init__(self, opts: KafkaOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        raw = self.opts.raw
        if raw.get("startingoffsets", "").strip() == "latest":
            raise KafkaSourceError("starting offset can't be latest for batch queries on Kafka")
        if raw.get("endingoffsets", "").strip() == "earliest":
            raise KafkaSourceError("ending offset can't be earliest for batch queries on Kafka")
        reader = OffsetReader(self.opts)
        try:
            tps = reader.topic_partitions()
            start = reader.resolve("startingOffsets", "earliest", tps)
            end = reader.resolve("endingOffsets", "latest", tps)
        finally:
            reader.close()
        parts = _ranges(start, end, {})
        # Spark needs at least one partition; an empty range reads nothing.
        return parts or [KafkaInputPartition("", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        yield from read_arrow(self.opts, partition)


def rate_limit(start: PartitionOffsets, latest: PartitionOffsets, limit: int) -> PartitionOffsets:
    """Split `limit` offsets across partitions in proportion to their backlog.

    Every partition with a backlog advances by at least one offset, so a skewed topic never
    starves its small partitions (the connector's KafkaMicroBatchStream.rateLimit does the same).
    """
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= limit:
        return dict(latest)
    out: PartitionOffsets = {}
    for tp, off in latest.items():
        frm = start.get(tp, off)
        size = backlog[tp]
        if size == 0:
            out[tp] = max(frm, off) if tp not in start else frm
            continue
        share = max(1, int(limit * size / total))
        out[tp] = min(off, frm + share)
    return out


class KafkaStreamReader(DataSourceStreamReader):
    """`spark.readStream.format("samsa-kafka")`: offsets are {topic: {partition: offset}}."""

    def __init__(self, opts: KafkaOptions) -> None:
        self.opts = opts
        self.reader = OffsetReader(opts)
        self._initial: PartitionOffsets | None = None
        # The end offsets of the batch Spark planned last: the start of the next one.
        self._position: PartitionOffsets | None = None

    def initialOffset(self) -> dict:
        if self._initial is None:
            tps = self.reader.topic_partitions()
            if self.opts.raw.get("endingoffsets") or self.opts.raw.get("endingoffsetsbytimestamp"):
                raise KafkaSourceError("Ending offset not valid in streaming queries")
            self._initial = self.reader.resolve("startingOffsets", "latest", tps)
        return offsets_to_json(self._initial)

    def latestOffset(self) -> dict:
        tps = self.reader.topic_partitions()
        latest = self.reader.latest(tps)
        start = self._position
        if start is None:
            self.initialOffset()
            start = dict(self._initial or {})
        # Partitions that appeared since the start are read from their beginning.
        new = [tp for tp in latest if tp not in start]
        start = {**self.reader.earliest(new), **start}
        # A partition that vanished keeps its last offset so offsets never move backwards.
        end = {tp: max(latest.get(tp, off), off) if tp in latest else off for tp, off in start.items()}
        for tp in latest:
            end.setdefault(tp, latest[tp])
        limit = self.opts.max_offsets_per_trigger
        if limit and not self.opts.available_now:
            end = rate_limit(start, end, limit)
        return offsets_to_json(end)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        s = offsets_from_json(start)
        e = offsets_from_json(end)
        self._position = dict(e)
        new = [tp for tp in e if tp not in s]
        fallback = self.reader.earliest(new) if new else {}
        for tp, until in e.items():
            if tp in s and until < s[tp]:
                msg = (f"Partition {tp[0]}-{tp[1]}'s offset was changed from {s[tp]} to {until}, "
                       "some data may have been missed.")
                if self.opts.fail_on_data_loss:
                    raise KafkaSourceError(msg)
        return _ranges(s, e, fallback)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition)
        yield from read_arrow(self.opts, partition)

    def commit(self, end: dict) -> None:
        # Nothing to do on the broker: progress lives in Spark's checkpoint, not in a group.
        e = offsets_from_json(end)
        if self._position is None:
            self._position = e

    def stop(self) -> None:
        self.reader.close()


# ---------------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------------


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


def _to_bytes(value: object) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return str(value).encode("utf-8")


def write_rows(opts: KafkaOptions, rows: Iterator[Row]) -> KafkaCommitMessage:
    """Send each row as one record; flush and surface the first failure before returning."""
    config = opts.client_config("producer")
    config.setdefault("client_id", "samsa-kafka-writer")
    config.setdefault("linger_ms", 5)
    producer = KafkaProducer(**config)
    errors: list[BaseException] = []
    sent = 0
    try:
        for row in rows:
            d = row.asDict() if hasattr(row, "asDict") else dict(row)
            topic = d.get("topic") or opts.default_topic
            if not topic:
                raise KafkaSourceError(
                    "null topic present in the data. Use the topic option for setting a default topic.")
            headers = [(h["key"] if isinstance(h, Mapping) else h[0],
                        _to_bytes(h["value"] if isinstance(h, Mapping) else h[1]))
                       for h in (d.get("headers") or [])]
            ts = d.get("timestamp")
            ts_ms = int(ts.timestamp() * 1000) if isinstance(ts, datetime) else None
            fut = producer.send(topic, key=_to_bytes(d.get("key")), value=_to_bytes(d.get("value")),
                                headers=headers or None, partition=d.get("partition"),
                                timestamp_ms=ts_ms)
            fut.add_errback(errors.append)
            sent += 1
            if errors:
                break
        producer.flush()
    finally:
        producer.close()
    if errors:
        raise KafkaSourceError(f"Failed to send record to Kafka: {errors[0]!r}")
    return KafkaCommitMessage(sent)


class KafkaBatchWriter(DataSourceWriter):
    def __init__(self, opts: KafkaOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return write_rows(self.opts, iterator)


class KafkaStreamWriter(DataSourceStreamWriter):
    def __init__(self, opts: KafkaOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        return write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


# ---------------------------------------------------------------------------------------------
# The data source
# ---------------------------------------------------------------------------------------------


class SamsaKafkaDataSource(DataSource):
    """Registered as ``samsa-kafka``; ``kafka`` stays the JVM connector's name."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return KafkaOptions(self.options).schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(KafkaOptions(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(KafkaOptions(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return KafkaBatchWriter(KafkaOptions(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return KafkaStreamWriter(KafkaOptions(self.options))


def register(spark: SparkSession) -> None:
    """Make ``format("samsa-kafka")`` available in this SparkSession."""
    spark.dataSource.register(SamsaKafkaDataSource)
