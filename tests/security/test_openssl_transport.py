"""broker/security/openssl_transport.py: TLS on pyOpenSSL's OpenSSL, the default for SSL/SASL_SSL.

Transport-level tests put a small protocol behind :func:`accept` on a real socket of a uvloop
event loop and talk to it with Python's ``ssl`` (another OpenSSL: the interop is real); the
broker-level ones run real clients against a broker on this transport and on the fallback.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import random
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import uvloop

from broker.config.properties import BrokerConfig
from broker.security import openssl_transport as ot
from broker.security.listeners import listener_configs
from broker.security.principal import parse_mapping_rules
from broker.security.tls import build_server_context, peer_principal
from tests.support.security import make_pki, secure_overrides

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not ot.AVAILABLE, reason="pyOpenSSL is not installed")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_pki(tmp_path_factory.mktemp("pki"))


BUILT = importlib.util.find_spec("broker.security._tlsread") is not None
EXPECTED = os.environ.get("SAMSA_EXPECT_TLS_READ_LOOP") == "c"  # .ci/run installs a compiler first


@pytest.fixture(autouse=True, params=["c", "python"])
def read_loop(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with the C read loop (the optional extension) and the Python one."""
    if request.param == "python":
        monkeypatch.setattr(ot, "_read_into", None)  # brokers in a process of their own: ssl.read.loop
    elif ot.read_loop() != "c":
        assert not EXPECTED, "SAMSA_EXPECT_TLS_READ_LOOP=c but the _tlsread extension was not built or bound"
        pytest.skip("the _tlsread extension is not built here (no C compiler or Python headers at install)")
    return str(request.param)


def test_the_c_read_loop_is_in_use_wherever_it_was_built(read_loop):
    """Built (a compiler at install, as in CI) means bound and chosen; ssl.read.loop=python turns
    it off."""
    if read_loop == "python":
        assert ot.read_loop() == "python"
        return
    assert BUILT and ot.read_loop() == "c"
    assert ot.read_loop("python") == "python"


@pytest.mark.skipif(not BUILT and not EXPECTED, reason="the _tlsread extension is not built here")
def test_the_c_read_loop_refuses_what_it_cannot_use(read_loop):
    """A null address, an unbound module (in a new process) or a read-only buffer raise instead
    of calling through a bad pointer."""
    from broker.security import _tlsread

    with pytest.raises(ValueError):
        _tlsread.bind(0, 0)
    with pytest.raises(RuntimeError):
        _tlsread.read_into(0, memoryview(bytearray(8)))
    with pytest.raises(TypeError):
        _tlsread.read_into(1, memoryview(b"read-only"))  # type: ignore[arg-type]
    probe = ("from broker.security import _tlsread\n"
             "try:\n    _tlsread.read_into(1, memoryview(bytearray(8)))\n"
             "except RuntimeError as e:\n    print('refused:', e)")
    fresh = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert fresh.stdout.startswith("refused: read_into() before bind()"), (fresh.stdout, fresh.stderr)


def _contexts(pki: Any, **extra: object) -> tuple[Any, Any]:
    props = {k: str(v) for k, v in secure_overrides(pki, {"SSL": 1}, **extra).items()}
    lc = next(lc for lc in listener_configs(BrokerConfig(props)) if lc.name == "SSL")
    return lc, ot.build_context(lc, build_server_context(lc))


def _client_ctx(pki: Any, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    c = ssl.create_default_context(cafile=str(pki.ca))
    if cert:
        c.load_cert_chain(str(cert[0]), str(cert[1]))
    return c


class App(asyncio.BufferedProtocol):
    """What a Kafka connection is to the transport: collects plaintext, with hooks for each test."""

    def __init__(self, buffer_size: int = 65536) -> None:
        self.buf = bytearray(buffer_size)
        self.data = bytearray()
        self.transport: Any = None
        self.lost: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        self.on_data: Any = None
        self.paused_writing = 0
        self.resumed_writing = 0

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self.buf)

    def buffer_updated(self, nbytes: int) -> None:
        self.data += self.buf[:nbytes]
        if self.on_data is not None:
            self.on_data(bytes(self.buf[:nbytes]))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)

    def pause_writing(self) -> None:
        self.paused_writing += 1

    def resume_writing(self) -> None:
        self.resumed_writing += 1


