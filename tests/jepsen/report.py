"""report.html: the verdict, latency and throughput over time with the nemesis intervals shaded.

The charts are plain SVG written here rather than matplotlib PNGs: a few hundred lines of
rectangles and circles need no plotting library (so the rig adds no dependency to the test
extras), the file stays text (diffable, greppable, viewable in any browser), and the drawing
is deterministic for a given history.
"""

from __future__ import annotations

import html
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from .checker import Result, pair
from .history import Op

W, H, PAD = 1000, 260, 50
COLORS = {"ok": "#2a7", "info": "#e90", "fail": "#d33"}
NEMESIS_COLORS = ["#fdd", "#dfd", "#ddf", "#ffd", "#dff", "#fdf", "#eee", "#fed", "#def", "#efd"]


def _intervals(history: list[Op]) -> list[tuple[float, float, str]]:
    out: list[tuple[float, float, str]] = []
    open_: dict[str, float] = {}
    end = history[-1]["time"] if history else 0.0
    for op in history:
        if op["process"] != "nemesis":
            continue
        kind = (op.get("value") or {}).get("kind", "?") if isinstance(op.get("value"), dict) else "?"
        if op["f"] == "start":
            open_[kind] = op["time"]
        elif op["f"] == "stop" and kind in open_:
            out.append((open_.pop(kind), op["time"], kind))
    out += [(t, end, k) for k, t in open_.items()]
    return out


