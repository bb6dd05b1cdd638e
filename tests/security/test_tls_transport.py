"""broker/security/tls_transport.py: the TLS transport whose socket OpenSSL reads and writes.

Each test runs the transport on a real uvloop loop against real TLS clients (Python's ``ssl``
over TCP) and checks what the broker relies on: every byte arrives in order whatever the record
sizes (read-ahead on), reading resumes with records OpenSSL already holds while the socket is
empty, writes keep their order under backpressure with pause/resume_writing, close() delivers
what was buffered, failed and stalled handshakes raise, and connection_lost comes exactly once.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
import uvloop

from broker.security import openssl
from broker.security.tls_transport import accept_tls, supported, tune_context
from tests.support.security import make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return make_pki(tmp_path_factory.mktemp("pki"))


def server_context(pki: Any) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki.server_pem))
    assert tune_context(ctx), "read-ahead could not be set on this Python/OpenSSL"
    assert supported(ctx)
    return ctx


def client_socket(pki: Any, port: int) -> ssl.SSLSocket:
    """A TLS client that reports an EOF without close_notify as SSLEOFError, not as b''."""
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    return ctx.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)


def memory_bio_client(pki: Any, port: int) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO, socket.socket]:
    """A handshaken TLS client over memory BIOs: records can be built first and sent in one go."""
    cctx = ssl.create_default_context(cafile=str(pki.ca))
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = cctx.wrap_bio(inc, out, server_hostname="localhost")
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            if out.pending:
                raw.sendall(out.read())
            inc.write(raw.recv(65536))
    if out.pending:
        raw.sendall(out.read())
    return obj, inc, out, raw


class Recorder(asyncio.BufferedProtocol):
    """Collects what arrives; optionally pauses reading after the first bytes."""

    def __init__(self, pause_after_first: bool = False) -> None:
        self.buf = bytearray(64 * 1024)
        self.data = bytearray()
        self.transport: Any = None
        self.pause_after_first = pause_after_first
        self.updates = 0
        self.lost: list[Exception | None] = []
        self.paused_writing = 0
        self.resumed_writing = 0
        self.arrived = asyncio.Event()

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self.buf)

    def buffer_updated(self, nbytes: int) -> None:
        self.data += self.buf[:nbytes]
        self.updates += 1
        self.arrived.set()
        if self.pause_after_first and self.updates == 1:
            self.transport.pause_reading()

    def pause_writing(self) -> None:
        self.paused_writing += 1

    def resume_writing(self) -> None:
        self.resumed_writing += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost.append(exc)


async def serve_one(ctx: ssl.SSLContext, proto: Recorder, **kw: Any) -> tuple[int, asyncio.Future[Any]]:
    """Listen on a free port; the future resolves to accept_tls's result for the first connection."""
    loop = asyncio.get_running_loop()
    lsock = socket.create_server(("127.0.0.1", 0))
    lsock.setblocking(False)
    port = lsock.getsockname()[1]

    async def accept() -> Any:
        sock, _ = await loop.sock_accept(lsock)
        lsock.close()
        return await accept_tls(loop, sock, ctx, lambda: proto, **kw)

    return port, asyncio.ensure_future(accept())


def run(coro: Any) -> Any:
    return uvloop.run(coro)


def test_every_byte_arrives_in_order_with_small_and_large_records(pki: Any) -> None:
    """librdkafka's pattern: a Produce split into 16 KiB records and runs of ~1 KiB ones."""
    ctx = server_context(pki)
    writes = ([16384] * 9 + [700, 1100] * 40 + [5, 3]) * 20
    payload = os.urandom(sum(writes))

    async def main() -> None:
        proto = Recorder()
        port, accepted = await serve_one(ctx, proto)

        def client() -> None:
            with client_socket(pki, port) as s:
                off = 0
                for w in writes:
                    s.sendall(payload[off:off + w])  # one TLS record per sendall
                    off += w
                assert s.recv(2) == b"ok"

        t = asyncio.get_running_loop().run_in_executor(None, client)
        transport, _ = await accepted
        while len(proto.data) < len(payload):
            proto.arrived.clear()
            await asyncio.wait_for(proto.arrived.wait(), 20)
        assert hashlib.sha256(proto.data).digest() == hashlib.sha256(payload).digest()
        transport.write(b"ok")
        await t
        transport.close()
        await asyncio.sleep(0.05)
        assert proto.lost == [None]

    run(main())


