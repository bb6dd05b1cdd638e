"""The web console in a real browser: Debian's headless Chromium driven by Selenium.

Against a live broker with real data: every page loads without console errors and is
screenshotted (build/test-artifacts/console/*.png), the figures shown match what the Kafka
protocol reports, the live chart moves while a producer runs, a group's lag shows up when it
falls behind and goes when it catches up, message contents cannot inject markup, a write
action from the page changes the cluster, and a read-only console refuses it.

Skips (with the reason) only where chromium, chromedriver or selenium are not installed;
``.ci/run`` installs them.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.support.brokers import BrokerProcess
from tests.support.console import ConsoleHttp, start_console_broker

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts" / "console"

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
    pytest.skip("Debian chromium/chromium-driver not installed (apt-get install -y chromium chromium-driver)",
                allow_module_level=True)

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, ConsoleHttp]]:
    b, http = start_console_broker(tmp_path_factory.mktemp("console-ui"), allow_writes=True)
    try:
        yield b, http
    finally:
        b.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="samsa-chromium-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1280,1000", f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _open(driver: Any, http: ConsoleHttp, path: str, ready_css: str, shot: str, timeout: float = 60) -> None:
    driver.get("about:blank")  # a fresh document: no element of the previous page can satisfy the wait
    driver.get(f"{http.base}{path}")
    WebDriverWait(driver, timeout, 0.2).until(lambda d: d.find_elements(By.CSS_SELECTOR, ready_css))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(ARTIFACTS / f"{shot}.png"))
    errors = _errors(driver)
    assert not errors, f"console errors on {path}: {errors}"
    assert not driver.find_elements(By.CSS_SELECTOR, ".error[data-page-error]")


def _card(driver: Any, name: str) -> str:
    # read in one script call: a refresh swaps the live region, and an element found in one
    # WebDriver call may be gone by the next
    return str(driver.execute_script(
        "const e = document.querySelector(arguments[0]); if (!e) throw new Error('no ' + arguments[0]);"
        "return e.innerText;", f'[data-card="{name}"] .value'))


def _cells(driver: Any, row_xpath: str) -> list[str] | None:
    """The cell texts of the first row matching ``row_xpath``, read in one script call (atomic
    with respect to the page's refresh swapping its live regions)."""
    return driver.execute_script(  # type: ignore[no-any-return]
        "const r = document.evaluate(arguments[0], document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null)"
        ".singleNodeValue; return r ? [...r.querySelectorAll('td')].map(td => td.innerText) : null;", row_xpath)


def _wait_text(driver: Any, fn: Any, timeout: float = 60) -> Any:
    return WebDriverWait(driver, timeout, 0.3, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: fn(d))


def test_pages_load_and_show_what_the_protocol_reports(cluster: tuple[BrokerProcess, ConsoleHttp],
                                                       browser: Any) -> None:
    b, http = cluster
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        admin.create_topics({"clicks": {"num_partitions": 3, "replication_factor": 1}})
        p = KafkaProducer(bootstrap_servers=b.bootstrap)
        for i in range(60):
            p.send("clicks", key=f"user-{i % 7}".encode(), value=f'{{"n": {i}}}'.encode(),
                   headers=[("source", b"web")])
        p.send("clicks", partition=0, value=b'{"n": -1}', headers=[("source", b"web")])
        p.send("clicks", partition=0, value=b'<img src=x onerror="document.title=\'pwned\'"><script>x()</script>')
        p.flush()
        p.close()
        cluster_md = admin.describe_cluster()
        partitions = sum(len(t["partitions"]) for t in admin.describe_topics())
        ends = {tp.partition: r.offset for tp, r in admin.list_partition_offsets(
            {TopicPartition("clicks", i): -1 for i in range(3)}).items()}
    finally:
        admin.close()

    _open(browser, http, "/", '[data-card="partitions"]', "overview")
    assert _card(browser, "cluster_id") == cluster_md["cluster_id"]
    assert _card(browser, "controller") == f"broker {cluster_md['controller_id']}"
    _wait_text(browser, lambda d: _card(d, "partitions") == f"{partitions:,}")
    assert _card(browser, "under_replicated") == "0" and _card(browser, "offline") == "0"

    _open(browser, http, "/topics", "table", "topics")
    cells = _cells(browser, "//tr[td/a[text()='clicks']]")
    assert cells is not None
    assert cells[2] == "3" and cells[5] == f"{sum(ends.values()):,}"

    _open(browser, http, "/topics/clicks", "table", "topic")
    rows = browser.find_elements(By.XPATH, "//h2[text()='Partitions']/following-sibling::div[1]//tbody/tr")
    shown = {int(r.find_elements(By.TAG_NAME, "td")[0].text): r.find_elements(By.TAG_NAME, "td")[6].text for r in rows}
    assert shown == {p: f"{e:,}" for p, e in ends.items()}
    assert "DEFAULT_CONFIG" in browser.page_source

    _open(browser, http, "/topics/clicks/messages?partition=0&offset=0&limit=200", "article.msg", "messages")
    arts = browser.find_elements(By.CSS_SELECTOR, "article.msg")
    assert len(arts) == ends[0]
    # the hostile record is shown as text: no <img> or <script> element came from it
    assert not browser.find_elements(By.CSS_SELECTOR, "#messages img, #messages script")
    assert any("<img src=x onerror=" in a.text for a in arts)
    assert browser.title != "pwned"
    first = arts[0]
    assert '"n":' in first.find_element(By.CSS_SELECTOR, '[data-field="value"] pre').text
    assert "source: web" in first.text

    # readable on a phone: nothing wider than the screen (wide tables scroll inside their box)
    browser.set_window_size(390, 844)
    try:
        for path, shot in [("/", "overview-phone"), ("/topics/clicks", "topic-phone"),
                           ("/topics/clicks/messages?partition=0&offset=0", "messages-phone")]:
            _open(browser, http, path, "h2, article.msg", shot)
            assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1"), shot
    finally:
        browser.set_window_size(1280, 1000)

    # an old single-page link (/#/topics) still lands on its page
    _open(browser, http, "/#/topics/clicks", "h1", "old-link")
    _wait_text(browser, lambda d: d.find_element(By.TAG_NAME, "h1").text == "Topic clicks")

    _open(browser, http, "/groups", ".empty, table", "groups")
    _open(browser, http, "/transactions", "h2", "transactions")
    _open(browser, http, "/security", "#acl-note", "security")
    assert "No authorizer is configured" in browser.find_element(By.ID, "acl-note").text
    assert _errors(browser) == []


def test_pages_read_with_javascript_off(cluster: tuple[BrokerProcess, ConsoleHttp]) -> None:
    """The same Chromium with JavaScript disabled: the pages are all there, figures included."""
    b, http = cluster
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="samsa-chromium-nojs-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
                 "--window-size=1280,1000", f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        driver.get(f"{http.base}/topics/clicks")
        rows = driver.find_elements(By.XPATH, "//h2[text()='Partitions']/following-sibling::div[1]//tbody/tr")
        assert len(rows) == 3
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "topic-no-javascript.png"))
        driver.get(f"{http.base}/topics/clicks/messages?partition=0&offset=0&limit=200")
        shown = [a.get_attribute("data-offset") for a in driver.find_elements(By.CSS_SELECTOR, "article.msg")]
        assert len(shown) >= 2 and shown[:2] == ["0", "1"]
        # the browse form works as a plain GET
        form = driver.find_element(By.ID, "browse")
        at = form.find_element(By.NAME, "at")
        at.clear()
        at.send_keys("1")
        form.find_element(By.NAME, "limit").clear()
        form.find_element(By.NAME, "limit").send_keys("1")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        WebDriverWait(driver, 30, 0.2).until(lambda d: "offset=" not in d.current_url and "at=1" in d.current_url)
        assert [a.get_attribute("data-offset") for a in driver.find_elements(By.CSS_SELECTOR, "article.msg")] == ["1"]
        driver.save_screenshot(str(ARTIFACTS / "messages-no-javascript.png"))
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_live_chart_moves_while_a_producer_runs(cluster: tuple[BrokerProcess, ConsoleHttp], browser: Any) -> None:
    b, http = cluster
    _open(browser, http, "/", '[data-chart="throughput"]', "overview-idle")

    def bytes_in_path(d: Any) -> str:
        return str(d.execute_script("const p = document.querySelector(arguments[0]); return p ? p.getAttribute('d') : ''",
                                    '[data-chart="throughput"] path[data-series="bytes in/s"]'))

    before = bytes_in_path(browser)
    stop = threading.Event()

    def produce() -> None:
        p = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=5)
        while not stop.is_set():
            for _ in range(100):
                p.send("live", value=b"z" * 300)
            p.flush()
            time.sleep(0.05)
        p.close()

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    try:
        _wait_text(browser, lambda d: bytes_in_path(d) not in ("", before) and
                   _card(d, "bytes_in") not in ("0 B/s", "–/s"), timeout=120)
        first = bytes_in_path(browser)
        _wait_text(browser, lambda d: bytes_in_path(d) != first, timeout=90)  # and keeps moving
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "overview-live.png"))
    finally:
        stop.set()
        t.join(10)
    assert not _errors(browser)


