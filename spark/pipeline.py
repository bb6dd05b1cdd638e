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
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if __package__ in (None, ""):
    # spark-submit runs this file as a script: make `spark.*` (and broker/) importable from the repo root.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from broker.config.properties import read_properties
from spark.pipeline_config import (
    EVENT_SCHEMA,
    FALLBACK_SOURCE,
    JARS_ENV,
    MAVEN_CENTRAL,
    PYTHON_CONF,
    PYTHON_ENV,
    SOURCES,
    TOP_PATHS,
    ConnectorUnavailable,
    PipelineConfig,
    check_connector_reachable,
    connector_jars,
    pin_python_workers,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["EVENT_SCHEMA", "FALLBACK_SOURCE", "JARS_ENV", "MAVEN_CENTRAL", "PYTHON_CONF", "PYTHON_ENV", "SOURCES",
           "TOP_PATHS", "ConnectorUnavailable", "PipelineConfig", "build_session", "build_parser",
           "check_connector_reachable", "config_from_args", "connector_jars", "main", "pin_python_workers", "run",
           "start_queries"]


def _streaming() -> ModuleType:
    """:mod:`spark.streaming`, imported when a pipeline first needs Spark. pyspark is optional (the
    test extra) and ~190 ms to import (``python3 -X importtime -c 'import pyspark.sql'``): ``samsa
    --help`` and ``samsa demo produce`` load this module's settings without paying for it."""
    from spark import streaming  # noqa: PLC0415

    return streaming


def build_session(cfg: PipelineConfig, app_name: str = "samsa-access-log-pipeline") -> SparkSession:
    """A SparkSession able to read `cfg.source`; the fallback source is registered always."""
    session: SparkSession = _streaming().build_session(cfg, app_name)
    return session


def start_queries(spark: SparkSession, cfg: PipelineConfig) -> list[StreamingQuery]:
    """Start the Kafka-sink and Parquet-sink queries; return them (already running)."""
    queries: list[StreamingQuery] = _streaming().start_queries(spark, cfg)
    return queries


def _progress(query: StreamingQuery, key: str, default: int) -> int:
    """A figure of the query's last micro-batch (``default`` before the first)."""
    progress = query.lastProgress
    return default if progress is None else int(progress.get(key, default))


def run(cfg: PipelineConfig, duration: float | None = None, spark: SparkSession | None = None, quiet: bool = False,
        ) -> int:
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
                rows = sum(_progress(q, "numInputRows", 0) for q in queries)
                batch = max((_progress(q, "batchId", -1) for q in queries), default=-1)
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
    return read_properties(Path(path))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(config_from_args(args), duration=args.duration, quiet=args.quiet)


if __name__ == "__main__":
    # spark-submit runs this file as a script; make `spark.*` importable from the repo root.
    sys.exit(main())
