"""A Samsa broker serving the Schema Registry, and a small raw HTTP client for its REST API.

The raw client (http.client, no retries, no cache) is for what confluent-kafka's
SchemaRegistryClient hides: status codes, Confluent's error bodies and content types.
"""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

from .brokers import BrokerProcess, make_broker
from .net import free_port, wait_until

V1 = "application/vnd.schemaregistry.v1+json"


class RegistryHttp:
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.host, self.port = host, port
        self.url = f"http://{host}:{port}"

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
        """(status, decoded JSON body or text, lower-cased headers)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            hdrs = {"Content-Type": V1} if (body is not None or raw is not None) else {}
            hdrs.update(headers or {})
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            payload = resp.read()
            out_headers = {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()
        try:
            doc: Any = json.loads(payload) if payload else None
        except ValueError:
            doc = payload.decode("utf-8", "replace")
        return resp.status, doc, out_headers

    def get(self, path: str, **kw: Any) -> tuple[int, Any]:
        status, doc, _ = self.request("GET", path, **kw)
        return status, doc

    def post(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        status, doc, _ = self.request("POST", path, body, **kw)
        return status, doc

    def put(self, path: str, body: Any, **kw: Any) -> tuple[int, Any]:
        status, doc, _ = self.request("PUT", path, body, **kw)
        return status, doc

    def delete(self, path: str, **kw: Any) -> tuple[int, Any]:
        status, doc, _ = self.request("DELETE", path, **kw)
        return status, doc

    def wait_ready(self, timeout: float = 60.0) -> None:
        def ready() -> bool:
            try:
                return self.get("/config")[0] == 200
            except OSError:
                return False

        if not wait_until(ready, timeout, interval=0.2):
            raise TimeoutError(f"schema registry at {self.url} not ready after {timeout}s")


def start_registry_broker(base: Path, overrides: dict[str, object] | None = None,
                          name: str = "broker", port: int | None = None) -> tuple[BrokerProcess, RegistryHttp]:
    port = port or free_port()
    props: dict[str, object] = {"schema.registry.listeners": f"http://127.0.0.1:{port}", "num.partitions": 1}
    props.update(overrides or {})
    b = make_broker(base, overrides=props, kind="samsa", name=name)
    b.start()
    reg = RegistryHttp(port)
    reg.wait_ready()
    return b, reg
