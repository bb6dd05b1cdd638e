"""Helpers for the web console tests: a broker subprocess with its console on, plain-HTTP calls.

``start_console_broker`` starts ``python -m broker`` with ``console.listener`` on a free port
and waits until the console answers and has taken its first sample; ``ConsoleHttp`` talks to
it with urllib (no client library between the test and the JSON API or the pages).
``ConsoleHttp.page`` fetches a server-rendered page and reads it with the standard library's
HTML parser into :class:`HtmlPage`: its cards, tables (cell texts) and elements by attribute,
which is what a reader without JavaScript sees.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from .brokers import BrokerProcess, make_broker
from .net import free_port

VOID = {"input", "meta", "link", "br", "img", "hr", "source", "area", "base", "col", "embed", "param", "track", "wbr"}


class Element:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Element | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element] = []
        self.parts: list[str | Element] = []

    @property
    def text(self) -> str:
        return "".join(p if isinstance(p, str) else p.text for p in self.parts)

    def iter(self) -> Any:
        yield self
        for c in self.children:
            yield from c.iter()

    def find_all(self, tag: str | None = None, **attrs: str | None) -> list[Element]:
        """Descendants (and self) with this tag and these attributes (value None: present)."""
        out = []
        for e in self.iter():
            if tag is not None and e.tag != tag:
                continue
            if all(k.replace("_", "-") in e.attrs and (v is None or e.attrs[k.replace("_", "-")] == v)
                   for k, v in attrs.items()):
                out.append(e)
        return out

    def find(self, tag: str | None = None, **attrs: str | None) -> Element:
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag or '*'} {attrs}> in the page"
        return found[0]

    def rows(self) -> list[list[str]]:
        """The cell texts of each body row of the tables under this element."""
        return [[td.text.strip() for td in tr.children if td.tag == "td"]
                for tr in self.find_all("tr") if any(c.tag == "td" for c in tr.children)]


class HtmlPage(HTMLParser):
    """A page parsed into a small element tree (void elements and implied closes handled)."""

    def __init__(self, status: int, content_type: str, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.status, self.content_type, self.source = status, content_type, source
        self.root = Element("#document", {}, None)
        self._cur = self.root
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        e = Element(tag, dict(attrs), self._cur)
        self._cur.children.append(e)
        self._cur.parts.append(e)
        if tag not in VOID:
            self._cur = e

    def handle_endtag(self, tag: str) -> None:
        e: Element | None = self._cur
        while e is not None and e.tag != tag:
            e = e.parent
        if e is not None and e.parent is not None:
            self._cur = e.parent

    def handle_data(self, data: str) -> None:
        self._cur.parts.append(data)

    def card(self, key: str) -> str:
        return self.root.find(data_card=key).find("div", **{"class": "value"}).text.strip()

    def section(self, heading: str) -> Element:
        """The element right after the <h2> with this text (the table or empty state under it)."""
        h2 = next(e for e in self.root.find_all("h2") if e.text.strip() == heading)
        assert h2.parent is not None
        sibs = h2.parent.children
        return sibs[sibs.index(h2) + 1]

    def find(self, tag: str | None = None, **attrs: str | None) -> Element:
        return self.root.find(tag, **attrs)

    def find_all(self, tag: str | None = None, **attrs: str | None) -> list[Element]:
        return self.root.find_all(tag, **attrs)


class ConsoleHttp:
    def __init__(self, port: int) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}"

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                timeout: float = 30.0) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        hdrs = {"Content-Type": "application/json"} if body is not None else {}
        hdrs.update(headers or {})
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                raw = resp.read()
                status = resp.status
        except urllib.error.HTTPError as e:
            raw, status = e.read(), e.code
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw.decode("utf-8", "replace")

    def get(self, path: str) -> Any:
        status, doc = self.request("GET", path)
        assert status == 200, f"GET {path}: {status} {doc}"
        return doc

    def page(self, path: str, expect: int = 200) -> HtmlPage:
        """GET a server-rendered page (no JavaScript involved) and parse it."""
        req = urllib.request.Request(self.base + path, headers={"Accept": "text/html"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw, status, ctype = resp.read(), resp.status, resp.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            raw, status, ctype = e.read(), e.code, e.headers.get("Content-Type", "")
        page = HtmlPage(status, ctype, raw.decode("utf-8"))
        assert status == expect, f"GET {path}: {status}, expected {expect}: {raw[:2000]!r}"
        assert ctype.startswith("text/html"), ctype
        return page

    def wait_for_page(self, path: str, predicate: Any, timeout: float = 60.0) -> HtmlPage:
        deadline = time.monotonic() + timeout
        while True:
            page = self.page(path)
            if predicate(page):
                return page
            if time.monotonic() > deadline:
                raise AssertionError(f"GET {path}: condition not met in {timeout}s")
            time.sleep(0.5)

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        return self.request("POST", path, body)

    def wait_for(self, path: str, predicate: Any, timeout: float = 60.0) -> Any:
        """GET path until predicate(doc) is true; returns that doc (AssertionError with the last one)."""
        deadline = time.monotonic() + timeout
        doc: Any = None
        while time.monotonic() < deadline:
            status, doc = self.request("GET", path)
            if status == 200 and predicate(doc):
                return doc
            time.sleep(0.5)
        raise AssertionError(f"GET {path}: condition not met in {timeout}s; last answer {doc}")


def start_console_broker(base: Path, allow_writes: bool, name: str = "broker",
                         overrides: dict[str, object] | None = None) -> tuple[BrokerProcess, ConsoleHttp]:
    port = free_port()
    props: dict[str, object] = {"console.listener": f"http://127.0.0.1:{port}",
                                "console.allow.writes": allow_writes, "num.partitions": 1}
    props.update(overrides or {})
    b = make_broker(base, overrides=props, kind="samsa", name=name)
    b.start()
    http = ConsoleHttp(port)
    http.wait_for("/api/throughput", lambda d: True, timeout=60)
    return b, http
