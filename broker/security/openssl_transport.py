"""TLS for SSL and SASL_SSL listeners on the OpenSSL inside ``cryptography``'s wheel, through pyOpenSSL.

Python's ``ssl`` is bound to the system's libssl (here OpenSSL 3.0), whose record layer costs
about a microsecond per TLS record beyond the cipher and whose AES-GCM runs at ~4.2 GB/s on
this machine. librdkafka sends a Produce as ~440 records per MB (~40 % of them under 1 KiB), so
that per-record cost is most of what TLS adds to the broker. The OpenSSL that ``cryptography``
ships in its wheel (4.0 with cryptography 50) decrypts that record pattern in ~0.50 ms/MB
against ~0.75 through Python's ``ssl``, and runs AES-256-GCM at ~8 GB/s (VAES). pyOpenSSL is
the library made to drive it; this module uses it for contexts and handshakes and calls
``SSL_read``/``SSL_write`` of its binding directly on the data path (the binding, a connection's
``SSL *`` and BIOs, and the C loop's function addresses come from :mod:`.openssl`, the one module
that reaches into pyOpenSSL's and cryptography's private parts). ``SSL_read`` returns one
record per call, so the loop that calls it record after record runs in C where the optional
extension ``_tlsread`` was built (see _tlsread.c and setup.py; ~0.5 us less per record, broker
CPU per MB produced over TLS 1.40 -> 1.27 ms), and in Python otherwise (or with the broker
property ``ssl.read.loop=python``). ``bench/security.py`` and bench/RESULTS.md have the end-to-end
figures. ``ssl.transport=loop`` (broker-wide or per listener) switches back to the event loop's own
TLS on Python's ``ssl``.

Theory of operation:

* Context (:func:`build_context`): a *mirror* of the listener's ``ssl.SSLContext`` that
  broker/security/tls.py builds and validates from Kafka's ``ssl.*`` settings: the protocol
  bounds, the cipher suites OpenSSL enabled there (TLS 1.2 and 1.3 lists), the CA certificates
  loaded, the client-auth mode; the keystore is read again through :func:`.tls.keystore_pem`.
  So each setting has one meaning and one error message, whichever transport serves it.
* A connection is a :class:`TlsProtocol` on a plain TCP transport of the event loop:
  ciphertext is read into the receive buffer (below) and, once the handshake is done, OpenSSL
  reads it from there through a read-only memory BIO made for each read (``BIO_new_mem_buf``:
  no copy, where writing it into a memory BIO would clear and copy every byte); ``SSL_read``
  decrypts record after record straight into the Kafka connection's ``get_buffer()`` (no
  plaintext copy either).
  Writes: ``SSL_write`` into the outgoing memory BIO, read out once into memory allocated
  uncleared for it, which goes to the TCP transport as it is; its flow control (high/low water)
  is the Kafka connection's. A Fetch response (:meth:`TlsTransport.write_regions`) is read from
  its segment files in :data:`SLICE`-byte pieces into a staging buffer per event loop, each piece
  encrypted and moved out of the BIO at once, and the whole response's records go to the TCP
  transport in one write. The BIO never holds more than a slice, and OpenSSL's memory BIO keeps
  the largest buffer it ever grew: 40 TLS consumers of 1 MiB fetches cost the broker 257 KiB
  each this way against 1,138 KiB when each response went through the BIO whole. The Kafka
  header rides in the first full record rather than a small record of its own.
* One receive buffer per event loop (thread), shared by all its TLS connections: the event loop
  reads into it and calls ``buffer_updated`` at once, and nothing of it is needed once that
  returns, so a connection costs no buffer of its own while it waits (the event loop's TLS
  transport keeps 256 KiB per connection). Invariant of the read-only BIO: it points into that
  buffer, which the next read on any connection overwrites, so it holds nothing when a read
  pass ends. If the pass stopped before OpenSSL took everything (the Kafka connection paused
  reading, or :data:`READ_PASS`), the rest is moved into a copying memory BIO of the
  connection, and what arrives next is appended to that one until it is empty again.
* Handshake first: :func:`accept` awaits the handshake (60 s deadline, as the event loop's
  ``ssl_handshake_timeout``) before the Kafka connection is attached; a failure raises to the
  acceptor, which logs it as Kafka does ("SSL handshake failed").
* Invariant: decrypted or undecrypted bytes may wait inside OpenSSL while the socket has nothing
  more to read, so reading stops only when OpenSSL wants more ciphertext, when the Kafka
  connection paused reading (``resume_reading`` then drains OpenSSL at once), or after
  :data:`READ_PASS` bytes (the rest is read on the next loop iteration, so one busy connection
  cannot hold the loop).
* A bad record or an alert closes that connection only; OpenSSL's error queue is cleared so the
  next connection's calls do not see it. ``close()`` sends close_notify before the TCP close.
  Renegotiation is refused (``OP_NO_RENEGOTIATION``), so reading never has to write first; TLS
  1.3 post-handshake messages (session tickets, key updates) are flushed after each read pass.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar, cast

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from OpenSSL import SSL, crypto

from log.segment import ReadInfo

from . import openssl
from .errors import SecurityConfigError
from .tls import keystore_pem, private_file

if TYPE_CHECKING:
    from cffi import FFI  # untyped library: FFI.CData names a pointer of the binding for the reader
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12

    from .listeners import ListenerConfig

log = logging.getLogger("samsa.server")

HANDSHAKE_TIMEOUT = 60.0
READ_BUFFER = 256 * 1024  # ciphertext read per recv, into the buffer all connections of a loop share
READ_PASS = 4 * 1024 * 1024  # bytes decrypted per event before the loop's other work runs
SLICE = 128 * 1024  # plaintext of a Fetch response encrypted per SSL_write (eight full TLS records)
RECORD_OVERHEAD = 128  # ciphertext bytes a TLS record may add (header, IV, tag, CBC MAC and padding)

AVAILABLE = openssl.PYOPENSSL  # pyOpenSSL and the binding give what the data path needs
_ffi, _lib = openssl.ffi, openssl.lib
_read_into: openssl.ReadInto | None = openssl.c_read_loop()


def read_loop(wanted: str = "c") -> str:
    """The TLS read loop connections run when ``ssl.read.loop`` is ``wanted``: "c" where the
    extension is built and bound, else "python"."""
    return "python" if _read_into is None or wanted == "python" else "c"


_VERIFY = {ssl.CERT_NONE: 0, ssl.CERT_OPTIONAL: 1, ssl.CERT_REQUIRED: 3}  # VERIFY_PEER=1, FAIL_IF_NO_PEER_CERT=2
_receive = threading.local()  # per thread running an event loop: (memoryview, pointer) of its buffer


def _receive_buffer() -> tuple[memoryview, FFI.CData]:
    """The receive buffer of this thread's connections (see the module docstring: one per loop)."""
    got = getattr(_receive, "buffer", None)
    if got is None:
        buf = bytearray(READ_BUFFER)
        got = _receive.buffer = (memoryview(buf), _ffi.from_buffer(buf))
    return got