def _answer_then_close(*replies: bytes, expect: bytes | None = None, look: Any = None) -> Any:
    """A ``_serve_one`` setup: once the protocol holds ``expect`` (or any bytes), call
    ``look(app)``, write each reply, and close."""
    def setup(app: App) -> None:
        def on(chunk: bytes) -> None:
            if expect is not None and bytes(app.data) != expect:
                return
            if look is not None:
                look(app)
            for r in replies:
                app.transport.write(r)
            app.transport.close()
        app.on_data = on
    return setup


def _ping(pki: Any, port: int, message: bytes, cert: tuple[Path, Path] | None = None) -> bytes:
    """Connect over TLS, send ``message``, return the first reply."""
    with socket.create_connection(("127.0.0.1", port)) as raw, \
            _client_ctx(pki, cert).wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(message)
        return s.recv(10)


def _serve_one(octx: Any, client: Any, app_setup: Any = None, handshake_timeout: float = 10.0,
               until: Any = None) -> tuple[App | BaseException, Any]:
    """Accept one connection on a uvloop loop, run ``client(port)`` in a thread; (app or error, client result)."""
    result: dict[str, Any] = {}

    async def main() -> App | BaseException:
        loop = asyncio.get_running_loop()
        lsock = socket.create_server(("127.0.0.1", 0))
        lsock.setblocking(False)
        port = lsock.getsockname()[1]
        t = threading.Thread(target=lambda: result.setdefault("client", client(port)), daemon=True)
        t.start()
        sock, _ = await loop.sock_accept(lsock)
        lsock.close()
        holder: list[App] = []

        def factory() -> App:
            app = App()
            if app_setup is not None:
                app_setup(app)
            holder.append(app)
            return app

        try:
            await ot.accept(loop, sock, octx, factory, handshake_timeout)
        except Exception as e:  # noqa: BLE001  the test looks at it
            await loop.run_in_executor(None, t.join, 10)
            return e
        app = holder[0]
        if until is not None:
            await asyncio.wait_for(until(app), 30)
        await asyncio.wait_for(app.lost, 30)
        await loop.run_in_executor(None, t.join, 10)
        return app

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        out = runner.run(main())
    return out, result.get("client")


