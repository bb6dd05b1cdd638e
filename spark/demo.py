"""`samsa demo`: see the whole access-log pipeline work with one command.

What it does, in order:

1. uses the broker at ``--bootstrap``, or starts an embedded one (``python -m broker`` on a
   free port with a temporary data directory, killed at the end);
2. produces nginx-style access-log events at ``--rate`` events/s in a background thread;
3. runs the Spark pipeline (spark/pipeline.py) in this process, with short windows so
   results show up quickly (10-second windows, 5-second watermark by default);
4. reads the pipeline's output topic back from the broker and redraws a small table of the
   latest windows every two seconds, until ``--duration`` seconds have passed since the
   command started (Spark's start-up included) or Ctrl-C;
5. stops what it started and removes its ``samsa-demo-*`` folder in the temporary directory
   (the embedded broker's data, Parquet results and checkpoints) unless ``--keep``.

Windows are emitted once the watermark passes their end, so the events of the last window
and watermark are still open when the demo stops; it says so.

Subcommands for the lead's ``samsa`` CLI (broker/cli/) — call
``spark.demo.add_demo_subcommands(subparsers)`` to get ``samsa demo``,
``samsa demo produce`` and ``samsa demo pipeline`` — or run ``python -m spark.demo``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypedDict

from kafka import KafkaConsumer, TopicPartition

from broker.tools._common import Subparsers

from . import generate, pipeline
from .brokers import EmbeddedBroker

if TYPE_CHECKING:  # pyspark is optional: `samsa demo produce` runs without it (see spark/pipeline.py)
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


class TopPath(TypedDict):
    path: str
    count: int


class WindowStats(TypedDict):
    """One closed window as the pipeline writes it to the output topic (JSON)."""

    window_start: str
    window_end: str
    requests: int
    status_2xx: int
    status_3xx: int
    status_4xx: int
    status_5xx: int
    bytes: int
    latency_p50: float
    latency_p95: float
    top_paths: list[TopPath]


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


def _render(windows: dict[str, WindowStats], produced: int, source: str, bootstrap: str, last: int = 10,
            read: int | None = None) -> str:
    read_note = "" if read is None else f", read by Spark: {read:,}"
    lines = [f"Samsa demo — broker {bootstrap}, source {source}, events produced: {produced:,}{read_note}", ""]
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


def _rows_read(queries: list[StreamingQuery], seen: dict[int, int]) -> int:
    """Input rows the first query (both read the same topic) has processed so far; ``seen``
    keeps each batch's count, since Spark only remembers the recent batches' progress."""
    for p in (queries[0].recentProgress or []) if queries else []:
        seen[int(p.get("batchId", -1))] = int(p.get("numInputRows", 0))
    return sum(seen.values())


class _ResultReader:
    """Follows the output topic from the beginning; keeps the last value per window key."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                      auto_offset_reset="earliest")
        self.windows: dict[str, WindowStats] = {}
        self.assigned = False

    def poll(self) -> None:
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


def _closing_note(windows: dict[str, WindowStats], args: argparse.Namespace, elapsed: float) -> str:
    """What the user should know when the demo stops: how long it ran, and the open windows."""
    note = f"stopped after {elapsed:.0f} s (--duration {args.duration:g})."
    if not windows:
        return (note + f" No window closed in that time: a window is emitted {args.window} + "
                f"{args.watermark} (the watermark) after it starts, once Spark is up; run longer, "
                f"e.g. --duration {max(60, int(args.duration) * 2)}.")
    return (note + f" The last {args.window} + {args.watermark} of events were in windows still open "
            "(a window is emitted once the watermark passes its end); run longer to see them.")


