"""Access-log analytics on Spark Structured Streaming, reading from and writing to Samsa.

The pipeline (``python -m spark.pipeline`` or ``spark-submit spark/pipeline.py``):

1. reads the access-log topic with ``spark.readStream.format(SOURCE)`` where SOURCE is
   ``kafka`` (Spark's JVM connector, spark-sql-kafka-0-10) or ``samsa-kafka`` (our Python
   data source, for machines where the connector jar cannot be loaded);
2. parses each record value as the JSON event written by ``spark.generate``;
3. with event-time tumbling windows (1 minute by default) and a watermark, computes per
   window: the request count, counts by status class (2xx/3xx/4xx/5xx), bytes served,
   p50/p95 latency and the top paths;
4. writes each closed window (append mode: once, when the watermark passes it) back to a
   Kafka topic as a JSON value keyed by the window start, and to Parquet files.

Each sink is its own streaming query with its own checkpoint under ``--checkpoint``; the
source offsets of every micro-batch are written there before the batch runs, so a query
that is killed and restarted resumes exactly where it stopped. The Parquet sink is
exactly-once (Spark's file sink commits each batch id once through ``_spark_metadata``);
the Kafka sink is at-least-once like Spark's own, and is keyed by window so a consumer that
keeps the last value per key (or a compacted topic) sees each window exactly once.

Connector jars: with ``--source kafka`` the session gets the connector either from a local
folder of jars (``--kafka-jars DIR`` or ``$SAMSA_SPARK_KAFKA_JARS``, for offline clusters)
or, by default, from Maven via ``spark.jars.packages =
org.apache.spark:spark-sql-kafka-0-10_2.13:<installed pyspark version>``. Before asking Spark
to resolve the package, :func:`check_connector_reachable` looks for it in the local Ivy/Maven
caches and for a reachable repository; offline, the run stops with one line saying what to do
(:class:`ConnectorUnavailable`) instead of Ivy's resolution report and a JVM start failure.

Security: ``--command-config client.properties`` takes Kafka's client properties
(``security.protocol=SASL_SSL``, ``sasl.mechanism``, ``sasl.jaas.config``,
``ssl.truststore.type=PEM`` / ``ssl.truststore.location`` ...) as Kafka's tools do, and passes
them to every source and sink as Spark's ``kafka.<property>`` options: the JVM connector hands
them to the Java client unchanged, the ``samsa-kafka`` source translates them for kafka-python
(PEM files only).

Python workers: Spark starts its Python workers (UDFs, and the planner and readers of the
``samsa-kafka`` data source) with ``PYSPARK_PYTHON``, else ``python3`` from PATH -- not the
interpreter that runs this pipeline, which may be a virtualenv's that nobody activated.
:func:`pin_python_workers` makes them use ``sys.executable`` unless the user chose an
interpreter (``PYSPARK_PYTHON``, or ``spark.pyspark.python`` given to spark-submit or with
``--conf``); every SparkSession started here goes through it.
"""

from __future__ import annotations

import argparse
import glob
import os
import socket
import sys
import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

FALLBACK_SOURCE = "samsa-kafka"
SOURCES = ("kafka", FALLBACK_SOURCE)
JARS_ENV = "SAMSA_SPARK_KAFKA_JARS"
TOP_PATHS = 5

EVENT_SCHEMA = (
    "timestamp string, host string, remote_addr string, method string, path string, "
    "status int, bytes long, latency double, user_agent string"
)


@dataclass
class PipelineConfig:
    bootstrap: str = "127.0.0.1:9092"
    topics: str = "access-log"
    output_topic: str | None = "access-log-stats"
    output_dir: str | None = "./spark-output/access-log-stats"
    checkpoint: str = "./spark-output/checkpoints"
    source: str = "kafka"
    trigger: str = "5 seconds"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    window: str = "1 minute"
    watermark: str = "30 seconds"
    kafka_jars: str | None = None
    master: str | None = None
    shuffle_partitions: int = 2
    fail_on_data_loss: bool = True
    extra_conf: dict[str, str] = field(default_factory=dict)
    # Kafka client properties for both sources and sinks (security.protocol, sasl.*, ssl.*),
    # passed as Spark's `kafka.<property>` options: from --command-config, as Kafka's tools take them.
    kafka_options: dict[str, str] = field(default_factory=dict)

    def kafka_option_items(self) -> dict[str, str]:
        return {f"kafka.{k}": v for k, v in self.kafka_options.items() if k != "bootstrap.servers"}


# ---------------------------------------------------------------------------------------------
# Session and connector
# ---------------------------------------------------------------------------------------------


def connector_package() -> str:
    """The Maven coordinate of the connector that matches the installed pyspark."""
    import pyspark

    version = pyspark.__version__.split("+")[0]
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"