def _frame(t_max: float, y_max: float, y_label: str, log: bool, intervals: list[tuple[float, float, str]],
           kinds: list[str]) -> tuple[list[str], Any, Any]:
    def x(t: float) -> float:
        return PAD + (W - 2 * PAD) * (t / t_max if t_max else 0)

    def y(v: float) -> float:
        if log:
            lo, hi = math.log10(0.001), math.log10(max(y_max, 0.01))
            f = (math.log10(max(v, 0.001)) - lo) / (hi - lo if hi > lo else 1)
        else:
            f = v / y_max if y_max else 0
        return H - PAD + 10 - (H - PAD - 10) * f

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" '
             f'font-size="11">', f'<rect x="0" y="0" width="{W}" height="{H}" fill="white"/>']
    for a, b, k in intervals:
        c = NEMESIS_COLORS[kinds.index(k) % len(NEMESIS_COLORS)]
        parts.append(f'<rect x="{x(a):.1f}" y="10" width="{max(x(b) - x(a), 1):.1f}" height="{H - PAD}" '
                     f'fill="{c}"><title>{html.escape(k)} {a:.1f}-{b:.1f} s</title></rect>')
        parts.append(f'<text x="{x(a) + 2:.1f}" y="22" fill="#555">{html.escape(k)}</text>')
    parts.append(f'<line x1="{PAD}" y1="{H - PAD + 10}" x2="{W - PAD}" y2="{H - PAD + 10}" stroke="black"/>')
    parts.append(f'<line x1="{PAD}" y1="10" x2="{PAD}" y2="{H - PAD + 10}" stroke="black"/>')
    for i in range(11):
        t = t_max * i / 10
        parts.append(f'<text x="{x(t):.1f}" y="{H - PAD + 25}" text-anchor="middle">{t:.0f}</text>')
    parts.append(f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle">time (s)</text>')
    ticks = [0.001, 0.01, 0.1, 1, 10, 100] if log else [y_max * i / 4 for i in range(5)]
    for v in ticks:
        if v <= y_max * 1.0001 or not log:
            parts.append(f'<text x="{PAD - 4}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    parts.append(f'<text x="12" y="{H / 2}" transform="rotate(-90 12 {H / 2})" text-anchor="middle">'
                 f'{html.escape(y_label)}</text>')
    return parts, x, y


def latency_svg(history: list[Op], intervals: list[tuple[float, float, str]], kinds: list[str]) -> str:
    pts = [(c["time"], c["time"] - i["time"], c["type"], i["f"]) for i, c in pair(history)
           if c is not None and i["f"] in ("send", "txn")]
    t_max = history[-1]["time"] if history else 1.0
    y_max = max((p[1] for p in pts), default=1.0)
    parts, x, y = _frame(t_max, y_max, "write latency (s, log)", True, intervals, kinds)
    step = max(1, len(pts) // 6000)   # keep the file small on long runs
    for t, lat, typ, f in pts[::step]:
        shape = "circle" if f == "send" else "rect"
        if shape == "circle":
            parts.append(f'<circle cx="{x(t):.1f}" cy="{y(lat):.1f}" r="1.6" fill="{COLORS[typ]}"/>')
        else:
            parts.append(f'<rect x="{x(t) - 1.5:.1f}" y="{y(lat) - 1.5:.1f}" width="3" height="3" '
                         f'fill="{COLORS[typ]}"/>')
    parts.append("</svg>")
    return "\n".join(parts)


def throughput_svg(history: list[Op], intervals: list[tuple[float, float, str]], kinds: list[str]) -> str:
    buckets: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for i, c in pair(history):
        if c is None or i["f"] not in ("send", "txn", "poll"):
            continue
        key = f"{i['f']} {c['type']}"
        buckets[key][int(c["time"])] += 1
    t_max = history[-1]["time"] if history else 1.0
    y_max = max((n for b in buckets.values() for n in b.values()), default=1)
    parts, x, y = _frame(t_max, float(y_max), "operations / s", False, intervals, kinds)
    palette = {"send ok": "#2a7", "send info": "#e90", "send fail": "#d33", "txn ok": "#27a", "txn info": "#a72",
               "txn fail": "#a27", "poll ok": "#999"}
    for n, (key, b) in enumerate(sorted(buckets.items())):
        col = palette.get(key, "#000")
        pts = " ".join(f"{x(s + 0.5):.1f},{y(b.get(s, 0)):.1f}" for s in range(int(t_max) + 1))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="1.2"/>')
        parts.append(f'<text x="{W - PAD - 90}" y="{30 + 13 * n}" fill="{col}">{html.escape(key)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def write_report(out: Path, history: list[Op], result: Result, meta: dict[str, Any]) -> Path:
    intervals = _intervals(history)
    kinds = sorted({k for _, _, k in intervals})
    s = result.summary()
    verdict = "VALID" if result.valid else "INVALID"
    color = "#2a7" if result.valid else "#d33"
    rec_rows = "".join(  # recovery_s None: unmeasured
        f"<tr><td>{r['heal_time']:.1f}</td><td>{html.escape(str(r['kind']))}</td><td>{r['recovery_s']}</td>"
        f"<td>{r['slowest_partition']}</td><td>{r['no_write_after'] or ''}</td></tr>" for r in result.recoveries)
    doc = f"""<!doctype html><html><head><meta charset="utf-8"><title>Samsa Jepsen run</title>
<style>body{{font-family:sans-serif;margin:2em}} pre{{background:#f6f6f6;padding:1em;overflow:auto}}
table{{border-collapse:collapse}} td,th{{border:1px solid #ccc;padding:2px 8px}}</style></head><body>
<h1>Samsa fault run: <span style="color:{color}">{verdict}</span></h1>
<h2>Anomalies</h2><pre>{html.escape(json.dumps(s["anomalies"], indent=2)) if s["anomalies"] else "none"}</pre>
<p>{html.escape(", ".join(f"{k}={v}" for k, v in s["counts"].items()))}</p>
<h2>Write latency</h2><p>circles: idempotent sends; squares: transactions; green ok, orange info (unknown), red fail.
Shaded: nemesis active.</p>
{latency_svg(history, intervals, kinds)}
<h2>Throughput</h2>
{throughput_svg(history, intervals, kinds)}
<h2>Recovery after each heal</h2><p>seconds from the heal until every partition took an acknowledged write again;
longest span without any acknowledged write: {s["longest-write-gap"]}</p>
<table><tr><th>heal at (s)</th><th>nemesis</th><th>recovery (s)</th><th>slowest partition</th>
<th>no write after</th></tr>{rec_rows}</table>
<details><summary>Run settings and notes</summary><pre>{html.escape(json.dumps(meta, indent=2))}</pre></details>
</body></html>
"""
    path = out / "report.html"
    path.write_text(doc)
    return path
