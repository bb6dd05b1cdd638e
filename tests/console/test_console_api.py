"""The web console's JSON API against a real broker subprocess, with real kafka-python clients.

Every figure the API shows is compared with what the Kafka protocol reports to a stock
client (offsets, partitions, configs, group lag, producers, transactions); writes are checked
by reading the cluster back through the protocol; bad HTTP gets a 4xx and the Kafka listener
keeps serving.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import ConfigResource, OffsetSpec
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.support.brokers import BrokerProcess, make_broker
from tests.support.console import ConsoleHttp, start_console_broker
from tests.support.net import free_port, wait_until


@pytest.fixture(scope="module")
def rw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, ConsoleHttp]]:
    b, http = start_console_broker(tmp_path_factory.mktemp("console-rw"), allow_writes=True)
    try:
        yield b, http
    finally:
        b.kill()


@pytest.fixture(scope="module")
def admin(rw: tuple[BrokerProcess, ConsoleHttp]) -> Iterator[Any]:
    a = KafkaAdminClient(bootstrap_servers=rw[0].bootstrap)
    yield a
    a.close()


def _create(admin: Any, name: str, partitions: int) -> None:
    admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}})


def _ends(admin: Any, topic: str, partitions: int, spec: Any = OffsetSpec.LATEST) -> dict[int, int]:
    res = admin.list_partition_offsets({TopicPartition(topic, p): spec for p in range(partitions)})
    return {tp.partition: r.offset for tp, r in res.items()}


def test_overview_and_topics_match_the_protocol(rw: tuple[BrokerProcess, ConsoleHttp], admin: Any) -> None:
    b, http = rw
    _create(admin, "orders", 3)
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(90):
        p.send("orders", key=f"k{i}".encode(), value=f"v{i}".encode())
    p.flush()
    p.close()
    ends = _ends(admin, "orders", 3)
    assert sum(ends.values()) == 90

    ov = http.get("/api/overview")
    cluster = admin.describe_cluster()
    meta = admin.describe_topics()
    assert ov["cluster_id"] == cluster["cluster_id"]
    assert ov["controller"] == cluster["controller_id"]
    assert [x["id"] for x in ov["brokers"]] == [x["broker_id"] for x in cluster["brokers"]]
    assert ov["brokers"][0]["port"] == b.port and ov["brokers"][0]["kafka_version"]
    assert ov["partitions"] == sum(len(t["partitions"]) for t in meta)
    assert ov["topics"] == sum(1 for t in meta if not t["is_internal"])
    assert ov["under_replicated"] == 0 and ov["offline"] == 0
    assert ov["samsa_version"]

    topics = {t["name"]: t for t in http.get("/api/topics")["topics"]}
    assert topics["orders"]["partitions"] == 3 and topics["orders"]["messages"] == 90
    assert topics["orders"]["size"] > 90 * 4

    t = http.get("/api/topics/orders")
    assert [p["partition"] for p in t["partitions"]] == [0, 1, 2]
    assert {p["partition"]: p["log_end_offset"] for p in t["partitions"]} == ends
    assert all(p["log_start_offset"] == 0 and p["leader"] == 0 and p["replicas"] == [0] and p["isr"] == [0]
               for p in t["partitions"])
    desc = {x["name"]: x for x in admin.describe_topics(["orders"])}
    assert t["topic_id"] and desc["orders"]["topic_id"]
    configs = {c["name"]: c for c in t["configs"]}
    assert configs["cleanup.policy"] == {**configs["cleanup.policy"], "value": "delete", "source": "DEFAULT_CONFIG"}

    admin.alter_configs([ConfigResource("topic", "orders", {"retention.ms": "3600000"})])
    configs = {c["name"]: c for c in http.get("/api/topics/orders")["configs"]}
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"

    status, doc = http.request("GET", "/api/topics/no-such-topic")
    assert status == 404 and "UNKNOWN_TOPIC_OR_PARTITION" in doc["error"]


def test_live_rates_follow_a_producer(rw: tuple[BrokerProcess, ConsoleHttp], admin: Any) -> None:
    b, http = rw
    _create(admin, "rates", 1)
    stop = threading.Event()

    def produce() -> None:
        p = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=5)
        while not stop.is_set():
            for _ in range(50):
                p.send("rates", value=b"x" * 200)
            p.flush()
            time.sleep(0.05)
        p.close()

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        doc = http.wait_for("/api/throughput", lambda d: any(p["bytes_in"] > 1000 and p["messages_in"] > 10
                                                             for p in d["history"]), timeout=120)
        topics = http.wait_for("/api/topics", lambda d: any(x["name"] == "rates" and x["messages_per_sec"] > 0
                                                            for x in d["topics"]), timeout=90)
    finally:
        stop.set()
        t.join(10)
    assert doc["history"][-1]["t"] > time.time() - 60
    assert next(x for x in topics["topics"] if x["name"] == "rates")["messages"] > 0


def test_messages_page_renders_json_text_hex_and_stays_bounded(rw: tuple[BrokerProcess, ConsoleHttp],
                                                                 admin: Any) -> None:
    b, http = rw
    _create(admin, "browse", 1)
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    p.send("browse", key=b"json", value=b'{"b": [1, 2], "a": "<b>x</b>"}', headers=[("trace", b"abc")]).get()
    p.send("browse", key=None, value=b"<script>alert('x')</script>").get()
    p.send("browse", key=b"\x00\xff\x10", value=None, headers=[("bin", b"\x01\x02")]).get()
    p.send("browse", value=b"y" * 100_000).get()
    for i in range(300):
        p.send("browse", value=f"m{i}".encode())
    p.flush()
    t_mid = int(time.time() * 1000)
    time.sleep(0.05)
    last = p.send("browse", value=b"after").get()
    p.close()

    page = http.get("/api/topics/browse/messages?partition=0&offset=0&limit=4")
    m = page["messages"]
    assert [x["offset"] for x in m] == [0, 1, 2, 3]
    assert page["next_offset"] == 4 and page["log_start_offset"] == 0 and page["log_end_offset"] == last.offset + 1
    assert m[0]["key"] == {"format": "text", "text": "json", "size": 4, "truncated": False}
    assert m[0]["value"]["format"] == "json"
    assert json.loads(m[0]["value"]["text"]) == {"b": [1, 2], "a": "<b>x</b>"} and "\n" in m[0]["value"]["text"]
    assert m[0]["headers"] == [{"key": "trace", "value": {"format": "text", "text": "abc", "size": 3,
                                                         "truncated": False}}]
    assert m[1]["key"]["format"] == "null" and m[1]["value"]["text"] == "<script>alert('x')</script>"
    assert m[2]["key"] == {"format": "hex", "text": "00 ff 10", "size": 3, "truncated": False}
    assert m[2]["value"]["format"] == "null" and m[2]["headers"][0]["value"]["text"] == "01 02"
    assert m[3]["value"]["size"] == 100_000 and m[3]["value"]["truncated"]
    assert len(m[3]["value"]["text"]) <= 16 * 1024

    # the default page is the newest one; a timestamp finds the first record at or after it
    newest = http.get("/api/topics/browse/messages?partition=0&limit=10")["messages"]
    assert [x["offset"] for x in newest] == list(range(last.offset - 9, last.offset + 1))
    by_time = http.get(f"/api/topics/browse/messages?partition=0&timestamp={t_mid}&limit=5")
    assert by_time["messages"][0]["offset"] == last.offset
    # past the end: an empty page, quickly; the page size is capped
    t0 = time.monotonic()
    assert http.get("/api/topics/browse/messages?partition=0&offset=99999999&limit=5")["messages"] == []
    assert time.monotonic() - t0 < 10
    big = http.get("/api/topics/browse/messages?partition=0&offset=0&limit=200")
    assert len(big["messages"]) == 200
    status, doc = http.request("GET", "/api/topics/browse/messages?partition=0&limit=100000")
    assert status == 400 and "limit" in doc["error"]
    status, doc = http.request("GET", "/api/topics/browse/messages?partition=7")
    assert status == 404 and "no partition 7" in doc["error"]
    status, doc = http.request("GET", "/api/topics/browse/messages?partition=zero")
    assert status == 400


def _commit(c: Any, offsets: dict[TopicPartition, int], timeout: float = 30) -> None:
    """Commit, retrying while a (load-slowed) rebalance makes the coordinator refuse it."""
    from kafka.errors import CommitFailedError, KafkaError

    deadline = time.monotonic() + timeout
    while True:
        try:
            c.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
            return
        except (CommitFailedError, KafkaError):
            if time.monotonic() > deadline:
                raise
            c.poll(timeout_ms=200, max_records=1)


def test_group_lag_members_and_history(rw: tuple[BrokerProcess, ConsoleHttp], admin: Any) -> None:
    b, http = rw
    _create(admin, "lagging", 2)
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(40):
        p.send("lagging", value=b"v", partition=i % 2)
    p.flush()
    p.close()
    c = KafkaConsumer("lagging", bootstrap_servers=b.bootstrap, group_id="billing", enable_auto_commit=False,
                      auto_offset_reset="earliest")
    try:
        # The group leader (this consumer) assigns from its own metadata: fetch the new topic's
        # first, or it may assign nothing ("No partition metadata for topic lagging") and wait
        # for a metadata refresh minutes away.
        assert c.partitions_for_topic("lagging") == {0, 1}
        assert wait_until(lambda: c.poll(timeout_ms=200, max_records=1) is not None and len(c.assignment()) == 2, 60)
        _commit(c, {TopicPartition("lagging", 0): 5, TopicPartition("lagging", 1): 20})
        g = http.wait_for("/api/groups/billing", lambda d: d["state"] == "Stable" and d["members"] and
                          d["total_lag"] == 15, timeout=60)
        lags = {o["partition"]: o for o in g["offsets"]}
        assert lags[0]["current_offset"] == 5 and lags[0]["log_end_offset"] == 20 and lags[0]["lag"] == 15
        assert lags[1]["lag"] == 0 and g["total_lag"] == 15
        assert sorted(p["partition"] for p in g["members"][0]["partitions"]) == [0, 1]
        assert g["members"][0]["client_id"] and lags[0]["consumer_id"] == g["members"][0]["member_id"]
        listed = {x["group"]: x for x in http.get("/api/groups")["groups"]}
        assert listed["billing"]["state"] == "Stable"
        # the sampler backs off when a sample is slow (a loaded machine): give it a few rounds
        g = http.wait_for("/api/groups/billing", lambda d: any(x["lag"] == 15 for x in d["lag_history"]), timeout=120)
        _commit(c, {TopicPartition("lagging", 0): 20})
        g = http.wait_for("/api/groups/billing", lambda d: d["lag_history"][-1]["lag"] == 0, timeout=120)
        assert g["total_lag"] == 0
    finally:
        c.close()
    status, doc = http.request("GET", "/api/groups/nobody")
    assert status == 404


def test_transactions_and_producers(rw: tuple[BrokerProcess, ConsoleHttp], admin: Any) -> None:
    b, http = rw
    _create(admin, "txns", 1)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="console-tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("txns", value=b"in flight").get()
    try:
        doc = http.wait_for("/api/transactions", lambda d: any(t["transactional_id"] == "console-tx"
                                                               for t in d["transactions"]), timeout=30)
        tx = next(t for t in doc["transactions"] if t["transactional_id"] == "console-tx")
        listed = admin.list_transactions()
        pid = next(x.producer_id for v in listed.values() for x in v if x.transactional_id == "console-tx")
        assert tx["producer_id"] == pid and tx["state"] == "Ongoing" and tx["partitions"] == ["txns-0"]
        prod = [x for x in doc["producers"] if x["topic"] == "txns"]
        assert [x["producer_id"] for x in prod] == [pid] and prod[0]["current_transaction_start_offset"] == 0
    finally:
        p.abort_transaction()
        p.close()


def test_writes_change_the_cluster(rw: tuple[BrokerProcess, ConsoleHttp], admin: Any) -> None:
    b, http = rw
    status, doc = http.post("/api/topics", {"name": "made-here", "partitions": 2, "replication_factor": 1,
                                            "configs": {"retention.ms": "7200000"}})
    assert status == 201, doc
    desc = admin.describe_topics(["made-here"])[0]
    assert len(desc["partitions"]) == 2
    status, doc = http.post("/api/topics", {"name": "made-here", "partitions": 2})
    assert status == 400 and "TOPIC_ALREADY_EXISTS" in doc["error"]

    status, doc = http.post("/api/topics/made-here/partitions", {"count": 4})
    assert status == 200, doc
    assert len(admin.describe_topics(["made-here"])[0]["partitions"]) == 4
    status, doc = http.post("/api/topics/made-here/partitions", {"count": 1})
    assert status == 400 and "INVALID_PARTITIONS" in doc["error"]

    status, doc = http.post("/api/topics/made-here/configs", {"set": {"cleanup.policy": "compact"},
                                                              "delete": ["retention.ms"]})
    assert status == 200, doc
    cfg = {c["name"]: c for c in http.get("/api/topics/made-here")["configs"]}
    assert cfg["cleanup.policy"]["value"] == "compact" and cfg["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"
    status, doc = http.post("/api/topics/made-here/configs", {"set": {"retention.ms": "soon"}})
    assert status == 400 and "INVALID_CONFIG" in doc["error"]

    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(30):  # keyed: the topic is compacted now, and Kafka refuses keyless records there
        p.send("made-here", key=f"k{i}".encode(), value=b"r", partition=0)
    p.flush()
    assert _ends(admin, "made-here", 1) == {0: 30}
    p.close()
    status, doc = http.post("/api/topics/made-here/delete-records", {"partition": 0, "offset": 10})
    assert status == 200 and doc["log_start_offset"] == 10, doc
    assert _ends(admin, "made-here", 1, OffsetSpec.EARLIEST) == {0: 10}

    # reset offsets: dry run leaves the group's offsets alone, execute commits them
    admin.alter_group_offsets("resetme", {TopicPartition("made-here", 0): OffsetAndMetadata(25, "", None)})
    status, plan = http.post("/api/groups/resetme/reset-offsets", {"topic": "made-here", "partitions": [0],
                                                                   "to": "earliest"})
    assert status == 200 and plan["dry_run"], plan
    assert plan["offsets"] == [{"topic": "made-here", "partition": 0, "previous_offset": 25, "new_offset": 10}]
    committed = admin.list_group_offsets({"resetme": None})["resetme"]
    assert committed[TopicPartition("made-here", 0)].offset == 25
    status, done = http.post("/api/groups/resetme/reset-offsets", {"topic": "made-here", "partitions": [0],
                                                                   "to": "shift", "value": -3, "execute": True})
    assert status == 200 and not done["dry_run"] and done["offsets"][0]["new_offset"] == 22, done
    committed = admin.list_group_offsets({"resetme": None})["resetme"]
    assert committed[TopicPartition("made-here", 0)].offset == 22
    status, doc = http.post("/api/groups/resetme/reset-offsets", {"topic": "made-here", "to": "sideways"})
    assert status == 400 and "unknown reset target" in doc["error"]


def test_write_from_another_origin_or_as_a_form_is_refused(rw: tuple[BrokerProcess, ConsoleHttp], admin: Any) -> None:
    _, http = rw
    status, doc = http.request("POST", "/api/topics", {"name": "csrf"}, headers={"Origin": "http://evil.example"})
    assert status == 403 and "cross-origin" in doc["error"]
    status, doc = http.request("POST", "/api/topics", {"name": "csrf"},
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415
    assert "csrf" not in admin.list_topics()


def test_read_only_console_refuses_writes(tmp_path: Path) -> None:
    b, http = start_console_broker(tmp_path, allow_writes=False)
    try:
        for path, body in [("/api/topics", {"name": "nope", "partitions": 1}),
                           ("/api/topics/nope/partitions", {"count": 3}),
                           ("/api/topics/nope/configs", {"set": {"retention.ms": "1"}}),
                           ("/api/topics/nope/delete-records", {"partition": 0, "offset": 1}),
                           ("/api/groups/g/reset-offsets", {"topic": "nope", "to": "earliest"})]:
            status, doc = http.post(path, body)
            assert status == 403, (path, doc)
            assert "read-only" in doc["error"] and "console.allow.writes=true" in doc["error"]
        assert http.get("/api/config")["allow_writes"] is False
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            assert "nope" not in a.list_topics()
        finally:
            a.close()
    finally:
        b.kill()


def _raw(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
    return out


def test_bad_http_gets_4xx_and_kafka_keeps_serving(rw: tuple[BrokerProcess, ConsoleHttp], admin: Any) -> None:
    b, http = rw
    assert _raw(http.port, b"NONSENSE\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    # a refusal is the console's JSON error, with its security headers, and closes the connection
    head, _, body = _raw(http.port, b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * 5000 + b"\r\n").partition(b"\r\n\r\n")
    assert json.loads(body)["status"] == 431 and b"\r\nX-Frame-Options: DENY" in head
    assert b"\r\nConnection: close" in head and b"\r\nContent-Type: application/json; charset=utf-8" in head
    assert _raw(http.port, b"GET /api/topics HTTP/9\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert _raw(http.port, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 414 ")
    assert _raw(http.port, b"GET /api/topics?" + b"x=1&" * 20_000 + b" HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 414 ")
    assert _raw(http.port, b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * 5000 + b"\r\n").startswith(b"HTTP/1.1 431 ")
    assert _raw(http.port, b"POST /api/topics HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n").startswith(b"HTTP/1.1 413 ")
    assert _raw(http.port, b"GET /%ff%fe HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert _raw(http.port, b"DELETE /api/topics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")
    status, doc = http.request("POST", "/api/topics", None, headers={"Content-Type": "application/json"})
    assert status in (400, 411)
    req = b"POST /api/topics HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n{nope"
    assert _raw(http.port, req).startswith(b"HTTP/1.1 400 ")
    assert http.request("GET", "/api/nothing-here")[0] == 404
    assert http.request("GET", "/static/../../etc/passwd")[0] == 404
    # many half-open connections do not stop the console or Kafka
    socks = [socket.create_connection(("127.0.0.1", http.port)) for _ in range(50)]
    for s in socks:
        s.sendall(b"GET / HTTP/1.1\r\n")
    try:
        assert http.get("/api/config")["allow_writes"] is True
        assert "orders" in admin.list_topics() or admin.list_topics() is not None
    finally:
        for s in socks:
            s.close()
    # the front end is served with a strict CSP
    with socket.create_connection(("127.0.0.1", http.port)) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        head = s.recv(65536).decode("latin-1")
    assert "Content-Security-Policy: default-src 'none'; script-src 'self'" in head
    assert "\r\nConnection: close\r\n" in head  # one request per connection
    assert b.is_running()


def test_console_port_in_use_is_a_clear_error_and_kafka_still_starts(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    b = make_broker(tmp_path, overrides={"console.listener": f"http://127.0.0.1:{port}"}, kind="samsa")
    try:
        b.start()
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            a.create_topics({"still-works": {"num_partitions": 1, "replication_factor": 1}})
            assert "still-works" in a.list_topics()
        finally:
            a.close()
        assert wait_until(lambda: "Console not started: cannot listen on" in b.log_text(), 10)
    finally:
        b.kill()
        holder.close()
    bad = make_broker(tmp_path, overrides={"console.listener": "ftp://x"}, kind="samsa", name="bad")
    try:
        bad.start()
        assert wait_until(lambda: "console.listener must look like http://" in bad.log_text(), 10)
    finally:
        bad.kill()
    assert free_port()


def test_exact_bytes_in_and_out_from_the_metrics_endpoint(tmp_path: Path) -> None:
    """With metrics.listener on, the console's rates are the brokers' own byte counters."""
    b, http = start_console_broker(tmp_path, allow_writes=False,
                                   overrides={"metrics.listener": f"http://127.0.0.1:{free_port()}"})
    stop = threading.Event()

    def produce_and_consume() -> None:
        p = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=5)
        c = KafkaConsumer("metered", bootstrap_servers=b.bootstrap, auto_offset_reset="earliest")
        while not stop.is_set():
            for _ in range(50):
                p.send("metered", value=b"m" * 400)
            p.flush()
            c.poll(timeout_ms=100)
        p.close()
        c.close()

    t = threading.Thread(target=produce_and_consume, daemon=True)
    t.start()
    try:
        doc = http.wait_for("/api/throughput", lambda d: any(
            p["source"] == "metrics" and p["bytes_in"] > 1000 and p["bytes_out"] > 1000 for p in d["history"]),
            timeout=90)
    finally:
        stop.set()
        t.join(10)
        b.kill()
    assert all(p["source"] in ("metrics", "protocol") for p in doc["history"])


def test_unreachable_cluster_is_a_503_with_the_reason_not_a_hang(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    b, http = start_console_broker(tmp_path, allow_writes=False, overrides={"console.bootstrap.servers": dead})
    try:
        t0 = time.monotonic()
        status, doc = http.request("GET", "/api/overview", timeout=90)
        assert status == 503 and "cannot reach the cluster" in doc["error"] and dead in doc["error"], doc
        assert time.monotonic() - t0 < 60
        assert http.request("GET", "/api/config")[1]["bootstrap"] == [dead]  # the console itself still answers
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)  # and so does Kafka
        a.close()
    finally:
        b.kill()


def test_kip848_consumer_group_shows_type_members_and_lag(rw: tuple[BrokerProcess, ConsoleHttp], admin: Any) -> None:
    """A librdkafka consumer with group.protocol=consumer (KIP-848) is described like a classic one."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    b, http = rw
    _create(admin, "next-gen", 2)
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(30):
        p.send("next-gen", value=b"n", partition=i % 2)
    p.flush()
    p.close()
    c = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g848", "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe(["next-gen"])
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < 30 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m)
        assert len(got) == 30
        c.commit(offsets=[confluent_kafka.TopicPartition("next-gen", 0, 10),
                          confluent_kafka.TopicPartition("next-gen", 1, 15)], asynchronous=False)
        g = http.wait_for("/api/groups/g848", lambda d: d["members"] and d["total_lag"] == 5, timeout=60)
        assert g["type"] == "consumer" and g["state"] == "Stable"
        assert sorted(x["partition"] for x in g["members"][0]["partitions"]) == [0, 1]
        assert {o["partition"]: o["lag"] for o in g["offsets"]} == {0: 5, 1: 0}
        listed = {x["group"]: x for x in http.get("/api/groups")["groups"]}
        assert listed["g848"]["type"] == "consumer"
    finally:
        c.close()


