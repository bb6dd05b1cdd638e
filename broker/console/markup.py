"""Building the console's HTML on the server, with every value escaped unless it says otherwise.

Theory of operation: :func:`h` builds one element from a tag, attributes and children. A
child or attribute value that is a plain ``str`` (or a number) is escaped with
:func:`html.escape`; only :class:`Markup` (what :func:`h` itself returns) passes through
unescaped. So text from the cluster (topic names, message keys and values, headers, configs,
client ids) can only ever become text: the same rule the JS front end followed with
``textContent``, enforced here by type. The strict Content-Security-Policy of :mod:`.http`
(no inline script, no inline style) stays as a second wall.

Also here: the number, byte and time formats shown on every page, tables, cards and the
server-drawn SVG line chart (the live chart is this SVG, redrawn by each refresh; no chart
library). Nothing here does I/O; pages call these from the console's worker thread.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

VOID = frozenset({"input", "meta", "link", "br", "img"})


class Markup(str):
    """A string that is already HTML: passed through by :func:`h` unescaped."""

    __slots__ = ()


def esc(value: object) -> Markup:
    return value if isinstance(value, Markup) else Markup(html.escape(str(value), quote=True))


def _children(children: Iterable[object]) -> Iterable[str]:
    for c in children:
        if c is None or c is False or c == "":
            continue
        if isinstance(c, (list, tuple)) or (not isinstance(c, str) and isinstance(c, Iterable)):
            yield from _children(c)
        else:
            yield esc(c)


def h(tag: str, attrs: Mapping[str, object] | None = None, *children: object) -> Markup:
    """``<tag attrs>children</tag>``; attribute ``None``/``False`` is left out, ``True`` is bare."""
    parts = [f"<{tag}"]
    for k, v in (attrs or {}).items():
        if v is None or v is False:
            continue
        parts.append(f" {k}" if v is True else f' {k}="{esc(v)}"')
    parts.append(">")
    if tag in VOID:
        return Markup("".join(parts))
    parts.extend(_children(children))
    parts.append(f"</{tag}>")
    return Markup("".join(parts))


def join(items: Iterable[object], sep: str = "") -> Markup:
    return Markup(esc(sep).join(_children(items)))


# --- formats (the same on every page) ----------------------------------------------------------

def fmt_num(n: float | None) -> str:
    if n is None:
        return "–"
    return f"{n:,}" if isinstance(n, int) else f"{float(n):,.0f}"


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "–"
    x = float(n)
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    i = 0
    while abs(x) >= 1024 and i < len(units) - 1:
        x /= 1024
        i += 1
    return f"{x:.0f} {units[i]}" if i == 0 else f"{x:.1f} {units[i]}"


def fmt_rate(n: float | None, unit: str = "msg") -> str:
    if unit == "B":
        return fmt_bytes(n) + "/s"
    return f"{float(n or 0):.1f} msg/s"


def fmt_time(ms: float | None) -> str:
    if ms is None or ms < 0:
        return "–"
    t = time.gmtime(ms / 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + f".{int(ms) % 1000:03d} UTC"


# --- building blocks ---------------------------------------------------------------------------

class Col:
    """A table column: its header and whether its cells are numbers (right-aligned)."""

    __slots__ = ("label", "num")

    def __init__(self, label: str, num: bool = False) -> None:
        self.label, self.num = label, num


def table(cols: Sequence[Col], rows: Iterable[Sequence[object]], empty: str = "Nothing to show.",
          attrs: Mapping[str, object] | None = None) -> Markup:
    body = [h("tr", None, *(h("td", {"class": "num" if c.num else None}, cell) for c, cell in zip(cols, r, strict=True)))
            for r in rows]
    if not body:
        return h("div", {"class": "empty", **(attrs or {})}, empty)
    head = h("thead", None, h("tr", None, *(h("th", {"class": "num" if c.num else None}, c.label) for c in cols)))
    return h("div", {"class": "table-wrap", **(attrs or {})}, h("table", None, head, h("tbody", None, *body)))


def card(label: str, value: object, cls: str = "", key: str | None = None) -> Markup:
    return h("div", {"class": f"card {cls}".strip(), "data-card": key or label},
             h("div", {"class": "label"}, label), h("div", {"class": "value"}, value))


def badge(text: object, cls: str = "") -> Markup:
    return h("span", {"class": f"badge {cls}".strip()}, text)


def state_badge(state: str | None) -> Markup:
    cls = "ok" if state == "Stable" else ("bad" if state == "Dead" else "warn")
    return badge(state or "–", cls)


def error_box(message: str, page_error: bool = False) -> Markup:
    return h("div", {"class": "error", "role": "alert", "data-page-error": page_error or None}, message)


class Series:
    """One line of a chart: a name, a CSS class for its colour, a value format and its points."""

    __slots__ = ("name", "cls", "color", "fmt", "points")

    def __init__(self, name: str, cls: str, color: str, fmt: Callable[[float], str], points: list[tuple[float, float]]) -> None:
        self.name, self.cls, self.color, self.fmt, self.points = name, cls, color, fmt, points


def line_chart(series: list[Series], chart_id: str, label: str, empty: str = "Collecting samples…") -> Markup:
    """An SVG line chart (time on x), drawn here; each refresh of the page redraws it."""
    W, H, L, R, T, B = 800, 220, 70, 10, 10, 24
    for s in series:  # one sample is drawn as a short flat line rather than nothing
        if len(s.points) == 1:
            t, v = s.points[0]
            s.points = [(t - 2, v), (t, v)]
    pts = [p for s in series for p in s.points]
    legend = h("div", {"class": "legend"}, *(
        h("span", None, h("span", {"class": f"swatch {s.cls}"}),
          f"{s.name}: {s.fmt(s.points[-1][1]) if s.points else '–'}") for s in series))
    svg_attrs = {"viewBox": f"0 0 {W} {H}", "preserveAspectRatio": "none", "role": "img", "aria-label": label}
    if len(pts) < 2:
        svg = h("svg", svg_attrs, h("text", {"x": W / 2, "y": H / 2, "text-anchor": "middle"}, empty))
        return h("div", {"class": "chart", "data-chart": chart_id}, svg, legend)
    t0, t1 = min(p[0] for p in pts), max(p[0] for p in pts)
    vmax = max(p[1] for p in pts)
    vmax = 1.0 if vmax <= 0 else vmax * 1.1

    def x(t: float) -> float:
        return L + (W - L - R) * (1.0 if t1 == t0 else (t - t0) / (t1 - t0))

    def y(v: float) -> float:
        return T + (H - T - B) * (1 - v / vmax)

    parts: list[Markup] = []
    for i in range(5):
        v = vmax * i / 4
        yy = y(v)
        parts.append(h("line", {"x1": L, "x2": W - R, "y1": f"{yy:.1f}", "y2": f"{yy:.1f}", "stroke": "#e5e8ef",
                                "stroke-width": 1}))
        parts.append(h("text", {"x": L - 6, "y": f"{yy + 4:.1f}", "text-anchor": "end"}, series[0].fmt(v)))
    parts.append(h("text", {"x": L, "y": H - 6}, time.strftime("%H:%M:%S UTC", time.gmtime(t0))))
    parts.append(h("text", {"x": W - R, "y": H - 6, "text-anchor": "end"},
                   time.strftime("%H:%M:%S UTC", time.gmtime(t1))))
    for s in series:
        if not s.points:
            continue
        d = " ".join(f"{'L' if i else 'M'}{x(t):.1f} {y(v):.1f}" for i, (t, v) in enumerate(s.points))
        parts.append(h("path", {"d": d, "fill": "none", "stroke": s.color, "stroke-width": 2, "data-series": s.name,
                                "vector-effect": "non-scaling-stroke"}))
    return h("div", {"class": "chart", "data-chart": chart_id}, h("svg", svg_attrs, *parts), legend)