def test_group_lag_appears_and_disappears(cluster: tuple[BrokerProcess, ConsoleHttp], browser: Any) -> None:
    b, http = cluster
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for _ in range(50):
        p.send("work", value=b"job")
    p.flush()
    c = KafkaConsumer("work", bootstrap_servers=b.bootstrap, group_id="workers", enable_auto_commit=False,
                      auto_offset_reset="earliest")
    try:
        got = 0
        deadline = time.monotonic() + 30
        while got < 50 and time.monotonic() < deadline:
            got += sum(len(v) for v in c.poll(timeout_ms=500).values())
        assert got == 50
        c.commit({TopicPartition("work", 0): OffsetAndMetadata(50, "", -1)})
        for _ in range(30):  # the group falls behind
            p.send("work", value=b"job")
        p.flush()
        _open(browser, http, "/groups/workers", '[data-card="total_lag"]', "group-lagging")
        _wait_text(browser, lambda d: _card(d, "total_lag") == "30")
        _wait_text(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '[data-chart="lag"] path'))
        assert _card(browser, "state") == "Stable"
        browser.save_screenshot(str(ARTIFACTS / "group-lagging.png"))
        got = 0
        deadline = time.monotonic() + 30
        while got < 30 and time.monotonic() < deadline:
            got += sum(len(v) for v in c.poll(timeout_ms=500).values())
        c.commit()
        _wait_text(browser, lambda d: _card(d, "total_lag") == "0")
        browser.save_screenshot(str(ARTIFACTS / "group-caught-up.png"))
    finally:
        c.close()
        p.close()
    assert not _errors(browser)