def test_records_of_every_size_arrive_in_order_both_ways(pki):
    """2,000 TLS records from 1 B to 40 KB (several per TCP segment, some split across reads):
    every byte decrypted in order into the protocol's buffers, echoed, and decrypted by the peer."""
    _lc, octx = _contexts(pki)
    rnd = random.Random(7)
    sizes = [rnd.choice([1, 5, 700, 1100, 16384, 16385, 40000, rnd.randint(1, 40000)]) for _ in range(2000)]
    payload = bytes(rnd.getrandbits(8) for _ in range(256)) * (sum(sizes) // 256 + 1)
    payload = payload[:sum(sizes)]

    def client(port: int) -> bytes:
        # One thread per SSLSocket: OpenSSL connections are not safe to read and write from two
        # threads at once. The broker side buffers the echo while this side is still sending.
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                _client_ctx(pki).wrap_socket(raw, server_hostname="localhost") as s:
            pos = 0
            for n in sizes:
                s.sendall(payload[pos:pos + n])  # one write, one record of up to 16 KiB
                pos += n
            got = bytearray()
            while len(got) < len(payload):
                chunk = s.recv(65536)
                if not chunk:
                    break
                got.extend(chunk)
            return bytes(got)

    def setup(app: App) -> None:
        def echo(chunk: bytes) -> None:
            app.transport.write(chunk)
            if len(app.data) == len(payload):
                app.transport.close()
        app.on_data = echo

    app, echoed = _serve_one(octx, client, setup)
    assert isinstance(app, App), app
    assert bytes(app.data) == payload
    assert echoed == payload


def _memory_bio_records(pki: Any, port: int, records: list[bytes]) -> tuple[socket.socket, Any, Any, Any]:
    """A client that handshakes through memory BIOs, then sends ``records`` in ONE TCP write."""
    sock = socket.create_connection(("127.0.0.1", port))
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = _client_ctx(pki).wrap_bio(inc, out, server_hostname="localhost")
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            if out.pending:
                sock.sendall(out.read())
            inc.write(sock.recv(65536))
    if out.pending:
        sock.sendall(out.read())
    for r in records:
        obj.write(r)
    sock.sendall(out.read())
    return sock, obj, inc, out


def _read_plain(sock: socket.socket, obj: Any, inc: Any, n: int, timeout: float = 10.0) -> bytes:
    sock.settimeout(timeout)
    got = bytearray()
    while len(got) < n:
        try:
            got += obj.read(65536)
            continue
        except ssl.SSLWantReadError:
            pass
        chunk = sock.recv(65536)
        if not chunk:
            break
        inc.write(chunk)
    return bytes(got)


def test_resume_reading_delivers_records_openssl_already_holds(pki):
    """The protocol pauses after its first bytes while 49 more records sit in OpenSSL's BIO and
    the socket is empty: resume_reading must deliver them without anything more arriving."""
    _lc, octx = _contexts(pki)
    records = [bytes([i]) * 100 for i in range(50)]

    def client(port: int) -> bytes:
        sock, obj, inc, _out = _memory_bio_records(pki, port, records)
        with sock:
            return _read_plain(sock, obj, inc, 2)  # "ok" once the server has all 5,000 bytes

    def setup(app: App) -> None:
        app.buf = bytearray(100)  # one record per buffer_updated
        state = {"paused": False}

        def on(chunk: bytes) -> None:
            if not state["paused"]:
                state["paused"] = True
                app.transport.pause_reading()
                asyncio.get_running_loop().call_later(0.2, app.transport.resume_reading)
            if len(app.data) == 5000:
                app.transport.write(b"ok")
                app.transport.close()
        app.on_data = on

    app, reply = _serve_one(octx, client, setup)
    assert isinstance(app, App), app
    assert bytes(app.data) == b"".join(records)
    assert reply == b"ok"


class _Wire:
    """The TCP transport under a TlsProtocol driven by hand: what the protocol writes is kept."""

    def __init__(self) -> None:
        self.sent = bytearray()
        self.reading = True

    def write(self, data: Any) -> None:
        self.sent += data

    def writelines(self, chunks: Any) -> None:
        for c in chunks:
            self.sent += c

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return False

    def abort(self) -> None:
        raise AssertionError("the protocol gave up on the connection")

    close = abort


class _ByHand:
    """A TlsProtocol on a _Wire and a Python ``ssl`` client on memory BIOs, handshaken, with an
    App (one 100-byte record per ``buffer_updated``) attached; ``receive`` is the event loop
    reading what the client sent. Must be made inside a running loop that the test does not
    yield to until it means to, so ``call_soon`` only queues."""

    def __init__(self, octx: Any, pki: Any, app: App) -> None:
        self.tls = ot.TlsProtocol(octx, asyncio.get_running_loop())
        self.wire = _Wire()
        self.tls.connection_made(self.wire)
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.client = _client_ctx(pki).wrap_bio(self.inc, self.out, server_hostname="localhost")
        while not self.tls.handshake.done():
            try:
                self.client.do_handshake()
            except ssl.SSLWantReadError:
                pass
            self.receive()
            self.inc.write(bytes(self.wire.sent))
            self.wire.sent.clear()
        self.client.do_handshake()
        self.app = app
        self.tls.attach(app)

    def send(self, records: list[bytes]) -> None:
        for r in records:
            self.client.write(r)
        self.receive()

    def receive(self) -> None:
        data = self.out.read()
        buf = self.tls.get_buffer(len(data))
        buf[:len(data)] = data
        self.tls.buffer_updated(len(data))


def _pausing_app() -> App:
    """Pauses reading after its first 100-byte record."""
    app = App(buffer_size=100)
    app.on_data = lambda chunk: app.transport.pause_reading() if len(app.data) == 100 else None
    return app


def test_records_left_when_reading_paused_stay_ahead_of_records_that_arrive_later(pki):
    """After the handshake OpenSSL reads ciphertext where it arrived, in the receive buffer. The
    application pauses after its first record with 49 still unread in that buffer, resumes, and
    50 more records are received into the same buffer *before* the read that resume_reading
    scheduled has run (the event loop may poll the socket first). The 49 must have been moved
    aside: all 100 arrive, in order. Driven by hand, so the order is certain."""
    _lc, octx = _contexts(pki)
    first = [bytes([i]) * 100 for i in range(50)]
    second = [bytes([100 + i]) * 100 for i in range(50)]

    async def run() -> None:  # no await until the end: call_soon only queues until then
        c = _ByHand(octx, pki, _pausing_app())
        c.send(first)
        assert bytes(c.app.data) == first[0] and not c.wire.reading  # paused, 49 records unread
        c.app.transport.resume_reading()  # schedules a read; the socket is read first:
        c.send(second)
        await asyncio.sleep(0)  # now the scheduled read
        assert bytes(c.app.data) == b"".join(first + second)

    asyncio.run(run())


def test_connections_of_one_loop_share_the_receive_buffer_and_keep_their_own_records(pki):
    """All TLS connections of an event loop read into one buffer (none keeps 256 KiB of its own).
    Connection A pauses with 49 records unread; B then receives 50 records into the same memory;
    A resumes and must still get its own 49, in order, and B all of its 50."""
    _lc, octx = _contexts(pki)
    mine = [bytes([i]) * 100 for i in range(50)]
    theirs = [bytes([200]) * 100 for _ in range(50)]

    async def run() -> None:
        a = _ByHand(octx, pki, _pausing_app())
        b = _ByHand(octx, pki, App())
        assert _address(a.tls.get_buffer(-1)) == _address(b.tls.get_buffer(-1))
        a.send(mine)
        assert bytes(a.app.data) == mine[0] and not a.wire.reading
        b.send(theirs)
        assert bytes(b.app.data) == b"".join(theirs)
        a.app.transport.resume_reading()
        await asyncio.sleep(0)
        assert bytes(a.app.data) == b"".join(mine)

    asyncio.run(run())


def _address(view: memoryview) -> int:
    return int(ot._ffi.cast("uintptr_t", ot._ffi.from_buffer(view)))


def _drain_tls(pki: Any, port: int, request: bytes) -> tuple[bytes, str]:
    """Send ``request`` over TLS, then read until the server closes: (plaintext, how it closed)."""
    with socket.create_connection(("127.0.0.1", port)) as raw, \
            _client_ctx(pki).wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False) as s:
        s.sendall(request)
        got = bytearray()
        try:
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    return bytes(got), "close_notify"
                got += chunk
        except (ssl.SSLError, ConnectionResetError) as e:
            return bytes(got), type(e).__name__


