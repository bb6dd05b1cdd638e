"""Schema Registry throughput and latency: registrations and lookups per second, no client cache.

Starts a Samsa broker with ``schema.registry.listeners`` (or uses ``--registry-url``) and
drives Confluent's REST API over keep-alive HTTP/1.1 connections (http.client, one per worker
thread; no client-side cache, so every call reaches the registry):

1. register: ``--schemas`` distinct Avro schemas, each a new subject (one ``_schemas``
   write read back per registration), by ``--workers`` threads;
2. lookup: ``POST /subjects/{s}`` of registered schemas (parse + fingerprint + match);
3. get by id: ``GET /schemas/ids/{id}`` (what a deserializer asks on a cache miss);
4. lookup at a fixed ``--rate`` (default 200/s): the latency distribution at that load, each
   call timed from when it was due.

Prints calls/s and latency p50, p99, p99.9 and max per phase, and the machine's load.

    python bench/schema_registry.py                         # 500 schemas, 2000 lookups, 4 workers
    python bench/schema_registry.py --registry-url http://127.0.0.1:8081 --workers 8
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.schema_registry import start_registry_broker  # noqa: E402

V1 = "application/vnd.schemaregistry.v1+json"


def schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"Bench{i}", "namespace": "bench",
                       "fields": [{"name": "id", "type": "long"}, {"name": f"f{i}", "type": "string", "default": ""}]})


def run_phase(name: str, url: str, n: int, workers: int,
              call: Callable[[http.client.HTTPConnection, int], None], rate: float = 0.0) -> dict[str, float]:
    """``n`` calls by ``workers`` threads: as fast as they go, or at a fixed ``rate`` per second,
    each call's latency then measured from when it was due (no coordinated omission)."""
    u = urlparse(url)
    lat: list[float] = []
    lock = threading.Lock()
    counter = iter(range(n))
    start = time.perf_counter() + 0.05

    def worker() -> None:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        mine: list[float] = []
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            if rate > 0:
                due = start + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                t0 = due
            else:
                t0 = time.perf_counter()
            call(conn, i)
            mine.append(time.perf_counter() - t0)
        conn.close()
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    lat.sort()

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000

    out = {"calls": len(lat), "per_s": len(lat) / elapsed, "p50_ms": pct(0.5), "p99_ms": pct(0.99),
           "p999_ms": pct(0.999), "max_ms": lat[-1] * 1000}
    print(f"{name:14s} {out['calls']:6d} calls  {out['per_s']:8.1f}/s  p50 {out['p50_ms']:7.2f} ms  "
          f"p99 {out['p99_ms']:7.2f} ms  p99.9 {out['p999_ms']:7.2f} ms  max {out['max_ms']:7.2f} ms")
    return out


def request(conn: http.client.HTTPConnection, method: str, path: str, body: object = None) -> object:
    data = json.dumps(body).encode() if body is not None else None
    conn.request(method, path, body=data, headers={"Content-Type": V1, "Accept": V1} if data else {"Accept": V1})
    resp = conn.getresponse()
    payload = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{method} {path}: HTTP {resp.status} {payload[:200]!r}")
    return json.loads(payload)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--registry-url", help="an existing registry (default: start a broker with one)")
    ap.add_argument("--schemas", type=int, default=500)
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rate", type=float, default=200.0,
                    help="calls/s of the fixed-rate lookup phase (latency at a fixed rate; 0 skips it)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    tmp = None
    broker = None
    url = args.registry_url
    if not url:
        tmp = tempfile.mkdtemp(prefix="sr-bench-")
        broker, reg = start_registry_broker(Path(tmp))
        url = reg.url
    prefix = f"bench-{int(time.time())}"
    ids: dict[int, int] = {}
    try:
        print(f"registry {url}, {args.workers} workers, load average {os.getloadavg()}")

        def register(conn: http.client.HTTPConnection, i: int) -> None:
            doc = request(conn, "POST", f"/subjects/{prefix}-{i}-value/versions", {"schema": schema(i)})
            ids[i] = doc["id"]  # type: ignore[index]

        def lookup(conn: http.client.HTTPConnection, i: int) -> None:
            j = i % args.schemas
            request(conn, "POST", f"/subjects/{prefix}-{j}-value", {"schema": schema(j)})

        def by_id(conn: http.client.HTTPConnection, i: int) -> None:
            request(conn, "GET", f"/schemas/ids/{ids[i % args.schemas]}")

        results = {"register": run_phase("register", url, args.schemas, args.workers, register),
                   "lookup": run_phase("lookup", url, args.lookups, args.workers, lookup),
                   "get-by-id": run_phase("get-by-id", url, args.lookups, args.workers, by_id),
                   **({f"lookup@{args.rate:g}/s": run_phase(f"lookup@{args.rate:g}/s", url, args.lookups,
                                                             max(args.workers, 8), lookup, args.rate)}
                      if args.rate > 0 else {}),
                   "load_average": list(os.getloadavg())}
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    finally:
        if broker is not None:
            broker.kill()
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
