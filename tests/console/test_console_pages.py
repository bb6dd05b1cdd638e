"""The console's pages are HTML rendered by the server: read with urllib, no JavaScript at all.

Against a live broker with real data, each page's figures (partitions, leaders, replicas, ISR,
log end offsets, messages, group lag) are found in the HTML exactly as a stock Kafka client
reads them through the protocol; message contents arrive escaped; the message browser works
as a plain GET form with pager links; errors are HTML pages with the reason and a 4xx/5xx;
write forms appear only on a console that allows writes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import OffsetSpec
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.support.brokers import BrokerProcess
from tests.support.console import ConsoleHttp, start_console_broker

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, ConsoleHttp, Any]]:
    b, http = start_console_broker(tmp_path_factory.mktemp("console-pages"), allow_writes=True)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        yield b, http, admin
    finally:
        admin.close()
        b.kill()


def _ends(admin: Any, topic: str, n: int) -> dict[int, int]:
    res = admin.list_partition_offsets({TopicPartition(topic, p): OffsetSpec.LATEST for p in range(n)})
    return {tp.partition: r.offset for tp, r in res.items()}


def test_overview_topics_and_partitions_are_in_the_html(console: tuple[BrokerProcess, ConsoleHttp, Any]) -> None:
    b, http, admin = console
    admin.create_topics({"pages": {"num_partitions": 3, "replication_factor": 1}})
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(41):
        p.send("pages", value=b"v%d" % i, partition=i % 3)
    p.flush()
    p.close()
    ends = _ends(admin, "pages", 3)
    cluster = admin.describe_cluster()
    meta = admin.describe_topics()
    total_parts = sum(len(t["partitions"]) for t in meta)

    ov = http.page("/")
    assert ov.card("cluster_id") == cluster["cluster_id"]
    assert ov.card("controller") == f"broker {cluster['controller_id']}"
    assert ov.card("partitions") == f"{total_parts:,}"
    assert ov.card("under_replicated") == "0" and ov.card("offline") == "0"
    brokers = ov.section("Brokers").rows()
    assert [r[0] for r in brokers] == [str(x["broker_id"]) for x in cluster["brokers"]]
    assert brokers[0][2] == str(b.port)
    assert ov.find("svg", role="img")  # the throughput chart is drawn by the server
    assert ov.find("body").attrs["data-refresh"] == "2000"  # the script keeps it live
    assert ov.find(id="mode").text == "writes allowed"

    listing = {r[0]: r for r in http.page("/topics").root.rows()}
    assert listing["pages"][2] == "3" and listing["pages"][5] == f"{sum(ends.values()):,}"

    page = http.page("/topics/pages")
    desc = {x["partition_index"]: x for x in admin.describe_topics(["pages"])[0]["partitions"]}
    rows = page.section("Partitions").rows()
    assert len(rows) == 3
    for r in rows:
        part = int(r[0])
        assert r[1] == str(desc[part]["leader_id"])
        assert r[3] == ", ".join(map(str, desc[part]["replica_nodes"]))
        assert r[4] == ", ".join(map(str, desc[part]["isr_nodes"]))  # ISR
        assert r[6] == f"{ends[part]:,}"  # log end offset
    configs = {r[0]: r for r in page.section("Configs").rows()}
    assert configs["cleanup.policy"][1:] == ["delete", "DEFAULT_CONFIG"]


def test_group_lag_is_in_the_html(console: tuple[BrokerProcess, ConsoleHttp, Any]) -> None:
    b, http, admin = console
    admin.create_topics({"lagged": {"num_partitions": 2, "replication_factor": 1}})
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(30):
        p.send("lagged", value=b"x", partition=i % 2)
    p.flush()
    p.close()
    admin.alter_group_offsets("html-readers", {TopicPartition("lagged", 0): OffsetAndMetadata(5, "", None),
                                               TopicPartition("lagged", 1): OffsetAndMetadata(15, "", None)})
    g = http.page("/groups/html-readers")
    assert g.card("total_lag") == "10"  # 15 - 5 on partition 0, 15 - 15 on partition 1
    lag = {r[1]: r for r in g.section("Lag per partition").rows()}
    assert lag["0"][2:5] == ["5", "15", "10"] and lag["1"][2:5] == ["15", "15", "0"]
    # the list's lag comes from the console's sampler: it shows up within a few samples
    http.wait_for_page("/groups", lambda pg: any(r[0] == "html-readers" and r[4] == "10" for r in pg.root.rows()),
                       timeout=60)
    admin.alter_group_offsets("html-readers", {TopicPartition("lagged", 0): OffsetAndMetadata(15, "", None)})
    assert http.page("/groups/html-readers").card("total_lag") == "0"
    # a group id with a slash in it has its own page (linked as %2F from the list)
    admin.alter_group_offsets("team/a", {TopicPartition("lagged", 1): OffsetAndMetadata(10, "", None)})
    listed = http.wait_for_page("/groups", lambda pg: any(r[0] == "team/a" for r in pg.root.rows()))
    href = next(a.attrs["href"] for a in listed.find_all("a") if a.text == "team/a")
    assert href == "/groups/team%2Fa"
    assert http.page(str(href)).card("total_lag") == "5"


def test_messages_are_escaped_and_browsable_without_javascript(console: tuple[BrokerProcess, ConsoleHttp, Any]) -> None:
    b, http, admin = console
    admin.create_topics({"peek": {"num_partitions": 1, "replication_factor": 1}})
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    p.send("peek", key=b"k", value=b'{"b": 1, "a": "<i>x</i>"}', headers=[("trace", b"<b>t</b>")]).get()
    p.send("peek", value=b'<img src=x onerror="alert(1)"><script>alert(2)</script>').get()
    for i in range(30):
        p.send("peek", value=b"m%d" % i)
    p.flush()
    time.sleep(0.05)
    t_mid = int(time.time() * 1000)
    time.sleep(0.05)
    last = p.send("peek", value=b"after").get()
    p.close()

    page = http.page("/topics/peek/messages?partition=0&offset=0&limit=5")
    arts = page.find_all("article")
    assert [int(a.attrs["data-offset"] or -1) for a in arts] == [0, 1, 2, 3, 4]
    # hostile contents are text: escaped in the source, no element made from them
    assert "<script>alert" not in page.source and "&lt;script&gt;alert(2)&lt;/script&gt;" in page.source
    assert not page.find("main").find_all("img") and not page.find("main").find_all("i")
    assert '<img src=x onerror="alert(1)">' in arts[1].find(data_field="value").text
    value = arts[0].find(data_field="value").find("pre").text
    assert '"a": "<i>x</i>"' in value and "\n" in value  # JSON, pretty-printed
    assert arts[0].find(data_header="trace").text.strip() == "trace: <b>t</b>"
    # pager links, and the browse form is a plain GET
    newer = next(a for a in page.find("div", **{"class": "pager"}).find_all("a") if "Newer" in a.text)
    assert newer.attrs["href"] == "/topics/peek/messages?partition=0&limit=5&offset=5"
    assert [int(a.attrs["data-offset"] or -1) for a in http.page(str(newer.attrs["href"])).find_all("article")] == \
        [5, 6, 7, 8, 9]
    form = page.find("form", id="browse")
    assert form.attrs["method"] == "get" and form.attrs["action"] == "/topics/peek/messages"
    by_time = http.page(f"/topics/peek/messages?partition=0&from=timestamp&at={t_mid}&limit=3")
    assert [int(a.attrs["data-offset"] or -1) for a in by_time.find_all("article")] == [last.offset]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t_mid / 1000 + 2)) + "Z"  # after every record
    assert http.page(f"/topics/peek/messages?partition=0&from=timestamp&at={iso}").find_all("article") == []
    bad = http.page("/topics/peek/messages?partition=0&from=timestamp&at=yesterday", expect=400)
    assert "ISO date" in bad.find("div", role="alert").text
    newest = http.page("/topics/peek/messages?partition=0&limit=2").find_all("article")
    assert [int(a.attrs["data-offset"] or -1) for a in newest] == [last.offset - 1, last.offset]


def test_errors_are_pages_with_the_reason(console: tuple[BrokerProcess, ConsoleHttp, Any]) -> None:
    _b, http, _admin = console
    missing = http.page("/topics/no-such-topic", expect=404)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.find("div", role="alert").text
    assert http.page("/no/such/page", expect=404).find("h1").text == "Not found"
    assert "no partition 9" in http.page("/topics/pages/messages?partition=9", expect=404).find(role="alert").text
    assert http.page("/topics/pages/messages?limit=100000", expect=400)
    status, _ = http.request("POST", "/topics", {"name": "x"})
    assert status == 405


def test_write_forms_only_when_writes_are_allowed(console: tuple[BrokerProcess, ConsoleHttp, Any],
                                                  tmp_path: Path) -> None:
    _b, http, _admin = console
    assert http.page("/topics").find("form", id="create-topic").attrs["data-api"] == "/api/topics"
    assert http.page("/topics/pages").find("form", id="add-partitions")
    b2, ro = start_console_broker(tmp_path, allow_writes=False, name="ro-pages")
    try:
        page = ro.page("/topics")
        assert page.find(id="mode").text == "read-only"
        assert not page.find_all("form")
        assert not ro.page("/").find_all("form")
    finally:
        b2.kill()
