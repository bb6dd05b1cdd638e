"""Broker metrics in the Prometheus format, under the names Kafka operators already graph.

What it owns: one prometheus-client ``CollectorRegistry`` per broker (``broker.metrics.registry``),
the hot-path counters it reads (:mod:`.stats`), the scrape-time collectors over broker state
(:mod:`.collectors`) and the ``metrics.listener`` HTTP endpoint (:mod:`.http`).

Theory of operation. The composition root (``broker/server.py``) calls :func:`start_metrics`
once the services the collectors read are up and before any listener opens. With ``metrics.listener`` empty (the default) there is no
:class:`BrokerMetrics` and ``broker.metrics`` is ``None``: Produce, Fetch and the connection check
that one attribute and skip all counting. With ``metrics.listener=http://HOST:PORT`` it builds a
:class:`BrokerMetrics`, binds the endpoint on the broker's event loop and starts an event-loop
lag probe. Gauges are computed when scraped; only Produce/Fetch bytes and messages (once per
partition per request) and request timings (once per request) are counted as they happen.

It must never block the Kafka listener for long: a scrape reads state and writes text in slices
of about 2 ms with Kafka requests served in between (:meth:`BrokerMetrics.render`); a bind
failure (port in use) is logged as an error and the broker serves Kafka without metrics; a
collector that raises answers that scrape with a 500 and is logged, the broker carries on.

Imports: the services it reads (replica manager, log/), broker/config/ and protocol/; nothing from the request
layer or above.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import GCCollector, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from ..config.properties import parse_listener
from . import collectors
from .host import MetricsHost
from .http import MetricsHttpServer
from .stats import BrokerTopicStats, EventLoopLag, RequestStats, RequestTimer

__all__ = ["BrokerMetrics", "MetricsHost", "RequestTimer", "parse_listener", "start_metrics"]

log = logging.getLogger("samsa.metrics")

RENDER_SLICE = 0.002  # a scrape holds the loop at most about this long at a time (plus one chunk)


class BrokerMetrics:
    """The broker's registry and the counters its collectors read."""

    def __init__(self, broker: MetricsHost) -> None:
        self.broker = broker
        self.topic_stats = BrokerTopicStats()
        self.request_stats = RequestStats()
        self.loop_lag = EventLoopLag()
        self.registry = CollectorRegistry(auto_describe=False)
        # Read only /proc and the interpreter: safe in the rendering thread.
        scratch = CollectorRegistry(auto_describe=False)  # they insist on registering somewhere
        self.collectors: list[Collector] = [
            ProcessCollector(registry=scratch),  # process_cpu_seconds_total, RSS, open fds
            PlatformCollector(registry=scratch), GCCollector(registry=scratch),
            collectors.BrokerTopicMetricsCollector(broker, self.topic_stats),
            collectors.RequestMetricsCollector(self.request_stats),
            collectors.SocketServerCollector(broker),
            collectors.ReplicaManagerCollector(broker),
            collectors.FetchSessionCacheCollector(broker),
            collectors.GroupCoordinatorCollector(broker),
            collectors.TransactionCoordinatorCollector(broker),
            collectors.LogCleanerCollector(broker),
            collectors.EventLoopCollector(self.loop_lag)]
        for c in self.collectors:
            self.registry.register(c)
        self.http: MetricsHttpServer | None = None
        self._rendering = 0
        self._gc_was_enabled = True
        self._lag_task: asyncio.Task[None] | None = None

    async def render(self, names: set[str] | None = None) -> bytes:
        """The exposition text, rendered on the loop in slices so Kafka requests interleave.

        First every collector reads the broker's state (the small ones build their families
        outright; those with ``prepare()`` copy numbers into tuples, pausing every few hundred
        partitions). Then families are built and written by ``generate_latest`` one at a time;
        the big per-partition ones come in chunks of ``collectors.CHUNK`` samples, and the loop
        is yielded whenever a slice has run for ``RENDER_SLICE`` seconds. A chunk that repeats a
        family already written loses its ``# HELP``/``# TYPE`` lines, so the text is exactly
        what one ``generate_latest`` call over the whole registry would write.
        """
        # The cyclic GC waits while a scrape runs: the scrape makes hundreds of thousands of
        # short-lived (acyclic, refcount-freed) objects, and the full collections they would
        # trigger each stall the whole loop for up to ~100 ms with 10,000 partitions.
        if self._rendering == 0:
            self._gc_was_enabled = gc.isenabled()
            gc.disable()
        self._rendering += 1
        try:
            return await self._render(names)
        finally:
            self._rendering -= 1
            if self._rendering == 0 and self._gc_was_enabled:
                gc.enable()

    async def _render(self, names: set[str] | None) -> bytes:
        clock = time.perf_counter
        t0 = clock()
        builders: list[Callable[[], Iterable[Metric]]] = []
        for c in self.collectors:
            prepare = getattr(c, "prepare", None)
            if prepare is None:
                builders.append(list(c.collect()).__iter__)
                continue
            prep = prepare()
            while True:
                try:
                    next(prep)
                except StopIteration as done:
                    builders.append(done.value)
                    break
                if clock() - t0 > RENDER_SLICE:
                    await asyncio.sleep(0)
                    t0 = clock()
        out: list[bytes] = []
        written: set[str] = set()
        for build in builders:
            for fam in build():
                if names is not None and fam.name not in names and not any(s.name in names for s in fam.samples):
                    continue
                text = generate_latest(_One(fam))
                if fam.name in written:
                    text = b"".join(line for line in text.splitlines(keepends=True) if not line.startswith(b"# "))
                written.add(fam.name)
                out.append(text)
                if clock() - t0 > RENDER_SLICE:
                    await asyncio.sleep(0)
                    t0 = clock()
        return b"".join(out)

    def start_probe(self) -> None:
        if self._lag_task is None:
            self._lag_task = asyncio.get_running_loop().create_task(self.loop_lag.run())

    async def close(self) -> None:
        if self.http is not None:
            await self.http.stop()
            self.http = None
        if self._lag_task is not None:
            self._lag_task.cancel()
            self._lag_task = None


class _One:
    """A registry stand-in holding one family, for ``generate_latest``."""

    def __init__(self, fam: Metric) -> None:
        self.fam = fam

    def collect(self) -> Iterator[Metric]:
        yield self.fam


async def start_metrics(broker: MetricsHost) -> BrokerMetrics | None:
    """The broker's metrics when ``metrics.listener`` is set: counting on, the lag probe running
    and the endpoint open; None otherwise (nothing is counted)."""
    where = parse_listener(str(broker.config.get("metrics.listener") or ""))
    if where is None:
        return None
    m = BrokerMetrics(broker)
    m.start_probe()
    host, port = where
    server = MetricsHttpServer(m.render, host, port)
    try:
        await server.start()
    except OSError as e:
        log.error("Cannot open metrics.listener http://%s:%d (%s); serving Kafka without the metrics "
                  "endpoint", host, port, e.strerror or e)
        return m
    m.http = server
    log.info("Metrics endpoint listening on http://%s:%d/metrics", host, server.port)
    return m
