"""The registry's HTTP/1.1 server, on the broker's event loop, framed by h11.

h11 (the sans-io HTTP/1.1 state machine under httpx and uvicorn) does the framing: keep-alive
(confluent-kafka's SchemaRegistryClient reuses connections, which matters for lookups per
second), pipelining, chunked and Content-Length bodies, and the protocol errors, none of which a
hand-written parser gets right cheaply. This module only owns sockets and limits:

* the request head is capped at :data:`MAX_HEAD` bytes (431), the body at ``max_body`` bytes
  (413, checked against Content-Length before reading and while reading a chunked body);
* a request must arrive within :data:`READ_TIMEOUT_S` of the connection going idle (408);
* a malformed request is a 400 and the connection is closed; a handler that raises anything
  but a :class:`~.errors.RegistryError` is logged and answered 500 (Confluent's 50001 body).
"""

from __future__ import annotations

import asyncio
import http
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import h11

from .errors import RegistryError

log = logging.getLogger("samsa.schema_registry")

MAX_HEAD = 16 * 1024
READ_TIMEOUT_S = 30.0


@dataclass
class Request:
    method: str
    path: str
    segments: list[str]
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    peer: str = ""
    query_string: str = ""
    principal: str | None = None  # set by the auth hook


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "application/vnd.schemaregistry.v1+json"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]


def error_response(e: RegistryError, content_type: str = "application/vnd.schemaregistry.v1+json") -> Response:
    return Response(e.http_status, json.dumps(e.body()).encode(), content_type)


def _reason(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b"Status"


class HttpServer:
    def __init__(self, host: str, port: int, handler: Handler, max_body: int,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.host, self.port, self.handler, self.max_body = host, port, handler, max_body
        self.ssl_context = ssl_context
        self.server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True,
                                                 ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for t in list(self._conns):
            t.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        peer = writer.get_extra_info("peername")
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            while True:
                try:
                    req = await asyncio.wait_for(self._read(conn, reader), READ_TIMEOUT_S)
                except _Reject as r:
                    await self._send(conn, writer, error_response(RegistryError(r.status, r.status, r.message)),
                                     close=True, head_only=r.head)
                    if r.status == 413:
                        await self._discard(reader)
                    return
                except TimeoutError:
                    if conn.our_state is h11.IDLE and conn.their_state is h11.IDLE:
                        return  # an idle keep-alive connection: just close it
                    await self._send(conn, writer,
                                     error_response(RegistryError(408, 408, "request not received in time")),
                                     close=True)
                    return
                if req is None:
                    return
                req.peer = f"{peer[0]}:{peer[1]}" if peer else ""
                try:
                    resp = await self.handler(req)
                except RegistryError as e:
                    resp = error_response(e)
                except Exception:
                    log.exception("Schema registry: error serving %s %s", req.method, req.path)
                    resp = error_response(RegistryError(500, 50001, "Internal error (see the broker's log)"))
                await self._send(conn, writer, resp, close=False, head_only=req.method == "HEAD")
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                try:
                    conn.start_next_cycle()
                except h11.LocalProtocolError:
                    return
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except h11.LocalProtocolError:
            pass
        finally:
            if task is not None:
                self._conns.discard(task)
            try:
                writer.close()
            except Exception:
                pass

    @staticmethod
    async def _discard(reader: asyncio.StreamReader) -> None:
        """After a 413: read (and drop) what the client is still sending, for a little while, so
        that it gets to read the answer instead of a reset connection."""
        loop = asyncio.get_running_loop()
        deadline, budget = loop.time() + 2.0, 64 << 20
        try:
            while budget > 0 and loop.time() < deadline:
                chunk = await asyncio.wait_for(reader.read(1 << 20), max(0.01, deadline - loop.time()))
                if not chunk:
                    return
                budget -= len(chunk)
        except (TimeoutError, ConnectionError):
            pass

    async def _read(self, conn: h11.Connection, reader: asyncio.StreamReader) -> Request | None:
        req: h11.Request | None = None
        body = bytearray()
        while True:
            try:
                event = conn.next_event()
            except h11.RemoteProtocolError as e:
                status = e.error_status_hint
                raise _Reject(431 if "exceeds" in str(e) or "too long" in str(e) else status,
                              f"malformed request: {e}") from None
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                if not data:
                    if conn.their_state is h11.IDLE and req is None:
                        return None
                    conn.receive_data(b"")
                    continue
                conn.receive_data(data)
                continue
            if isinstance(event, h11.Request):
                req = event
                length = _header(event, b"content-length")
                if length is not None and length.isdigit() and int(length) > self.max_body:
                    raise _Reject(413, f"request body larger than {self.max_body} bytes")
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self.max_body:
                    raise _Reject(413, f"request body larger than {self.max_body} bytes")
            elif isinstance(event, h11.EndOfMessage):
                assert req is not None
                try:
                    return _request(req, bytes(body))
                except _Reject as r:
                    r.head = req.method == b"HEAD"  # the answer to a HEAD has no body
                    raise
            elif isinstance(event, h11.ConnectionClosed):
                return None

    async def _send(self, conn: h11.Connection, writer: asyncio.StreamWriter, resp: Response, close: bool,
                    head_only: bool = False) -> None:
        headers = [(b"Content-Type", resp.content_type.encode()), (b"Content-Length", str(len(resp.body)).encode())]
        headers += [(k.encode(), v.encode()) for k, v in resp.headers.items()]
        if close:
            headers.append((b"Connection", b"close"))
        try:
            out = conn.send(h11.Response(status_code=resp.status, headers=headers, reason=_reason(resp.status)))
            if not head_only and resp.body:
                out = (out or b"") + (conn.send(h11.Data(data=resp.body)) or b"")
            out = (out or b"") + (conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:
            return
        writer.write(out)
        try:
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
        except TimeoutError:
            pass


class _Reject(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.head = False


def _header(req: h11.Request, name: bytes) -> str | None:
    for k, v in req.headers:
        if k.lower() == name:
            return v.decode("latin-1")
    return None


def _request(event: h11.Request, body: bytes) -> Request:
    target = event.target.decode("latin-1")
    split = urlsplit(target)
    try:
        qs = parse_qs(split.query, keep_blank_values=True, max_num_fields=50)
    except ValueError as e:
        raise _Reject(400, f"bad query string: {e}") from None
    query = {k: v[-1] for k, v in qs.items()}
    # split before decoding, so a subject with "/" in it (sent as %2F) stays one segment
    try:
        segments = [unquote(s, errors="strict") for s in split.path.split("/") if s]
    except UnicodeDecodeError:
        raise _Reject(400, "path is not valid UTF-8 once percent-decoded") from None
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in event.headers}
    return Request(event.method.decode("latin-1").upper(), split.path, segments, query, headers, body,
                   query_string=split.query)
