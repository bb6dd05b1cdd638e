"""Helpers for the web console tests: a broker subprocess with its console on, plain-HTTP calls.

``start_console_broker`` starts ``python -m broker`` with ``console.listener`` on a free port
and waits until the console answers and has taken its first sample; ``ConsoleHttp`` talks to
it with urllib (no client library between the test and the JSON API).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .brokers import BrokerProcess, make_broker
from .net import free_port


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