def test_write_action_from_the_page_changes_the_cluster(cluster: tuple[BrokerProcess, ConsoleHttp],
                                                        browser: Any) -> None:
    b, http = cluster
    _open(browser, http, "/topics", "#create-topic", "topics-write")
    form = browser.find_element(By.ID, "create-topic")
    form.find_element(By.NAME, "name").send_keys("from-the-browser")
    count = form.find_element(By.NAME, "partitions")
    count.clear()
    count.send_keys("2")
    form.find_element(By.NAME, "configs").send_keys("retention.ms=600000")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    _wait_text(browser, lambda d: "Created topic from-the-browser" in d.page_source)
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        desc = admin.describe_topics(["from-the-browser"])[0]
        assert len(desc["partitions"]) == 2
    finally:
        admin.close()
    _open(browser, http, "/topics/from-the-browser", "#add-partitions", "topic-write")
    browser.find_element(By.CSS_SELECTOR, "#add-partitions button").click()
    _wait_text(browser, lambda d: "now has 3 partitions" in d.page_source)
    assert len(http.get("/api/topics/from-the-browser")["partitions"]) == 3


def test_read_only_console_refuses_a_write_from_the_page(tmp_path: Path, browser: Any) -> None:
    b, http = start_console_broker(tmp_path, allow_writes=False, name="ro")
    try:
        _open(browser, http, "/topics", "h1", "topics-read-only")
        assert browser.find_element(By.ID, "mode").text == "read-only"
        assert not browser.find_elements(By.ID, "create-topic")  # no write forms offered
        # and a write sent from the page anyway is refused with the reason
        status, error = browser.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch('/api/topics', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                  body: JSON.stringify({name: 'sneaky', partitions: 1})})
              .then(r => r.json().then(j => done([r.status, j.error])));
        """)
        assert status == 403 and "read-only" in error
        # the refused request is the only error the browser logged
        assert all("/api/topics" in e["message"] and "403" in e["message"] for e in _errors(browser))
        assert "sneaky" not in [t["name"] for t in http.get("/api/topics")["topics"]]
    finally:
        b.kill()


def test_reset_offsets_from_the_page_dry_run_then_execute(cluster: tuple[BrokerProcess, ConsoleHttp],
                                                          browser: Any) -> None:
    from selenium.webdriver.support.ui import Select

    b, http = cluster
    p = KafkaProducer(bootstrap_servers=b.bootstrap)
    for _ in range(40):
        p.send("replay", value=b"e")
    p.flush()
    p.close()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    tp = TopicPartition("replay", 0)
    try:
        admin.alter_group_offsets("replayers", {tp: OffsetAndMetadata(40, "", None)})
        _open(browser, http, "/groups/replayers", "#reset-offsets form", "group-reset")
        form = browser.find_element(By.CSS_SELECTOR, "#reset-offsets form")
        execute = form.find_element(By.NAME, "execute")
        assert not execute.is_enabled()  # nothing to execute before a dry run
        Select(form.find_element(By.NAME, "to")).select_by_value("offset")
        form.find_element(By.NAME, "value").send_keys("12")
        form.find_element(By.NAME, "dry-run").click()
        _wait_text(browser, lambda d: "Dry run (nothing committed)" in d.page_source and "replay-0: 40 → 12" in
                   d.find_element(By.CSS_SELECTOR, "#reset-offsets .result").text)
        assert admin.list_group_offsets({"replayers": None})["replayers"][tp].offset == 40
        browser.find_element(By.CSS_SELECTOR, "#reset-offsets [name=execute]").click()
        _wait_text(browser, lambda d: "Offsets reset" in d.find_element(By.CSS_SELECTOR, "#reset-offsets .result").text)
        assert admin.list_group_offsets({"replayers": None})["replayers"][tp].offset == 12
        _wait_text(browser, lambda d: _card(d, "total_lag") == "28")
        browser.save_screenshot(str(ARTIFACTS / "group-reset-done.png"))
    finally:
        admin.close()
    assert not _errors(browser)


def test_transactions_page_shows_an_open_transaction(cluster: tuple[BrokerProcess, ConsoleHttp], browser: Any) -> None:
    b, http = cluster
    p = KafkaProducer(bootstrap_servers=b.bootstrap, transactional_id="ui-tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("ui-txns", value=b"pending").get()
    try:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            pid = next(x.producer_id for v in admin.list_transactions().values() for x in v
                       if x.transactional_id == "ui-tx")
        finally:
            admin.close()
        _open(browser, http, "/transactions", "h2", "transactions-open")
        cells = _wait_text(browser, lambda d: _cells(d, "//tr[td[text()='ui-tx']]"))
        assert cells[1] == "Ongoing" and cells[2] == str(pid) and cells[6] == "ui-txns-0"
        browser.save_screenshot(str(ARTIFACTS / "transactions-open.png"))
    finally:
        p.abort_transaction()
        p.close()
    assert not _errors(browser)
