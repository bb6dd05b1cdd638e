"""The running console: the HTTP server, the cluster view and the sampler task (started by
``broker.console.start`` when ``console.listener`` is set)."""

from __future__ import annotations

import asyncio
import logging

from .api import ConsoleApp
from .cluster import SAMPLE_INTERVAL_S, ClusterView
from .http import ConsoleHttpServer

log = logging.getLogger("samsa.console")


class Console:
    """The running console: HTTP server, cluster view and sampler task."""

    def __init__(self, host: str, port: int, bootstrap: list[str], allow_writes: bool,
                 metrics_urls: list[str] | None = None, schema_registry_url: str = "") -> None:
        self.view = ClusterView(bootstrap, metrics_urls, schema_registry_url)
        self.app = ConsoleApp(self.view, allow_writes)
        self.server = ConsoleHttpServer(host, port, self.app)
        self._sampler: asyncio.Task[None] | None = None

    async def start(self, ready: asyncio.Event | None = None) -> None:
        await self.server.start()
        self._sampler = asyncio.get_running_loop().create_task(self._sample_loop(ready))

    async def _sample_loop(self, ready: asyncio.Event | None) -> None:
        if ready is not None:
            await ready.wait()  # the Kafka listener is up: the clients can bootstrap
        loop = asyncio.get_running_loop()
        failures = 0
        while True:
            t0 = loop.time()
            try:
                await self.view.call(self.view.sample)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as e:
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    log.warning("Console: sampling the cluster failed (%d in a row): %s", failures, e)
            elapsed = loop.time() - t0
            # A slow sample (many partitions) backs off so the console never loads the cluster much.
            await asyncio.sleep(max(SAMPLE_INTERVAL_S, min(3 * elapsed, 30.0)))

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
        await self.server.stop()
        await asyncio.get_running_loop().run_in_executor(None, self.view.close)
