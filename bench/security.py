#!/usr/bin/env python3
"""Throughput over PLAINTEXT, SSL and SASL_SSL, and authenticated connections per second (issue 10).

One Samsa broker (a subprocess) with a PLAINTEXT, an SSL, a SASL_PLAINTEXT and a SASL_SSL
listener and a CA made here with ``cryptography``. For each of PLAINTEXT, SSL and SASL_SSL
(SCRAM-SHA-512) a confluent-kafka producer sends N messages of 1 KiB to a fresh topic (timed
from the first produce to the last delivery report) and a consumer reads them back (assign,
from the beginning, until the N-th record). The ratio to PLAINTEXT is printed per row (aim:
SSL >= 0.6x). Then the same produce from a client that hands each ~1 MB Produce request to
OpenSSL whole (one ``SSL_write``, so 16 KiB records; pyOpenSSL on the OpenSSL the broker runs),
four requests in flight, over PLAINTEXT and SSL. librdkafka does not: it calls ``SSL_write``
once per segment of its request buffer, and whenever a segment has less room left than the next
value it links that value by reference as a segment of its own, while the record headers that
follow fill the room left, 9-10 bytes at a time; so about a fifth of 1 KiB values (10,232 of
50,000 in an strace) go out as a TLS record and a write syscall of their own plus another for
the 9-10 bytes after them: ~450 records per MB where whole requests make ~64. The broker pays
per record too (``SSL_read`` returns one record per call); this row shows what TLS costs it
when the records are full. Then new connections per second over SASL_PLAINTEXT, each a TCP
connect, SaslHandshake, SaslAuthenticate (one round trip for PLAIN, two for SCRAM-SHA-512,
whose client-side PBKDF2 at 4096 iterations is included) and close, for PLAIN and
SCRAM-SHA-512.
Last, the broker's resident memory per idle TLS connection: ``--idle`` clients handshake with
the SSL listener and stay connected while the broker's VmRSS is read.

Throughput is timed on connections already up: the producer delivers one warm-up message to
the topic before its clock starts, and the consumer's clock starts when that message arrives,
so the TCP connect, the TLS handshake and the SASL exchange (3, 6-9 and 25-40 ms here, both
clients together) are left to the connections-per-second figures rather than counted a second
time inside a case that lasts 0.2-0.8 s. The fetch that brings the warm-up message also brings
up to 1 MB of the timed ones (0.3 % of 300 MB) before the consumer's clock starts, alike for
every listener. ``--cold`` times the set-up inside each case as well (the method before
2026-11-26).

Usage::

    python bench/security.py                 # 300000 x 1 KiB, 8 rounds, 300 connections per mechanism
    python bench/security.py -n 100000 --connections 100 --repeat 4

The topic's name changes how librdkafka lays out a Produce request (its length shifts where
the buffer's segments end, and so how many values are linked by reference, above): producing
300,000 x 1 KiB over SSL, names of 18 or 20 characters made 565 TLS records per MB (258 of 9-10
bytes), 24 made 362 and 32 made 450, and SSL produce moved with them from 430-463 to 492-531 MB/s
(broker 1.50-1.63 against 1.22 ms/MB), PLAINTEXT not at all. So no single name length stands for
"1 KiB over TLS": round *i* names its topics with ``NAME_LENGTHS[i % 8]`` characters (12 to 40,
the same for every listener in the round, so each round's ratio is paired), and the default
``--repeat 8`` covers each length once. Until 2026-11-26 every case used an 18-character name,
one of the lengths with the most records.

Each listener is measured ``--repeat`` times, interleaved, after one unmeasured warm-up round,
and the medians are printed, with each round's SSL/PLAINTEXT produce ratio next to its name
length, with the broker's CPU milliseconds per MB (from /proc) and the
client's (this process: the Python loop and librdkafka's threads, whose TLS is the client's
share of the cost): on a shared machine the rates move with the load, the CPU per MB much less.
When client and broker share the machine's cores, as here, TLS throughput is bounded by the sum
of the two: the client's CPU columns say how much of the SSL/PLAINTEXT gap is the client's. Each case's topic is deleted
after it, so every case writes into memory the previous one freed (see bench/replication.py on
this machine's first-touch cost). The default of 300,000 messages (300 MB) makes each case long
enough to measure throughput rather than connection set-up: at 50,000 (the old default, 0.1 s
per consume over PLAINTEXT) the TLS handshake and the consumer's first fetch were a large part
of what was timed.

It is a script, not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.net import free_port, recv_frame, wait_until  # noqa: E402
from tests.support.security import make_pki, secure_overrides  # noqa: E402


def start_broker(tmp: Path) -> tuple[subprocess.Popen[bytes], dict[str, int], object]:
    pki = make_pki(tmp / "pki")
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    props = secure_overrides(pki, ports, **{"log.dirs": str(tmp / "data"), "offsets.topic.num.partitions": "1",
                                            "transaction.state.log.num.partitions": "1"})
    cmd = [sys.executable, "-m", "broker"] + [a for k, v in props.items() for a in ("--override", f"{k}={v}")]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=open(tmp / "broker.log", "wb"), stderr=subprocess.STDOUT)
    from tests.support.net import port_accepts

    if not wait_until(lambda: all(port_accepts("127.0.0.1", p) for p in ports.values()), 60):
        proc.kill()
        raise SystemExit("broker did not start; see " + str(tmp / "broker.log"))
    subprocess.run([sys.executable, "-m", "broker.tools", "configs", "--bootstrap-server",
                    f"127.0.0.1:{ports['PLAINTEXT']}", "--alter", "--entity-type", "users", "--entity-name", "bob",
                    "--add-config", "SCRAM-SHA-512=[password=bob-secret]"], check=True, capture_output=True, cwd=ROOT)
    return proc, ports, pki


def conf_for(proto: str, ports: dict[str, int], pki: object) -> dict[str, str]:
    conf = {"bootstrap.servers": f"127.0.0.1:{ports[proto]}", "security.protocol": proto}
    if "SSL" in proto:
        conf["ssl.ca.location"] = str(pki.ca)  # type: ignore[attr-defined]
    if "SASL" in proto:
        conf.update({"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "bob", "sasl.password": "bob-secret"})
    return conf


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def memory_per_tls_connection(pid: int, port: int, pki: object, count: int) -> float:
    """KiB of broker RSS per TLS connection: ``count`` clients handshake and stay idle."""
    import ssl

    ctx = ssl.create_default_context(cafile=str(pki.ca))  # type: ignore[attr-defined]
    ctx.check_hostname = False
    before = rss_kib(pid)
    socks = []
    try:
        for _ in range(count):
            socks.append(ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost"))
        time.sleep(1)  # the broker has attached every connection
        return (rss_kib(pid) - before) / count
    finally:
        for s in socks:
            s.close()


def cpu_seconds(pid: int) -> float:
    """user + system CPU of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    """user + system CPU of this process (all its threads: librdkafka's as well) so far."""
    t = os.times()
    return t.user + t.system