def test_close_sends_close_notify_after_buffered_data(pki):
    """close() right after a 3 MB write: the peer reads all of it, then a clean TLS EOF (close_notify),
    not the 'EOF occurred in violation of protocol' a bare TCP close gives."""
    _lc, octx = _contexts(pki)
    blob = os.urandom(3 * 1024 * 1024)

    app, (got, how) = _serve_one(octx, lambda port: _drain_tls(pki, port, b"go"),
                                 _answer_then_close(blob, expect=b"go"))
    assert isinstance(app, App), app
    assert got == blob
    assert how == "close_notify"


def test_fetch_response_regions_are_read_encrypted_and_sent_byte_exact(pki, tmp_path):
    """write_regions (a Fetch response: headers as bytes, records as segment regions) around
    every edge of the staging slice: a header and a region filling it, regions of exactly one
    slice, over several slices and of a few bytes, bytes chunks between them and one larger
    than a slice, a region with no open descriptor. The peer decrypts exactly their
    concatenation, in order, then a clean close_notify."""
    from log.segment import ReadInfo

    _lc, octx = _contexts(pki)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(os.urandom(3 * ot.SLICE + 12345))
    fd = os.open(seg, os.O_RDONLY)
    try:
        def region(position: int, size: int, with_fd: bool = True) -> ReadInfo:
            return ReadInfo(str(seg), position, size, 0, fd if with_fd else -1)

        chunks: list[Any] = [b"H" * 37, region(0, ot.SLICE - 37), region(ot.SLICE, ot.SLICE),
                             b"p" * 60, region(5, 2 * ot.SLICE + 999), region(7, 3),
                             os.urandom(ot.SLICE + 1), b"", region(100, 70000, with_fd=False),
                             b"tail", region(3 * ot.SLICE, 12345)]
        expected = b"".join(c if isinstance(c, bytes) else c.read() for c in chunks)

        def setup(app: App) -> None:
            def on(_chunk: bytes) -> None:
                if bytes(app.data) == b"fetch":
                    app.transport.write_regions(chunks)
                    app.transport.close()
            app.on_data = on

        app, (got, how) = _serve_one(octx, lambda port: _drain_tls(pki, port, b"fetch"), setup)
    finally:
        os.close(fd)
    assert isinstance(app, App), app
    assert how == "close_notify"
    assert len(got) == len(expected) and got == expected