def _slice_buffer() -> memoryview:
    """The plaintext staging buffer of this thread's Fetch responses (see TlsTransport.write_regions)."""
    got = getattr(_receive, "slice", None)
    if got is None:
        got = _receive.slice = memoryview(bytearray(SLICE))
    return got


def _no_binding(kind: str, n: int) -> FFI.CData:
    raise RuntimeError("pyOpenSSL's binding is missing: listeners serve TLS with ssl.transport=loop")


# Ciphertext out: memory allocated and not cleared first (_Ciphertext)
_alloc: Callable[[str, int], FFI.CData] = _ffi.new_allocator(should_clear_after_alloc=False) if AVAILABLE \
    else _no_binding


class TlsHandshakeError(Exception):
    """The TLS handshake failed (the reason is OpenSSL's) or did not finish in time."""


def enabled(transport: str = "openssl") -> bool:
    """Whether a listener whose ``ssl.transport`` is ``transport`` is served by this module."""
    return transport != "loop" and AVAILABLE


def build_context(lc: ListenerConfig, ctx: ssl.SSLContext) -> SSL.Context:
    """A pyOpenSSL server context with the settings of ``ctx`` (built from ``lc`` by tls.py)."""
    c = SSL.Context(SSL.TLS_SERVER_METHOD)
    c.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_CIPHER_SERVER_PREFERENCE | SSL.OP_NO_RENEGOTIATION)
    try:
        c.set_min_proto_version(int(ctx.minimum_version))
        c.set_max_proto_version(int(ctx.maximum_version))
        suites = ctx.get_ciphers()
        tls12 = [s["name"] for s in suites if s["protocol"] != "TLSv1.3"]
        tls13 = [s["name"] for s in suites if s["protocol"] == "TLSv1.3"]
        if tls12:
            c.set_cipher_list(":".join(tls12).encode())
        if tls13:
            c.set_tls13_ciphersuites(":".join(tls13).encode())
    except SSL.Error as e:
        raise SecurityConfigError(f"Listener {lc.name}: OpenSSL {openssl_version()} refused the protocols or "
                                  f"cipher suites of ssl.enabled.protocols/ssl.cipher.suites: {e}") from None
    pem, password, what = keystore_pem(lc)
    if password:
        c.set_passwd_cb(lambda *_: password.encode())
    with private_file(pem) as path:
        try:
            c.use_certificate_chain_file(path)
            c.use_privatekey_file(path)
            c.check_privatekey()
        except SSL.Error as e:
            raise SecurityConfigError(f"Listener {lc.name}: invalid certificate or key in {what} ({e}); "
                                      "check the file and ssl.key.password") from None
    store = c.get_cert_store()
    assert store is not None  # a new context always has one
    for der in ctx.get_ca_certs(binary_form=True):
        store.add_cert(crypto.X509.from_cryptography(x509.load_der_x509_certificate(der)))
    c.set_verify(_VERIFY[ctx.verify_mode])
    c.set_session_id(f"samsa-{lc.name}".encode()[:32])  # session resumption with client certificates
    return c


