"""The ``/metrics`` endpoint, on the broker's shared HTTP/1.1 server (:mod:`broker.network.http`).

Theory of operation. The server accepts scrapers on the broker's own event loop beside the Kafka
listeners; each connection reads one request at a time (keep-alive, as Prometheus scrapes), answers
``GET /metrics`` with the text :meth:`broker.metrics.BrokerMetrics.render` produces (prometheus-client's
``generate_latest``) and anything else with a 4xx. The server is not a thread (as
prometheus-client's own ``start_http_server`` is): accepting and parsing requests would then
contend for the GIL with the Kafka listener all the time, and collectors read broker state
that only the loop may touch. Only the rendering of a scrape's text leaves the loop.

Bad input never reaches a traceback: a request line over 8 KiB is 414, headers over 64 lines or
32 KiB are 431, an unparsable request line is 400, a method other than GET/HEAD is 405, an
unknown path is 404, a client that sends nothing for ``IDLE_TIMEOUT`` seconds is dropped (one
that stopped mid-request is answered 408), and a connection is closed after
``MAX_REQUESTS_PER_CONNECTION`` scrapes.
``?name[]=...`` restricts the output to those metric families, as prometheus-client's server does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs

from broker.network.http import HttpLimits, HttpServer, Request, Response, reason

log = logging.getLogger("samsa.metrics")

MAX_REQUEST_LINE = 8192
MAX_HEADER_LINES = 64
MAX_HEADER_BYTES = 32768
IDLE_TIMEOUT = 30.0
MAX_REQUESTS_PER_CONNECTION = 1000
LIMITS = HttpLimits(max_head=MAX_REQUEST_LINE + MAX_HEADER_BYTES, max_request_line=MAX_REQUEST_LINE,
                    max_header_lines=MAX_HEADER_LINES, max_body=64 * 1024, max_query_fields=None,
                    read_timeout=IDLE_TIMEOUT, max_requests=MAX_REQUESTS_PER_CONNECTION, host_required=False)

# What generate_latest writes (names escaped to underscores): the classic text format, which
# every Prometheus version reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

INDEX = b"<html><head><title>Samsa metrics</title></head><body><a href=\"/metrics\">/metrics</a></body></html>\n"


def _plain(status: int, _message: str = "") -> Response:
    """``404 Not Found``: the answer to anything but a scrape, as prometheus-client's server words it."""
    return Response(status, b"%d %s\n" % (status, reason(status).encode()), "text/plain; charset=utf-8")


class MetricsHttpServer(HttpServer):
    """Serves what ``render(names or None)`` returns over HTTP at ``host:port``."""

    def __init__(self, render: Callable[[set[str] | None], Awaitable[bytes]], host: str, port: int) -> None:
        super().__init__(host, port, self._dispatch, error=_plain, limits=LIMITS, name="Metrics", logger=log)
        self.render = render

    async def _dispatch(self, req: Request) -> Response:
        if req.method not in ("GET", "HEAD"):
            return _plain(405)
        if req.path == "/metrics":
            try:
                names = parse_qs(req.query_string).get("name[]")
                return Response(200, await self.render(set(names) if names else None), CONTENT_TYPE)
            except Exception:
                log.exception("Metrics collection failed")
                return _plain(500)
        if req.path == "/":
            return Response(200, INDEX, "text/html; charset=utf-8")
        return _plain(404)
