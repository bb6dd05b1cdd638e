"""The registry's HTTP: Confluent's error bodies and content type, TLS and its limits, on the
broker's shared HTTP/1.1 server (:mod:`broker.network.http`, h11 framing on the broker's loop).

Keep-alive matters here (confluent-kafka's SchemaRegistryClient reuses connections, which counts
for lookups per second), as do pipelining and chunked bodies; the shared server gives all three.
What this module sets:

* the request head is capped at :data:`MAX_HEAD` bytes (431; 414 for a request line alone that
  long), the body at ``max_body`` bytes (413, checked against Content-Length before reading and
  while reading a chunked body);
* a request must arrive within :data:`READ_TIMEOUT_S` once begun (408); an idle keep-alive
  connection is closed after as long;
* bad input is answered with Confluent's body (``{"error_code": 400, "message": ...}``); a
  handler that raises anything but a :class:`~.errors.RegistryError` is logged and answered 500
  (Confluent's 50001 body).
"""

from __future__ import annotations

import json
import logging
import ssl

from broker.network.http import Handler, HttpLimits, HttpServer, Request, Response

from .errors import RegistryError

__all__ = ["Request", "Response", "RegistryHttpServer", "error_response"]

log = logging.getLogger("samsa.schema_registry")

MAX_HEAD = 16 * 1024
READ_TIMEOUT_S = 30.0
V1 = "application/vnd.schemaregistry.v1+json"


def error_response(e: RegistryError, content_type: str = V1) -> Response:
    return Response(e.http_status, json.dumps(e.body()).encode(), content_type)


def _bad_input(status: int, message: str) -> Response:
    if status == 500:
        return error_response(RegistryError(500, 50001, "Internal error (see the broker's log)"))
    return error_response(RegistryError(status, status, message))


class RegistryHttpServer(HttpServer):
    """Serves the REST app ``handler`` on host:port, over TLS with ``ssl_context``."""

    def __init__(self, host: str, port: int, handler: Handler, max_body: int,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        async def serve(req: Request) -> Response:
            try:
                return await handler(req)
            except RegistryError as e:
                return error_response(e)

        super().__init__(host, port, serve, error=_bad_input, name="Schema registry", logger=log,
                         limits=HttpLimits(max_head=MAX_HEAD, max_body=max_body, read_timeout=READ_TIMEOUT_S),
                         ssl_context=ssl_context)