IN_FLIGHT = 4  # Produce requests the whole-record client keeps outstanding
NAME_LENGTHS = (12, 16, 20, 24, 28, 32, 36, 40)  # topic-name lengths, one per round (module docstring)


@contextlib.contextmanager
def fresh_topic(conf: dict[str, str], prefix: str, length: int = 18) -> Iterator[str]:
    """A one-partition topic for one case, named with ``length`` characters (at least the prefix,
    a dash and 6 random hex digits), deleted after it (see the module docstring)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"{prefix}-{uuid.uuid4().hex * 2}"[:max(length, len(prefix) + 7)]
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    yield topic
    admin.delete_topics([topic])[topic].result(30)


def throughput(conf: dict[str, str], n: int, size: int, pid: int, cold: bool,
               name_length: int = 18) -> tuple[float, ...]:
    """(produce MB/s, consume MB/s, broker CPU ms per MB produced, per MB consumed,
    client CPU ms per MB produced, per MB consumed), into a topic named with ``name_length``
    characters. Unless ``cold``, each clock starts once the client's connection is up: the
    producer's after it delivered one warm-up message, the consumer's when that message arrives
    (see the module docstring)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    with fresh_topic(conf, "bench-sec", name_length) as topic:
        payload = b"x" * size
        p = Producer({**conf, "linger.ms": 5, "batch.size": 1048576, "acks": "all"})
        if not cold:
            p.produce(topic, b"w")
            if p.flush(30):
                raise SystemExit("the warm-up message was not delivered")
        cpu0, own0 = cpu_seconds(pid), own_cpu_seconds()
        t0 = time.perf_counter()
        for _ in range(n):
            while True:
                try:
                    p.produce(topic, payload)
                    break
                except BufferError:
                    p.poll(0.01)
        p.flush(120)
        produce_s = time.perf_counter() - t0
        produce_cpu, produce_own = cpu_seconds(pid) - cpu0, own_cpu_seconds() - own0
        c = Consumer({**conf, "group.id": topic, "enable.auto.commit": False, "fetch.max.bytes": 52428800})
        c.assign([TopicPartition(topic, 0, 0)])
        if not cold:
            deadline = time.monotonic() + 30
            while not [m for m in c.consume(1, 1.0) if not m.error()]:
                if time.monotonic() > deadline:
                    raise SystemExit("the warm-up message did not arrive")
        got = 0
        cpu0, own0 = cpu_seconds(pid), own_cpu_seconds()
        t0 = time.perf_counter()
        while got < n:
            for m in c.consume(1000, 1.0):
                if not m.error():
                    got += 1
        consume_s = time.perf_counter() - t0
        consume_cpu, consume_own = cpu_seconds(pid) - cpu0, own_cpu_seconds() - own0
        c.close()
    mb = n * size / 1e6
    return (mb / produce_s, mb / consume_s, produce_cpu * 1000 / mb, consume_cpu * 1000 / mb,
            produce_own * 1000 / mb, consume_own * 1000 / mb)


