"""The ``metrics.listener`` endpoint against a real broker process, real clients and real HTTP.

Each test starts ``python -m broker`` with ``metrics.listener=http://127.0.0.1:<free port>``,
drives it with stock clients (kafka-python, confluent-kafka) or raw Kafka requests, scrapes
``/metrics`` over HTTP and parses the text with ``prometheus_client.parser``. Counters must move
by exactly what was produced and fetched (messages by the count sent, bytes by the bytes the log
grew and the bytes a raw Fetch returned), lag must equal the high watermark minus the committed
offset, and the endpoint must keep answering while a client hammers the Kafka listener and
after malformed HTTP.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, NewTopic
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families

from broker.metrics.stats import RequestTimer
from tests.support.brokers import REPO_ROOT, BrokerProcess
from tests.support.metrics import scrape, value, values
from tests.support.net import api_versions_v0, free_port, wait_until
from tests.support.rawclient import RawClient

pytestmark = pytest.mark.timeout(180)

@pytest.fixture
def metered(broker_factory: Callable[..., BrokerProcess]) -> tuple[BrokerProcess, int]:
    port = free_port()
    b = broker_factory({"metrics.listener": f"http://127.0.0.1:{port}"})
    return b, port


def create_topic(bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs or {})])
    finally:
        admin.close()


def test_produce_and_fetch_counters_move_by_exactly_what_was_sent(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    create_topic(b.bootstrap, "orders", 3)
    before = scrape(port)
    assert value(before, "kafka_server_brokertopicmetrics_messagesin_total") == 0

    # confluent-kafka: lz4 batches of many records (counted per batch, from its offsets)
    p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": "lz4", "linger.ms": 20})
    for i in range(1000):
        p.produce("orders", value=b"v%05d" % i, key=b"k%d" % (i % 7))
    assert p.flush(30) == 0
    # kafka-python: one record per request
    kp = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=0)
    for i in range(37):
        kp.send("orders", value=b"x" * 50, partition=i % 3).get(timeout=10)
    kp.close()

    s = scrape(port)
    sent = 1037
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="orders") == sent
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total") == sent
    sizes = {lab: v for lab, v in values(s, "kafka_log_log_size").items() if ("topic", "orders") in lab}
    assert len(sizes) == 3
    log_bytes = sum(sizes.values())
    # The log stores batches exactly as produced, so bytes in equal the bytes the log holds.
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total", topic="orders") == log_bytes
    assert value(s, "kafka_server_brokertopicmetrics_bytesin_total") == log_bytes
    ends = {dict(lab)["partition"]: v for lab, v in values(s, "kafka_log_log_logendoffset").items()
            if ("topic", "orders") in lab}
    assert sum(ends.values()) == sent
    assert value(s, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="orders") == 0
    produce_reqs = sum(v for lab, v in values(s, "kafka_network_requestmetrics_requests_total").items()
                       if ("request", "Produce") in lab)
    assert produce_reqs >= 37
    assert value(s, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produce_reqs
    assert value(s, "kafka_network_requestmetrics_localtimems_count", request="Produce") == produce_reqs
    assert value(s, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") == produce_reqs
    assert value(s, "kafka_server_brokertopicmetrics_totalproducerequests_total", topic="orders") >= 37

    # A raw Fetch per partition returns every batch once: bytes out are exactly the log's bytes.
    fetched = 0
    with RawClient(b.host, b.port) as rc:
        for part in range(3):
            code, hw, data = rc.fetch_raw("orders", part, 0, max_bytes=8 << 20)
            assert code == 0 and hw == ends[str(part)]
            fetched += len(data)
    assert fetched == log_bytes
    s2 = scrape(port)
    assert value(s2, "kafka_server_brokertopicmetrics_bytesout_total", topic="orders") == fetched
    assert value(s2, "kafka_server_brokertopicmetrics_bytesout_total") == fetched
    assert value(s2, "kafka_server_brokertopicmetrics_totalfetchrequests_total", topic="orders") == 3
    assert value(s2, "kafka_server_brokertopicmetrics_failedfetchrequests_total", topic="orders") == 0
    # Scrapes themselves count nothing.
    assert value(scrape(port), "kafka_server_brokertopicmetrics_bytesout_total") == fetched


def test_failed_produce_is_counted_per_topic(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    create_topic(b.bootstrap, "strict", 1, {"min.insync.replicas": "2"})
    kp = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", retries=0, enable_idempotence=False)
    with pytest.raises(KafkaError):
        kp.send("strict", b"refused").get(timeout=10)  # NOT_ENOUGH_REPLICAS: one broker < 2
    kp.send("strict", b"nope", partition=0)
    kp.close()
    s = scrape(port)
    failed = value(s, "kafka_server_brokertopicmetrics_failedproducerequests_total", topic="strict")
    assert failed == 2
    assert value(s, "kafka_server_brokertopicmetrics_failedproducerequests_total") == failed
    # RequestMetrics ErrorsPerSec: the two refusals by their Kafka error name, beside the NONEs.
    assert value(s, "kafka_network_requestmetrics_errors_total", request="Produce",
                 error="NOT_ENOUGH_REPLICAS") == 2
    assert value(s, "kafka_network_requestmetrics_errors_total", request="Metadata", error="NONE") >= 1
    with RawClient(b.host, b.port) as rc:  # a Fetch past the end: OFFSET_OUT_OF_RANGE, counted once
        code, _hw, _data = rc.fetch_raw("strict", 0, 1000)
        assert code == 1  # OFFSET_OUT_OF_RANGE
        rc.fetch_raw("strict", 0, 0)
    s = scrape(port)
    assert value(s, "kafka_network_requestmetrics_errors_total", request="Fetch", error="OFFSET_OUT_OF_RANGE") == 1
    assert value(s, "kafka_network_requestmetrics_errors_total", request="Fetch", error="NONE") >= 3
    assert ("kafka_network_requestmetrics_errors_total",
            frozenset({("request", "FetchConsumer"), ("error", "NONE")})) not in s
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="strict") == 0
    assert value(s, "kafka_log_log_logendoffset", topic="strict", partition="0") == 0
    # A made-up topic name never becomes a label.
    assert not any(("topic", "no-such-topic") in lab for (_n, lab) in s)


def test_consumer_lag_matches_committed_offsets(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    create_topic(b.bootstrap, "events", 2)
    kp = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(30):
        kp.send("events", b"e%d" % i, partition=0 if i < 20 else 1)
    kp.flush()
    kp.close()
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="billing", enable_auto_commit=False)
    tp0, tp1 = TopicPartition("events", 0), TopicPartition("events", 1)
    c.commit({tp0: OffsetAndMetadata(7, "", -1), tp1: OffsetAndMetadata(10, "", -1)})
    c.close()

    s = scrape(port)
    assert value(s, "kafka_consumergroup_current_offset", consumergroup="billing", topic="events", partition="0") == 7
    assert value(s, "kafka_consumergroup_current_offset", consumergroup="billing", topic="events", partition="1") == 10
    assert value(s, "kafka_consumergroup_lag", consumergroup="billing", topic="events", partition="0") == 20 - 7
    assert value(s, "kafka_consumergroup_lag", consumergroup="billing", topic="events", partition="1") == 0
    assert value(s, "kafka_consumergroup_lag_sum", consumergroup="billing", topic="events") == 13
    assert value(s, "kafka_coordinator_group_groupmetadatamanager_numgroups") == 1
    assert value(s, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") == 1
    assert value(s, "kafka_coordinator_group_groupmetadatamanager_numoffsets") == 2

    # A subscribed consumer in a stable group that reads to the end: lag goes to 0.
    c = KafkaConsumer("events", bootstrap_servers=b.bootstrap, group_id="billing", enable_auto_commit=False,
                      auto_offset_reset="earliest")
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 13 and time.monotonic() < deadline:
        seen += sum(len(v) for v in c.poll(timeout_ms=500).values())
    assert seen == 13
    s = scrape(port)
    assert value(s, "kafka_coordinator_group_groupmetadatamanager_numgroupsstable") == 1
    assert value(s, "kafka_consumergroup_members", consumergroup="billing") == 1
    assert value(s, "kafka_server_group_coordinator_metrics_group_rebalance_count") >= 1
    c.commit()
    s = scrape(port)
    assert value(s, "kafka_consumergroup_lag_sum", consumergroup="billing", topic="events") == 0
    assert value(s, "kafka_consumergroup_current_offset", consumergroup="billing", topic="events", partition="0") == 20
    c.close()


def test_state_gauges_and_process_metrics(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    create_topic(b.bootstrap, "g", 4)
    s = scrape(port)
    parts = value(s, "kafka_server_replicamanager_partitioncount")
    assert parts >= 4  # plus the internal topics' partitions
    assert value(s, "kafka_server_replicamanager_leadercount") == parts
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(s, "kafka_server_replicamanager_offlinereplicacount") == 0
    assert value(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert ("kafka_controller_kafkacontroller_activecontrollercount", frozenset()) in s
    for p in range(4):
        assert value(s, "kafka_log_log_logstartoffset", topic="g", partition=str(p)) == 0
        assert value(s, "kafka_log_log_numlogsegments", topic="g", partition=str(p)) == 1
    assert value(s, "process_resident_memory_bytes") > 10 << 20
    assert value(s, "process_open_fds") > 0
    assert ("process_cpu_seconds_total", frozenset()) in s
    assert ("samsa_event_loop_lag_seconds", frozenset()) in s
    assert ("kafka_log_logcleaner_deadthreadcount", frozenset()) in s
    assert value(s, "kafka_log_logcleaner_deadthreadcount") == 0
    assert ("samsa_transaction_coordinator_oldest_open_transaction_age_seconds", frozenset()) in s
    # Connections per listener: the scrape does not count, a Kafka client does.
    base = value(s, "kafka_server_socketservermetrics_connection_count", listener="PLAINTEXT")
    socks = [socket.create_connection((b.host, b.port)) for _ in range(3)]
    try:
        assert wait_until(lambda: value(scrape(port), "kafka_server_socketservermetrics_connection_count",
                                        listener="PLAINTEXT") == base + 3, 10)
    finally:
        for sk in socks:
            sk.close()
    assert wait_until(lambda: value(scrape(port), "kafka_server_socketservermetrics_connection_count",
                                    listener="PLAINTEXT") == base, 10)
    # ?name[]= restricts the families, as prometheus-client's own server does.
    only = scrape(port, "/metrics?name[]=kafka_server_replicamanager_leadercount")
    assert set(only) == {("kafka_server_replicamanager_leadercount", frozenset())}


def test_endpoint_answers_while_a_client_hammers_the_broker(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    create_topic(b.bootstrap, "hammer", 2)
    stop = threading.Event()
    acked = [0]
    errors: list[Any] = []

    def hammer() -> None:
        # Idempotent: a batch retried under load is answered as a duplicate, never appended twice.
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 1, "batch.num.messages": 50,
                      "enable.idempotence": True})

        def dr(err: Any, _msg: Any) -> None:
            if err is None:
                acked[0] += 1
            else:
                errors.append(err)

        while not stop.is_set():
            try:
                p.produce("hammer", b"y" * 200, on_delivery=dr)
            except BufferError:
                p.poll(0.05)
            p.poll(0)
        p.flush(30)

    t = threading.Thread(target=hammer, daemon=True)
    t.start()
    try:
        assert wait_until(lambda: acked[0] > 500, 60)
        last = -1.0
        for _ in range(15):
            t0 = time.monotonic()
            s = scrape(port, timeout=10)
            assert time.monotonic() - t0 < 10
            n = value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="hammer")
            assert n >= last
            last = n
        assert wait_until(lambda: value(scrape(port), "kafka_server_brokertopicmetrics_messagesin_total",
                                        topic="hammer") > last, 30)
    finally:
        stop.set()
        t.join(60)
    assert not errors
    final = scrape(port)
    assert value(final, "kafka_server_brokertopicmetrics_messagesin_total", topic="hammer") == acked[0]
    ends = sum(v for lab, v in values(final, "kafka_log_log_logendoffset").items() if ("topic", "hammer") in lab)
    assert ends == acked[0]


def _raw_http(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sk:
        sk.sendall(data)
        chunks = []
        while True:
            try:
                chunk = sk.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_malformed_http_gets_4xx_and_the_broker_carries_on(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    bad = _raw_http(port, b"NONSENSE\r\n\r\n")
    assert bad.startswith(b"HTTP/1.1 400 ") and bad.endswith(b"\r\n\r\n400 Bad Request\n")  # plain text
    too_long = _raw_http(port, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n")
    assert too_long.startswith(b"HTTP/1.1 414 ") and too_long.endswith(b"\r\n\r\n414 URI Too Long\n")
    assert _raw_http(port, b"GET /metrics?" + b"q=1&" * 5000 + b" HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 414 ")
    assert _raw_http(port, b"GET /metrics HTTP/1.1\r\n" + b"X-A: b\r\n" * 1000 + b"\r\n").startswith(
        b"HTTP/1.1 431 ")
    assert _raw_http(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").startswith(
        b"HTTP/1.1 405 ")
    assert _raw_http(port, b"GET /nope HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.1 404 ")
    assert _raw_http(port, b"\x00\xff\x16\x03\x01garbage\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    # Half a request, then hang up: nothing to answer, nothing breaks.
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sk:
        sk.sendall(b"GET /metr")
    head = _raw_http(port, b"HEAD /metrics HTTP/1.0\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")
    # Keep-alive: two scrapes on one connection.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for _ in range(2):
        conn.request("GET", "/metrics")
        r = conn.getresponse()
        assert r.status == 200 and b"kafka_server_replicamanager_partitioncount" in r.read()
    conn.close()
    assert scrape(port)
    assert api_versions_v0(b.host, b.port)
    assert "Traceback" not in b.log_text()


def test_metrics_port_in_use_logs_an_error_and_kafka_still_serves(
        broker_factory: Callable[..., BrokerProcess]) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        b = broker_factory({"metrics.listener": f"http://127.0.0.1:{port}"})
        assert api_versions_v0(b.host, b.port)
        kp = KafkaProducer(bootstrap_servers=b.bootstrap)
        kp.send("still-works", b"v").get(timeout=10)
        kp.close()
        assert f"Cannot open metrics.listener http://127.0.0.1:{port}" in b.log_text()
    finally:
        blocker.close()


def test_metrics_listener_is_a_broker_config_off_by_default(broker_factory: Callable[..., BrokerProcess]) -> None:
    b = broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        res = admin.describe_configs([ConfigResource("broker", "0", {"metrics.listener": None})],
                                     config_filter="all")
    finally:
        admin.close()
    entry = res["broker"]["0"]["metrics.listener"]
    assert entry["value"] == "" and entry["config_source"] == "DEFAULT_CONFIG" and entry["read_only"]
    assert "Metrics endpoint listening" not in b.log_text()


def test_invalid_metrics_listener_is_refused_at_start(tmp_path: Any) -> None:
    r = subprocess.run([sys.executable, "-m", "broker", "--override", f"log.dirs={tmp_path}",
                        "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                        "--override", "metrics.listener=ftp://127.0.0.1:80"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "Invalid metrics.listener 'ftp://127.0.0.1:80'; expected http://HOST:PORT" in r.stdout + r.stderr


# --- RequestTimer: local vs remote time, without a broker -------------------------------------

def test_request_timer_splits_running_from_waiting() -> None:
    async def handler(busy: float, wait: float) -> str:
        t = time.perf_counter()
        while time.perf_counter() - t < busy:
            pass
        await asyncio.sleep(wait)
        return "done"

    async def main() -> None:
        timer = RequestTimer(time.perf_counter())
        t0 = time.perf_counter()
        assert await timer.run(handler(0.05, 0.2)) == "done"
        total = time.perf_counter() - t0
        # The busy part is local, the sleep remote; together they are the handler's whole time
        # (bounds only from below: a loaded machine may preempt either part).
        assert timer.local >= 0.05
        assert timer.remote >= 0.2
        assert timer.local + timer.remote <= total

        timer = RequestTimer(time.perf_counter())
        task = asyncio.ensure_future(timer.run(handler(0, 10)))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        async def boom() -> None:
            await asyncio.sleep(0)
            raise ValueError("x")

        with pytest.raises(ValueError):
            await RequestTimer(time.perf_counter()).run(boom())

    asyncio.run(main())


def test_grafana_dashboard_only_graphs_metrics_the_broker_serves(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    dash = json.loads((REPO_ROOT / "broker" / "metrics" / "grafana-dashboard.json").read_text())
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    exprs = [t["expr"] for p in panels for t in p.get("targets", [])]
    assert len(exprs) >= 20
    assert {v["name"] for v in dash["templating"]["list"]} >= {"datasource", "instance"}
    # Serve every family: a request of each kind and a group with a committed offset.
    create_topic(b.bootstrap, "dash", 1)
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="dash-g", enable_auto_commit=False)
    c.commit({TopicPartition("dash", 0): OffsetAndMetadata(0, "", -1)})
    c.close()
    body = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body.request("GET", "/metrics")
    text = body.getresponse().read().decode()
    body.close()
    known: set[str] = set()
    for fam in text_string_to_metric_families(text):
        known |= {fam.name, *(fam.name + s for s in ("_total", "_bucket", "_sum", "_count"))}
        known |= {s.name for s in fam.samples}
    used = {m for e in exprs for m in re.findall(r"\b((?:kafka|samsa|process)_[a-z0-9_]+)", e)}
    assert used, exprs
    assert used <= known, sorted(used - known)


def test_fetch_long_poll_is_remote_time_not_local_time(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    create_topic(b.bootstrap, "quiet", 1)
    with RawClient(b.host, b.port) as rc:
        t0 = time.monotonic()
        code, hw, data = rc.fetch_raw("quiet", 0, 0)  # nothing to read: parks for max_wait_ms=500
        waited_ms = 1000 * (time.monotonic() - t0)
    assert code == 0 and hw == 0 and data == b""
    s = scrape(port)
    assert value(s, "kafka_network_requestmetrics_remotetimems_count", request="Fetch") == 1
    assert value(s, "kafka_network_requestmetrics_remotetimems_count", request="FetchConsumer") == 1
    assert ("kafka_network_requestmetrics_remotetimems_count", frozenset({("request", "FetchFollower")})) not in s
    remote = value(s, "kafka_network_requestmetrics_remotetimems_sum", request="Fetch")
    local = value(s, "kafka_network_requestmetrics_localtimems_sum", request="Fetch")
    total = value(s, "kafka_network_requestmetrics_totaltimems_sum", request="Fetch")
    # The handler lasted max_wait_ms; what it spent parked is remote time (all of it but the
    # reads before and after, which a loaded machine may stretch). The broker's total ends after
    # its write returns, which may be after the client has the answer: no bound by waited_ms.
    assert 495 <= remote + local <= total
    assert remote >= 250 and local < remote and remote <= waited_ms
    assert value(s, "kafka_network_requestmetrics_remotetimems_bucket", request="Fetch", le="100.0") == 0
    assert value(s, "kafka_network_requestmetrics_remotetimems_bucket", request="Fetch", le="+Inf") == 1
    assert value(s, "kafka_network_requestmetrics_throttletimems_sum", request="Fetch") == 0


def test_many_partitions_render_in_chunks_as_one_family_each(metered: tuple[BrokerProcess, int]) -> None:
    from broker.metrics.collectors import CHUNK

    b, port = metered
    n = 2 * CHUNK + 37
    create_topic(b.bootstrap, "wide", n)
    c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="wide-g", enable_auto_commit=False)
    c.commit({TopicPartition("wide", i): OffsetAndMetadata(0, "", -1) for i in range(n)})
    c.close()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    for fam in ("kafka_log_log_size", "kafka_log_log_logendoffset", "kafka_consumergroup_lag"):
        assert text.count(f"# HELP {fam} ") == 1 and text.count(f"# TYPE {fam} ") == 1
    fams = [f for f in text_string_to_metric_families(text) if f.name == "kafka_log_log_size"]
    assert len(fams) == 1
    wide = {s.labels["partition"] for s in fams[0].samples if s.labels["topic"] == "wide"}
    assert wide == {str(i) for i in range(n)}
    lags = [s for f in text_string_to_metric_families(text) if f.name == "kafka_consumergroup_lag"
            for s in f.samples if s.labels["consumergroup"] == "wide-g"]
    assert len(lags) == n and all(s.value == 0 for s in lags)


def test_quota_throttle_is_throttle_time(broker_factory: Callable[..., BrokerProcess]) -> None:
    port = free_port()
    b = broker_factory({"metrics.listener": f"http://127.0.0.1:{port}", "quota.window.num": 2,
                        "quota.window.size.seconds": 1})
    create_topic(b.bootstrap, "slow", 1)
    r = subprocess.run([sys.executable, "-m", "broker.cli", "configs", "--bootstrap-server", b.bootstrap,
                        "--alter", "--entity-type", "clients", "--entity-name", "slowpoke",
                        "--add-config", "producer_byte_rate=20000"],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    throttles: list[int] = []
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "slowpoke", "linger.ms": 5,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    for _ in range(40):  # 40 x 5 KB in a burst: ~10x the quota's 20 KB/s
        p.produce("slow", b"z" * 5000)
        p.poll(0)
    assert p.flush(60) == 0
    assert wait_until(lambda: (p.poll(0.1), bool(throttles))[1], 30)
    s = scrape(port)
    throttled = value(s, "kafka_network_requestmetrics_throttletimems_sum", request="Produce")
    assert throttled > 0
    # Every throttle a client was told of is in the histogram (it may also hold ones not yet polled).
    assert throttled >= sum(throttles) - 1
    assert value(s, "kafka_network_requestmetrics_throttletimems_count", request="Produce") == \
        value(s, "kafka_network_requestmetrics_totaltimems_count", request="Produce")


def test_transaction_coordinator_metrics_follow_a_transaction(metered: tuple[BrokerProcess, int]) -> None:
    b, port = metered
    create_topic(b.bootstrap, "txn-t", 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "tx-metrics", "linger.ms": 0})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-t", b"in a transaction")
    assert p.flush(30) == 0
    s = scrape(port)
    assert value(s, "samsa_transaction_coordinator_transactional_ids", state="Ongoing") == 1
    assert value(s, "samsa_transaction_coordinator_oldest_open_transaction_age_seconds") >= 0
    p.commit_transaction(30)

    def committed() -> bool:
        s = scrape(port)
        return (s.get(("samsa_transaction_coordinator_transactional_ids",
                       frozenset({("state", "CompleteCommit")}))) == 1
                and value(s, "samsa_transaction_coordinator_oldest_open_transaction_age_seconds") == 0)

    assert wait_until(committed, 30)
    # The data record and the commit marker: the log end moved by 2, messages in by 1.
    s = scrape(port)
    assert value(s, "kafka_log_log_logendoffset", topic="txn-t", partition="0") == 2
    assert value(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="txn-t") == 1


def test_lag_of_a_kip848_consumer_group(broker_factory: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTopicPartition

    port = free_port()
    b = broker_factory({"metrics.listener": f"http://127.0.0.1:{port}",
                        "group.consumer.heartbeat.interval.ms": 1000,
                        "group.consumer.min.heartbeat.interval.ms": 1000})
    create_topic(b.bootstrap, "k848", 1)
    kp = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(15):
        kp.send("k848", b"m%d" % i, partition=0)
    kp.flush()
    kp.close()
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "new-protocol", "group.protocol": "consumer",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["k848"])
        got = 0
        deadline = time.monotonic() + 60
        while got < 15 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got += 1
        assert got == 15
        c.commit(offsets=[CTopicPartition("k848", 0, 10)], asynchronous=False)
        s = scrape(port)
        assert value(s, "kafka_consumergroup_current_offset", consumergroup="new-protocol", topic="k848",
                     partition="0") == 10
        assert value(s, "kafka_consumergroup_lag", consumergroup="new-protocol", topic="k848", partition="0") == 5
        assert value(s, "kafka_consumergroup_members", consumergroup="new-protocol") == 1
        consumer_groups = sum(v for lab, v in values(s, "samsa_group_coordinator_groups").items()
                              if ("protocol", "consumer") in lab)
        assert consumer_groups == 1
    finally:
        c.close()


def test_log_cleaner_gauges_follow_a_cleaning_pass(broker_factory: Callable[..., BrokerProcess]) -> None:
    port = free_port()
    b = broker_factory({"metrics.listener": f"http://127.0.0.1:{port}", "log.cleaner.backoff.ms": "300"})
    s = scrape(port)
    assert value(s, "kafka_log_logcleaner_max_clean_time_secs") == 0  # no pass yet
    assert value(s, "kafka_log_logcleaner_max_buffer_utilization_percent") == 0
    assert 0 <= value(s, "kafka_log_logcleanermanager_time_since_last_run_ms") < 60_000
    create_topic(b.bootstrap, "compacted", 1, {"cleanup.policy": "compact", "segment.bytes": "16384",
                                               "min.cleanable.dirty.ratio": "0.01"})
    kp = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=5)
    for i in range(4000):
        kp.send("compacted", key=b"key-%d" % (i % 50), value=b"value-%05d" % i)
    kp.flush()
    kp.close()

    def cleaned() -> dict[Any, float] | None:
        s = scrape(port)
        return s if value(s, "samsa_log_cleaner_passes_total") >= 1 else None

    deadline = time.monotonic() + 60
    while (s2 := cleaned()) is None:
        assert time.monotonic() < deadline, "no cleaning pass within 60 s"
        time.sleep(0.3)
    assert value(s2, "kafka_log_logcleaner_max_clean_time_secs") > 0
    # 50 keys of 16-byte slots in a 128 MiB buffer: a tiny but non-zero share
    util = value(s2, "kafka_log_logcleaner_max_buffer_utilization_percent")
    assert 0 < util < 1, util
    # most records were superseded, so the pass wrote back far less than it read
    recopy = value(s2, "kafka_log_logcleaner_cleaner_recopy_percent")
    assert 0 < recopy < 50, recopy
    # the cleaner wakes every log.cleaner.backoff.ms=300
    assert value(s2, "kafka_log_logcleanermanager_time_since_last_run_ms") < 5000
