"""The pipeline's answer computed directly from the produced events, without Spark.

This is the independent count the exactly-once checks compare against: plain Python over
the event dicts that `spark.generate` produced, with the same rules as the pipeline
(tumbling windows aligned to the epoch, status class = status // 100, top paths by count
then path name) and Spark's append-mode rule for which windows are final: a window is
emitted once the watermark (max event time seen - delay) reaches its end.
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import datetime
from typing import Any

TOP_PATHS = 5


def parse_ms(ts: str) -> int:
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)


def closed_windows(events: list[dict[str, Any]], window_s: int, delay_s: int) -> dict[int, dict[str, Any]]:
    """{window start (epoch s): stats} for every window final under the watermark."""
    window_ms = window_s * 1000
    watermark = max(parse_ms(e["timestamp"]) for e in events) - delay_s * 1000
    groups: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        start = parse_ms(e["timestamp"]) // window_ms * window_ms
        groups.setdefault(start, []).append(e)
    out = {}
    for start, evs in groups.items():
        if start + window_ms > watermark:
            continue
        classes = Counter(e["status"] // 100 for e in evs)
        paths = Counter(e["path"] for e in evs)
        top = sorted(paths.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_PATHS]
        out[start // 1000] = {
            "requests": len(evs),
            "status_2xx": classes[2], "status_3xx": classes[3],
            "status_4xx": classes[4], "status_5xx": classes[5],
            "bytes": sum(e["bytes"] for e in evs),
            "top_paths": [(p, c) for p, c in top],
            "latencies": sorted(e["latency"] for e in evs),
        }
    return out


def percentile_ok(value: float, sorted_values: list[float], p: float, slack: int = 1) -> bool:
    """True if `value` is the p-th percentile of the data within `slack` ranks.

    percentile_approx with accuracy 10000 is exact on fewer than 10000 values up to its
    rank convention; the slack absorbs the convention (nearest rank vs. rank below).
    """
    n = len(sorted_values)
    rank = max(0, math.ceil(p * n) - 1)
    lo = sorted_values[max(0, rank - slack)]
    hi = sorted_values[min(n - 1, rank + slack)]
    return lo <= value <= hi


def compare(actual: dict[int, dict[str, Any]], expected: dict[int, dict[str, Any]]) -> list[str]:
    """Human-readable differences between pipeline output and the direct count ([] = equal)."""
    problems = []
    if sorted(actual) != sorted(expected):
        problems.append(f"windows differ: pipeline {sorted(actual)} vs expected {sorted(expected)}")
    for start in sorted(set(actual) & set(expected)):
        a, e = actual[start], expected[start]
        for k in ("requests", "status_2xx", "status_3xx", "status_4xx", "status_5xx", "bytes", "top_paths"):
            if a[k] != e[k]:
                problems.append(f"window {start}: {k} pipeline={a[k]} expected={e[k]}")
        for k, p in (("latency_p50", 0.5), ("latency_p95", 0.95)):
            if not percentile_ok(a[k], e["latencies"], p):
                problems.append(f"window {start}: {k}={a[k]} is not the {p} percentile of its latencies")
    return problems
