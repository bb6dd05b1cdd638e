"""Scraping a broker's ``metrics.listener`` in tests: GET /metrics over real HTTP, parsed by
``prometheus_client.parser`` into ``{(sample name, frozenset(labels)): value}``."""

from __future__ import annotations

import http.client

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int, path: str = "/metrics", timeout: float = 10.0, host: str = "127.0.0.1") -> Samples:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        body = resp.read().decode()
        assert resp.status == 200, body
        assert resp.getheader("Content-Type", "").startswith("text/plain; version=0.0.4")
    finally:
        conn.close()
    out: Samples = {}
    for fam in text_string_to_metric_families(body):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample with exactly these labels (KeyError if absent)."""
    return samples[(name, frozenset(labels.items()))]


def values(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """Every sample of ``name``, by label set."""
    return {lab: v for (n, lab), v in samples.items() if n == name}


def topic_sum(samples: Samples, name: str, topic: str) -> float:
    """The sum of ``name`` over the samples labelled ``topic=...`` (e.g. over partitions)."""
    return sum(v for lab, v in values(samples, name).items() if ("topic", topic) in lab)
