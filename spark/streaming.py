"""The access-log pipeline's Spark side: the session, the streaming source, the windowed
statistics and the two sinks (:mod:`spark.pipeline` documents the whole). Imports pyspark, which is
optional (the test extra) and slow to import, so :mod:`spark.pipeline` loads this module only when
a pipeline runs.
"""

from __future__ import annotations

import os

import pyspark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from .datasource import register
from .pipeline_config import (
    EVENT_SCHEMA,
    FALLBACK_SOURCE,
    PYTHON_CONF,
    TOP_PATHS,
    ConnectorUnavailable,
    PipelineConfig,
    check_connector_reachable,
    connector_jars,
    pin_python_workers,
)


def connector_package() -> str:
    """The Maven coordinate of the connector that matches the installed pyspark."""
    version = pyspark.__version__.split("+")[0]
    return f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"


def build_session(cfg: PipelineConfig, app_name: str = "samsa-access-log-pipeline") -> SparkSession:
    """A SparkSession able to read `cfg.source`; the fallback source is registered always."""
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
    register(spark)
    return spark


# ---------------------------------------------------------------------------------------------
# The query
# ---------------------------------------------------------------------------------------------


def read_stream(spark: SparkSession, cfg: PipelineConfig, available_now: bool = False) -> DataFrame:
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


def parse_events(raw: DataFrame) -> DataFrame:
    """Kafka rows -> typed events with an `event_time` timestamp column."""
    return (raw.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
            .select("e.*")
            .withColumn("event_time", F.to_timestamp("timestamp"))
            .where(F.col("event_time").isNotNull()))


def windowed_stats(events: DataFrame, window: str = "1 minute", watermark: str = "30 seconds") -> DataFrame:
    """Per event-time window: counts by status class, bytes, p50/p95 latency, top paths.

    Top paths come from one aggregation (collect the window's paths, then count the
    distinct ones) because Spark allows a single stateful aggregation per query in append
    mode without chaining; a window's path list lives in state only until the window closes.
    Ties in the top list are broken by path name so the output is deterministic.
    """
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


def as_kafka_records(stats: DataFrame) -> DataFrame:
    """Key = window start (ISO-8601 UTC), value = the window's JSON: one record per window."""
    return stats.select(
        F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("key"),
        F.to_json(F.struct(
            F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            "requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes",
            "latency_p50", "latency_p95", "top_paths")).alias("value"))


def _trigger(writer: DataStreamWriter, trigger: str) -> DataStreamWriter:
    if trigger == "availableNow":
        return writer.trigger(availableNow=True)
    if trigger == "once":
        return writer.trigger(once=True)
    return writer.trigger(processingTime=trigger)


def start_queries(spark: SparkSession, cfg: PipelineConfig) -> list[StreamingQuery]:
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
