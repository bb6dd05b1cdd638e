"""The ``/metrics`` endpoint: a minimal HTTP/1.1 server on the broker's own event loop.

Theory of operation. ``asyncio.start_server`` accepts scrapers beside the Kafka listeners; each
connection reads one request at a time (keep-alive, as Prometheus scrapes), answers
``GET /metrics`` with prometheus-client's ``generate_latest`` over the broker's registry and
anything else with a 4xx. The scrape runs on the loop, not in a thread: the collectors read
live broker state that only the loop may touch, and a thread would contend for the GIL with
the Kafka listener on every scrape instead of once.

Bad input never reaches a traceback: a request line over 8 KiB is 414, headers over 64 lines or
32 KiB are 431, an unparsable request line is 400, a method other than GET/HEAD is 405, an
unknown path is 404, and a client that sends nothing for ``IDLE_TIMEOUT`` seconds is dropped.
``?name[]=...`` restricts the output to those metric families, as prometheus-client's server does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import CollectorRegistry

log = logging.getLogger("samsa.metrics")

MAX_REQUEST_LINE = 8192
MAX_HEADER_LINES = 64
MAX_HEADER_BYTES = 32768
IDLE_TIMEOUT = 30.0
MAX_REQUESTS_PER_CONNECTION = 1000

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 414: "URI Too Long", 431: "Request Header Fields Too Large",
            500: "Internal Server Error"}

# What generate_latest writes (names escaped to underscores): the classic text format, which
# every Prometheus version reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

INDEX = b"<html><head><title>Samsa metrics</title></head><body><a href=\"/metrics\">/metrics</a></body></html>\n"


class _BadRequest(Exception):
    def __init__(self, status: int) -> None:
        self.status = status


class _Only:
    """The families of ``registry`` named in ``names`` (by family or sample name)."""

    def __init__(self, registry: CollectorRegistry, names: set[str]) -> None:
        self.registry = registry
        self.names = names

    def collect(self) -> Iterator[Metric]:
        for fam in self.registry.collect():
            if fam.name in self.names or any(s.name in self.names for s in fam.samples):
                yield fam


class MetricsHttpServer:
    """Serves ``registry`` over HTTP at ``host:port``."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.server: asyncio.base_events.Server | None = None
        self._clients: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True,
                                                 limit=MAX_REQUEST_LINE)
        sock = self.server.sockets[0].getsockname()
        self.port = sock[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for w in list(self._clients):
                w.close()
            self.server = None

    def render(self, query: str = "") -> bytes:
        names = parse_qs(query).get("name[]")
        return generate_latest(_Only(self.registry, set(names)) if names else self.registry)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.add(writer)
        try:
            for _ in range(MAX_REQUESTS_PER_CONNECTION):
                try:
                    request = await asyncio.wait_for(self._read_request(reader), IDLE_TIMEOUT)
                except TimeoutError:
                    return
                except _BadRequest as bad:
                    await self._respond(writer, bad.status, b"%d %s\n" % (bad.status, _REASONS[bad.status].encode()),
                                        "text/plain; charset=utf-8", keep_alive=False)
                    return
                if request is None:
                    return
                method, target, keep_alive = request
                status, body, ctype = self._dispatch(method, target)
                await self._respond(writer, status, body, ctype, keep_alive=keep_alive,
                                    head=(method == "HEAD"))
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._clients.discard(writer)
            writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> tuple[str, str, bool] | None:
        try:
            line = await reader.readline()
        except (asyncio.LimitOverrunError, ValueError):
            raise _BadRequest(414) from None
        if not line:
            return None
        if not line.endswith(b"\n"):
            raise _BadRequest(414 if len(line) >= MAX_REQUEST_LINE else 400)
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _BadRequest(400)
        method, target, version = parts
        keep_alive = version == "HTTP/1.1"
        total = 0
        for _ in range(MAX_HEADER_LINES + 1):
            try:
                header = await reader.readline()
            except (asyncio.LimitOverrunError, ValueError):
                raise _BadRequest(431) from None
            if not header.endswith(b"\n"):
                raise _BadRequest(400)
            total += len(header)
            if total > MAX_HEADER_BYTES:
                raise _BadRequest(431)
            if header in (b"\r\n", b"\n"):
                return method, target, keep_alive
            name, sep, value = header.decode("latin-1").partition(":")
            if not sep:
                raise _BadRequest(400)
            if name.strip().lower() == "connection":
                v = value.strip().lower()
                keep_alive = v == "keep-alive" or (keep_alive and v != "close")
        raise _BadRequest(431)

    def _dispatch(self, method: str, target: str) -> tuple[int, bytes, str]:
        if method not in ("GET", "HEAD"):
            return 405, b"405 Method Not Allowed\n", "text/plain; charset=utf-8"
        url = urlsplit(target)
        if url.path == "/metrics":
            try:
                return 200, self.render(url.query), CONTENT_TYPE
            except Exception:
                log.exception("Metrics collection failed")
                return 500, b"500 Internal Server Error\n", "text/plain; charset=utf-8"
        if url.path == "/":
            return 200, INDEX, "text/html; charset=utf-8"
        return 404, b"404 Not Found\n", "text/plain; charset=utf-8"

    @staticmethod
    async def _respond(writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str, *,
                       keep_alive: bool, head: bool = False) -> None:
        headers = (f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
                   f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                   f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n")
        writer.write(headers.encode("latin-1"))
        if not head:
            writer.write(body)
        await writer.drain()