def whole_record_produce(proto: str, ports: dict[str, int], pki: object, n: int, size: int,
                         pid: int) -> tuple[float, float, float]:
    """(MB/s, broker CPU ms/MB, client CPU ms/MB) producing ``n`` x ``size`` through one connection
    that hands each ~1 MB Produce request to TLS whole (``SSL_write`` of the whole request: 16 KiB
    records), four in flight: the same bytes as the confluent-kafka case without librdkafka's
    record pattern (the module docstring). The broker's CPU per MB over SSL against PLAINTEXT is
    what TLS costs it when the records are full; the throughput ratio also carries this client's
    own TLS (encryption and a write per record), which shares the machine's cores."""
    import struct

    from kafka.protocol.producer import ProduceResponse

    from tests.support.rawclient import build_batch, produce_request

    with fresh_topic(conf_for(proto, ports, pki), "bench-rec") as topic:
        per = max(1, (1 << 20) // (size + 20))  # records per batch: ~1 MB requests, as librdkafka's
        batch = build_batch([(None, b"x" * size, [])] * per)
        req = produce_request(topic, 0, batch, acks=-1, timeout_ms=30000)
        req.with_header(correlation_id=0, client_id="bench-whole-records")
        frame = bytearray(req.encode(version=7, header=True, framed=True))
        sock: Any = socket.create_connection(("127.0.0.1", ports[proto]))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Kafka clients do: no Nagle wait
        if proto == "SSL":  # the OpenSSL the broker runs (cryptography's), so both ends encrypt alike
            from OpenSSL import SSL

            ctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
            ctx.load_verify_locations(str(pki.ca))  # type: ignore[attr-defined]
            ctx.set_verify(SSL.VERIFY_PEER)
            sock = SSL.Connection(ctx, sock)
            sock.set_connect_state()
            sock.do_handshake()

        def send(corr: int) -> None:
            struct.pack_into(">i", frame, 8, corr)  # size, api key, version, then the correlation id
            sock.sendall(frame)

        def answer() -> None:
            r = ProduceResponse.decode(recv_frame(sock), version=7, header=True)
            err = r.responses[0].partition_responses[0].error_code
            if err:
                raise SystemExit(f"Produce over {proto} failed with error {err}")

        requests = max(1, n // per)
        try:
            send(0)
            answer()  # connection up before the clock starts, as in throughput()
            cpu0, own0 = cpu_seconds(pid), own_cpu_seconds()
            t0 = time.perf_counter()
            for i in range(1, requests + 1):
                send(i)
                if i > IN_FLIGHT:
                    answer()
            for _ in range(min(IN_FLIGHT, requests)):
                answer()
            secs = time.perf_counter() - t0
            cpu, own = cpu_seconds(pid) - cpu0, own_cpu_seconds() - own0
        finally:
            sock.close()
    mb = requests * len(batch) / 1e6
    return mb / secs, cpu * 1000 / mb, own * 1000 / mb


def connections_per_second(port: int, mechanism: str, count: int) -> float:
    from kafka.net.sasl.scram import ScramClient
    from kafka.protocol.sasl import (
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

    def rt(sock: socket.socket, req: object, version: int, cls: object) -> object:
        req.with_header(correlation_id=1, client_id="bench")  # type: ignore[attr-defined]
        sock.sendall(req.encode(version=version, header=True, framed=True))  # type: ignore[attr-defined]
        return cls.decode(recv_frame(sock), version=version, header=True)  # type: ignore[attr-defined]

    t0 = time.perf_counter()
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", port)) as s:
            assert rt(s, SaslHandshakeRequest(mechanism=mechanism), 1, SaslHandshakeResponse).error_code == 0
            if mechanism == "PLAIN":
                r = rt(s, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2, SaslAuthenticateResponse)
            else:
                sc = ScramClient("bob", "bob-secret", mechanism)
                r = rt(s, SaslAuthenticateRequest(auth_bytes=sc.first_message()), 2, SaslAuthenticateResponse)
                sc.process_server_first_message(r.auth_bytes)
                r = rt(s, SaslAuthenticateRequest(auth_bytes=sc.final_message()), 2, SaslAuthenticateResponse)
            assert r.error_code == 0, r.error_message
    return count / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=300000, help="messages per case")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--connections", type=int, default=300, help="authenticated connections per mechanism")
    ap.add_argument("--repeat", type=int, default=len(NAME_LENGTHS),
                    help="rounds, each with its own topic-name length, every listener in each; medians are printed")
    ap.add_argument("--idle", type=int, default=500, help="idle TLS connections for the memory figure (0: skip)")
    ap.add_argument("--cold", action="store_true",
                    help="time each client's connection set-up (TCP, TLS, SASL) inside the case too")
    args = ap.parse_args()
    print(f"loadavg before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="samsa-bench-sec-") as d:
        proc, ports, pki = start_broker(Path(d))
        try:
            protos = ("PLAINTEXT", "SSL", "SASL_SSL")
            runs: dict[str, list[tuple[float, ...]]] = {p: [] for p in protos}
            for proto in protos:  # warm-up: connections, page cache, allocator; not counted
                throughput(conf_for(proto, ports, pki), max(args.n // 5, 1000), args.size, proc.pid, args.cold)
            lengths = [NAME_LENGTHS[i % len(NAME_LENGTHS)] for i in range(args.repeat)]
            for length in lengths:  # interleaved, so a burst of load hits every listener alike
                for proto in protos:
                    runs[proto].append(throughput(conf_for(proto, ports, pki), args.n, args.size, proc.pid, args.cold,
                                                  length))
                    print(f"  {proto:<10} produce {runs[proto][-1][0]:7.1f} MB/s  consume {runs[proto][-1][1]:7.1f} MB/s"
                          f"  (topic name: {length} characters)", flush=True)
            rows = [(proto, *(statistics.median(r[i] for r in runs[proto]) for i in range(6))) for proto in protos]
            base_p, base_c = rows[0][1], rows[0][2]
            print(f"{'listener':<12} {'produce MB/s':>13} {'x PLAINTEXT':>12} {'consume MB/s':>13} {'x PLAINTEXT':>12}"
                  f" {'broker CPU ms/MB produce':>25} {'consume':>8} {'client CPU ms/MB produce':>25} {'consume':>8}")
            for proto, p, c, pc, cc, po, co in rows:
                print(f"{proto:<12} {p:>13.1f} {p / base_p:>12.2f} {c:>13.1f} {c / base_c:>12.2f} {pc:>25.2f} {cc:>8.2f}"
                      f" {po:>25.2f} {co:>8.2f}")
            for proto in protos[1:]:  # each round's ratio, paired: same name length, same minute
                pairs = ", ".join(f"{length}: {r[0] / b[0]:.2f}"
                                  for length, r, b in zip(lengths, runs[proto], runs["PLAINTEXT"], strict=True))
                print(f"{proto} produce x PLAINTEXT by topic-name length: {pairs}")
            whole = {p: [whole_record_produce(p, ports, pki, args.n, args.size, proc.pid) for _ in range(args.repeat)]
                     for p in ("PLAINTEXT", "SSL")}
            med = {p: [statistics.median(r[i] for r in whole[p]) for i in range(3)] for p in whole}
            print(f"produce from a client that sends whole TLS records (Produce v7, ~1 MB requests, {IN_FLIGHT} in flight):")
            for p, (rate, bcpu, ccpu) in med.items():
                print(f"  {p:<10} {rate:7.1f} MB/s  x PLAINTEXT {rate / med['PLAINTEXT'][0]:.2f}  "
                      f"broker CPU {bcpu:.2f} ms/MB  client CPU {ccpu:.2f} ms/MB")
            for mech in ("PLAIN", "SCRAM-SHA-512"):
                rate = connections_per_second(ports["SASL_PLAINTEXT"], mech, args.connections)
                print(f"new authenticated connections/s, {mech}: {rate:.0f}")
            if args.idle:
                per = memory_per_tls_connection(proc.pid, ports["SSL"], pki, args.idle)
                print(f"broker memory per idle TLS connection ({args.idle} connections): {per:.0f} KiB")
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"loadavg after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