def connector_jars(folder: str | None) -> list[str]:
    """All jars in `folder` (or $SAMSA_SPARK_KAFKA_JARS); empty if neither is set."""
    folder = folder or os.environ.get(JARS_ENV)
    if not folder:
        return []
    jars = sorted(glob.glob(os.path.join(folder, "*.jar")))
    if not any("spark-sql-kafka-0-10" in os.path.basename(j) for j in jars):
        raise ConnectorUnavailable(f"no spark-sql-kafka-0-10 jar in {folder}")
    return jars


PYTHON_CONF = "spark.pyspark.python"
PYTHON_ENV = "PYSPARK_PYTHON"


def pin_python_workers(conf: Mapping[str, str], environ: MutableMapping[str, str] | None = None) -> str:
    """Make Spark's Python workers run this interpreter unless the user chose one; return theirs.

    pyspark's SparkContext takes the workers' interpreter from ``$PYSPARK_PYTHON`` when it is
    created (spark-submit sets that variable from ``spark.pyspark.python``), so the variable
    is what counts, in this process, before the session exists. Precedence: an existing
    ``$PYSPARK_PYTHON`` (the user's, or spark-submit's from its conf), then
    ``spark.pyspark.python`` in ``conf`` (``--conf``), then ``sys.executable``.
    """
    env = os.environ if environ is None else environ
    chosen = env.get(PYTHON_ENV) or conf.get(PYTHON_CONF) or sys.executable
    env[PYTHON_ENV] = chosen
    return chosen


