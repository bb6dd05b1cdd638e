"""The ``/metrics`` endpoint: a minimal HTTP/1.1 server on the broker's own event loop.

Theory of operation. ``asyncio.start_server`` accepts scrapers beside the Kafka listeners; each
connection reads one request at a time (keep-alive, as Prometheus scrapes), answers
``GET /metrics`` with the text :meth:`broker.metrics.BrokerMetrics.render` produces (prometheus-client's
``generate_latest``) and anything else with a 4xx. The server is not a thread (as
prometheus-client's own ``start_http_server`` is): accepting and parsing requests would then
contend for the GIL with the Kafka listener all the time, and collectors read broker state
that only the loop may touch. Only the rendering of a scrape's text leaves the loop.

Bad input never reaches a traceback: a request line over 8 KiB is 414, headers over 64 lines or
32 KiB are 431, an unparsable request line is 400, a method other than GET/HEAD is 405, an
unknown path is 404, and a client that sends nothing for ``IDLE_TIMEOUT`` seconds is dropped.
``?name[]=...`` restricts the output to those metric families, as prometheus-client's server does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

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


class MetricsHttpServer:
    """Serves what ``render(names or None)`` returns over HTTP at ``host:port``."""

    def __init__(self, render: Callable[[set[str] | None], Awaitable[bytes]], host: str, port: int) -> None:
        self.render = render
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
                status, body, ctype = await self._dispatch(method, target)
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

    async def _dispatch(self, method: str, target: str) -> tuple[int, bytes, str]:
        if method not in ("GET", "HEAD"):
            return 405, b"405 Method Not Allowed\n", "text/plain; charset=utf-8"
        url = urlsplit(target)
        if url.path == "/metrics":
            try:
                names = parse_qs(url.query).get("name[]")
                return 200, await self.render(set(names) if names else None), CONTENT_TYPE
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
