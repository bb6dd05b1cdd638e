"""`samsa demo`: see the whole access-log pipeline work with one command.

What it does, in order:

1. uses the broker at ``--bootstrap``, or starts an embedded one (``python -m broker`` on a
   free port with a temporary data directory, killed at the end);
2. produces nginx-style access-log events at ``--rate`` events/s in a background thread;
3. runs the Spark pipeline (spark/pipeline.py) in this process, with short windows so
   results show up quickly (10-second windows, 5-second watermark by default);
4. reads the pipeline's output topic back from the broker and redraws a small table of the
   latest windows every two seconds, until ``--duration`` seconds have passed or Ctrl-C.

Subcommands for the lead's ``samsa`` CLI (broker/cli.py) — call
``spark.demo.add_demo_subcommands(subparsers)`` to get ``samsa demo``,
``samsa demo produce`` and ``samsa demo pipeline`` — or run ``python -m spark.demo``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from . import generate, pipeline


def _default_source() -> str:
    """The JVM connector when its jars are at hand locally, else the Python fallback."""
    folder = os.environ.get(pipeline.JARS_ENV) or os.path.expanduser("~/.cache/samsa/spark-jars")
    try:
        if pipeline.connector_jars(folder):
            os.environ.setdefault(pipeline.JARS_ENV, folder)
            return "kafka"
    except SystemExit:
        pass
    return pipeline.FALLBACK_SOURCE


def _render(windows: dict[str, dict[str, Any]], produced: int, source: str, bootstrap: str, last: int = 10) -> str:
    lines = [f"Samsa demo — broker {bootstrap}, source {source}, events produced: {produced:,}", ""]
    header = (f"{'window (UTC)':<20} {'reqs':>6} {'2xx':>6} {'3xx':>5} {'4xx':>5} {'5xx':>5} "
              f"{'p50 ms':>7} {'p95 ms':>7}  top path")
    lines += [header, "-" * len(header)]
    for key in sorted(windows)[-last:]:
        w = windows[key]
        top = w["top_paths"][0] if w.get("top_paths") else {"path": "-", "count": 0}
        lines.append(
            f"{w['window_start'][:19]:<20} {w['requests']:>6} {w['status_2xx']:>6} {w['status_3xx']:>5} "
            f"{w['status_4xx']:>5} {w['status_5xx']:>5} {w['latency_p50']:>7.1f} {w['latency_p95']:>7.1f}  "
            f"{top['path']} ({top['count']})")
    if not windows:
        lines.append("(waiting for the first window to close: window length + watermark)")
    return "\n".join(lines)


class _ResultReader:
    """Follows the output topic from the beginning; keeps the last value per window key."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer

        self.topic = topic
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                      auto_offset_reset="earliest")
        self.windows: dict[str, dict[str, Any]] = {}
        self.assigned = False

    def poll(self) -> None:
        from kafka import TopicPartition

        if not self.assigned:
            parts = self.consumer.partitions_for_topic(self.topic)
            if not parts:
                return
            self.consumer.assign([TopicPartition(self.topic, p) for p in parts])
            self.assigned = True
        for recs in self.consumer.poll(timeout_ms=200).values():
            for r in recs:
                self.windows[r.key.decode()] = json.loads(r.value)

    def close(self) -> None:
        self.consumer.close()