def openssl_version() -> str:
    return SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode() if AVAILABLE else "(pyOpenSSL missing)"


App = TypeVar("App", bound=asyncio.BufferedProtocol)
Plaintext = bytes | bytearray | memoryview


async def accept(loop: asyncio.AbstractEventLoop, sock: socket.socket, context: SSL.Context,
                 protocol_factory: Callable[[], App], handshake_timeout: float = HANDSHAKE_TIMEOUT,
                 read_loop: str = "c") -> tuple[TlsTransport, App]:
    """Handshake on an accepted socket, then attach a protocol. Raises if the handshake fails."""
    raw, tls = await loop.connect_accepted_socket(lambda: TlsProtocol(context, loop, read_loop), sock)
    try:
        await asyncio.wait_for(asyncio.shield(tls.handshake), handshake_timeout)
    except TimeoutError:
        raw.abort()
        raise TlsHandshakeError(f"no TLS handshake within {handshake_timeout:g} s") from None
    except BaseException:
        raw.abort()
        raise
    if tls.lost:  # the client left between its Finished and now: no Kafka connection to set up
        raise ConnectionResetError("the client closed the connection right after the TLS handshake")
    protocol = protocol_factory()
    return tls.attach(protocol), protocol


class _PeerInfo:
    """What ``get_extra_info("ssl_object")`` offers, in the shape of Python's ``SSLObject``."""

    def __init__(self, conn: SSL.Connection) -> None:
        self._conn = conn

    def getpeercert(self, binary_form: bool = False) -> bytes | dict[str, str] | None:
        cert = self._conn.get_peer_certificate(as_cryptography=True)
        if cert is None:
            return None
        if binary_form:
            return cert.public_bytes(Encoding.DER)
        return {"subject": cert.subject.rfc4514_string()}

    def version(self) -> str | None:
        return self._conn.get_protocol_version_name()

    def cipher(self) -> tuple[str, str | None, int | None] | None:
        name = self._conn.get_cipher_name()
        return None if name is None else (name, self._conn.get_cipher_version(), self._conn.get_cipher_bits())