@pytest.mark.parametrize("fault", ["truncated", "unreadable"])
def test_a_fetch_region_that_cannot_be_read_closes_the_connection_before_any_of_the_response(pki, tmp_path,
                                                                                           fault):
    """The segment is shorter than the region handed out (truncated since), or its descriptor
    cannot be read (here a directory's: EISDIR): nothing of the response may go out, as its
    length prefix promised bytes that do not exist; the connection closes instead (the client
    reconnects and fetches again) and the broker goes on."""
    from log.segment import ReadInfo

    _lc, octx = _contexts(pki)
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(os.urandom(ot.SLICE + 500))
    fd = os.open(seg if fault == "truncated" else tmp_path, os.O_RDONLY)
    try:
        chunks = [b"header", ReadInfo(str(seg), 0, 2 * ot.SLICE, 0, fd)]
        returned: list[bool] = []

        def setup(app: App) -> None:
            def on(_chunk: bytes) -> None:
                if bytes(app.data) == b"fetch":
                    app.transport.write_regions(chunks)  # must close, not raise into the caller
                    returned.append(app.transport.is_closing())
            app.on_data = on

        app, (got, how) = _serve_one(octx, lambda port: _drain_tls(pki, port, b"fetch"), setup)
    finally:
        os.close(fd)
    assert isinstance(app, App), app
    assert returned == [True]
    assert got == b"" and how != "close_notify"
    assert app.lost.done()


def test_write_backpressure_pauses_and_resumes_the_protocol_and_keeps_order(pki):
    """8 MB written while the peer does not read: the protocol is told to pause (TCP high-water),
    then to resume as the peer drains; every byte arrives in order."""
    _lc, octx = _contexts(pki)
    pieces = [os.urandom(64 * 1024) for _ in range(128)]

    def client(port: int) -> bytes:
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                _client_ctx(pki).wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"go")
            time.sleep(0.5)  # let the broker's side fill up
            got = bytearray()
            while len(got) < 128 * 64 * 1024:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                got += chunk
            return bytes(got)

    app, got = _serve_one(octx, client, _answer_then_close(*pieces))
    assert isinstance(app, App), app
    assert got == b"".join(pieces)
    assert app.paused_writing >= 1 and app.resumed_writing >= 1


def test_client_certificate_gives_the_principal(pki):
    """mTLS (ssl.client.auth=required) through this transport: the DN reaches peer_principal."""
    lc, octx = _contexts(pki, **{"ssl.client.auth": "required",
                                 "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/L,DEFAULT"})
    rules = parse_mapping_rules(lc.get("ssl.principal.mapping.rules"))
    seen: dict[str, str] = {}

    def look(app: App) -> None:
        seen["principal"] = peer_principal(app.transport.get_extra_info("ssl_object"), rules)
        seen["version"] = app.transport.get_extra_info("ssl_object").version()

    app, reply = _serve_one(octx, lambda port: _ping(pki, port, b"hi", (pki.client_crt, pki.client_key)),
                            _answer_then_close(b"bye", look=look))
    assert isinstance(app, App), app
    assert reply == b"bye"
    assert seen["principal"] == "User:alice"  # CN=alice,OU=eng,O=Samsa by the rule
    assert seen["version"] == "TLSv1.3"


def test_client_without_certificate_is_refused_when_required(pki):
    _lc, octx = _contexts(pki, **{"ssl.client.auth": "required"})

    def client(port: int) -> str:
        try:
            return repr(_ping(pki, port, b"hi"))
        except (ssl.SSLError, OSError) as e:
            return type(e).__name__

    err, seen = _serve_one(octx, client)
    assert isinstance(err, ot.TlsHandshakeError), err
    assert "certificate" in str(err)
    assert seen != "b'hi'"


