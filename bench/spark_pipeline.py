"""Events per second through the Spark access-log pipeline, Samsa vs Tansu, in one run.

For each broker: start it on a free port, create a 2-partition topic, produce N access-log
events (synthetic event time), then run the pipeline (spark/pipeline.py: parse, 1-minute
windows with a watermark, results to a Kafka topic and to Parquet) from the earliest offset
until both of its queries have consumed every record, and report N / elapsed. One
SparkSession (one JVM) serves both brokers; a warm-up run pays the Python-worker and JIT
start-up first, and the measured runs go in ABBA order (samsa, tansu, tansu, samsa, ...), so
the figures compare the brokers rather than their place in the run.

A single-record batch is produced to each partition after the events: Tansu 0.6 reports a
partition's end offset as the last batch's base offset + 1, so without it the events of the
last batch would stay invisible to any Kafka reader until more data arrived. The pipeline
drops that record (it is not an event), on both brokers alike.

    python bench/spark_pipeline.py [--events 20000] [--rounds 2] [--source samsa-kafka|kafka] [--brokers samsa,tansu]

`--source kafka` needs the connector jars ($SAMSA_SPARK_KAFKA_JARS or ~/.cache/samsa/spark-jars).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark import generate, pipeline  # noqa: E402
from spark.brokers import EmbeddedBroker  # noqa: E402

START_MS = 1_763_000_040_000


def _fill(bootstrap: str, topic: str, n: int) -> float:
    """Produce n events + one sentinel batch per partition; return the produce rate."""
    from kafka import KafkaProducer

    generate.ensure_topic(bootstrap, topic, 2)
    gen = generate.EventGenerator(seed=1, start_ms=START_MS, events_per_second=200.0)
    stats = generate.produce(bootstrap, topic, count=n, generator=gen, progress=False)
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for part in (0, 1):
        p.send(topic, value=b"end-of-benchmark", partition=part)
        p.flush()
    p.close()
    return stats.rate


def _run_pipeline(spark: Any, bootstrap: str, topic: str, n: int, source: str, workdir: str,
                  max_per_trigger: int) -> tuple[float, int]:
    """Seconds until both queries consumed n + 2 records; number of windows written to Parquet."""
    cfg = pipeline.PipelineConfig(
        bootstrap=bootstrap, topics=topic, output_topic=f"{topic}-stats",
        output_dir=os.path.join(workdir, "parquet"), checkpoint=os.path.join(workdir, "ckpt"),
        source=source, trigger="0 seconds", max_offsets_per_trigger=max_per_trigger)
    target = n + 2
    started = time.monotonic()
    queries = pipeline.start_queries(spark, cfg)
    try:
        while True:
            for q in queries:
                if q.exception() is not None:
                    raise RuntimeError(f"{q.name} failed: {q.exception()}")
            done = [sum(p["numInputRows"] for p in q.recentProgress) for q in queries]
            if all(d >= target for d in done):
                break
            if time.monotonic() - started > 1800:
                raise RuntimeError(f"pipeline did not consume {target} records in 30 min: {done}")
            time.sleep(0.2)
        elapsed = time.monotonic() - started
    finally:
        for q in queries:
            q.stop()
    try:
        windows = spark.read.parquet(cfg.output_dir).count()  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - no window closed yet
        windows = 0
    return elapsed, windows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--max-offsets-per-trigger", type=int, default=10000)
    ap.add_argument("--source", choices=pipeline.SOURCES, default=pipeline.FALLBACK_SOURCE)
    ap.add_argument("--brokers", default="samsa,tansu")
    ap.add_argument("--rounds", type=int, default=2, help="runs per broker, in ABBA order")
    args = ap.parse_args(argv)

    cfg = pipeline.PipelineConfig(source=args.source)
    spark = pipeline.build_session(cfg, app_name="samsa-bench-spark-pipeline")
    # FATAL: stopping a query mid-batch logs interrupted tasks at ERROR; failures still surface
    # through query.exception().
    spark.sparkContext.setLogLevel("FATAL")
    kinds = [k.strip() for k in args.brokers.split(",") if k.strip()]
    # ABBA order: whichever broker runs while the JVM is still warming up, both get that slot once.
    order = []
    for r in range(args.rounds):
        order += kinds if r % 2 == 0 else kinds[::-1]
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    brokers = {k: EmbeddedBroker(k).start() for k in kinds}  # type: ignore[arg-type]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
            first = brokers[kinds[0]]
            warm = f"warmup-{uuid.uuid4().hex[:6]}"
            # A full-size warm-up: smaller ones left the first measured run visibly slower.
            _fill(first.bootstrap, warm, args.events)
            _run_pipeline(spark, first.bootstrap, warm, args.events, args.source, os.path.join(tmp, "warm"),
                          args.max_offsets_per_trigger)
            for i, kind in enumerate(order):
                b = brokers[kind]
                topic = f"access-{uuid.uuid4().hex[:6]}"
                produce_rate = _fill(b.bootstrap, topic, args.events)
                elapsed, windows = _run_pipeline(spark, b.bootstrap, topic, args.events, args.source,
                                                 os.path.join(tmp, f"run{i}"), args.max_offsets_per_trigger)
                rates[kind].append(args.events / elapsed)
                print(f"round {i + 1}: {kind:>6}: {args.events} events through the pipeline in {elapsed:.1f} s = "
                      f"{args.events / elapsed:,.0f} events/s (source {args.source}; produced at "
                      f"{produce_rate:,.0f} events/s; {windows} windows written)", flush=True)
    finally:
        spark.stop()
        for b in brokers.values():
            b.cleanup()
    means = {k: sum(v) / len(v) for k, v in rates.items() if v}
    for k, m in means.items():
        print(f"{k:>6}: mean {m:,.0f} events/s over {len(rates[k])} runs")
    if "samsa" in means and "tansu" in means:
        print(f"ratio samsa/tansu (pipeline events/s): {means['samsa'] / means['tansu']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
