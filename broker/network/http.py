"""The broker's one HTTP/1.1 server: the web console, the schema registry and ``/metrics`` use it.

Theory of operation. ``asyncio.start_server`` on the broker's event loop; each connection reads
one request at a time, hands it to the endpoint's async handler and writes its answer. h11 (the
sans-io HTTP/1.1 state machine under httpx and uvicorn) does the framing: keep-alive, pipelining,
Content-Length and chunked bodies and the protocol errors, none of which a hand-written parser
gets right cheaply. This module owns the sockets, the limits and the answers to bad input; what
differs between endpoints is data (:class:`HttpLimits`) and two callables: ``error`` words an
answer to bad input the endpoint's way (the console's JSON, Confluent's error body, Prometheus'
plain text) and ``check_head`` refuses a request from its head, before its body is read.

* The head (request line and headers) is capped at ``max_head`` bytes: 431, or 414 when the
  request line alone is longer than ``max_request_line`` (as Jetty, under Confluent's registry,
  answers); more than ``max_header_lines`` headers is 431.
* The body is capped at ``max_body`` bytes: 413, checked against Content-Length before reading
  and while reading a chunked body; what the client still sends is then drained for a moment, so
  that it reads the answer rather than a reset connection.
* A request must arrive within ``read_timeout`` seconds: a connection that sent nothing since its
  last answer (or ever) is closed quietly, one that stopped mid-request is answered 408.
* Anything malformed (HTTP other than 1.x too) is 400; every refusal closes the connection. A
  handler that raises :class:`HttpError` is answered with its status through ``error``; one that
  raises anything else is logged and answered 500.

It imports nothing of the broker: in the layers contract it sits below all of its users.
"""

from __future__ import annotations

import asyncio
import http
import logging
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import h11

log = logging.getLogger("samsa.http")

# h11's own end-of-head test (a blank line, CRLF or bare LF), to measure the head it parsed
_END_OF_HEAD = re.compile(rb"\n\r?\n")

# RFC 9110's names where Python's table still has RFC 7231's
_REASONS = {413: "Content Too Large", 414: "URI Too Long"}


def reason(status: int) -> str:
    """The reason phrase for ``status``."""
    if status in _REASONS:
        return _REASONS[status]
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Status"