def test_browsing_the_middle_of_a_long_partition_is_bounded(rw: tuple[BrokerProcess, ConsoleHttp],
                                                           admin: Any) -> None:
    """A page from the middle of a long partition is found through the index, not by reading up to it."""
    b, http = rw
    _create(admin, "long", 1)
    p = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=20, batch_size=256 * 1024, compression_type="lz4")
    n = 60_000
    for i in range(n):
        p.send("long", value=f"{i:08d}".encode())
    p.flush()
    p.close()
    t0 = time.monotonic()
    page = http.get(f"/api/topics/long/messages?partition=0&offset={n // 2}&limit=50")
    elapsed = time.monotonic() - t0
    assert [m["offset"] for m in page["messages"]] == list(range(n // 2, n // 2 + 50))
    assert [m["value"]["text"] for m in page["messages"]] == [f"{i:08d}" for i in range(n // 2, n // 2 + 50)]
    assert page["log_end_offset"] == n and elapsed < 15, elapsed
    last = http.get("/api/topics/long/messages?partition=0&offset=-3&limit=50")
    assert [m["offset"] for m in last["messages"]] == [n - 3, n - 2, n - 1]


def test_acls_and_quotas_as_the_protocol_reports_them(tmp_path: Path) -> None:
    import subprocess
    import sys

    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourceType,
    )

    b, http = start_console_broker(tmp_path, allow_writes=False, overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found": True})
    try:
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            assert not a.create_acls([ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                                          ResourcePattern(ResourceType.TOPIC, "orders",
                                                          ACLResourcePatternType.PREFIXED))])["failed"]
        finally:
            a.close()
        out = subprocess.run([sys.executable, "-m", "broker.cli", "configs", "--bootstrap-server", b.bootstrap,
                              "--alter", "--entity-type", "clients", "--entity-name", "busy", "--add-config",
                              "producer_byte_rate=1048576"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        doc = http.get("/api/security")
        assert doc["acls"] == [{"principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW",
                                "resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "PREFIXED"}]
        assert doc["quotas"] == [{"entity": "client-id=busy", "key": "producer_byte_rate", "value": 1048576.0}]
    finally:
        b.kill()
    pb, plain = start_console_broker(tmp_path, allow_writes=False, name="plain")
    try:
        doc = plain.get("/api/security")
        assert doc["acls"] is None and "No authorizer" in doc["acl_note"] and doc["quotas"] == []
    finally:
        pb.kill()