def test_resume_reading_delivers_records_openssl_already_holds(pki: Any) -> None:
    """Ten 1,000-byte records reach the server in one segment, so one recv takes all of them into
    OpenSSL; the protocol pauses after the first and the client sends nothing more until it is
    answered. The nine records OpenSSL holds must arrive on resume_reading with the socket empty."""
    ctx = server_context(pki)
    payload = os.urandom(10_000)

    async def main() -> None:
        proto = Recorder(pause_after_first=True)
        proto.buf = bytearray(1000)  # one record per buffer_updated
        port, accepted = await serve_one(ctx, proto)
        answered = threading.Event()

        def client() -> None:
            obj, inc, out, raw = memory_bio_client(pki, port)
            for i in range(0, len(payload), 1000):
                obj.write(payload[i:i + 1000])
            raw.sendall(out.read())  # ten records, one send
            got = b""
            while b"done" not in got:
                data = raw.recv(65536)
                assert data
                inc.write(data)
                try:
                    got += obj.read(100)
                except ssl.SSLWantReadError:
                    pass
            answered.set()
            raw.close()

        t = asyncio.get_running_loop().run_in_executor(None, client)
        transport, _ = await accepted
        await asyncio.wait_for(proto.arrived.wait(), 20)
        await asyncio.sleep(0.3)
        assert not transport.is_reading() and len(proto.data) == 1000
        transport.resume_reading()
        for _ in range(100):
            if len(proto.data) >= len(payload):
                break
            await asyncio.sleep(0.05)
        assert bytes(proto.data) == payload
        transport.write(b"done")
        await asyncio.wait_for(t, 20)
        assert answered.is_set()
        transport.close()

    run(main())


def test_writes_keep_order_under_backpressure_and_close_flushes(pki: Any) -> None:
    ctx = server_context(pki)
    chunks = [os.urandom(n) for n in (100, 3, 1 << 20, 50, 7, 2 << 20, 16383, 16384, 16385, 1, 3 << 20)]
    expected = b"".join(chunks) * 2

    async def main() -> None:
        proto = Recorder()
        port, accepted = await serve_one(ctx, proto)
        got = bytearray()
        started = threading.Event()

        def client() -> None:
            with client_socket(pki, port) as s:
                s.sendall(b"go")
                started.wait(20)
                import time

                time.sleep(0.5)  # let the server's writes pile up against a full socket
                while True:
                    data = s.recv(1 << 20)  # b"" only after close_notify (SSLEOFError without)
                    if not data:
                        break
                    got.extend(data)

        t = asyncio.get_running_loop().run_in_executor(None, client)
        transport, _ = await accepted
        await asyncio.wait_for(proto.arrived.wait(), 20)
        transport.writelines(chunks)  # small neighbours are joined; the big ones go as they are
        for c in chunks:
            transport.write(c)
        started.set()
        assert transport.get_write_buffer_size() > 0 and proto.paused_writing == 1
        transport.close()  # must flush everything first, then close_notify
        await asyncio.wait_for(t, 30)
        assert len(got) == len(expected) and bytes(got) == expected
        await asyncio.sleep(0.05)
        assert proto.lost == [None]
        assert proto.resumed_writing == 1

    run(main())


def test_a_reused_bytearray_that_had_to_wait_is_sent_as_it_was(pki: Any) -> None:
    """write() may be handed a buffer the caller reuses at once (asyncio allows it): what waits is copied."""
    ctx = server_context(pki)
    filler = os.urandom(4 << 20)
    original = os.urandom(100_000)

    async def main() -> None:
        proto = Recorder()
        port, accepted = await serve_one(ctx, proto)
        got = bytearray()
        written = threading.Event()

        def client() -> None:
            with client_socket(pki, port) as s:
                s.sendall(b"go")
                written.wait(20)
                while len(got) < len(filler) + 2 * len(original) + 10:
                    data = s.recv(1 << 20)
                    assert data
                    got.extend(data)

        t = asyncio.get_running_loop().run_in_executor(None, client)
        transport, _ = await accepted
        await asyncio.wait_for(proto.arrived.wait(), 20)
        transport.write(filler)  # more than the socket takes while the client is not reading
        reused = bytearray(original)
        transport.write(reused)
        assert transport.get_write_buffer_size() > len(original)
        reused[:] = bytes(len(reused))  # the caller reuses its buffer
        transport.writelines([memoryview(reused)[:10], reused])  # writable views, too, in writelines
        reused[:] = original
        written.set()
        await asyncio.wait_for(t, 30)
        assert bytes(got) == filler + original + bytes(10) + bytes(len(original))
        transport.close()

    run(main())


