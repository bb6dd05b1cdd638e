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

Theory of operation: this module is a broker component (``start(broker)``/``stop(broker)``,
see ``COMPONENTS`` in broker/server.py). It starts :class:`http.HttpServer` on the broker's
event loop and a sampler task. Neither touches broker internals: every fact shown comes over
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
from typing import Protocol
from urllib.parse import urlparse

from broker.config.properties import BrokerConfig, Listener

log = logging.getLogger("samsa.console")


def parse_listener(spec: str) -> tuple[str, int]:
    """``http://host:port`` -> (host, port); ValueError with a clear message otherwise."""
    u = urlparse(spec.strip())
    if u.scheme != "http" or not u.hostname or u.port is None or u.path not in ("", "/"):
        raise ValueError(f"console.listener must look like http://127.0.0.1:9090, not {spec!r}")
    return u.hostname, u.port


class RunningConsole(Protocol):
    """The console ``start`` leaves in the broker's ``console`` slot (:class:`.service.Console`)."""

    async def stop(self) -> None: ...


class ConsoleHost(Protocol):
    """What the console reads from the broker that starts it: its configuration, its advertised
    listener (the default cluster to show) and the event set once the Kafka listener serves.
    ``console`` is the slot the running console is kept in between ``start`` and ``stop``."""

    console: RunningConsole | None

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def started(self) -> asyncio.Event: ...

    @property
    def advertised(self) -> Listener: ...


async def start(broker: ConsoleHost) -> None:
    spec = str(broker.config.get("console.listener") or "").strip()
    if not spec:
        return
    try:
        host, port = parse_listener(spec)
    except ValueError as e:
        log.error("Console not started: %s", e)
        return
    bootstrap_spec = str(broker.config.get("console.bootstrap.servers") or "").strip()
    if bootstrap_spec:
        bootstrap = [s.strip() for s in bootstrap_spec.split(",") if s.strip()]
    else:
        adv = broker.advertised
        bootstrap = [f"{'127.0.0.1' if adv.host in ('0.0.0.0', '::', '') else adv.host}:{adv.port}"]
    allow_writes = bool(broker.config.get("console.allow.writes"))
    metrics_spec = str(broker.config.get("console.metrics.urls") or "").strip()
    metrics_urls = [u.strip() for u in metrics_spec.split(",") if u.strip()]
    own_metrics = str(broker.config.get("metrics.listener") or "").strip()
    if not metrics_urls and own_metrics:
        try:
            mhost, mport = parse_listener(own_metrics)
            mhost = "127.0.0.1" if mhost in ("0.0.0.0", "::") else mhost
            metrics_urls = [f"http://{mhost}:{mport}/metrics"]
        except ValueError:
            pass
    if not log.isEnabledFor(logging.DEBUG):
        logging.getLogger("kafka").setLevel(logging.WARNING)  # the console's clients: quiet unless debugging
    registry_url = str(broker.config.get("console.schema.registry.url") or "").strip()
    own_registry = str(broker.config.get("schema.registry.listeners") or "").strip().split(",")[0]
    if not registry_url and own_registry:
        registry_url = own_registry.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://127.0.0.1:")
    # Deferred to here, the one function-local import of the console: every broker imports this
    # package (server.py's COMPONENTS), but only one with console.listener set needs the console's
    # clients (kafka-python's admin client and consumer, broker/tools/): ~70-170 ms of imports
    # measured with `python3 -X importtime` on top of broker.server.
    from .service import Console  # noqa: PLC0415

    console = Console(host, port, bootstrap, allow_writes, metrics_urls, registry_url)
    try:
        await console.start(broker.started)
    except OSError as e:
        log.error("Console not started: cannot listen on %s: %s (the Kafka listener is unaffected)", spec, e)
        console.view.close()
        return
    broker.console = console
    log.info("Samsa console listening on http://%s:%d/ (%s), showing the cluster at %s", host,
             console.server.port, "writes allowed" if allow_writes else "read-only", ",".join(bootstrap))


async def stop(broker: ConsoleHost) -> None:
    console = broker.console
    if console is not None:
        broker.console = None
        await console.stop()