class HttpError(Exception):
    """Answer this request with ``status`` (through the endpoint's ``error``) and ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    method: str  # upper-case
    path: str  # as sent (still percent-encoded), without the query
    segments: list[str]  # the path split at "/" and then percent-decoded: "%2F" stays inside a segment
    query: dict[str, str]  # the last value of each name
    headers: dict[str, str]  # lower-case names
    body: bytes = b""
    peer: str = ""  # "host:port" of the client
    query_string: str = ""
    principal: str | None = None  # who sent it, once an endpoint's authentication has said so


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]
ErrorAnswer = Callable[[int, str], Response]


@dataclass(frozen=True)
class HttpLimits:
    max_head: int = 16 * 1024  # request line and headers, bytes: 431
    max_request_line: int | None = None  # bytes: 414 (None: max_head)
    max_header_lines: int | None = None  # 431 (None: only max_head counts)
    max_body: int = 1024 * 1024  # bytes: 413
    max_query_fields: int | None = 50  # name=value pairs in the query string: 400 (None: no limit)
    read_timeout: float = 30.0  # seconds for a request to arrive: 408 (or a quiet close if none began)
    keep_alive: bool = True  # False: one request per connection, answered with Connection: close
    max_requests: int | None = None  # per connection; the last answer says Connection: close
    host_required: bool = True  # False: an HTTP/1.1 request without Host is served (RFC 9112 says 400)


class HttpServer:
    """Serves ``handler`` on host:port (TLS with ``ssl_context``); :meth:`start` raises OSError
    if the port is taken. ``headers`` go on every answer, refusals included."""

    def __init__(self, host: str, port: int, handler: Handler, *, error: ErrorAnswer, limits: HttpLimits,
                 name: str, logger: logging.Logger = log, check_head: Callable[[Request], None] | None = None,
                 headers: Mapping[str, str] | None = None, ssl_context: ssl.SSLContext | None = None) -> None:
        self.host, self.port, self.handler = host, port, handler
        self.error, self.limits, self.check_head = error, limits, check_head
        self.name, self.log = name, logger  # for the log line of a handler's crash
        self.headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
        self.ssl_context = ssl_context
        self.server: asyncio.base_events.Server | None = None
        self._conns: set[asyncio.Task[object]] = set()  # the _serve task of each open connection

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True,
                                                 ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for t in list(self._conns):
            t.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._conns.add(task)
        peer = writer.get_extra_info("peername")
        wire = _Wire(reader, self.limits)
        limits, served = self.limits, 0
        try:
            while True:
                try:
                    req = await asyncio.wait_for(self._read(wire), limits.read_timeout)
                except HttpError as e:
                    await self._send(wire, writer, self.error(e.status, str(e)), close=True,
                                     head_only=wire.method == b"HEAD")
                    if e.status == 413:
                        await _drain(reader)
                    return
                except TimeoutError:
                    if wire.pending or wire.conn.their_state is not h11.IDLE:
                        await self._send(wire, writer, self.error(408, "request not received in time"), close=True)
                    return
                if req is None:
                    return
                req.peer = f"{peer[0]}:{peer[1]}" if peer else ""
                try:
                    resp = await self.handler(req)
                except HttpError as e:
                    resp = self.error(e.status, str(e))
                except Exception:
                    self.log.exception("%s: error serving %s %s", self.name, req.method, req.path)
                    resp = self.error(500, "internal error (see the broker's log)")
                served += 1
                last = not limits.keep_alive or (limits.max_requests is not None and served >= limits.max_requests)
                await self._send(wire, writer, resp, close=last, head_only=req.method == "HEAD")
                if not wire.next_request():
                    return
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError, h11.LocalProtocolError):
            pass
        finally:
            if task is not None:
                self._conns.discard(task)
            try:
                writer.close()
            except Exception:
                pass

    async def _read(self, wire: _Wire) -> Request | None:
        """The next request, None if the client closed between requests, or HttpError."""
        event = await wire.head()
        if event is None:
            return None
        req = _request(event, self.limits)
        if self.check_head is not None:
            self.check_head(req)
        length = _header(event, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limits.max_body:
            raise HttpError(413, f"request body larger than {self.limits.max_body} bytes")
        req.body = await wire.body(self.limits.max_body)
        return req

    async def _send(self, wire: _Wire, writer: asyncio.StreamWriter, resp: Response, close: bool,
                    head_only: bool = False) -> None:
        conn = wire.conn
        headers = [(b"Content-Type", resp.content_type.encode("latin-1")),
                   (b"Content-Length", str(len(resp.body)).encode())]
        headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers.items()]
        headers += self.headers
        if close:
            headers.append((b"Connection", b"close"))
        try:
            out = conn.send(h11.Response(status_code=resp.status, headers=headers,
                                         reason=reason(resp.status).encode("latin-1"))) or b""
            if not head_only and resp.body:
                out += conn.send(h11.Data(data=resp.body)) or b""
            out += conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:
            return
        writer.write(out)
        try:
            await asyncio.wait_for(writer.drain(), self.limits.read_timeout)
        except TimeoutError:
            pass


class _Wire:
    """One connection's incoming bytes and h11's state for the request being read.

    ``pending`` holds the bytes of the current request's head until h11 has parsed it (never more
    than ``max_head`` plus one read): how long the head and its request line were decides between
    414, 431 and 400, and a head without Host is read again with one added where that is allowed.
    """

    def __init__(self, reader: asyncio.StreamReader, limits: HttpLimits) -> None:
        self.reader, self.limits = reader, limits
        self.conn = self._connection(b"")
        self.pending = b""
        self.method = b""  # of the request being read, once its head is parsed

    def _connection(self, data: bytes) -> h11.Connection:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_head)
        if data:
            conn.receive_data(data)
        return conn

    def next_request(self) -> bool:
        """After an answer: ready for the next request on this connection, or False to close."""
        conn = self.conn
        if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
            return False
        leftover, closed = conn.trailing_data
        if closed:
            return False
        self.conn, self.pending, self.method = self._connection(leftover), leftover, b""
        return True

    async def _more(self) -> None:
        data = await self.reader.read(65536)
        if self.conn.their_state is h11.IDLE:
            self.pending += data
        self.conn.receive_data(data)  # b"" is the client's end of stream

    async def head(self) -> h11.Request | None:
        limits = self.limits
        retried = False
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as e:
                self._check_size()
                if not limits.host_required and not retried and self._add_host():
                    retried = True
                    continue
                raise HttpError(e.error_status_hint, f"malformed request: {e}") from None
            if event is h11.NEED_DATA:
                await self._more()
                continue
            if isinstance(event, h11.ConnectionClosed):
                return None  # closed between requests
            if not isinstance(event, h11.Request):  # pragma: no cover - h11 gives a server requests first
                raise HttpError(400, "malformed request")
            self.method = event.method
            self._check_size()
            if limits.max_header_lines is not None and len(event.headers) > limits.max_header_lines:
                raise HttpError(431, f"more than {limits.max_header_lines} header lines")
            if not event.http_version.startswith(b"1."):
                raise HttpError(400, "malformed request line: only HTTP/1.x is served")
            self.pending = b""
            return event

    def _check_size(self) -> None:
        """414 or 431 if the head (complete or not) in ``pending`` is over the limits."""
        limits, pending = self.limits, self.pending
        end = _END_OF_HEAD.search(pending)
        head_len = end.end() if end else len(pending)
        max_line = min(limits.max_request_line or limits.max_head, limits.max_head)
        line_end = pending.find(b"\n", 0, head_len)
        if (line_end if line_end >= 0 else head_len) > max_line:
            raise HttpError(414, f"request line longer than {max_line} bytes")
        if head_len > limits.max_head:
            raise HttpError(431, f"request head longer than {limits.max_head} bytes")

    def _add_host(self) -> bool:
        """Feed h11 the head again with an empty Host if it has none (and is complete and HTTP/1.1)."""
        end = _END_OF_HEAD.search(self.pending)
        line_end = self.pending.find(b"\n")
        if end is None or line_end < 0 or not self.pending[:line_end].rstrip(b"\r").endswith(b" HTTP/1.1"):
            return False
        if re.search(rb"\nhost[ \t]*:", self.pending[:end.end()], re.IGNORECASE):
            return False
        self.pending = self.pending[:line_end + 1] + b"Host: \r\n" + self.pending[line_end + 1:]
        self.conn = self._connection(self.pending)
        return True

    async def body(self, max_body: int) -> bytes:
        body = bytearray()
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError as e:
                raise HttpError(e.error_status_hint, f"malformed request: {e}") from None
            if event is h11.NEED_DATA:
                await self._more()
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > max_body:
                    raise HttpError(413, f"request body larger than {max_body} bytes")
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            else:  # pragma: no cover - h11 ends a body with EndOfMessage or a protocol error
                raise HttpError(400, "malformed request body")


async def _drain(reader: asyncio.StreamReader) -> None:
    """After a 413: read (and drop) what the client is still sending, for a little while, so that
    it gets to read the answer instead of a reset connection."""
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


def _header(event: h11.Request, name: bytes) -> str | None:
    for k, v in event.headers:
        if k == name:  # h11 lower-cases names
            return v.decode("latin-1")
    return None


def _request(event: h11.Request, limits: HttpLimits) -> Request:
    split = urlsplit(event.target.decode("latin-1"))
    try:
        qs = parse_qs(split.query, keep_blank_values=True, max_num_fields=limits.max_query_fields)
    except ValueError as e:
        raise HttpError(400, f"bad query string: {e}") from None
    # split before decoding, so a name with "/" in it (a subject, a group id: sent as %2F) stays one segment
    try:
        segments = [unquote(s, errors="strict") for s in split.path.split("/") if s]
    except UnicodeDecodeError:
        raise HttpError(400, "path is not valid UTF-8 once percent-decoded") from None
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in event.headers}
    return Request(event.method.decode("latin-1").upper(), split.path, segments, {k: v[-1] for k, v in qs.items()},
                   headers, query_string=split.query)
