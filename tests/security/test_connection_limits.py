"""Connection limits (issue 10, broker/network/connection_quotas.py) over real sockets: max.connections.per.ip
with overrides, max.connections with the protected inter-broker listener, max.connection.creation.rate,
socket.request.max.bytes, and the bound on what a client that never reads can make the broker buffer."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.metrics import scrape, value
from tests.support.net import Conn, free_port, wait_until
from tests.support.rawclient import RawClient, build_batch, produce_request


def _produce_one(bootstrap: str, topic: str, value: bytes) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    errors: list[object] = []
    p.produce(topic, value, on_delivery=lambda err, _m: err and errors.append(err))
    assert p.flush(30) == 0 and not errors, errors


def test_max_connections_per_ip_with_override(broker_factory) -> None:
    b = broker_factory({"max.connections.per.ip": 3, "max.connections.per.ip.overrides": "127.0.0.2:5"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
    defaults = [Conn(b.port, "127.0.0.3") for _ in range(3)]
    assert [c.ask() for c in defaults] == ["ok"] * 3
    over = Conn(b.port, "127.0.0.3")
    assert over.ask() == "closed"
    assert wait_until(lambda: "Rejected connection from /127.0.0.3 on listener PLAINTEXT, address already has "
                              "the configured maximum of 3 connections" in b.log_text(), 10), b.log_tail()
    overridden = [Conn(b.port, "127.0.0.2") for _ in range(5)]
    assert [c.ask() for c in overridden] == ["ok"] * 5
    assert Conn(b.port, "127.0.0.2").ask() == "closed"
    # the addresses' open connections and other addresses' clients are untouched
    assert [c.ask() for c in defaults + overridden] == ["ok"] * 8
    _produce_one(b.bootstrap, "t", b"still served")
    # a closed connection frees its address's slot
    defaults.pop().close()
    assert wait_until(lambda: Conn(b.port, "127.0.0.3").ask() == "ok", 10)


def test_max_connections_waits_and_protects_the_inter_broker_listener(broker_factory) -> None:
    internal = free_port()
    b = broker_factory({"listeners": f"PLAINTEXT://127.0.0.1:{{port}},INTERNAL://127.0.0.1:{internal}",
                        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                        "inter.broker.listener.name": "INTERNAL", "max.connections": 4,
                        "listener.name.plaintext.max.connections": 3}, start=False)
    b.overrides["listeners"] = b.overrides["listeners"].format(port=b.port)
    b.start()
    p = [Conn(b.port) for _ in range(3)]
    assert [c.ask() for c in p] == ["ok"] * 3
    # the listener is full: the next connection is not refused but waits to be accepted
    waiting = Conn(b.port)
    assert waiting.ask(timeout=1.5) == "timeout"
    assert "Not accepting new connections: listener PLAINTEXT has reached " \
           "listener.name.plaintext.max.connections=3" in b.log_text()
    assert [c.ask() for c in p] == ["ok"] * 3  # existing clients keep working
    p[0].close()
    assert waiting.wait_answer(10) == "ok"  # served as soon as a slot is free
    p = [*p[1:], waiting]
    # the protected inter-broker listener may take the broker past max.connections=4; the
    # least recently active connection of the other listener is closed to make room
    p[1].ask()
    p[2].ask()
    i1, i2 = Conn(internal), Conn(internal)
    assert i1.ask() == "ok" and i2.ask() == "ok"
    assert p[0].ask() == "closed"
    assert [c.ask() for c in p[1:]] == ["ok", "ok"]
    assert "broker has reached max.connections=4; the least recently active connection of listener " \
           "PLAINTEXT" in b.log_text()


def test_max_connection_creation_rate_throttles_accepting(broker_factory, tmp_path: Path) -> None:
    metrics_port = free_port()
    rate = 10
    b = broker_factory({"max.connection.creation.rate": rate, "quota.window.num": 2,
                        "quota.window.size.seconds": 1, "metrics.listener": f"http://127.0.0.1:{metrics_port}"})
    time.sleep(2.5)  # the readiness probes' connections leave the rate's window
    n = 45
    done: list[float] = []
    conns = []
    t0 = time.monotonic()
    for _ in range(n):
        c = Conn(b.port)
        assert c.ask() == "ok"  # throttled, never refused
        done.append(time.monotonic() - t0)
        conns.append(c)
        if len(conns) > 5:
            conns.pop(0).close()
    # Past the first window's burst, connections are accepted at the configured rate.
    steady = (n - 1 - 15) / (done[-1] - done[15])
    print(f"accepted {n} connections in {done[-1]:.2f} s; steady rate {steady:.1f}/s (limit {rate}/s)")
    assert 0.7 * rate <= steady <= 1.25 * rate, done
    samples = scrape(metrics_port)
    assert value(samples, "kafka_server_socketservermetrics_connection_accept_throttle_time_ms_total",
                 listener="PLAINTEXT") > 1000
    assert value(samples, "kafka_server_socketservermetrics_connection_creation_rate", listener="PLAINTEXT") > 0
    for c in conns:
        c.close()


def test_oversized_request_closes_only_that_connection(broker_factory) -> None:
    b = broker_factory({"socket.request.max.bytes": 1 << 20})
    good = Conn(b.port)
    bad = Conn(b.port)
    bad.sock.sendall(struct.pack(">i", 2 << 20) + b"\0" * 64)
    assert bad.wait_answer(10) == "closed"
    assert good.ask() == "ok"
    assert "invalid frame size 2097152 (socket.request.max.bytes=1048576)" in b.log_text()


def _rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_client_that_never_reads_cannot_grow_broker_memory(broker_factory) -> None:
    """A client pipelines Fetches (big responses) and then 8 MB requests without reading a byte:
    the broker stops reading from it; its memory and its buffered request bytes stay bounded while
    another client produces and consumes."""
    metrics_port = free_port()
    b = broker_factory({"metrics.listener": f"http://127.0.0.1:{metrics_port}", "message.max.bytes": 2 << 20})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("big", 1, 1)])["big"].result(30)
    with RawClient("127.0.0.1", b.port) as rc:
        for _ in range(8):
            assert rc.produce("big", 0, build_batch([(None, b"x" * 900_000, [])]))[0] == 0
        for _ in range(3):
            rc.fetch_raw("big", 0, 0)  # warm the fetch path before the baseline
    time.sleep(0.5)
    rss0 = _rss_bytes(b.proc.pid)

    hog = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.connect(("127.0.0.1", b.port))
    fetch = RawClient._fetch_request("big", 0, 0, 1 << 20)
    for corr in range(40):
        fetch.with_header(correlation_id=corr, client_id="hog")
        hog.sendall(fetch.encode(version=11, header=True, framed=True))
    req = produce_request("big", 0, b"\0" * (8 << 20))
    req.with_header(correlation_id=99, client_id="hog")
    frame = req.encode(version=7, header=True, framed=True)
    hog.settimeout(3)
    sent = 0
    try:
        for _ in range(100):  # 800 MB offered
            hog.sendall(frame)
            sent += len(frame)
    except TimeoutError:
        pass
    rss1 = _rss_bytes(b.proc.pid)
    buffered = value(scrape(metrics_port), "kafka_network_socketserver_memorypoolused")
    print(f"broker took {sent >> 20} MB of 800 MB offered; RSS {rss0 >> 20} -> {rss1 >> 20} MB; "
          f"buffered request bytes {int(buffered) >> 20} MB")
    assert sent < 64 << 20
    assert buffered <= (4 << 20) + 2 * len(frame)
    assert rss1 - rss0 < 128 << 20

    # everyone else is served meanwhile
    _produce_one(b.bootstrap, "big", b"small")
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g", "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 4 << 20})
    c.subscribe(["big"])
    got = 0
    deadline = time.monotonic() + 30
    while got < 9 and time.monotonic() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            got += 1
    c.close()
    assert got == 9
    hog.close()
    assert wait_until(lambda: value(scrape(metrics_port), "kafka_network_socketserver_memorypoolused") == 0, 10)