def test_plaintext_client_fails_the_handshake_and_the_socket_is_closed(pki: Any) -> None:
    ctx = server_context(pki)

    async def main() -> None:
        proto = Recorder()
        port, accepted = await serve_one(ctx, proto)

        def client() -> bytes:
            with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
                s.sendall(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")  # Kafka, not TLS
                out = b""
                try:
                    while True:
                        d = s.recv(100)
                        if not d:
                            return out
                        out += d
                except ConnectionResetError:
                    return out

        t = asyncio.get_running_loop().run_in_executor(None, client)
        with pytest.raises(ssl.SSLError):
            await accepted
        reply = await asyncio.wait_for(t, 20)
        assert not reply or reply.startswith(b"\x15")  # a TLS alert, never a Kafka response
        assert proto.transport is None  # no connection was made

    run(main())


def test_a_stalled_handshake_times_out(pki: Any) -> None:
    ctx = server_context(pki)

    async def main() -> None:
        proto = Recorder()
        port, accepted = await serve_one(ctx, proto, handshake_timeout=0.5)
        s = socket.create_connection(("127.0.0.1", port), timeout=20)  # connects, never says hello
        try:
            with pytest.raises(asyncio.TimeoutError):
                await accepted
            s.settimeout(5)
            assert s.recv(10) == b""  # the server closed its end
        finally:
            s.close()

    run(main())


def test_peer_reset_mid_stream_reports_connection_lost_once(pki: Any) -> None:
    ctx = server_context(pki)

    async def main() -> None:
        proto = Recorder()
        port, accepted = await serve_one(ctx, proto)

        connected = threading.Event()

        def client() -> None:
            s = client_socket(pki, port)
            s.sendall(b"x" * 5000)
            connected.wait(20)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            s.close()  # linger 0: a RST, no close_notify

        t = asyncio.get_running_loop().run_in_executor(None, client)
        transport, _ = await accepted
        connected.set()
        await t
        for _ in range(100):
            if proto.lost:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)
        assert len(proto.lost) == 1 and transport.is_closing()
        transport.close()
        transport.abort()
        await asyncio.sleep(0.05)
        assert len(proto.lost) == 1

    run(main())


def test_without_a_usable_libssl_nothing_is_touched(pki: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the SSL_CTX pointer cannot be had safely, the context is not tuned (the listener keeps
    the loop's transport) and TLS 1.3 suites cannot be set (the listener refuses to start)."""
    monkeypatch.setattr(openssl, "_libssl", False)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(pki.server_pem))
    assert not tune_context(ctx) and not supported(ctx)
    assert openssl.set_tls13_ciphersuites(ctx, ["TLS_AES_128_GCM_SHA256"]) is None


@pytest.mark.parametrize("proto", ["SSL", "SASL_SSL"])
def test_a_broker_on_the_socket_transport_serves_confluent_kafka(broker_factory: Any, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch, proto: str) -> None:
    """SAMSA_TLS_TRANSPORT=socket end to end: a producer and a consumer over TLS (SCRAM on SASL_SSL)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.security import scram_user, start_secure_broker

    monkeypatch.setenv("SAMSA_TLS_TRANSPORT", "socket")
    pki = make_pki(tmp_path / "pki")
    sb = start_secure_broker(broker_factory, pki)
    port = sb.ssl if proto == "SSL" else sb.sasl_ssl
    conf: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": proto,
                            "ssl.ca.location": str(pki.ca)}
    if proto == "SASL_SSL":
        scram_user(f"127.0.0.1:{sb.plaintext}", "carol", "carol-secret", "SCRAM-SHA-512")
        conf.update({"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "carol", "sasl.password": "carol-secret"})
    admin = AdminClient(conf)
    admin.create_topics([NewTopic("t", 2, 1)])["t"].result(30)
    values = [os.urandom(n) for n in (1, 700, 1100, 16384, 70000, 1024) * 300]
    p = Producer({**conf, "linger.ms": 5, "acks": "all"})
    for i, v in enumerate(values):
        p.produce("t", v, key=str(i).encode(), partition=i % 2)
    assert p.flush(60) == 0
    c = Consumer({**conf, "group.id": "g", "enable.auto.commit": False})
    c.assign([TopicPartition("t", 0, 0), TopicPartition("t", 1, 0)])
    got: dict[int, bytes] = {}
    for _ in range(300):
        for m in c.consume(500, 1.0):
            assert m.error() is None, m.error()
            got[int(m.key())] = m.value()
        if len(got) == len(values):
            break
    c.close()
    assert got == dict(enumerate(values))
    assert f"Listener {proto}: TLS through OpenSSL's socket BIO" in sb.broker.log_text()
