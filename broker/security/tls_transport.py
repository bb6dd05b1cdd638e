"""An opt-in TLS transport for SSL and SASL_SSL listeners on which OpenSSL reads and writes the socket.

The default for SSL and SASL_SSL listeners is the event loop's own TLS transport
(``loop.connect_accepted_socket(..., ssl=ctx)``): uvloop runs OpenSSL over two *memory* BIOs,
so every byte received is copied from the socket into a read buffer, into the incoming BIO
(which first clears what it grows), into OpenSSL's record buffer, and only then decrypted; every
response is encrypted into the outgoing BIO, copied out and written to the socket in one call.
With ``SAMSA_TLS_TRANSPORT=socket`` this module's transport is used instead: OpenSSL owns the
socket (a *socket* BIO), ``SSL_read`` pulls ciphertext from the kernel straight into its record
buffer and decrypts into the request frame's own buffer, ``SSL_write`` sends each record as it
is encrypted.

Why it is not the default (issue 10, bench/RESULTS.md, this 2-core machine, client and broker
on the same host): it costs the broker less CPU per MB produced (1.69-1.76 against 1.90-2.21 ms
in alternating probe runs; ``bench/security.py`` 1.9-2.0 against 2.1), but that bought no
throughput here, where the client's own TLS takes the other core, and Fetch responses, sent a
16 KiB record per ``send`` instead of in one write, came out slower: consume over SSL 650-664
against 712-737 MB/s (holding the records back with ``TCP_CORK`` did not reliably recover it).
Where the broker's CPU is what limits TLS produce (clients on other hosts), it is the better one.

Theory of operation:

* The accepted socket is wrapped non-blocking (``SSLContext.wrap_socket``); the handshake steps
  whenever the socket is readable or writable, under a deadline (60 s, as the loop's own
  ``ssl_handshake_timeout``); a failure closes the socket and raises to the acceptor, which logs
  it as Kafka does ("SSL handshake failed").
* Reads: the context has OpenSSL's *read-ahead* on (:func:`tune_context`), so one ``recv`` fills
  OpenSSL's record buffer (its default, one maximal record: ~16 KiB) with as many records as fit,
  instead of two ``recv`` calls (header, body) per record, which small records would make
  ruinous: librdkafka sends ~40 % of a Produce's records as 0.7-1.1 KiB ones (counted with a
  proxy: ~440 records per MB). A bigger buffer is slower, not faster: before each record OpenSSL
  moves the unread rest of its buffer to the front (memmove was 43 % of the broker's samples with
  256 KiB). When the socket is readable, records are decrypted into the protocol's
  ``get_buffer()`` until OpenSSL needs more from the socket (``SSLWantReadError``).
* Invariant: with read-ahead, decrypted or undecrypted bytes may wait inside OpenSSL while the
  socket has nothing to read, so the socket's readiness says nothing about them. Reading
  therefore only ever stops in three ways: OpenSSL asks for the socket (then readiness does
  announce the next bytes), the protocol paused reading (``resume_reading`` schedules a read at
  once), or a pass reached :data:`READ_PASS` bytes (the next pass is scheduled at once, so one
  busy connection cannot hold the loop).
* Writes: ``write``/``writelines`` try ``SSL_write`` at once; what the socket does not take waits
  in order in a buffer and is retried when the socket is writable. After ``SSLWantWriteError``
  OpenSSL must be handed the *same* bytes again (it has encrypted part of them), so the head of
  the buffer is never merged or dropped. Above the high-water mark the protocol's
  ``pause_writing`` is called, below the low-water mark ``resume_writing``, as asyncio does.
* ``close()`` stops reading, flushes what is buffered (for at most 30 s), sends close_notify and
  closes the socket; ``abort()`` closes at once. ``connection_lost`` is called exactly once.

Read-ahead needs OpenSSL's ``SSL_CTX`` pointer, which Python's ``ssl`` does not expose:
:func:`tune_context` reads it from CPython's ``SSLContext`` object (its first field on every
CPython from 3.7 to 3.13) and checks it by asking OpenSSL for the context's options, which must
equal ``SSLContext.options``. Where that cannot be done (another Python, another libssl than the
one ``_ssl`` uses, a mismatch), the listener keeps the event loop's TLS transport and says so:
:func:`supported` tells which (broker/security/openssl.py does the ``ctypes`` part).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import ssl
import weakref
from typing import Any

from .openssl import set_read_ahead

log = logging.getLogger("samsa.server")

HANDSHAKE_TIMEOUT = 60.0
CLOSE_TIMEOUT = 30.0
READ_PASS = 4 * 1024 * 1024  # bytes decrypted per readable event before the loop's other work runs
HIGH_WATER = 64 * 1024
LOW_WATER = 16 * 1024
COALESCE = 16 * 1024  # writelines joins neighbouring chunks below this into one TLS record

# Which TLS transport SSL and SASL_SSL listeners use: "loop" (the default, the event loop's own)
# or "socket" (this module). See the module docstring for why the default is the loop's.
SELECTED = os.environ.get("SAMSA_TLS_TRANSPORT", "loop").strip().lower()

_tuned: weakref.WeakSet[ssl.SSLContext] = weakref.WeakSet()


def tune_context(ctx: ssl.SSLContext) -> bool:
    """Turn on OpenSSL's read-ahead on a server context for this transport.

    True when done (the context can serve :class:`TlsTransport` connections)."""
    if not set_read_ahead(ctx):
        return False
    _tuned.add(ctx)
    return True


def supported(ctx: ssl.SSLContext) -> bool:
    """Whether connections on this context use :class:`TlsTransport` (read-ahead is on)."""
    return ctx in _tuned


async def accept_tls(loop: asyncio.AbstractEventLoop, sock: socket.socket, ctx: ssl.SSLContext,
                     protocol_factory: Any, handshake_timeout: float = HANDSHAKE_TIMEOUT) -> tuple[TlsTransport, Any]:
    """Handshake on an accepted socket, then connect a protocol to it. Raises if the handshake fails."""
    sock.setblocking(False)
    ssock = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
    fd = ssock.fileno()
    done: asyncio.Future[None] = loop.create_future()

    def step() -> None:
        loop.remove_reader(fd)
        loop.remove_writer(fd)
        if done.done():
            return
        try:
            ssock.do_handshake()
        except ssl.SSLWantReadError:
            loop.add_reader(fd, step)
        except ssl.SSLWantWriteError:
            loop.add_writer(fd, step)
        except BaseException as e:  # noqa: BLE001  handed to the acceptor, which logs it
            done.set_exception(e)
        else:
            done.set_result(None)

    try:
        step()
        await asyncio.wait_for(done, handshake_timeout)
    except BaseException:
        loop.remove_reader(fd)
        loop.remove_writer(fd)
        ssock.close()
        raise
    try:
        transport = TlsTransport(loop, ssock)
    except OSError:  # the peer left right after the handshake
        ssock.close()
        raise
    protocol = protocol_factory()
    transport.start(protocol)
    return transport, protocol


class TlsTransport(asyncio.Transport):
    """A server-side TLS connection whose socket OpenSSL reads and writes (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ssock: ssl.SSLSocket) -> None:
        super().__init__()
        self._loop = loop
        self._ssock = ssock
        self._fd = ssock.fileno()
        sslobj = ssock._sslobj  # type: ignore[attr-defined]  # the C object: no Python frame per record
        self._read = sslobj.read
        self._write = sslobj.write
        self._protocol: Any = None
        self._extra = {"peername": ssock.getpeername(), "sockname": ssock.getsockname(), "socket": ssock,
                       "ssl_object": ssock, "sslcontext": ssock.context, "peercert": ssock.getpeercert(),
                       "cipher": ssock.cipher(), "compression": ssock.compression()}
        self._buffer: collections.deque[memoryview] = collections.deque()
        self._buffer_size = 0
        self._reading = False
        self._read_scheduled = False
        self._writer_on = False
        self._closing = False
        self._closed = False
        self._protocol_paused = False
        self._high = HIGH_WATER
        self._low = LOW_WATER
        self._close_timer: asyncio.TimerHandle | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self, protocol: Any) -> None:
        self._protocol = protocol
        protocol.connection_made(self)
        if not self._closing:
            self.resume_reading()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)

    def is_closing(self) -> bool:
        return self._closing

    def set_protocol(self, protocol: Any) -> None:
        self._protocol = protocol

    def get_protocol(self) -> Any:
        return self._protocol

    def close(self) -> None:
        """Stop reading; send what is buffered, then close_notify, then close the socket."""
        if self._closing:
            return
        self._closing = True
        self._stop_reading()
        if self._buffer:
            self._close_timer = self._loop.call_later(CLOSE_TIMEOUT, self._finish, None)
        else:
            self._loop.call_soon(self._finish, None, True)

    def abort(self) -> None:
        self._closing = True
        self._finish(None)

    def _fatal(self, exc: BaseException | None) -> None:
        if isinstance(exc, (ssl.SSLError, OSError)):
            log.debug("TLS connection from %s ended: %s", self._extra["peername"], exc)
        self._closing = True
        self._finish(None if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)) else exc)

    def _finish(self, exc: BaseException | None, notify: bool = False) -> None:
        if self._closed:
            return
        self._stop_reading()
        self._closed = True
        self._closing = True
        if self._close_timer is not None:
            self._close_timer.cancel()
        if self._writer_on:
            self._loop.remove_writer(self._fd)
            self._writer_on = False
        if notify:
            try:  # close_notify, as a Java broker's SSLEngine sends; the peer's reply is not awaited
                self._ssock._sslobj.shutdown()  # type: ignore[attr-defined]
            except (ssl.SSLError, OSError, ValueError):
                pass
        self._buffer.clear()
        self._buffer_size = 0
        try:
            self._ssock.close()
        except OSError:
            pass
        self._loop.call_soon(self._protocol.connection_lost, exc)

    # --- reading --------------------------------------------------------------------------

    def is_reading(self) -> bool:
        return self._reading

    def pause_reading(self) -> None:
        self._stop_reading()

    def resume_reading(self) -> None:
        if self._reading or self._closing:
            return
        self._reading = True
        self._loop.add_reader(self._fd, self._on_readable)
        self._schedule_read()  # OpenSSL may hold records read ahead while the socket is empty

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def _schedule_read(self) -> None:
        if not self._read_scheduled:
            self._read_scheduled = True
            self._loop.call_soon(self._scheduled_read)

    def _scheduled_read(self) -> None:
        self._read_scheduled = False
        self._on_readable()

    def _on_readable(self) -> None:
        if not self._reading:
            return
        protocol = self._protocol
        read = self._read
        passed = 0
        try:
            while True:
                buf = protocol.get_buffer(-1)
                size = len(buf)
                got = 0
                try:
                    while got < size:
                        n = read(size - got, buf[got:] if got else buf)
                        if n == 0:
                            raise ssl.SSLZeroReturnError("TLS close_notify received")
                        got += n
                finally:
                    if got:
                        passed += got
                        protocol.buffer_updated(got)
                if not self._reading:
                    return  # paused (or closed) by the protocol; resume_reading reads again at once
                if passed >= READ_PASS:
                    self._schedule_read()
                    return
        except ssl.SSLWantReadError:
            pass  # OpenSSL has consumed everything: the socket's readiness announces what comes next
        except ssl.SSLWantWriteError:
            if not self._writer_on:  # renegotiation (TLS 1.2) wants to send first
                self._loop.add_writer(self._fd, self._on_writable)
                self._writer_on = True
        except (ssl.SSLError, OSError) as e:
            self._fatal(e)
            return
        if self._buffer and not self._writer_on and not self._closed:
            self._flush()  # a write that waited for a read (renegotiation) may go on now

    # --- writing --------------------------------------------------------------------------

    def get_write_buffer_size(self) -> int:
        return self._buffer_size

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = HIGH_WATER if high is None else high
        self._low = self._high // 4 if low is None else low

    def can_write_eof(self) -> bool:
        return False

    def write_eof(self) -> None:
        raise NotImplementedError("TLS connections close with close()")

    def write(self, data: Any) -> None:
        if self._closing or not data:
            return
        self._queue(data)
        if not self._writer_on:
            self._flush()
        self._keep_what_waits(1)
        self._check_high()

    def writelines(self, list_of_data: Any) -> None:
        if self._closing:
            return
        before = len(self._buffer)
        small: list[Any] = []
        small_size = 0
        for data in list_of_data:
            n = len(data)
            if not n:
                continue
            if n < COALESCE and small_size + n <= COALESCE:
                small.append(data)
                small_size += n
                continue
            if small:
                self._queue(b"".join(small) if len(small) > 1 else small[0])
                small, small_size = [], 0
            if n < COALESCE:
                small, small_size = [data], n
            else:
                self._queue(data)
        if small:
            self._queue(b"".join(small) if len(small) > 1 else small[0])
        added = len(self._buffer) - before
        if not self._writer_on:
            self._flush()
        self._keep_what_waits(added)
        self._check_high()

    def _keep_what_waits(self, added: int) -> None:
        """Copy mutable buffers (bytearray, writable views) of the last write that must wait: the
        caller may reuse them once write() returns, as asyncio allows. Bytes wait without a copy."""
        buffer = self._buffer
        for i in range(max(len(buffer) - added, 0), len(buffer)):
            if not buffer[i].readonly:
                buffer[i] = memoryview(buffer[i].tobytes())

    def _queue(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        self._buffer.append(view)
        self._buffer_size += len(view)

    def _flush(self) -> None:
        """SSL_write the buffer's head until the socket is full; then wait until it is writable."""
        buffer = self._buffer
        write = self._write
        try:
            while buffer:
                head = buffer[0]
                write(head)  # all of it, or SSLWantWriteError (then again with the same bytes)
                buffer.popleft()
                self._buffer_size -= len(head)
        except ssl.SSLWantWriteError:
            if not self._writer_on:
                self._loop.add_writer(self._fd, self._on_writable)
                self._writer_on = True
            return
        except ssl.SSLWantReadError:  # renegotiation (TLS 1.2): the next read calls _flush again
            if self._writer_on:
                self._loop.remove_writer(self._fd)
                self._writer_on = False
            return
        except (ssl.SSLError, OSError) as e:
            self._fatal(e)
            return
        if self._writer_on:
            self._loop.remove_writer(self._fd)
            self._writer_on = False
        self._check_low()
        if self._closing and not self._closed:
            self._finish(None, True)

    def _on_writable(self) -> None:
        if self._closed:
            return
        self._flush()
        self._check_low()

    def _check_high(self) -> None:
        if not self._protocol_paused and self._buffer_size > self._high and not self._closing:
            self._protocol_paused = True
            self._protocol.pause_writing()

    def _check_low(self) -> None:
        if self._protocol_paused and self._buffer_size <= self._low:
            self._protocol_paused = False
            self._protocol.resume_writing()