def run_demo(args: argparse.Namespace) -> int:
    from .brokers import EmbeddedBroker

    source = args.source or _default_source()
    embedded = None
    workdir = tempfile.mkdtemp(prefix="samsa-demo-")
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        print("starting an embedded Samsa broker ...", file=sys.stderr)
        overrides = {"console.listener": args.console} if args.console else {}
        embedded = EmbeddedBroker("samsa", overrides=overrides).start()
        bootstrap = embedded.bootstrap
        print(f"broker listening on {bootstrap} (data in {embedded.data_dir})", file=sys.stderr)
        if args.console:
            print(f"web console at {args.console.rstrip('/')}/ (read-only)", file=sys.stderr)
    stop = threading.Event()
    produced = [0]
    producer_error: list[BaseException] = []

    def produce_loop() -> None:
        try:
            generate.produce(bootstrap, args.topic, rate=args.rate, generator=generate.EventGenerator(seed=args.seed),
                             progress=False, on_event=lambda _e: produced.__setitem__(0, produced[0] + 1),
                             stop=stop.is_set)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            producer_error.append(e)

    spark = None
    queries: list[Any] = []
    reader = None
    try:
        generate.ensure_topic(bootstrap, args.topic, args.partitions)
        generate.ensure_topic(bootstrap, args.output_topic, 1)
        thread = threading.Thread(target=produce_loop, name="demo-producer", daemon=True)
        thread.start()
        cfg = pipeline.PipelineConfig(
            bootstrap=bootstrap, topics=args.topic, output_topic=args.output_topic,
            output_dir=os.path.join(workdir, "parquet"), checkpoint=os.path.join(workdir, "checkpoints"),
            source=source, trigger=args.trigger, starting_offsets="earliest", window=args.window,
            watermark=args.watermark, kafka_jars=args.kafka_jars)
        print(f"starting Spark (source {source}) ...", file=sys.stderr)
        spark = pipeline.build_session(cfg, app_name="samsa-demo")
        # FATAL: stopping the queries at the end interrupts a batch, which Spark logs at ERROR;
        # real failures still surface through query.exception() below.
        spark.sparkContext.setLogLevel("FATAL")
        queries = pipeline.start_queries(spark, cfg)
        reader = _ResultReader(bootstrap, args.output_topic)
        started = time.monotonic()
        tty = sys.stdout.isatty()
        while time.monotonic() - started < args.duration:
            for q in queries:
                if q.exception() is not None:
                    raise RuntimeError(f"query {q.name} failed: {q.exception()}")
            if producer_error:
                raise RuntimeError(f"producer failed: {producer_error[0]!r}")
            reader.poll()
            table = _render(reader.windows, produced[0], source, bootstrap)
            if tty:
                sys.stdout.write("\x1b[2J\x1b[H" + table + "\n")
            else:
                sys.stdout.write(table + "\n\n")
            sys.stdout.flush()
            time.sleep(2.0)
        print(f"\nParquet results: {cfg.output_dir}", file=sys.stderr)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        for q in queries:
            if q.isActive:
                q.stop()
        if reader is not None:
            reader.close()
        if spark is not None:
            spark.stop()
        if embedded is not None:
            embedded.cleanup()
    return 0


def _add_demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", default=None, help="use this broker instead of starting an embedded one")
    p.add_argument("--console", default="http://127.0.0.1:9090", metavar="URL",
                   help="the embedded broker's web console (console.listener); '' for none")
    p.add_argument("--topic", default="access-log")
    p.add_argument("--output-topic", default="access-log-stats")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--rate", type=float, default=200.0, help="events per second")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--duration", type=float, default=90.0, help="seconds to run")
    p.add_argument("--source", choices=pipeline.SOURCES, default=None,
                   help="default: 'kafka' if the connector jars are found locally, else the fallback")
    p.add_argument("--kafka-jars", default=None)
    p.add_argument("--trigger", default="2 seconds")
    p.add_argument("--window", default="10 seconds")
    p.add_argument("--watermark", default="5 seconds")


def add_demo_subcommands(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``demo`` (with ``produce`` and ``pipeline`` under it) on an argparse subparsers.

    Each parser sets ``func`` to a callable taking the parsed namespace and returning an exit
    code, so the caller dispatches with ``sys.exit(args.func(args))``.
    """
    demo = subparsers.add_parser("demo", help="access-log pipeline demo on Spark",
                                 description="Start a broker if needed, produce access-log events, run the "
                                             "Spark pipeline and show windowed results live.")
    _add_demo_args(demo)
    demo.set_defaults(func=run_demo)
    sub = demo.add_subparsers(dest="demo_command")
    prod = sub.add_parser("produce", help="produce nginx-style access-log events to a topic")
    generate.build_parser(prod)
    prod.set_defaults(func=generate.run)
    pipe = sub.add_parser("pipeline", help="run the Spark access-log pipeline")
    pipeline.build_parser(pipe)
    pipe.set_defaults(func=lambda a: pipeline.run(pipeline.config_from_args(a), duration=a.duration, quiet=a.quiet))
    return demo


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="samsa")
    add_demo_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["demo", *(argv if argv is not None else sys.argv[1:])])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
