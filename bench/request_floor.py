#!/usr/bin/env python3
"""The floor of a request's cost: broker CPU per request for the smallest requests, one at a time.

Every Produce and Fetch pays what any request pays before its own work: the read, the frame, the
header, the handler's dispatch, the response's write and the wake-up of the peer it is written
to. This script starts one Samsa broker and sends, over one raw connection with TCP_NODELAY, one
request at a time (closed loop) of each kind below, then prints the broker's CPU (user + system,
from ``/proc``) per request and the client's round trip:

* ApiVersions v0 (its response lists every API the broker serves);
* Metadata v1 for no topics (the brokers and the controller only).

Usage::

    python bench/request_floor.py                  # 5,000 of each
    python bench/request_floor.py --requests 20000 --no-uvloop

A measuring tool, not a test: nothing here asserts a cost.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import psutil  # noqa: E402

from tests.support.brokers import SamsaBroker  # noqa: E402

REQUESTS = (("ApiVersions v0", 18, 0, b""), ("Metadata v1, no topics", 3, 1, struct.pack(">i", 0)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=5000, help="requests of each kind (default 5000)")
    ap.add_argument("--no-uvloop", action="store_true", help="the broker on asyncio's own event loop")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="samsa-floor-") as tmp:
        broker = SamsaBroker(Path(tmp) / "data", Path(tmp) / "broker.log")
        if args.no_uvloop:
            broker.args = ["--no-uvloop"]
        broker.start()
        try:
            assert broker.proc is not None
            proc = psutil.Process(broker.proc.pid)
            sock = socket.create_connection((broker.host, broker.port))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def roundtrip(api: int, version: int, corr: int, body: bytes) -> None:
                payload = struct.pack(">hhih", api, version, corr, 5) + b"floor" + body
                sock.sendall(struct.pack(">i", len(payload)) + payload)
                (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
                sock.recv(size, socket.MSG_WAITALL)

            for i in range(500):  # warm-up
                roundtrip(18, 0, i, b"")
            print(f"# load {psutil.getloadavg()}, {psutil.cpu_count()} cores, "
                  f"{'asyncio' if args.no_uvloop else 'uvloop'} broker, {args.requests} requests each")
            for name, api, version, body in REQUESTS:
                c0, t0 = proc.cpu_times(), time.perf_counter()
                for i in range(args.requests):
                    roundtrip(api, version, i, body)
                t1, c1 = time.perf_counter(), proc.cpu_times()
                user, system = (c1.user - c0.user) / args.requests, (c1.system - c0.system) / args.requests
                print(f"{name:24s} broker CPU {1e6 * (user + system):6.1f} us/request "
                      f"(user {1e6 * user:5.1f}, system {1e6 * system:5.1f}), "
                      f"round trip {1e6 * (t1 - t0) / args.requests:6.1f} us")
            sock.close()
        finally:
            broker.kill()


if __name__ == "__main__":
    main()
