"""The end-to-end exactly-once scenario, shared by the fallback and the real-connector tests.

1. Produce the first half of a reproducible access log (synthetic event time) to a
   2-partition topic.
2. Start ``python -m spark.pipeline`` as its own process with a small
   ``maxOffsetsPerTrigger``; once it has committed two micro-batches, SIGKILL it — a crash,
   not a graceful stop, so a batch may be half done.
3. Produce the second half, start the pipeline again on the same checkpoint, and wait until
   the windows that the watermark has closed appear in the Parquet output.
4. Compare the Parquet output (read through Spark, which honours the file sink's commit log)
   and the Kafka output topic (last record per window key) with the windows computed
   directly from the produced events.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from spark_expected import closed_windows, compare

from spark.generate import EventGenerator, ensure_topic, produce

WINDOW_S = 60
DELAY_S = 20
HALF = 1200
EVENTS_PER_S = 10.0
START_MS = 1_763_000_040_000  # a minute boundary, so windows are full except the first


def _pipeline_cmd(bootstrap: str, topic: str, out_topic: str, tmp: Path, source: str) -> list[str]:
    return [sys.executable, "-m", "spark.pipeline", "--bootstrap", bootstrap, "--topics", topic,
            "--output-topic", out_topic, "--output-dir", str(tmp / "parquet"),
            "--checkpoint", str(tmp / "checkpoint"), "--source", source, "--trigger", "1 second",
            "--starting-offsets", "earliest", "--max-offsets-per-trigger", "300",
            "--window", f"{WINDOW_S} seconds", "--watermark", f"{DELAY_S} seconds", "--quiet",
            "--conf", "spark.driver.memory=1g", "--conf", f"spark.local.dir={tmp / 'spark-local'}"]


class Pipeline:
    """One pipeline process in its own process group, logging to a file."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        with open(log, "ab") as f:
            self.proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                         env={**os.environ, **(env or {})})

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"pipeline exited with {self.proc.returncode}:\n{self.tail()}")

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


def _committed_batches(ckpt: Path) -> int:
    commits = ckpt / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


def _parquet_windows(spark: Any, path: Path) -> dict[int, dict[str, Any]]:
    try:
        rows = spark.read.parquet(str(path)).collect()
    except Exception:  # noqa: BLE001 - nothing committed yet
        return {}
    out = {}
    for r in rows:
        start = int(r.window_start.timestamp())
        if start in out:
            raise AssertionError(f"window {start} written twice to Parquet")
        out[start] = {**r.asDict(), "top_paths": [(p.path, p["count"]) for p in r.top_paths]}
    return out


def _kafka_windows(bootstrap: str, topic: str) -> tuple[dict[int, dict[str, Any]], int]:
    """Last value per window key from the output topic, and the number of records read."""
    from datetime import datetime

    from kafka import KafkaConsumer
    from kafka import TopicPartition as TP

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        parts = c.partitions_for_topic(topic) or set()
        tps = [TP(topic, p) for p in parts]
        if not tps:
            return {}, 0
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        out: dict[int, dict[str, Any]] = {}
        n = 0
        deadline = time.monotonic() + 30
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=500).values():
                for rec in recs:
                    n += 1
                    v = json.loads(rec.value)
                    start = int(datetime.fromisoformat(v["window_start"].replace("Z", "+00:00")).timestamp())
                    assert rec.key.decode() == v["window_start"]
                    v["top_paths"] = [(p["path"], p["count"]) for p in v["top_paths"]]
                    out[start] = v
        return out, n
    finally:
        c.close()


def run_scenario(spark: Any, bootstrap: str, tmp: Path, source: str, env: dict[str, str] | None = None,
                 pipeline_bootstrap: str | None = None, pipeline_args: tuple[str, ...] = ()) -> str:
    """Run the scenario; raise AssertionError on any difference. Returns a summary line.

    The test produces and checks through ``bootstrap``; the pipeline may be given another
    listener (``pipeline_bootstrap``) and client settings (``pipeline_args``, e.g. --command-config)."""
    topic, out_topic = f"access-{uuid.uuid4().hex[:6]}", f"stats-{uuid.uuid4().hex[:6]}"
    ensure_topic(bootstrap, topic, 2)
    ensure_topic(bootstrap, out_topic, 1)
    gen = EventGenerator(seed=20261122, start_ms=START_MS, events_per_second=EVENTS_PER_S, jitter_ms=2000)
    events: list[dict[str, Any]] = []
    produce(bootstrap, topic, count=HALF, generator=gen, on_event=events.append, progress=False)

    cmd = _pipeline_cmd(pipeline_bootstrap or bootstrap, topic, out_topic, tmp, source) + list(pipeline_args)
    ckpt = tmp / "checkpoint" / "parquet"
    log = tmp / "pipeline.log"
    first = Pipeline(cmd, log, env)
    try:
        deadline = time.monotonic() + 300
        while _committed_batches(ckpt) < 2:
            first.check_alive()
            if time.monotonic() > deadline:
                raise AssertionError(f"no two committed batches in 300 s:\n{first.tail()}")
            time.sleep(0.2)
    finally:
        first.kill()
    batches_before_crash = _committed_batches(ckpt)

    produce(bootstrap, topic, count=HALF, generator=gen, on_event=events.append, progress=False)
    expected = closed_windows(events, WINDOW_S, DELAY_S)
    second = Pipeline(cmd, log, env)
    try:
        deadline = time.monotonic() + 400
        while True:
            second.check_alive()
            parquet = _parquet_windows(spark, tmp / "parquet")
            kafka, n_records = _kafka_windows(bootstrap, out_topic)
            if len(parquet) >= len(expected) and len(kafka) >= len(expected):
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"after 400 s: {len(parquet)} Parquet / {len(kafka)} Kafka windows of {len(expected)}:\n"
                    f"{second.tail()}")
            time.sleep(1.0)
    finally:
        second.kill()
    problems = compare(parquet, expected)
    problems += [f"kafka: {p}" for p in compare(kafka, expected)]
    assert not problems, "\n".join(problems)
    return (f"{len(events)} events, {len(expected)} windows equal in Parquet and Kafka "
            f"({n_records} Kafka records); crash after {batches_before_crash} committed batches")