def test_plaintext_and_silent_clients_fail_the_handshake_cleanly(pki):
    _lc, octx = _contexts(pki)

    def plaintext(port: int) -> bytes:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")  # ApiVersions, no TLS
            s.settimeout(10)
            try:
                return s.recv(100)
            except OSError:
                return b""

    err, _ = _serve_one(octx, plaintext)
    assert isinstance(err, ot.TlsHandshakeError), err
    assert str(err)

    def silent(port: int) -> None:
        with socket.create_connection(("127.0.0.1", port)):
            time.sleep(1.5)

    started = time.monotonic()
    err, _ = _serve_one(octx, silent, handshake_timeout=0.5)
    assert isinstance(err, ot.TlsHandshakeError) and "within 0.5 s" in str(err), err
    assert time.monotonic() - started < 10


def test_a_forged_record_closes_that_connection_only_and_the_next_one_is_served(pki):
    """After the handshake a client sends an application-data record that fails authentication:
    what came before it is delivered, that connection is closed, and the next connection, on the
    same thread, completes its handshake and is served normally."""
    _lc, octx = _contexts(pki)

    def forger(port: int) -> bytes:
        sock, _obj, _inc, _out = _memory_bio_records(pki, port, [b"first"])
        with sock:
            sock.sendall(b"\x17\x03\x03\x00\x40" + os.urandom(64))  # a record no key produced
            sock.settimeout(10)
            try:
                while sock.recv(65536):
                    pass
            except OSError:
                pass
            return b"closed"

    app, seen = _serve_one(octx, forger)
    assert isinstance(app, App), app
    assert bytes(app.data) == b"first"  # what came before the forged record was delivered
    assert seen == b"closed"

    app, reply = _serve_one(octx, lambda port: _ping(pki, port, b"ping"), _answer_then_close(b"pong"))
    assert isinstance(app, App), app
    assert reply == b"pong"


def test_client_leaving_right_after_the_handshake_never_leaves_a_connection_behind(pki):
    """Handshake, then close at once, 30 times: each time either accept() refuses (the client was
    already gone) or the protocol is attached and then told connection_lost; never attached to a
    dead connection and left waiting (the harness would time out)."""
    _lc, octx = _contexts(pki)

    def client(port: int) -> None:
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                _client_ctx(pki).wrap_socket(raw, server_hostname="localhost"):
            pass

    outcomes = set()
    for _ in range(30):
        app, _ = _serve_one(octx, client)
        assert isinstance(app, (App, ConnectionResetError)), app
        outcomes.add(type(app).__name__)
        if isinstance(app, App):
            assert app.lost.done() and app.data == b""
    assert outcomes <= {"App", "ConnectionResetError"}


@pytest.mark.parametrize("transport", ["openssl", "loop"])
def test_broker_serves_ssl_and_sasl_ssl_on_each_transport(broker_factory, pki, read_loop, transport):
    """A producer and a consumer (confluent-kafka) over SSL and SASL_SSL/SCRAM-SHA-512, on the
    default transport and on ssl.transport=loop, with each ssl.read.loop; the broker's log names the
    one in use."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    from tests.support.security import scram_user, start_secure_broker

    sb = start_secure_broker(broker_factory, pki, **{"ssl.transport": transport, "ssl.read.loop": read_loop})
    scram_user(f"127.0.0.1:{sb.plaintext}", "tls-user", "tls-secret", "SCRAM-SHA-512")
    for port, extra in ((sb.ssl, {"security.protocol": "SSL"}),
                        (sb.sasl_ssl, {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512",
                                       "sasl.username": "tls-user", "sasl.password": "tls-secret"})):
        conf = {"bootstrap.servers": f"127.0.0.1:{port}", "ssl.ca.location": str(pki.ca), **extra}
        topic = f"tls-{uuid.uuid4().hex[:8]}"
        values = [os.urandom(random.choice([10, 1000, 20000, 300000])) for _ in range(200)]
        p = Producer({**conf, "acks": "all", "linger.ms": 5})
        for v in values:
            p.produce(topic, v)
        assert p.flush(60) == 0
        c = Consumer({**conf, "group.id": topic, "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            for m in c.consume(100, 1.0):
                assert m.error() is None, m.error()
                got.append(m.value())
        c.close()
        assert got == values
    want = f"(pyOpenSSL, read loop in {'C' if read_loop == 'c' else 'Python'})" if transport == "openssl" \
        else "ssl.transport=loop"
    assert want in sb.broker.log_text()
