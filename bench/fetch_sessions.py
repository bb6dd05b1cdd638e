#!/usr/bin/env python3
"""Broker CPU per Fetch for a consumer of many partitions, with and without fetch sessions (KIP-227).

One consumer follows a topic of ``--partitions`` partitions (1,000 by default) where only
``--active`` partitions get new records between fetches -- the usual shape of a consumer of
many partitions. Two ways of fetching, each for ``--fetches`` requests:

* **full**: every Fetch lists every partition (``session_epoch`` -1), and every answer carries
  every partition, as before sessions and as clients without them (librdkafka) still do;
* **session**: one full fetch opens a session (``session_epoch`` 0), then incremental fetches
  list only the partitions whose fetch offset moved and get back only partitions with news.

Exact frames (kafka-python's message classes, one connection, ``max_wait_ms`` 0 so nothing
waits). Reported per fetch: broker CPU (``/proc/PID/stat``, microseconds), request and response
bytes, and wall time. A script, not a test: nothing here asserts a speed.

    python bench/fetch_sessions.py [--partitions 1000] [--active 10] [--fetches 300]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kafka.protocol.consumer import FetchRequest, FetchResponse  # noqa: E402

from tests.support.brokers import SamsaBroker  # noqa: E402
from tests.support.rawclient import RawClient, build_batch  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
TOPIC = "fetch-sessions"
VERSION = 12


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def fetch_request(offsets: dict[int, int], session_id: int, epoch: int) -> Any:
    T = FetchRequest.FetchTopic
    P = T.FetchPartition
    topics = [T(topic=TOPIC, partitions=[
        P(partition=p, current_leader_epoch=-1, fetch_offset=o, last_fetched_epoch=-1, log_start_offset=-1,
          partition_max_bytes=1 << 20) for p, o in offsets.items()])] if offsets else []
    return FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 24, isolation_level=0,
                        session_id=session_id, session_epoch=epoch, topics=topics, forgotten_topics_data=[],
                        rack_id="")


def run(c: RawClient, pid: int, partitions: int, active: int, fetches: int, sessions: bool) -> dict[str, float]:
    offsets = {p: 0 for p in range(partitions)}
    batch = build_batch([(None, b"x" * 100, [])])
    session_id, epoch = 0, (0 if sessions else -1)
    cpu = wall = req_bytes = resp_bytes = 0.0
    sent: dict[int, int] = {}  # the fetch offsets the session knows
    for i in range(fetches + 1):
        for p in range(active):  # new data on a few partitions (not timed)
            c.produce(TOPIC, (i * active + p) % partitions, batch)
        if sessions and session_id:
            changed = {p: o for p, o in offsets.items() if o != sent.get(p)}
            req = fetch_request(changed, session_id, epoch)
        else:
            req = fetch_request(offsets, session_id if sessions else 0, epoch)
        sent = dict(offsets)
        corr = i + 1
        req.with_header(correlation_id=corr, client_id="bench-fetch-sessions")
        frame = req.encode(version=VERSION, header=True, framed=True)
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        c.send_frame(frame)
        payload = c.recv_frame()
        t1, c1 = time.perf_counter(), cpu_seconds(pid)
        resp = FetchResponse.decode(payload, version=VERSION, header=True)
        if i:  # the first (full) fetch of each mode is a warm-up
            cpu += c1 - c0
            wall += t1 - t0
            req_bytes += len(frame)
            resp_bytes += len(payload) + 4
        assert resp.error_code == 0, resp
        if sessions:
            session_id = resp.session_id
            epoch = epoch + 1 if epoch > 0 else 1
        for t in resp.responses:
            for p in t.partitions:
                if p.records:
                    offsets[p.partition_index] = p.high_watermark
    return {"cpu_us": cpu / fetches * 1e6, "wall_ms": wall / fetches * 1e3,
            "request_bytes": req_bytes / fetches, "response_bytes": resp_bytes / fetches}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--active", type=int, default=10, help="partitions that get a new batch before each fetch")
    ap.add_argument("--fetches", type=int, default=300)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fetch-sessions-") as tmp:
        b = SamsaBroker(Path(tmp) / "data", Path(tmp) / "samsa.log",
                        overrides={"num.partitions": a.partitions, "auto.create.topics.enable": "true"})
        b.start(timeout=60)
        try:
            assert b.proc is not None
            with RawClient(b.host, b.port, timeout=60) as c:
                from kafka.protocol.metadata import MetadataRequest, MetadataResponse

                T = MetadataRequest.MetadataRequestTopic
                c.roundtrip(MetadataRequest(topics=[T(name=TOPIC, topic_id=None)], allow_auto_topic_creation=True),
                            12, MetadataResponse)
                rows = {mode: run(c, b.proc.pid, a.partitions, a.active, a.fetches, mode == "session")
                        for mode in ("full", "session")}
        finally:
            b.kill()
    print(f"{a.partitions} partitions, {a.active} with a new batch before each fetch, {a.fetches} fetches per mode "
          f"(Fetch v{VERSION}, max_wait_ms 0)")
    print(f"{'mode':<8} {'broker CPU us/fetch':>20} {'wall ms/fetch':>14} {'request B':>10} {'response B':>11}")
    for mode, r in rows.items():
        print(f"{mode:<8} {r['cpu_us']:>20,.0f} {r['wall_ms']:>14.2f} {r['request_bytes']:>10,.0f} "
              f"{r['response_bytes']:>11,.0f}")
    print(f"session/full broker CPU per fetch: {rows['session']['cpu_us'] / rows['full']['cpu_us']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