class TlsProtocol(asyncio.BufferedProtocol):
    """The TLS side of one connection: a protocol for the TCP transport (see the module docstring)."""

    raw: asyncio.Transport  # the TCP transport, from connection_made (before anything else is called)

    def __init__(self, context: SSL.Context, loop: asyncio.AbstractEventLoop, read_loop: str = "c") -> None:
        self._read_into = _read_into if read_loop == "c" else None  # None: the Python loop
        conn = SSL.Connection(context, None)
        conn.set_accept_state()
        self._conn = conn
        self._ssl, self._rbio, self._wbio = openssl.connection_handles(conn)
        self._ssl_address = openssl.address(self._ssl)  # for the C read loop
        self._inview, self._inptr = _receive_buffer()
        # After the handshake OpenSSL reads ciphertext straight from that buffer through a read-only
        # BIO made per read (see buffer_updated); between reads _rbio is either empty or a copying
        # BIO (the handshake's, or one holding what a read pass left when it stopped early).
        self._leftptr = _ffi.new("char **")
        self._loop = loop
        self.handshake: asyncio.Future[None] = loop.create_future()
        self.app: asyncio.BufferedProtocol | None = None
        self.transport: TlsTransport | None = None
        self.reading = True  # the app's wish (pause_reading / resume_reading)
        self.closing = False
        self.lost = False  # connection_lost was called
        self._read_scheduled = False

    # --- the TCP transport's callbacks ---------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = cast(asyncio.Transport, transport)  # the loop's TCP transport (uvloop's is not a subclass)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._inview

    def buffer_updated(self, nbytes: int) -> None:
        if self.app is None or _lib.BIO_get_mem_data(self._rbio, _ffi.NULL) > 0:
            # The handshake, or records still waiting in a copying BIO: append behind them.
            self._bio_write(self._inptr, nbytes)
            if self.app is not None:
                self._read()
            elif not self.handshake.done():
                self._handshake()
            # else: handshake done, protocol not attached yet: attach() reads what waits in the BIO
            return
        # OpenSSL reads these records where they arrived: a read-only BIO over the receive buffer.
        if not self._set_rbio(_lib.BIO_new_mem_buf(self._inptr, nbytes)):
            return
        try:
            self._read()
        finally:  # even if the application raised: the buffer is overwritten by the next read
            left = _lib.BIO_get_mem_data(self._rbio, self._leftptr)
            if left > 0:  # reading stopped early: move the rest to a BIO of its own
                rest = self._leftptr[0]
                if self._set_rbio(_lib.BIO_new(_lib.BIO_s_mem())):
                    self._bio_write(rest, left)

    def _set_rbio(self, bio: FFI.CData) -> bool:
        """Give the connection a new incoming BIO (OpenSSL frees the one it had)."""
        if bio == _ffi.NULL:
            self._fatal("OpenSSL could not allocate a BIO")
            return False
        _lib.BIO_set_mem_eof_return(bio, -1)  # empty means "wait for more", not end of stream
        _lib.SSL_set_bio(self._ssl, bio, self._wbio)  # wbio unchanged: only the rbio is replaced
        self._rbio = bio
        return True

    def _bio_write(self, ptr: FFI.CData, nbytes: int) -> None:
        if _lib.BIO_write(self._rbio, ptr, nbytes) != nbytes:
            self._fatal("cannot buffer received TLS records")

    def eof_received(self) -> bool:
        return False  # the TCP transport closes; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = self.lost = True
        if not self.handshake.done():
            self.handshake.set_exception(TlsHandshakeError("connection closed during the TLS handshake"))
            self.handshake.exception()  # retrieved: accept() may already have given up on it
        if self.app is not None:
            self.app.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.app is not None:
            self.app.pause_writing()

    def resume_writing(self) -> None:
        if self.app is not None:
            self.app.resume_writing()

    # --- handshake ------------------------------------------------------------------------

    def _handshake(self) -> None:
        try:
            self._conn.do_handshake()
        except SSL.WantReadError:
            self.flush()
            return
        except SSL.Error as e:
            self.flush()  # the alert, if OpenSSL made one
            _lib.ERR_clear_error()
            self.handshake.set_exception(TlsHandshakeError(_describe(e)))
            return
        self.flush()
        self.handshake.set_result(None)

    def attach(self, app: asyncio.BufferedProtocol) -> TlsTransport:
        self.app = app
        openssl.retire_read_bio(self._conn)  # replaced from here on (buffer_updated): pyOpenSSL must not use it
        self.transport = TlsTransport(self)
        app.connection_made(self.transport)
        self._read()  # requests that came with the client's last handshake flight
        return self.transport

    # --- reading --------------------------------------------------------------------------

    def schedule_read(self) -> None:
        if not self._read_scheduled:
            self._read_scheduled = True
            self._loop.call_soon(self._scheduled_read)

    def _scheduled_read(self) -> None:
        self._read_scheduled = False
        self._read()

    def _read(self) -> None:
        app = self.app
        if app is None or not self.reading or self.closing:
            return
        read_into, ssl_ = ((_read_into_python, self._ssl) if self._read_into is None
                           else (self._read_into, self._ssl_address))
        passed = 0
        while True:
            got, err = read_into(ssl_, app.get_buffer(-1))  # err is read before any other call
            if got:
                app.buffer_updated(got)  # may write (SSL_write), which resets the error state
            if err:
                self._read_stopped(err)
                return
            if not self.reading or self.closing:
                return
            passed += got
            if passed >= READ_PASS:
                self.schedule_read()
                return

    def _read_stopped(self, err: int) -> None:
        if err == _lib.SSL_ERROR_WANT_READ:
            self.flush()  # TLS 1.3 post-handshake messages the read may have produced
            return
        _lib.ERR_clear_error()
        if err == _lib.SSL_ERROR_ZERO_RETURN:  # close_notify
            log.debug("TLS close_notify from %s", self.raw.get_extra_info("peername"))
            if self.transport is not None:
                self.transport.close()
            return
        self._fatal(f"TLS error {err} reading from the client")

    def _fatal(self, why: str) -> None:
        log.debug("Closing TLS connection from %s: %s", self.raw.get_extra_info("peername"), why)
        _lib.ERR_clear_error()
        self.closing = True
        self.raw.abort()

    # --- writing --------------------------------------------------------------------------

    def encrypt(self, data: Plaintext) -> bool:
        """SSL_write all of ``data`` into the outgoing BIO; False (connection aborted) on error."""
        n = len(data) if not isinstance(data, memoryview) else data.nbytes
        ptr = _ffi.from_buffer(data)
        done = 0
        while done < n:
            r = _lib.SSL_write(self._ssl, ptr + done, n - done)
            if r <= 0:
                self._fatal(f"TLS error {_lib.SSL_get_error(self._ssl, r)} writing to the client")
                return False
            done += r
        return True

    def seal(self, data: Plaintext, out: _Ciphertext) -> bool:
        """Encrypt ``data`` and move its records to ``out``; False (connection aborted) on error."""
        return self.encrypt(data) and self._move_out(out)

    def _move_out(self, out: _Ciphertext) -> bool:
        """Move what OpenSSL wrote into the outgoing BIO to ``out``: the only copy between the
        BIO and the kernel. False (connection aborted) on error."""
        n = _lib.BIO_get_mem_data(self._wbio, _ffi.NULL)
        if n > 0 and _lib.BIO_read(self._wbio, out.reserve(n), n) != n:  # a memory BIO hands out all it holds
            self._fatal("cannot read TLS records from the outgoing buffer")
            return False
        return True

    def flush(self) -> None:
        """Move what OpenSSL wrote into the outgoing BIO to the TCP transport.

        The ciphertext is read out once, into memory allocated for it and not cleared first, and
        that memory is handed to the transport as it is (the event loop keeps a reference while
        it waits for the socket): see _Ciphertext.
        """
        n = _lib.BIO_get_mem_data(self._wbio, _ffi.NULL)
        if n > 0:
            out = _Ciphertext(self.raw, n)
            if self._move_out(out):
                out.send()


