"""A deliberately small HTTP/1.1 server for the console, on the broker's asyncio loop.

Theory of operation: one ``asyncio.start_server`` connection handler reads one request (head
capped at :data:`MAX_HEAD` bytes, body at :data:`MAX_BODY`, both within
:data:`READ_TIMEOUT_S`), dispatches it to an async handler, writes one response and closes
(``Connection: close``: a console makes few requests, and closing keeps the server stateless).
Anything malformed is answered with a 4xx and the connection closed; a handler that raises
is logged and answered 500; nothing here can stop the Kafka listener, which runs on the same
loop but never waits for this server.

Every response carries a strict Content-Security-Policy (scripts, styles and images only
from this server, no inline script), ``X-Content-Type-Options: nosniff`` and
``X-Frame-Options: DENY``: even if text from a message reached the page as markup, the
browser would refuse to run it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from broker.tools._common import JSON

log = logging.getLogger("samsa.console")

MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024
READ_TIMEOUT_S = 15.0

REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 403: "Forbidden",
           404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict",
           411: "Length Required", 413: "Content Too Large", 414: "URI Too Long", 415: "Unsupported Media Type",
           431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented",
           503: "Service Unavailable", 504: "Gateway Timeout"}

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    method: str
    path: str  # percent-decoded
    query: dict[str, str]
    headers: dict[str, str]  # lower-cased names
    body: bytes = b""
    segments: list[str] = field(default_factory=list)

    def json(self) -> dict[str, JSON]:
        if not self.headers.get("content-type", "").lower().startswith("application/json"):
            raise HttpError(415, "send the request body as application/json")
        try:
            doc = json.loads(self.body or b"{}")
        except ValueError as e:
            raise HttpError(400, f"request body is not valid JSON: {e}") from e
        if not isinstance(doc, dict):
            raise HttpError(400, "request body must be a JSON object")
        return doc


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"


Handler = Callable[[Request], Awaitable[Response]]


def json_response(doc: JSON, status: int = 200) -> Response:
    return Response(status, json.dumps(doc, default=str).encode())


def error_response(status: int, message: str) -> Response:
    return json_response({"error": message, "status": status}, status)


def parse_head(head: bytes) -> Request:
    """Request line and headers (the bytes before the blank line) -> Request, or HttpError."""
    try:
        text = head.decode("latin-1")
    except Exception as e:  # pragma: no cover - latin-1 decodes anything
        raise HttpError(400, "undecodable request") from e
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0].isalpha():
        raise HttpError(400, "malformed request line")
    method, target, _ = parts
    if not target.startswith("/"):
        raise HttpError(400, "request target must be a path")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or " " in name:
            raise HttpError(400, "malformed header line")
        headers[name.lower()] = value.strip()
    split = urlsplit(target)
    try:
        path = unquote(split.path, errors="strict") if "%" in split.path else split.path
    except UnicodeDecodeError as e:
        raise HttpError(400, "path is not valid UTF-8 once percent-decoded") from e
    try:
        qs = parse_qs(split.query, keep_blank_values=True, strict_parsing=False, max_num_fields=50)
    except ValueError as e:
        raise HttpError(400, f"bad query string: {e}") from e
    query = {k: v[-1] for k, v in qs.items()}
    # segments are split before decoding, so a name with a "/" in it (a group id may have one)
    # arrives as %2F and stays one segment
    segments = [unquote(s) for s in split.path.split("/") if s]
    return Request(method.upper(), path, query, headers, b"", segments)


class HttpServer:
    """Serves ``handler`` on host:port; :meth:`start` raises OSError if the port is taken."""

    def __init__(self, host: str, port: int, handler: Handler) -> None:
        self.host, self.port, self.handler = host, port, handler
        self.server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[object]] = set()  # the _serve task of each open connection

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEAD,
                                                 reuse_address=True)
        sock = self.server.sockets[0]
        self.port = sock.getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for t in list(self._conns):
            t.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        try:
            try:
                req = await asyncio.wait_for(self._read(reader), READ_TIMEOUT_S)
            except HttpError as e:
                await self._write(writer, error_response(e.status, str(e)), head_only=False)
                return
            except TimeoutError:
                await self._write(writer, error_response(408, "request not received in time"), head_only=False)
                return
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            try:
                resp = await self.handler(req)
            except HttpError as e:
                resp = error_response(e.status, str(e))
            except Exception:
                log.exception("Console: error serving %s %s", req.method, req.path)
                resp = error_response(500, "internal error (see the broker's log)")
            await self._write(writer, resp, head_only=req.method == "HEAD")
        except asyncio.CancelledError:
            pass
        except ConnectionError:
            pass
        finally:
            if task is not None:
                self._conns.discard(task)
            try:
                writer.close()
            except Exception:
                pass

    async def _read(self, reader: asyncio.StreamReader) -> Request:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError as e:
            # The request line alone too long is a 414; otherwise the headers are.
            first = bytes(reader._buffer[:MAX_HEAD])  # type: ignore[attr-defined]
            if b"\r\n" not in first:
                raise HttpError(414, f"request line longer than {MAX_HEAD} bytes") from e
            raise HttpError(431, f"request head longer than {MAX_HEAD} bytes") from e
        req = parse_head(head[:-4])
        if req.method not in ("GET", "HEAD", "POST"):
            raise HttpError(405 if req.method in ("PUT", "DELETE", "PATCH", "OPTIONS") else 501,
                            f"method {req.method} not allowed")
        if "transfer-encoding" in req.headers:
            raise HttpError(501, "chunked request bodies are not supported; send Content-Length")
        length_s = req.headers.get("content-length", "0" if req.method != "POST" else "")
        if not length_s:
            raise HttpError(411, "POST needs Content-Length")
        if not length_s.isdigit():
            raise HttpError(400, "bad Content-Length")
        length = int(length_s)
        if length > MAX_BODY:
            raise HttpError(413, f"request body larger than {MAX_BODY} bytes")
        if length:
            req.body = await reader.readexactly(length)
        return req

    async def _write(self, writer: asyncio.StreamWriter, resp: Response, head_only: bool) -> None:
        ctype = resp.content_type
        if ctype.startswith(("text/", "application/json", "application/javascript", "image/svg")):
            ctype += "; charset=utf-8"
        headers = {"Content-Type": ctype, "Content-Length": str(len(resp.body)), "Connection": "close",
                   **SECURITY_HEADERS}
        head = f"HTTP/1.1 {resp.status} {REASONS.get(resp.status, 'Status')}\r\n" + \
            "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        writer.write(head.encode("latin-1"))
        if not head_only:
            writer.write(resp.body)
        try:
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
        except TimeoutError:
            pass