def run_demo(args: argparse.Namespace) -> int:
    """Run for ``--duration`` seconds from the moment the command starts (Spark's start-up
    included), then stop everything it started and remove what it wrote unless ``--keep``."""
    t0 = time.monotonic()
    deadline = t0 + args.duration
    source = args.source or _default_source()
    embedded = None
    workdir = tempfile.mkdtemp(prefix="samsa-demo-")
    stop = threading.Event()
    produced = [0]
    producer_error: list[BaseException] = []
    thread: threading.Thread | None = None
    spark: SparkSession | None = None
    queries: list[StreamingQuery] = []
    reader = None
    windows: dict[str, WindowStats] = {}
    batches: dict[int, int] = {}
    status = 0
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            print("starting an embedded Samsa broker ...", file=sys.stderr)
            overrides = {"console.listener": args.console} if args.console else {}
            embedded = EmbeddedBroker("samsa", overrides=overrides, data_dir=os.path.join(workdir, "broker")).start()
            bootstrap = embedded.bootstrap
            print(f"broker listening on {bootstrap} (data in {embedded.data_dir})", file=sys.stderr)
            if args.console:
                print(f"web console at {args.console.rstrip('/')}/ (read-only)", file=sys.stderr)

        def produce_loop() -> None:
            try:
                generate.produce(bootstrap, args.topic, rate=args.rate,
                                 generator=generate.EventGenerator(seed=args.seed), progress=False,
                                 on_event=lambda _e: produced.__setitem__(0, produced[0] + 1), stop=stop.is_set)
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                producer_error.append(e)

        cfg = pipeline.PipelineConfig(
            bootstrap=bootstrap, topics=args.topic, output_topic=args.output_topic,
            output_dir=os.path.join(workdir, "parquet"), checkpoint=os.path.join(workdir, "checkpoints"),
            source=source, trigger=args.trigger, starting_offsets="earliest", window=args.window,
            watermark=args.watermark, kafka_jars=args.kafka_jars)
        # Spark first: if it cannot start (no connector offline), nothing else has begun.
        print(f"starting Spark (source {source}) ...", file=sys.stderr)
        spark = pipeline.build_session(cfg, app_name="samsa-demo")
        print(f"Spark is up after {time.monotonic() - t0:.0f} s", file=sys.stderr)
        # FATAL: stopping the queries at the end interrupts a batch, which Spark logs at ERROR;
        # real failures still surface through query.exception() below.
        spark.sparkContext.setLogLevel("FATAL")
        generate.ensure_topic(bootstrap, args.topic, args.partitions)
        generate.ensure_topic(bootstrap, args.output_topic, 1)
        thread = threading.Thread(target=produce_loop, name="demo-producer", daemon=True)
        thread.start()
        queries = pipeline.start_queries(spark, cfg)
        reader = _ResultReader(bootstrap, args.output_topic)
        tty = sys.stdout.isatty()
        while True:  # the table shows at least once, even when start-up ate the whole duration
            for q in queries:
                if q.exception() is not None:
                    raise RuntimeError(f"query {q.name} failed: {q.exception()}")
            if producer_error:
                raise RuntimeError(f"producer failed: {producer_error[0]!r}")
            reader.poll()
            windows = reader.windows
            table = _render(windows, produced[0], source, bootstrap, read=_rows_read(queries, batches))
            if tty:
                sys.stdout.write("\x1b[2J\x1b[H" + table + "\n")
            else:
                sys.stdout.write(table + "\n\n")
            sys.stdout.flush()
            if time.monotonic() >= deadline:
                break
            time.sleep(max(0.0, min(2.0, deadline - time.monotonic())))
        print(_closing_note(windows, args, time.monotonic() - t0), file=sys.stderr)
    except KeyboardInterrupt:
        pass
    except pipeline.ConnectorUnavailable as e:
        print(e.code, file=sys.stderr)
        status = 2
    except RuntimeError as e:
        print(f"Error: {e}", file=sys.stderr)
        status = 1
    finally:
        stop.set()
        for q in queries:
            if q.isActive:
                q.stop()
        if thread is not None:
            thread.join(10)
        if reader is not None:
            reader.close()
        if spark is not None:
            spark.stop()
        if embedded is not None:
            embedded.stop()
        if args.keep:
            print(f"kept {workdir} (broker data, Parquet results, checkpoints)", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return status


def _add_demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap", default=None, help="use this broker instead of starting an embedded one")
    p.add_argument("--console", default="http://127.0.0.1:9090", metavar="URL",
                   help="the embedded broker's web console (console.listener); '' for none")
    p.add_argument("--topic", default="access-log")
    p.add_argument("--output-topic", default="access-log-stats")
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--rate", type=float, default=200.0, help="events per second")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--duration", type=float, default=90.0,
                   help="seconds to run, counted from the start (Spark's start-up included)")
    p.add_argument("--keep", action="store_true",
                   help="keep the demo's folder (broker data, Parquet results, checkpoints) at the end")
    p.add_argument("--source", choices=pipeline.SOURCES, default=None,
                   help="default: 'kafka' if the connector jars are found locally, else the fallback")
    p.add_argument("--kafka-jars", default=None)
    p.add_argument("--trigger", default="2 seconds")
    p.add_argument("--window", default="10 seconds")
    p.add_argument("--watermark", default="5 seconds")


def add_demo_subcommands(subparsers: Subparsers) -> argparse.ArgumentParser:
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