class _Ciphertext:
    """TLS records of one response, gathered into memory allocated (uncleared) for them and handed
    to the TCP transport as they are, in one write. ``reserve`` grows it by sending what it holds
    and starting a new buffer, should the estimate of the records' overhead fall short."""

    __slots__ = ("raw", "buf", "cap", "used")

    def __init__(self, raw: asyncio.Transport, capacity: int) -> None:
        self.raw = raw
        self.cap = capacity
        self.buf = _alloc("char[]", capacity)
        self.used = 0

    def reserve(self, n: int) -> FFI.CData:
        """A pointer to ``n`` bytes at the end, counted as used."""
        if self.used + n > self.cap:
            self.send()
            self.cap = max(n, self.cap)
            self.buf = _alloc("char[]", self.cap)
        ptr = self.buf + self.used
        self.used += n
        return ptr

    def send(self) -> None:
        if self.used:
            self.raw.write(memoryview(_ffi.buffer(self.buf, self.used)))
            self.used = 0


def _read_into_python(ssl_: FFI.CData, buf: Buffer) -> tuple[int, int]:
    """The read loop without the C extension: ``SSL_read`` record after record into ``buf`` until
    it is full or OpenSSL stops; (bytes read, ``SSL_get_error``'s code then, 0 if ``buf`` filled)."""
    read = _lib.SSL_read
    ptr = _ffi.from_buffer(buf)
    size = len(ptr)
    got = 0
    while got < size:
        n = read(ssl_, ptr + got, size - got)
        if n <= 0:
            return got, _lib.SSL_get_error(ssl_, n)
        got += n
    return got, 0