class ConnectorUnavailable(SystemExit):
    """Spark's Kafka connector cannot be had here; the message is one line saying what to do."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"Error: {why}. Offline, put the connector jars in a folder and pass --kafka-jars DIR "
            f"(or set {JARS_ENV}=DIR), or use the Python fallback source: --source {FALLBACK_SOURCE}")


MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"


def _cached_connector(package: str, conf: Mapping[str, str]) -> str | None:
    """A local Ivy or Maven copy of ``package`` (group:artifact:version), if any."""
    group, artifact, version = package.split(":")
    jar = f"{group}_{artifact}-{version}.jar"
    ivy_dirs = [conf["spark.jars.ivy"]] if conf.get("spark.jars.ivy") else []
    ivy_dirs += [os.path.expanduser(d) for d in ("~/.ivy2.5.2", "~/.ivy2")]
    candidates = [os.path.join(d, "jars", jar) for d in ivy_dirs]
    candidates.append(os.path.expanduser(os.path.join(
        "~/.m2/repository", *group.split("."), artifact, version, f"{artifact}-{version}.jar")))
    return next((c for c in candidates if os.path.exists(c)), None)


def check_connector_reachable(package: str, conf: Mapping[str, str], timeout: float = 3.0) -> None:
    """Raise :class:`ConnectorUnavailable` if Spark could neither find ``package`` in a local
    cache nor reach a repository to download it from (Maven Central, ``spark.jars.repositories``)."""
    if _cached_connector(package, conf):
        return
    repos = [r.strip() for r in conf.get("spark.jars.repositories", "").split(",") if r.strip()]
    repos.append(MAVEN_CENTRAL)
    for repo in repos:
        url = urlparse(repo)
        if url.scheme == "file":
            return  # a local repository: let Ivy look
        host = url.hostname
        if not host:
            continue
        try:
            with socket.create_connection((host, url.port or (443 if url.scheme == "https" else 80)), timeout):
                return
        except OSError:
            continue
    raise ConnectorUnavailable(
        f"Spark's Kafka connector ({package}) is not in the local Ivy/Maven cache and no repository "
        f"is reachable to download it from ({', '.join(repos)})")


def build_session(cfg: PipelineConfig, app_name: str = "samsa-access-log-pipeline") -> Any:
    """A SparkSession able to read `cfg.source`; the fallback source is registered always."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    # Under spark-submit (which launches the JVM first and sets PYSPARK_GATEWAY_PORT) the
    # master comes from spark-submit's --master; only a plain `python -m` run picks one here.
    if cfg.master:
        builder = builder.master(cfg.master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master("local[2]")
    builder = (builder
               .config("spark.sql.shuffle.partitions", str(cfg.shuffle_partitions))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.streaming.stopGracefullyOnShutdown", "true"))
    package = None
    if cfg.source == "kafka":
        jars = connector_jars(cfg.kafka_jars)
        if jars:
            builder = builder.config("spark.jars", ",".join(jars))
        else:
            package = connector_package()
            check_connector_reachable(package, cfg.extra_conf)
            builder = builder.config("spark.jars.packages", package)
    builder = builder.config(PYTHON_CONF, pin_python_workers(cfg.extra_conf))
    for k, v in cfg.extra_conf.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception as e:
        if package is not None and "JAVA_GATEWAY_EXITED" in str(e):
            # The JVM died resolving spark.jars.packages (Ivy printed why, above).
            raise ConnectorUnavailable(f"Spark could not start with its Kafka connector ({package})") from None
        raise
    from .datasource import register

    register(spark)
    return spark


# ---------------------------------------------------------------------------------------------
# The query
# ---------------------------------------------------------------------------------------------


def read_stream(spark: Any, cfg: PipelineConfig, available_now: bool = False) -> Any:
    reader = (spark.readStream.format(cfg.source)
              .option("kafka.bootstrap.servers", cfg.bootstrap)
              .option("subscribe", cfg.topics)
              .option("startingOffsets", cfg.starting_offsets)
              .option("failOnDataLoss", str(cfg.fail_on_data_loss).lower())
              .options(**cfg.kafka_option_items()))
    if cfg.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    if available_now and cfg.source == FALLBACK_SOURCE:
        reader = reader.option("samsa.availableNow", "true")
    return reader.load()


def parse_events(raw: Any) -> Any:
    """Kafka rows -> typed events with an `event_time` timestamp column."""
    from pyspark.sql import functions as F

    return (raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
            .select("e.*")
            .withColumn("event_time", F.to_timestamp("timestamp"))
            .where(F.col("event_time").isNotNull()))


def windowed_stats(events: Any, window: str = "1 minute", watermark: str = "30 seconds") -> Any:
    """Per event-time window: counts by status class, bytes, p50/p95 latency, top paths.

    Top paths come from one aggregation (collect the window's paths, then count the
    distinct ones) because Spark allows a single stateful aggregation per query in append
    mode without chaining; a window's path list lives in state only until the window closes.
    Ties in the top list are broken by path name so the output is deterministic.
    """
    from pyspark.sql import functions as F

    status_class = (F.col("status") / 100).cast("int")
    agg = (events.withWatermark("event_time", watermark)
           .groupBy(F.window("event_time", window).alias("w"))
           .agg(F.count(F.lit(1)).alias("requests"),
                F.sum(F.when(status_class == 2, 1).otherwise(0)).alias("status_2xx"),
                F.sum(F.when(status_class == 3, 1).otherwise(0)).alias("status_3xx"),
                F.sum(F.when(status_class == 4, 1).otherwise(0)).alias("status_4xx"),
                F.sum(F.when(status_class == 5, 1).otherwise(0)).alias("status_5xx"),
                F.sum("bytes").alias("bytes"),
                F.percentile_approx("latency", 0.5, 10000).alias("latency_p50"),
                F.percentile_approx("latency", 0.95, 10000).alias("latency_p95"),
                F.collect_list("path").alias("paths")))
    top = F.expr(
        "slice(array_sort(transform(array_distinct(paths), "
        "p -> named_struct('count', size(filter(paths, x -> x = p)), 'path', p)), "
        "(a, b) -> case when a.count > b.count then -1 when a.count < b.count then 1 "
        "when a.path < b.path then -1 when a.path > b.path then 1 else 0 end), "
        f"1, {TOP_PATHS})")
    return agg.select(
        F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
        "requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes",
        "latency_p50", "latency_p95",
        F.transform(top, lambda s: F.struct(s["path"].alias("path"), s["count"].alias("count")))
        .alias("top_paths"))


def as_kafka_records(stats: Any) -> Any:
    """Key = window start (ISO-8601 UTC), value = the window's JSON: one record per window."""
    from pyspark.sql import functions as F

    return stats.select(
        F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("key"),
        F.to_json(F.struct(
            F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            "requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes",
            "latency_p50", "latency_p95", "top_paths")).alias("value"))


def _trigger(writer: Any, trigger: str) -> Any:
    if trigger == "availableNow":
        return writer.trigger(availableNow=True)
    if trigger == "once":
        return writer.trigger(once=True)
    return writer.trigger(processingTime=trigger)


def start_queries(spark: Any, cfg: PipelineConfig) -> list[Any]:
    """Start the Kafka-sink and Parquet-sink queries; return them (already running)."""
    available_now = cfg.trigger in ("availableNow", "once")
    stats = windowed_stats(parse_events(read_stream(spark, cfg, available_now)), cfg.window, cfg.watermark)
    queries = []
    if cfg.output_topic:
        w = (as_kafka_records(stats).writeStream.format(cfg.source)
             .queryName("access_log_stats_to_kafka")
             .outputMode("append")
             .option("kafka.bootstrap.servers", cfg.bootstrap)
             .options(**cfg.kafka_option_items())
             .option("topic", cfg.output_topic)
             .option("checkpointLocation", os.path.join(cfg.checkpoint, "kafka")))
        queries.append(_trigger(w, cfg.trigger).start())
    if cfg.output_dir:
        w = (stats.writeStream.format("parquet")
             .queryName("access_log_stats_to_parquet")
             .outputMode("append")
             .option("path", cfg.output_dir)
             .option("checkpointLocation", os.path.join(cfg.checkpoint, "parquet")))
        queries.append(_trigger(w, cfg.trigger).start())
    if not queries:
        raise SystemExit("nothing to do: give --output-topic and/or --output-dir")
    return queries


def run(cfg: PipelineConfig, duration: float | None = None, spark: Any = None, quiet: bool = False) -> int:
    """Run until the queries finish (availableNow/once), `duration` elapses, or Ctrl-C."""
    own = spark is None
    spark = spark or build_session(cfg)
    if own:
        spark.sparkContext.setLogLevel("WARN")
    queries = start_queries(spark, cfg)
    started = time.monotonic()
    try:
        while any(q.isActive for q in queries):
            for q in queries:
                if q.exception() is not None:
                    raise RuntimeError(f"query {q.name} failed: {q.exception()}")
            if duration is not None and time.monotonic() - started >= duration:
                break
            if not quiet:
                rows = sum((q.lastProgress or {}).get("numInputRows", 0) for q in queries)
                batch = max(((q.lastProgress or {}).get("batchId", -1) for q in queries), default=-1)
                sys.stderr.write(f"\rpipeline: batch {batch}, last batch input rows {rows}    ")
                sys.stderr.flush()
            time.sleep(1.0)
        for q in queries:
            if q.exception() is not None:
                raise RuntimeError(f"query {q.name} failed: {q.exception()}")
    except KeyboardInterrupt:
        pass
    finally:
        for q in queries:
            if q.isActive:
                q.stop()
        if not quiet:
            sys.stderr.write("\n")
        if own:
            spark.stop()
    return 0


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    d = PipelineConfig()
    p = parser or argparse.ArgumentParser(
        prog="python -m spark.pipeline",
        description="Windowed access-log analytics: Kafka topic -> Spark -> Kafka topic + Parquet.")
    p.add_argument("--bootstrap", default=d.bootstrap, help="Kafka bootstrap servers (host:port,...)")
    p.add_argument("--topics", default=d.topics, help="comma-separated input topics")
    p.add_argument("--output-topic", default=d.output_topic, help="topic for window results ('' = none)")
    p.add_argument("--output-dir", default=d.output_dir, help="Parquet output directory ('' = none)")
    p.add_argument("--checkpoint", default=d.checkpoint, help="checkpoint directory")
    p.add_argument("--source", choices=SOURCES, default=d.source,
                   help=f"'kafka' = Spark's JVM connector, '{FALLBACK_SOURCE}' = the Python fallback")
    p.add_argument("--trigger", default=d.trigger,
                   help="processing-time interval ('5 seconds'), 'availableNow' or 'once'")
    p.add_argument("--starting-offsets", default=d.starting_offsets,
                   help="earliest, latest or JSON {\"topic\":{\"0\":23}}")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--window", default=d.window, help="event-time window length")
    p.add_argument("--watermark", default=d.watermark, help="allowed lateness of events")
    p.add_argument("--kafka-jars", default=None,
                   help=f"folder of connector jars (default ${JARS_ENV}, else spark.jars.packages)")
    p.add_argument("--master", default=None, help="Spark master (default local[2])")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--no-fail-on-data-loss", action="store_true")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    p.add_argument("--command-config", metavar="FILE", default=None,
                   help="Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config, "
                        "ssl.truststore.location ...) for reading and writing, as Kafka's tools take them")
    p.add_argument("--quiet", action="store_true")
    return p


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    return PipelineConfig(
        bootstrap=args.bootstrap, topics=args.topics, output_topic=args.output_topic or None,
        output_dir=args.output_dir or None, checkpoint=args.checkpoint, source=args.source,
        trigger=args.trigger, starting_offsets=args.starting_offsets,
        max_offsets_per_trigger=args.max_offsets_per_trigger, window=args.window,
        watermark=args.watermark, kafka_jars=args.kafka_jars, master=args.master,
        fail_on_data_loss=not args.no_fail_on_data_loss,
        extra_conf=dict(kv.split("=", 1) for kv in args.conf),
        kafka_options=read_client_properties(args.command_config) if args.command_config else {})


def read_client_properties(path: str) -> dict[str, str]:
    """A Kafka client.properties file (Java properties syntax, JAAS continuation lines included)."""
    from broker.config.properties import read_properties

    return read_properties(Path(path))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(config_from_args(args), duration=args.duration, quiet=args.quiet)


if __name__ == "__main__":
    # spark-submit runs this file as a script; make `spark.*` importable from the repo root.
    if __package__ in (None, ""):
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from spark.pipeline import main as _main  # type: ignore[no-redef]

        sys.exit(_main())
    sys.exit(main())
