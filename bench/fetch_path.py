"""Fetch serving path: pread + write vs sendfile(2), measured on the broker side.

Starts a Samsa broker three ways (uvloop with pread+write, the default asyncio loop with
pread+write, the default loop with sendfile), fills a topic, then has a raw-socket client
issue Fetch requests for the same large region again and again (page cache hot) and discard
the answers, so the figure is how fast the broker can serve fetched bytes. Prints MB/s and
requests/s per mode and the ratio to the first.

    python bench/fetch_path.py [--mb 64] [--fetch-mb 8] [--seconds 5]
"""

from __future__ import annotations

import argparse
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kafka.protocol.consumer import FetchRequest  # noqa: E402

from tests.support.net import free_port, wait_until  # noqa: E402


def start(mode: str, data: Path, port: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    args = [sys.executable, "-m", "broker", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={data}"]
    if mode != "uvloop+copy":
        args.append("--no-uvloop")
    args += ["--override", f"fetch.sendfile.enable={'true' if mode == 'asyncio+sendfile' else 'false'}"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)

    def ready() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    wait_until(ready, timeout=20)
    return proc


def fill(bootstrap: str, topic: str, mb: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1000000})
    value = os.urandom(1024)
    for i in range(mb * 1024):
        while True:
            try:
                p.produce(topic, value, key=b"%d" % i)
                break
            except BufferError:
                p.poll(0.01)
    p.flush()


def fetch_request(topic: str, max_bytes: int, corr: int) -> bytes:
    R = FetchRequest[11]
    req = R(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[R.FetchTopic(topic=topic, partitions=[R.FetchTopic.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                partition_max_bytes=max_bytes)])], forgotten_topics_data=[], rack_id="")
    req.with_header(correlation_id=corr, client_id="bench")
    return bytes(req.encode(header=True, framed=True))


def recv_exact(sock: socket.socket, buf: memoryview, n: int) -> None:
    got = 0
    while got < n:
        k = sock.recv_into(buf[got:n])
        if not k:
            raise ConnectionError("closed")
        got += k


def measure(port: int, topic: str, fetch_bytes: int, seconds: float) -> tuple[float, float]:
    sock = socket.create_connection(("127.0.0.1", port))
    buf = memoryview(bytearray(fetch_bytes + 1_000_000))
    req = fetch_request(topic, fetch_bytes, 1)
    total = n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        sock.sendall(req)
        recv_exact(sock, buf, 4)
        size = struct.unpack(">i", buf[:4])[0]
        recv_exact(sock, buf, size)
        total += size + 4
        n += 1
    dt = time.perf_counter() - t0
    sock.close()
    return total / dt / 1e6, n / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=64, help="MiB to produce")
    ap.add_argument("--fetch-kb", type=int, nargs="+", default=[16, 1024, 8192],
                    help="partition_max_bytes per Fetch, KiB (one column each)")
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    rows = []
    for mode in ("uvloop+copy", "asyncio+copy", "asyncio+sendfile"):
        with tempfile.TemporaryDirectory() as d:
            port = free_port("127.0.0.1")
            proc = start(mode, Path(d), port)
            try:
                fill(f"127.0.0.1:{port}", "fetchbench", args.mb)
                row = []
                for kb in args.fetch_kb:
                    measure(port, "fetchbench", kb << 10, 0.5)  # warm up
                    row.append(measure(port, "fetchbench", kb << 10, args.seconds))
            finally:
                proc.terminate()
                proc.wait(10)
            rows.append((mode, row))
    head = "".join(f"{f'{kb} KiB MB/s':>16}{'fetch/s':>9}{'ratio':>7}" for kb in args.fetch_kb)
    print(f"{'mode':<18}{head}")
    for mode, row in rows:
        cells = "".join(f"{mbs:>16.0f}{rps:>9.0f}{mbs / rows[0][1][i][0]:>7.2f}" for i, (mbs, rps) in enumerate(row))
        print(f"{mode:<18}{cells}")


if __name__ == "__main__":
    main()
