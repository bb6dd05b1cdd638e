"""The console's HTTP: its limits, its security headers and its JSON answers, on the broker's
shared HTTP/1.1 server (:mod:`broker.network.http`, h11 framing on the broker's asyncio loop).

One request per connection (``Connection: close``: a console makes few requests, and closing
keeps the server stateless), its head capped at :data:`MAX_HEAD` bytes and its body at
:data:`MAX_BODY`, both within :data:`READ_TIMEOUT_S`. Only GET, HEAD and POST are served (405
for the other methods a browser knows, 501 for the rest), a POST needs Content-Length (411) and a
chunked body is refused (501). Anything malformed is answered with a 4xx JSON error and the
connection closed; a handler that raises is logged and answered 500; nothing here can stop the
Kafka listener, which runs on the same loop but never waits for this server.

Every response carries a strict Content-Security-Policy (scripts, styles and images only
from this server, no inline script), ``X-Content-Type-Options: nosniff`` and
``X-Frame-Options: DENY``: even if text from a message reached the page as markup, the
browser would refuse to run it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from broker.network.http import Handler, HttpError, HttpLimits, HttpServer, Request
from broker.network.http import Response as _Response
from broker.tools._common import JSON

log = logging.getLogger("samsa.console")

__all__ = ["HttpError", "Request", "Response", "ConsoleHttpServer", "error_response", "json_response", "json_body"]

MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024
READ_TIMEOUT_S = 15.0
LIMITS = HttpLimits(max_head=MAX_HEAD, max_body=MAX_BODY, read_timeout=READ_TIMEOUT_S, keep_alive=False,
                    host_required=False)

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

_TEXT_TYPES = ("text/", "application/json", "application/javascript", "image/svg")


@dataclass
class Response(_Response):
    content_type: str = "application/json"

    def __post_init__(self) -> None:
        if self.content_type.startswith(_TEXT_TYPES) and "charset=" not in self.content_type:
            self.content_type += "; charset=utf-8"


def json_response(doc: JSON, status: int = 200) -> Response:
    return Response(status, json.dumps(doc, default=str).encode())


def error_response(status: int, message: str) -> Response:
    return json_response({"error": message, "status": status}, status)


def json_body(req: Request) -> dict[str, JSON]:
    """The request's body, a JSON object sent as application/json, or HttpError (415, 400)."""
    if not req.headers.get("content-type", "").lower().startswith("application/json"):
        raise HttpError(415, "send the request body as application/json")
    try:
        doc = json.loads(req.body or b"{}")
    except ValueError as e:
        raise HttpError(400, f"request body is not valid JSON: {e}") from e
    if not isinstance(doc, dict):
        raise HttpError(400, "request body must be a JSON object")
    return doc


def check_head(req: Request) -> None:
    """What the console refuses before reading a body."""
    if not req.path.startswith("/"):
        raise HttpError(400, "request target must be a path")
    if req.method not in ("GET", "HEAD", "POST"):
        raise HttpError(405 if req.method in ("PUT", "DELETE", "PATCH", "OPTIONS") else 501,
                        f"method {req.method} not allowed")
    if "transfer-encoding" in req.headers:
        raise HttpError(501, "chunked request bodies are not supported; send Content-Length")
    if req.method == "POST" and "content-length" not in req.headers:
        raise HttpError(411, "POST needs Content-Length")


class ConsoleHttpServer(HttpServer):
    """Serves ``handler`` on host:port; :meth:`start` raises OSError if the port is taken."""

    def __init__(self, host: str, port: int, handler: Handler) -> None:
        super().__init__(host, port, handler, error=error_response, limits=LIMITS, name="Console", logger=log,
                         check_head=check_head, headers=SECURITY_HEADERS)