class TlsTransport(asyncio.Transport):
    """The transport the Kafka connection sees: plaintext in and out, TCP flow control underneath."""

    def __init__(self, tls: TlsProtocol) -> None:
        super().__init__()
        self._tls = tls
        self._raw = tls.raw
        self._peer = _PeerInfo(tls._conn)

    def get_extra_info(self, name: str, default: object = None) -> object:
        if name == "ssl_object":
            return self._peer
        if name == "cipher":
            return self._peer.cipher()
        return self._raw.get_extra_info(name, default)

    def write(self, data: Plaintext) -> None:
        tls = self._tls
        if tls.closing or not data:
            return
        if tls.encrypt(data):
            tls.flush()

    def writelines(self, list_of_data: Iterable[Plaintext]) -> None:
        tls = self._tls
        if tls.closing:
            return
        for data in list_of_data:
            if data and not tls.encrypt(data):
                return
        tls.flush()

    def write_regions(self, chunks: list[bytes | memoryview | ReadInfo]) -> None:
        """Write a response given as ``bytes`` and file regions (a Fetch response, see
        protocol/fetch_codec.py), reading each region straight into the TLS path.

        The plaintext is staged in this thread's SLICE-byte buffer: small chunks (the response
        and partition headers) are copied in, regions are read from their segment file into it
        (``ReadInfo.read_into``), and each full slice is encrypted with one ``SSL_write`` and its records
        moved out of the memory BIO into one buffer for the whole response, handed to the TCP
        transport at the end. So the staging buffer and the BIO stay a few hundred KiB and hot
        in cache instead of holding a copy of the whole response each, and the Kafka header
        travels in the first full record rather than a record of its own. A region that reads
        short (its file was truncated under it) closes the connection: a frame whose length
        prefix promised more must not go out.
        """
        tls = self._tls
        if tls.closing:
            return
        stage = _slice_buffer()
        total = sum(len(c) if isinstance(c, (bytes, memoryview)) else c.size for c in chunks)
        out = _Ciphertext(self._raw, total + (total // 16384 + total // SLICE + 4) * RECORD_OVERHEAD)
        fill = 0
        try:
            for c in chunks:
                if not isinstance(c, (bytes, memoryview)) and getattr(c, "fd", -1) < 0:
                    c = c.read()  # a region without an open descriptor: read as a whole
                if isinstance(c, (bytes, memoryview)):
                    n = len(c)
                    if fill + n > SLICE:  # too big to stage behind what waits: seal that, send this as is
                        if fill and not tls.seal(stage[:fill], out):
                            return
                        fill = 0
                        if n >= SLICE:
                            if not tls.seal(c, out):
                                return
                            continue
                    stage[fill:fill + n] = c
                    fill += n
                    continue
                done = 0
                while done < c.size:
                    n = min(SLICE - fill, c.size - done)
                    c.read_into(stage[fill:fill + n], done)
                    fill += n
                    done += n
                    if fill == SLICE:
                        if not tls.seal(stage, out):
                            return
                        fill = 0
        except OSError as e:  # a region cut or unreadable since the fetch chose it (ReadInfo.read/read_into)
            tls._fatal(f"segment region {e.strerror}")
            return
        if fill and not tls.seal(stage[:fill], out):
            return
        out.send()

    def close(self) -> None:
        tls = self._tls
        if tls.closing:
            return
        tls.closing = True
        if _lib.SSL_shutdown(tls._ssl) < 0:  # close_notify into the outgoing BIO
            _lib.ERR_clear_error()
        tls.flush()
        self._raw.close()  # after what is buffered has been sent

    def abort(self) -> None:
        self._tls.closing = True
        self._raw.abort()

    def is_closing(self) -> bool:
        return self._tls.closing or self._raw.is_closing()

    def pause_reading(self) -> None:
        if self._tls.reading:
            self._tls.reading = False
            if not self._raw.is_closing():
                self._raw.pause_reading()

    def resume_reading(self) -> None:
        if not self._tls.reading and not self._tls.closing:
            self._tls.reading = True
            if not self._raw.is_closing():
                self._raw.resume_reading()
            self._tls.schedule_read()  # OpenSSL may hold records while the socket is empty

    def is_reading(self) -> bool:
        return self._tls.reading

    def get_write_buffer_size(self) -> int:
        return int(self._raw.get_write_buffer_size())

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return tuple(self._raw.get_write_buffer_limits())  # type: ignore[return-value]

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._raw.set_write_buffer_limits(high, low)

    def can_write_eof(self) -> bool:
        return False

    def write_eof(self) -> None:
        raise NotImplementedError("TLS connections close with close()")

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._tls.app = cast(asyncio.BufferedProtocol, protocol)  # Kafka connections are buffered protocols

    def get_protocol(self) -> asyncio.BaseProtocol:
        return cast(asyncio.BaseProtocol, self._tls.app)


def _describe(e: Exception) -> str:
    """OpenSSL's reasons from a pyOpenSSL error, e.g. ``wrong version number``."""
    try:
        reasons = [r[2] for r in e.args[0] if len(r) == 3]
    except (IndexError, TypeError):
        reasons = []
    return "; ".join(reasons) or str(e) or type(e).__name__
