"""The web console: an operator's view of the cluster, served by the broker itself.

``console.listener=http://127.0.0.1:9090`` turns it on (empty, the default, leaves it off);
``console.allow.writes=true`` allows the write actions (create topic, add partitions, alter
configs, reset offsets, delete records), which are refused with a clear message otherwise;
``console.bootstrap.servers`` names the cluster to show (default: this broker's own
advertised listener, from which the clients discover every broker); ``console.metrics.urls``
lists the brokers' Prometheus endpoints for exact bytes in/out (default: this broker's own
``metrics.listener``, if set; without any, the rates are estimated from the protocol);
``console.schema.registry.url`` is the Schema Registry the Schemas page reads (default: this
broker's ``schema.registry.listeners``, if set), over Confluent's REST API.

Theory of operation: the process that runs a broker hands it a :class:`ConsoleSidecar`
(``samsa broker``, the embedded broker), which shares the broker's lifetime. It starts
:class:`http.ConsoleHttpServer` on the broker's event loop and a sampler task. Neither touches broker internals: every fact shown comes over
the Kafka protocol through kafka-python clients run on the console's own worker thread
(:mod:`.cluster`), so the console shows a whole cluster, and a slow page can never stall the
Kafka listener. A console port already in use is logged as an error at start and the broker
carries on without the console.

Layout: :mod:`.service` (the running console: server, view and sampler), :mod:`.http` (the HTTP/1.1 server), :mod:`.api` (routes: pages, the JSON API,
static files), :mod:`.pages` (each page rendered as HTML on the console's worker thread),
:mod:`.markup` (the escaping HTML builder, formats, tables and the SVG line chart),
:mod:`.cluster` (the protocol view and the sampled history), :mod:`.messages` (bounded
record pages), ``static/`` (CSS, the favicon, and ``app.js``: in-place refresh of a page's
live regions and the write forms; no build step, no CDN).

Imports: protocol/, broker/tools/ and kafka-python's clients; like the tools it reads the cluster
over the Kafka protocol, never the broker's internals (broker/config/properties.py only names the types of the
broker's properties it is started with).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from broker.config.properties import BrokerConfig

if TYPE_CHECKING:
    from .service import Console

log = logging.getLogger("samsa.console")


def parse_listener(spec: str) -> tuple[str, int]:
    """``http://host:port`` -> (host, port); ValueError with a clear message otherwise."""
    u = urlparse(spec.strip())
    if u.scheme != "http" or not u.hostname or u.port is None or u.path not in ("", "/"):
        raise ValueError(f"console.listener must look like http://127.0.0.1:9090, not {spec!r}")
    return u.hostname, u.port


async def start_console(config: BrokerConfig, kafka_ready: asyncio.Event) -> Console | None:
    """The console on ``console.listener``, started; None when not configured or it cannot start.
    Its clients bootstrap once ``kafka_ready`` is set (the broker's listeners are up)."""
    spec = str(config.get("console.listener") or "").strip()
    if not spec:
        return None
    try:
        host, port = parse_listener(spec)
    except ValueError as e:
        log.error("Console not started: %s", e)
        return None
    bootstrap_spec = str(config.get("console.bootstrap.servers") or "").strip()
    if bootstrap_spec:
        bootstrap = [s.strip() for s in bootstrap_spec.split(",") if s.strip()]
    else:
        adv = config.advertised_listeners[0]
        bootstrap = [f"{'127.0.0.1' if adv.host in ('0.0.0.0', '::', '') else adv.host}:{adv.port}"]
    allow_writes = bool(config.get("console.allow.writes"))
    metrics_spec = str(config.get("console.metrics.urls") or "").strip()
    metrics_urls = [u.strip() for u in metrics_spec.split(",") if u.strip()]
    own_metrics = str(config.get("metrics.listener") or "").strip()
    if not metrics_urls and own_metrics:
        try:
            mhost, mport = parse_listener(own_metrics)
            mhost = "127.0.0.1" if mhost in ("0.0.0.0", "::") else mhost
            metrics_urls = [f"http://{mhost}:{mport}/metrics"]
        except ValueError:
            pass
    if not log.isEnabledFor(logging.DEBUG):
        logging.getLogger("kafka").setLevel(logging.WARNING)  # the console's clients: quiet unless debugging
    registry_url = str(config.get("console.schema.registry.url") or "").strip()
    own_registry = str(config.get("schema.registry.listeners") or "").strip().split(",")[0]
    if not registry_url and own_registry:
        registry_url = own_registry.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://127.0.0.1:")
    # Deferred to here, the one function-local import of the console: `samsa broker` imports this
    # package (for ConsoleSidecar), but only a broker with console.listener set needs the console's
    # clients (kafka-python's admin client and consumer, broker/tools/): ~70-170 ms of imports
    # measured with `python3 -X importtime` on top of broker.server.
    from .service import Console  # noqa: PLC0415

    console = Console(host, port, bootstrap, allow_writes, metrics_urls, registry_url)
    try:
        await console.start(kafka_ready)
    except OSError as e:
        log.error("Console not started: cannot listen on %s: %s (the Kafka listener is unaffected)", spec, e)
        console.view.close()
        return None
    log.info("Samsa console listening on http://%s:%d/ (%s), showing the cluster at %s", host,
             console.server.port, "writes allowed" if allow_writes else "read-only", ",".join(bootstrap))
    return console


class ConsoleSidecar:
    """The console beside a broker (``console.listener``): started once the coordinators are,
    stopped before the logs close. It reads the broker only over the Kafka protocol."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.console: Console | None = None

    async def start(self, kafka_ready: asyncio.Event) -> None:
        self.console = await start_console(self.config, kafka_ready)

    async def stop(self) -> None:
        console, self.console = self.console, None
        if console is not None:
            await console.stop()
