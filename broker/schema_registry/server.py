"""The Schema Registry a broker serves (``schema.registry.listeners``) or ``samsa schema-registry``
runs: :class:`SchemaRegistry` ties the store's reader, the REST app and its HTTP server together.
The composition root imports this module only when the registry is configured."""

from __future__ import annotations

import asyncio
import logging
import ssl
from urllib.parse import urlparse

from .cluster_auth import standalone_security
from .election import PrimaryElection
from .host import BrokerHost, kafka_client_settings
from .http import RegistryHttpServer
from .metrics import RegistryMetrics
from .rest import RestApp
from .security import AccessGuard, RegistrySecurity
from .service import Registry
from .state import RegistryState
from .store import ClientOptions, KafkaStore

__all__ = ["SchemaRegistry", "forward_ssl_context", "parse_listener", "standalone_security", "start_schema_registry"]

log = logging.getLogger("samsa.schema_registry")


def forward_ssl_context(server_context: ssl.SSLContext | None) -> ssl.SSLContext | None:
    """For forwarding to other registries over https: the system's CAs plus the ones the
    broker's own listener trusts (its truststore), since the registries share the broker's keystore."""
    if server_context is None:
        return None

    ctx = ssl.create_default_context()
    for der in server_context.get_ca_certs(binary_form=True):
        ctx.load_verify_locations(cadata=der)
    return ctx


def parse_listener(spec: str) -> tuple[str, str, int]:
    """``http://host:port`` (or https) -> (scheme, host, port); ValueError with a clear message otherwise."""
    u = urlparse(spec.strip())
    if u.scheme not in ("http", "https") or not u.hostname or u.port is None or u.path not in ("", "/"):
        raise ValueError(f"schema.registry.listeners must look like http://127.0.0.1:8081, not {spec!r}")
    return u.scheme, u.hostname, u.port


class SchemaRegistry:
    """A running registry: the store's reader, the REST app and its HTTP server."""

    def __init__(self, host: str, port: int, bootstrap: str, *, max_body: int = 1048576,
                 client_options: ClientOptions | None = None, ssl_context: ssl.SSLContext | None = None,
                 advertised_url: str = "", eligible: bool = True, replication_factor: int = 3,
                 security: AccessGuard | None = None) -> None:
        self.state = RegistryState()
        self.store = KafkaStore(bootstrap, self.state, client_options=client_options,
                                replication_factor=replication_factor)
        self.registry = Registry(self.state, self.store)
        self.metrics = RegistryMetrics(self)
        self.app = RestApp(self.registry, metrics=self.metrics, security=security)
        self.server = RegistryHttpServer(host, port, self.app, max_body, ssl_context)
        self.scheme = "https" if ssl_context is not None else "http"
        self.advertised_url = advertised_url
        self.eligible = eligible
        self.bootstrap = bootstrap
        self.client_options = client_options
        self.election: PrimaryElection | None = None
        self._starter: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.server.host}:{self.server.port}"

    async def start(self, kafka_ready: asyncio.Event | None = None) -> None:
        """Listen at once; connect to Kafka in the background (requests wait for the store)."""
        await self.server.start()
        if not self.advertised_url:
            host = self.server.host if self.server.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
            self.advertised_url = f"{self.scheme}://{host}:{self.server.port}"
        self.election = PrimaryElection(self.advertised_url, self.eligible, self.bootstrap, self.store,
                                        self.client_options, forward_ssl_context(self.server.ssl_context))
        self.app.forwarder = self.election
        self._starter = asyncio.get_running_loop().create_task(self._start_store(kafka_ready))

    async def _start_store(self, kafka_ready: asyncio.Event | None) -> None:
        if kafka_ready is not None:
            await kafka_ready.wait()
        delay = 0.5
        while True:
            try:
                await self.store.start()
                assert self.election is not None
                await self.election.start()
                return
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.warning("Schema registry: cannot open %s yet (%s); retrying in %.1f s", self.store.topic, e, delay)
                await self.store.stop()
                if self.election is not None:
                    await self.election.stop()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def stop(self) -> None:
        if self._starter is not None:
            self._starter.cancel()
            try:
                await self._starter
            except (asyncio.CancelledError, Exception):
                pass
        await self.server.stop()
        if self.election is not None:
            await self.election.stop()
        await self.store.stop()


async def start_schema_registry(broker: BrokerHost) -> SchemaRegistry | None:
    """The registry on ``schema.registry.listeners``, started; None when not configured or it cannot start."""
    spec = str(broker.config.get("schema.registry.listeners") or "").strip()
    if not spec:
        return None
    try:
        scheme, host, port = parse_listener(spec.split(",")[0])
    except ValueError as e:
        log.error("Schema registry not started: %s", e)
        return None
    ssl_context = None
    if scheme == "https":
        # the broker's own keystore: the first TLS listener's context
        ssl_context = next((ls.ssl_context for ls in broker.security.listeners.values()
                            if ls.ssl_context is not None), None)
        if ssl_context is None:
            log.error("Schema registry not started: %s needs a TLS listener's keystore (ssl.keystore.location)", spec)
            return None
    security = RegistrySecurity.from_broker(broker)
    try:
        bootstrap, options = kafka_client_settings(broker)
    except ValueError as e:
        log.error("Schema registry not started: %s", e)
        return None
    max_body = broker.config.int("schema.registry.max.request.bytes") or 1048576
    advertised = str(broker.config.get("schema.registry.advertised.listener") or "").strip()
    if not advertised and host in ("0.0.0.0", "::", ""):
        adv = broker.advertised
        advertised = f"{scheme}://{adv.host if adv.host not in ('0.0.0.0', '::', '') else '127.0.0.1'}:{port}"
    sr = SchemaRegistry(host, port, bootstrap, max_body=max_body, advertised_url=advertised,
                        eligible=bool(broker.config.get("schema.registry.leader.eligibility")),
                        replication_factor=broker.config.int("schema.registry.topic.replication.factor")
                        if broker.metadata_support.clustered else 1, ssl_context=ssl_context, security=security,
                        client_options=options)
    try:
        await sr.start(broker.started)
    except OSError as e:
        log.error("Schema registry not started: cannot listen on %s: %s (the Kafka listener is unaffected)", spec, e)
        return None
    if broker.metrics is not None:  # the broker's metrics.listener shows the registry's too
        broker.metrics.collectors.append(sr.metrics)  # what a scrape renders
        broker.metrics.registry.register(sr.metrics)
    log.info("Schema registry listening on %s://%s:%d/ (%s), storing schemas in %s at %s", scheme, host,
             sr.server.port, "HTTP Basic authentication against the broker's SASL users" if security is not None
             and security.authenticate else "no authentication", sr.store.topic, bootstrap)
    return sr
