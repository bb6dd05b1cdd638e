"""Realistic nginx-style access-log events, produced to a Kafka topic at a chosen rate.

Web and access-log analytics is Kafka's classic use (LinkedIn built it to move exactly this
kind of activity data), so the pipeline's input is an access log. Each event is one JSON
object per record value:

    {"timestamp": "2026-11-22T04:31:07.123Z", "host": "shop.example.com",
     "remote_addr": "203.0.113.7", "method": "GET", "path": "/products/42",
     "status": 200, "bytes": 5123, "latency": 12.5, "user_agent": "Mozilla/5.0 ..."}

`latency` is in milliseconds. The record key is the client address, so one client's
requests stay in order within a partition, as a log shipper keyed by client would do.

The generator is deterministic for a given seed and (optionally) a synthetic clock, which is
what lets the tests compute the expected windowed counts directly from the events and compare
them with what Spark produced. Without a synthetic clock, timestamps are wall-clock "now".

Run: ``python -m spark.generate --bootstrap 127.0.0.1:9092 --topic access-log --rate 500``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TextIO, TypedDict, TypeVar

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

# Weighted so the top-paths output is stable and interesting: a few hot paths, a long tail.
PATHS: list[tuple[str, int]] = [
    ("/", 30), ("/index.html", 12), ("/products", 18), ("/products/{id}", 25),
    ("/cart", 8), ("/checkout", 4), ("/api/v1/search", 15), ("/api/v1/items/{id}", 14),
    ("/api/v1/login", 5), ("/static/app.js", 20), ("/static/style.css", 18),
    ("/favicon.ico", 6), ("/robots.txt", 2), ("/admin", 1), ("/wp-login.php", 1),
]
METHODS: list[tuple[str, int]] = [("GET", 80), ("POST", 14), ("PUT", 3), ("DELETE", 2), ("HEAD", 1)]
STATUSES: list[tuple[int, int]] = [
    (200, 70), (201, 3), (204, 2), (301, 4), (302, 3), (304, 6), (400, 2), (401, 2),
    (403, 1), (404, 4), (429, 1), (500, 1), (502, 1), (503, 1),
]
HOSTS = ["shop.example.com", "api.example.com", "static.example.com"]
USER_AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148",
    "curl/8.5.0",
    "Googlebot/2.1 (+http://www.google.com/bot.html)",
    "python-requests/2.32.3",
]


T = TypeVar("T")


class AccessLogEvent(TypedDict):
    """One nginx-style access-log event, the JSON value of a record (EVENT_SCHEMA in spark/pipeline_config.py)."""

    timestamp: str
    host: str
    remote_addr: str
    method: str
    path: str
    status: int
    bytes: int
    latency: float
    user_agent: str


def _weighted(rng: random.Random, table: Sequence[tuple[T, int]]) -> T:
    return rng.choices([v for v, _ in table], weights=[w for _, w in table])[0]


def iso_millis(epoch_ms: int) -> str:
    """ISO-8601 UTC with milliseconds, the form nginx's `$time_iso8601` + msec would give."""
    dt = datetime.fromtimestamp(epoch_ms / 1000.0, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{epoch_ms % 1000:03d}Z"


class EventGenerator:
    """Endless, reproducible stream of access-log events.

    With `start_ms` set, event time is synthetic: event i happens at
    start_ms + i * 1000 / events_per_second, plus a jitter of up to `jitter_ms` either way
    (logs from several web servers arrive slightly out of order). Jitter must stay well under
    the pipeline's watermark delay, or Spark would rightly drop the late events.
    """

    def __init__(
        self,
        seed: int = 0,
        start_ms: int | None = None,
        events_per_second: float = 100.0,
        jitter_ms: int = 2000,
    ) -> None:
        self.rng = random.Random(seed)
        self.start_ms = start_ms
        self.events_per_second = events_per_second
        self.jitter_ms = jitter_ms
        self.index = 0
        self.clients = [
            f"{self.rng.randint(1, 223)}.{self.rng.randint(0, 255)}.{self.rng.randint(0, 255)}."
            f"{self.rng.randint(1, 254)}"
            for _ in range(200)
        ]

    def next_event(self) -> AccessLogEvent:
        rng = self.rng
        if self.start_ms is None:
            ts = int(time.time() * 1000) - rng.randint(0, self.jitter_ms)
        else:
            base = self.start_ms + int(self.index * 1000 / self.events_per_second)
            ts = base + rng.randint(-self.jitter_ms, self.jitter_ms)
        self.index += 1
        path = _weighted(rng, PATHS).replace("{id}", str(rng.randint(1, 50)))
        status = _weighted(rng, STATUSES)
        # Latency: log-normal around ~20 ms, with slow 5xx responses, like a real upstream.
        latency = rng.lognormvariate(3.0, 0.6) * (8.0 if status >= 500 else 1.0)
        size = 0 if status == 204 or 300 <= status < 400 else int(rng.lognormvariate(8.0, 1.2))
        return {
            "timestamp": iso_millis(ts),
            "host": rng.choice(HOSTS),
            "remote_addr": rng.choice(self.clients),
            "method": _weighted(rng, METHODS),
            "path": path,
            "status": status,
            "bytes": size,
            "latency": round(latency, 3),
            "user_agent": rng.choice(USER_AGENTS),
        }

    def __iter__(self) -> Iterator[AccessLogEvent]:
        while True:
            yield self.next_event()


def encode(event: AccessLogEvent) -> tuple[bytes, bytes]:
    """(key, value) bytes for one event: key = client address, value = compact JSON."""
    return event["remote_addr"].encode(), json.dumps(event, separators=(",", ":")).encode()


def ensure_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Create `topic` with `partitions` partitions unless it exists already."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="samsa-generate")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


@dataclass
class ProduceStats:
    events: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0


def produce(
    bootstrap: str,
    topic: str,
    *,
    count: int | None = None,
    rate: float | None = None,
    duration: float | None = None,
    generator: EventGenerator | None = None,
    progress: bool = True,
    on_event: Callable[[AccessLogEvent], None] | None = None,
    stop: Callable[[], bool] | None = None,
    out: TextIO | None = None,
) -> ProduceStats:
    """Produce events until `count` events, `duration` seconds or `stop()` says so.

    `rate` (events/s) is enforced by pacing against the start time, so a slow moment is
    caught up rather than lost. Every send is acknowledged by all in-sync replicas
    (acks=all) and the producer is flushed before returning: a returned count is on the broker.
    """
    out = out or sys.stderr
    gen = generator or EventGenerator()
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, client_id="samsa-generate",
        batch_size=64 * 1024,
    )
    errors: list[BaseException] = []

    def on_error(exc: BaseException) -> None:
        errors.append(exc)

    sent = 0
    started = time.monotonic()
    last_report = started
    try:
        while True:
            if count is not None and sent >= count:
                break
            now = time.monotonic()
            if duration is not None and now - started >= duration:
                break
            if stop is not None and stop():
                break
            if rate:
                due = started + sent / rate
                if due > now:
                    time.sleep(min(due - now, 0.05))
                    continue
            event = gen.next_event()
            key, value = encode(event)
            producer.send(topic, key=key, value=value).add_errback(on_error)
            if on_event is not None:
                on_event(event)
            sent += 1
            if errors:
                raise RuntimeError(f"produce failed: {errors[0]!r}")
            if progress and now - last_report >= 0.5:
                last_report = now
                elapsed = now - started
                out.write(f"\rproduced {sent:>9,} events to {topic} "
                          f"({sent / elapsed if elapsed else 0:,.0f} events/s)   ")
                out.flush()
        producer.flush()
        if errors:
            raise RuntimeError(f"produce failed: {errors[0]!r}")
    finally:
        producer.close()
    elapsed = time.monotonic() - started
    if progress:
        out.write(f"\rproduced {sent:>9,} events to {topic} in {elapsed:.1f}s "
                  f"({sent / elapsed if elapsed else 0:,.0f} events/s)\n")
        out.flush()
    return ProduceStats(sent, elapsed)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    p = parser or argparse.ArgumentParser(
        prog="python -m spark.generate", description="Produce nginx-style access-log events.")
    p.add_argument("--bootstrap", default="127.0.0.1:9092", help="bootstrap server host:port")
    p.add_argument("--topic", default="access-log")
    p.add_argument("--partitions", type=int, default=1, help="partitions if the topic is created")
    p.add_argument("--rate", type=float, default=200.0, help="events per second (0 = as fast as possible)")
    p.add_argument("--count", type=int, default=None, help="stop after this many events")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--seed", type=int, default=None, help="random seed (reproducible events)")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    return p


def run(args: argparse.Namespace) -> int:
    ensure_topic(args.bootstrap, args.topic, args.partitions)
    gen = EventGenerator(seed=args.seed if args.seed is not None else random.randrange(1 << 30))
    try:
        produce(args.bootstrap, args.topic, count=args.count, rate=args.rate or None,
                duration=args.duration, generator=gen, progress=not args.quiet)
    except KeyboardInterrupt:
        print("", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
