"""The console's pages, rendered on the server as plain HTML that reads without JavaScript.

Theory of operation: each page is a function ``(view, allow_writes, query) -> (status, html)``
that :class:`.api.ConsoleApp` runs on the console's worker thread (``ClusterView.call``), so
both the Kafka round trips and the HTML building stay off the broker's event loop. A page
asks :class:`.cluster.ClusterView` for the same dicts the JSON API serves and turns them into
markup with :mod:`.markup`, which escapes every value.

The HTML is complete on arrival: tables, cards, the SVG charts, the message browser (a GET
form and pager links). ``static/app.js`` only adds what needs a script: pages whose
``<body>`` has ``data-refresh`` are re-fetched every so many milliseconds and their
``data-live`` regions swapped in place (which is what makes the throughput and lag charts
live), and the write forms (shown only with ``console.allow.writes=true``) are sent as JSON
to the ``/api/`` endpoints, whose same-origin JSON-only rule keeps other sites from
forging them. Forms sit outside the live regions, so a refresh never eats what the operator
is typing.
"""

from __future__ import annotations

import calendar
import json
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import quote, urlencode

from .cluster import ClusterView, ConsoleError
from .markup import (
    Col,
    Markup,
    Series,
    badge,
    card,
    error_box,
    fmt_bytes,
    fmt_num,
    fmt_rate,
    fmt_time,
    h,
    line_chart,
    state_badge,
    table,
)
from .messages import MAX_PAGE, RenderedBytes

Page = tuple[int, bytes]

NAV = (("overview", "/", "Overview"), ("topics", "/topics", "Topics"), ("groups", "/groups", "Consumer groups"),
       ("transactions", "/transactions", "Transactions"), ("security", "/security", "ACLs & quotas"),
       ("schemas", "/schemas", "Schemas"))
WRITES_NEED_JS = "Write actions need JavaScript: they are sent as JSON, which other web sites cannot forge."


def url(*parts: object) -> str:
    return "/" + "/".join(quote(str(p), safe="") for p in parts)


def link(href: str, text: object) -> Markup:
    return h("a", {"href": href}, text)


def layout(title: str, section: str, allow_writes: bool, *content: object, refresh_ms: int | None = None,
           status: int = 200) -> Page:
    nav = h("nav", {"id": "nav"}, *(h("a", {"href": href, "data-nav": key, "class": "active" if key == section else None},
                                      label) for key, href, label in NAV))
    mode = h("span", {"id": "mode", "class": "mode rw" if allow_writes else "mode"},
             "writes allowed" if allow_writes else "read-only")
    head = h("head", None, h("meta", {"charset": "utf-8"}),
             h("meta", {"name": "viewport", "content": "width=device-width, initial-scale=1"}),
             h("title", None, f"{title} · Samsa console"),
             h("link", {"rel": "icon", "href": "/static/favicon.svg", "type": "image/svg+xml"}),
             h("link", {"rel": "stylesheet", "href": "/static/app.css"}),
             h("script", {"src": "/static/app.js", "defer": True}))
    body = h("body", {"data-refresh": refresh_ms},
             h("header", {"class": "top"}, h("a", {"class": "brand", "href": "/"}, "Samsa"), nav, mode),
             h("main", {"id": "main"}, h("h1", None, title), *content))
    return status, ("<!doctype html>\n" + h("html", {"lang": "en"}, head, body) + "\n").encode()


def live(key: str, *content: object) -> Markup:
    """A region the page's refresh replaces (by id)."""
    return h("div", {"id": key, "data-live": True}, *content)


def error_page(status: int, message: str, allow_writes: bool) -> Page:
    return layout("Error" if status != 404 else "Not found", "", allow_writes, error_box(message),
                  h("p", None, link("/", "Back to the overview")), status=status)


def result_area() -> Markup:
    return h("div", {"class": "result", "aria-live": "polite"})


def write_note() -> Markup:
    return h("noscript", None, h("p", {"class": "muted"}, WRITES_NEED_JS))


def _query_int(query: dict[str, str], name: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = query.get(name, "")
    if raw == "":
        return default
    try:
        v = int(raw)
    except ValueError as e:
        raise ConsoleError(f"{name} must be an integer, not {raw[:40]!r}") from e
    if not lo <= v <= hi:
        raise ConsoleError(f"{name} must be between {lo} and {hi}")
    return v


def parse_time_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO date/time (UTC unless it says otherwise)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise ConsoleError(f"Give a timestamp in ms or an ISO date, e.g. 2026-11-23T10:00:00Z, not {text[:40]!r}") \
            from e
    if dt.tzinfo is None:
        return calendar.timegm(dt.timetuple()) * 1000 + dt.microsecond // 1000
    return int(dt.astimezone(UTC).timestamp() * 1000)


# --- overview ---------------------------------------------------------------------------------

def overview(v: ClusterView, allow_writes: bool, query: dict[str, str]) -> Page:
    ov = v.overview()
    hist = list(v.history)
    rates = ov["rates"] or {}
    metrics = rates.get("source") == "metrics"
    cards = h("div", {"class": "cards"},
              card("Cluster id", ov["cluster_id"], "wide", "cluster_id"),
              card("Controller", f"broker {ov['controller']}", "", "controller"),
              card("Brokers", fmt_num(len(ov["brokers"])), "", "brokers"),
              card("Samsa version", ov["samsa_version"], "", "version"),
              card("Topics", fmt_num(ov["topics"]), "", "topics"),
              card("Partitions", fmt_num(ov["partitions"]), "", "partitions"),
              card("Under-replicated", fmt_num(ov["under_replicated"]), "bad" if ov["under_replicated"] else "ok",
                   "under_replicated"),
              card("Offline", fmt_num(ov["offline"]), "bad" if ov["offline"] else "ok", "offline"),
              card("Bytes in", fmt_rate(rates.get("bytes_in"), "B"), "", "bytes_in"),
              card("Bytes out" if metrics else "Bytes out (groups, est.)", fmt_rate(rates.get("bytes_out"), "B"), "",
                   "bytes_out"),
              card("Messages in", fmt_rate(rates.get("messages_in")), "", "messages_in"))
    per_s = lambda x: fmt_bytes(x) + "/s"  # noqa: E731
    chart = line_chart([Series("bytes in/s", "in", "#2f6fdd", per_s, [(p["t"], p["bytes_in"]) for p in hist]),
                        Series("bytes out/s", "out", "#e07b00", per_s, [(p["t"], p["bytes_out"]) for p in hist])],
                       "throughput", "bytes in and out per second")
    source = ("Bytes in/out: the brokers' BytesInPerSec/BytesOutPerSec counters from their metrics endpoints, "
              "sampled every 2 s." if metrics else
              "Bytes in: growth of each partition's log on its leader. Bytes out: records committed by consumer "
              "groups times the partition's mean record size (estimated; set metrics.listener for exact counters). "
              "Sampled every 2 s over the Kafka protocol.")
    brokers = table([Col("ID"), Col("Host"), Col("Port", True), Col("Rack"), Col("Role"), Col("Leaders", True),
                     Col("Kafka version")],
                    [[str(b["id"]), b["host"], str(b["port"]), b["rack"] or "–",
                      badge("controller", "ok") if b["id"] == ov["controller"] else "broker", fmt_num(b["leaders"]),
                      b["kafka_version"] or "–"] for b in ov["brokers"]], "No brokers reported.")
    return layout("Cluster overview", "overview", allow_writes,
                  live("overview-live", cards, h("h2", None, "Throughput"), chart,
                       h("p", {"class": "muted", "id": "rates-source"}, source), h("h2", None, "Brokers"), brokers),
                  refresh_ms=2000)


# --- topics -----------------------------------------------------------------------------------

def topics(v: ClusterView, allow_writes: bool, query: dict[str, str]) -> Page:
    rows = []
    for t in v.topics():
        health = (badge(f"{t['under_replicated']} under-replicated, {t['offline']} offline", "bad")
                  if t["under_replicated"] or t["offline"] else badge("ok", "ok"))
        rows.append([link(url("topics", t["name"]), t["name"]), badge("internal") if t["internal"] else "",
                     fmt_num(t["partitions"]), fmt_num(t["replication_factor"]), fmt_bytes(t["size"]),
                     fmt_num(t["messages"]), f"{float(t['messages_per_sec'] or 0):.1f}", health])
    empty = "No topics yet. Produce to a topic, or create one" + (" above." if allow_writes else
                                                                  " with samsa topics --create.")
    listing = table([Col("Topic"), Col(""), Col("Partitions", True), Col("RF", True), Col("Size", True),
                     Col("Messages", True), Col("Msg/s", True), Col("Health")], rows, empty)
    return layout("Topics", "topics", allow_writes, create_topic_form() if allow_writes else None,
                  live("topics-live", listing), refresh_ms=5000)


def create_topic_form() -> Markup:
    form = h("form", {"class": "inline", "id": "create-topic", "data-api": "/api/topics", "data-action": "create-topic"},
             h("label", None, "New topic", h("input", {"name": "name", "required": True, "placeholder": "orders"})),
             h("label", None, "Partitions", h("input", {"name": "partitions", "type": "number", "min": 1, "value": 1})),
             h("label", None, "Replication factor",
               h("input", {"name": "replication_factor", "type": "number", "min": 1, "value": 1})),
             h("label", None, "Configs (k=v, …)", h("input", {"name": "configs", "placeholder": "retention.ms=86400000"})),
             h("button", {"type": "submit"}, "Create topic"))
    return h("div", {"id": "create-topic-box"}, form, write_note(), result_area())


def topic(v: ClusterView, allow_writes: bool, query: dict[str, str], name: str) -> Page:
    t = v.topic(name)
    parts = table([Col("Partition", True), Col("Leader", True), Col("Epoch", True), Col("Replicas"), Col("ISR"),
                   Col("Log start", True), Col("Log end", True), Col("Size", True), Col("")],
                  [[str(p["partition"]), badge("offline", "bad") if p["leader"] < 0 else str(p["leader"]),
                    fmt_num(p["leader_epoch"]), ", ".join(map(str, p["replicas"])),
                    h("span", {"class": "badge warn" if len(p["isr"]) < len(p["replicas"]) else None,
                               "data-isr": ",".join(map(str, p["isr"]))}, ", ".join(map(str, p["isr"]))),
                    fmt_num(p["log_start_offset"]), fmt_num(p["log_end_offset"]), fmt_bytes(p["size"]),
                    link(url("topics", name, "messages") + f"?partition={p['partition']}", "messages")]
                   for p in t["partitions"]])
    configs = table([Col("Name"), Col("Value"), Col("Source")],
                    [[c["name"], "(sensitive)" if c["sensitive"] else ("null" if c["value"] is None else c["value"]),
                      badge(c["source"], "warn" if c["source"] == "DYNAMIC_TOPIC_CONFIG" else "")]
                     for c in t["configs"]])
    summary = (f"Topic id {t['topic_id']} · {len(t['partitions'])} partition(s) · "
               f"{float(t['messages_per_sec'] or 0):.1f} msg/s")
    return layout(f"Topic {name}", "topics", allow_writes,
                  live("topic-live", h("p", {"class": "muted"}, summary), h("h2", None, "Partitions"), parts,
                       h("h2", None, "Configs"), configs),
                  topic_write_forms(name, len(t["partitions"])) if allow_writes else None)


def topic_write_forms(name: str, partitions: int) -> Markup:
    base = url("api", "topics", name)
    return h("div", {"id": "topic-writes", "data-topic": name}, h("h2", None, "Change this topic"), write_note(),
             h("form", {"class": "inline", "id": "add-partitions", "data-api": base + "/partitions"},
               h("label", None, "Total partitions", h("input", {"name": "count", "type": "number", "min": partitions + 1,
                                                                "value": partitions + 1, "required": True})),
               h("button", {"type": "submit"}, "Add partitions")),
             h("form", {"class": "inline", "id": "alter-config", "data-api": base + "/configs"},
               h("label", None, "Config", h("input", {"name": "name", "required": True, "placeholder": "retention.ms"})),
               h("label", None, "Value (empty: back to default)", h("input", {"name": "value"})),
               h("button", {"type": "submit"}, "Alter config")),
             h("form", {"class": "inline", "id": "delete-records", "data-api": base + "/delete-records"},
               h("label", None, "Partition", h("input", {"name": "partition", "type": "number", "min": 0, "value": 0,
                                                         "required": True})),
               h("label", None, "Delete records before offset",
                 h("input", {"name": "offset", "type": "number", "min": 0, "required": True})),
               h("button", {"type": "submit"}, "Delete records")),
             result_area())


# --- messages ---------------------------------------------------------------------------------

def _field(label: str, f: RenderedBytes) -> Markup:
    info = f["format"] + (f" · {fmt_bytes(f['size'])}" if f["size"] else "") + (" · truncated" if f["truncated"] else "")
    return h("div", {"class": "field", "data-field": label}, h("div", {"class": "name"}, label + " ", badge(info)),
             h("pre", {"class": "muted"}, "null") if f["format"] == "null" else h("pre", None, f["text"]))


def messages(v: ClusterView, allow_writes: bool, query: dict[str, str], name: str) -> Page:
    partition = _query_int(query, "partition", 0, 0, 2**31 - 1) or 0
    limit = _query_int(query, "limit", 20, 1, MAX_PAGE) or 20
    offset = _query_int(query, "offset", None, -(2**62), 2**62)
    timestamp = _query_int(query, "timestamp", None, 0, 2**62)
    at = query.get("at", "").strip()
    if query.get("from") == "timestamp" and at:  # the browse form
        timestamp, offset = parse_time_ms(at), None
    elif query.get("from") == "offset" and at:
        offset, timestamp = _query_int({"offset": at}, "offset", None, -(2**62), 2**62), None
    page = v.browse(name, partition, offset, timestamp, limit)
    base = url("topics", name, "messages")

    def href(**extra: object) -> str:
        return base + "?" + urlencode({"partition": page["partition"], "limit": page["limit"], **extra})

    from_ts = timestamp is not None
    form = h("form", {"class": "inline", "id": "browse", "method": "get", "action": base},
             h("label", None, "Partition", h("input", {"name": "partition", "type": "number", "min": 0,
                                                       "value": page["partition"]})),
             h("label", None, "From", h("select", {"name": "from"},
                                        h("option", {"value": "offset", "selected": not from_ts}, "offset"),
                                        h("option", {"value": "timestamp", "selected": from_ts}, "timestamp"))),
             h("label", None, "Offset / time (empty: newest)",
               h("input", {"name": "at", "value": at or (str(timestamp) if from_ts else
                                                         "" if offset is None else str(offset))})),
             h("label", None, "Page size", h("input", {"name": "limit", "type": "number", "min": 1, "max": MAX_PAGE,
                                                       "value": page["limit"]})),
             h("button", {"type": "submit"}, "Show"))
    msgs = page["messages"]
    prev_start = max(page["log_start_offset"], page["start_offset"] - page["limit"])
    older = (link(href(offset=prev_start), "← Older") if page["start_offset"] > page["log_start_offset"]
             else h("span", {"class": "button disabled"}, "← Older"))
    newer = (link(href(offset=page["next_offset"]), "Newer →") if page["next_offset"] < page["log_end_offset"]
             else h("span", {"class": "button disabled"}, "Newer →"))
    articles = [h("article", {"class": "msg", "data-offset": m["offset"]},
                  h("div", {"class": "meta"}, h("span", None, f"offset {m['offset']}"),
                    h("span", None, f"{fmt_time(m['timestamp'])} ({m['timestamp_type']})")),
                  _field("key", m["key"]), _field("value", m["value"]),
                  h("div", {"class": "field"}, h("div", {"class": "name"}, "headers"),
                    *(h("div", {"data-header": hd["key"]},
                        h("pre", None, f"{hd['key']}: " + ("null" if hd["value"]["format"] == "null"
                                                           else hd["value"]["text"])))
                      for hd in m["headers"])) if m["headers"] else None)
                for m in msgs]
    shown = f"offsets {msgs[0]['offset']}–{msgs[-1]['offset']}" if msgs else ""
    return layout(f"Messages in {name}", "topics", allow_writes,
                  h("p", None, link(url("topics", name), f"← topic {name}"),
                    h("span", {"class": "muted"}, f" · partition {page['partition']}: offsets "
                      f"{fmt_num(page['log_start_offset'])} to {fmt_num(page['log_end_offset'])} (exclusive)")),
                  form,
                  h("div", {"class": "pager"}, older, h("span", {"class": "muted"}, shown), newer),
                  h("div", {"id": "messages"}, *articles) if articles else
                  h("div", {"class": "empty"}, "No messages in this range."))


# --- consumer groups --------------------------------------------------------------------------

def groups(v: ClusterView, allow_writes: bool, query: dict[str, str]) -> Page:
    listing = table([Col("Group"), Col("State"), Col("Type"), Col("Protocol"), Col("Total lag", True)],
                    [[link(url("groups", g["group"]), g["group"]), state_badge(g["state"]), g["type"] or "classic",
                      g["protocol_type"] or "–", fmt_num(g["lag"])] for g in v.groups()],
                    "No consumer groups yet. They appear here once a consumer joins a group or commits offsets.")
    return layout("Consumer groups", "groups", allow_writes, live("groups-live", listing), refresh_ms=4000)


def group(v: ClusterView, allow_writes: bool, query: dict[str, str], gid: str) -> Page:
    g = v.group(gid)
    cards = h("div", {"class": "cards"},
              card("State", g["state"] or "–", "", "state"), card("Members", fmt_num(len(g["members"])), "", "members"),
              card("Total lag", fmt_num(g["total_lag"]), "bad" if g["total_lag"] else "ok", "total_lag"),
              card("Coordinator", f"broker {g['coordinator']}", "", "coordinator"),
              card("Strategy", g.get("assignment_strategy") or "–", "", "strategy"),
              card("Type", g.get("type") or "classic", "", "type"))
    chart = line_chart([Series("total lag", "lag", "#b42318", lambda x: fmt_num(round(x)),
                               [(p["t"], p["lag"]) for p in g["lag_history"]])], "lag", "total lag over time")
    offsets = table([Col("Topic"), Col("Partition", True), Col("Committed", True), Col("Log end", True),
                     Col("Lag", True), Col("Consumer")],
                    [[link(url("topics", o["topic"]), o["topic"]), str(o["partition"]), fmt_num(o["current_offset"]),
                      fmt_num(o["log_end_offset"]), fmt_num(o["lag"]), o.get("consumer_id") or "–"]
                     for o in g["offsets"]], "No committed offsets.")
    members = table([Col("Member"), Col("Client id"), Col("Host"), Col("Assigned partitions")],
                    [[m["member_id"], m.get("client_id") or "–", m.get("host") or "–",
                      ", ".join(f"{p['topic']}-{p['partition']}" for p in m["partitions"]) or "–"]
                     for m in g["members"]], f"No active members (the group is {g['state'] or 'unknown'}).")
    topics_ = sorted({o["topic"] for o in g["offsets"]})
    return layout(f"Consumer group {gid}", "groups", allow_writes,
                  live("group-live", cards, h("h2", None, "Lag over time"), chart, h("h2", None, "Lag per partition"),
                       offsets, h("h2", None, "Members"), members),
                  reset_form(gid, topics_) if allow_writes else None, refresh_ms=2000)


def reset_form(gid: str, topics_: list[str]) -> Markup:
    form = h("form", {"class": "inline", "data-api": url("api", "groups", gid, "reset-offsets")},
             h("label", None, "Topic", h("input", {"name": "topic", "required": True, "value": topics_[0] if topics_ else "",
                                                   "list": "group-topics"})),
             h("datalist", {"id": "group-topics"}, *(h("option", {"value": t}) for t in topics_)),
             h("label", None, "Reset to", h("select", {"name": "to"}, *(
                 h("option", {"value": o}, o) for o in ("earliest", "latest", "offset", "timestamp", "shift")))),
             h("label", None, "Value (offset, ms or shift)", h("input", {"name": "value", "type": "number"})),
             h("button", {"type": "submit", "name": "dry-run"}, "Dry run"),
             h("button", {"type": "submit", "name": "execute", "disabled": True}, "Execute"))
    return h("div", {"id": "reset-offsets"}, h("h2", None, "Reset offsets"),
             h("p", {"class": "muted"}, "The group must be empty (no running consumers). A dry run shows the plan first."),
             write_note(), form, result_area())


# --- transactions, ACLs and quotas ------------------------------------------------------------

def transactions(v: ClusterView, allow_writes: bool, query: dict[str, str]) -> Page:
    doc = v.transactions()
    txns = table([Col("Transactional id"), Col("State"), Col("Producer id", True), Col("Epoch", True),
                  Col("Timeout ms", True), Col("Started"), Col("Partitions")],
                 [[t["transactional_id"], state_badge(t["state"]), str(t["producer_id"]), fmt_num(t["producer_epoch"]),
                   fmt_num(t["timeout_ms"]), fmt_time(t["start_time_ms"]), ", ".join(t["partitions"]) or "–"]
                  for t in doc["transactions"]], "No transactional producers known to the transaction coordinators.")
    producers = table([Col("Topic"), Col("Partition", True), Col("Producer id", True), Col("Epoch", True),
                       Col("Last sequence", True), Col("Last write"), Col("Open txn from", True)],
                      [[p["topic"], str(p["partition"]), str(p["producer_id"]), str(p["producer_epoch"]),
                        str(p["last_sequence"]), fmt_time(p["last_timestamp"]),
                        str(p["current_transaction_start_offset"]) if p["current_transaction_start_offset"] >= 0
                        else "–"] for p in doc["producers"]],
                      "No idempotent or transactional producers have written to the topics.")
    return layout("Transactions and producers", "transactions", allow_writes,
                  live("transactions-live", h("h2", None, "Transactions"), txns, h("h2", None, "Active producers"),
                       producers), refresh_ms=5000)


def security(v: ClusterView, allow_writes: bool, query: dict[str, str]) -> Page:
    doc = v.security()
    if doc["acls"] is None:
        acls = h("div", {"class": "empty", "id": "acl-note"}, doc["acl_note"])
    else:
        acls = table([Col("Resource"), Col("Name"), Col("Pattern"), Col("Principal"), Col("Host"), Col("Operation"),
                      Col("Permission")],
                     [[a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"], a["host"],
                       a["operation"], badge(a["permission"], "bad" if a["permission"] == "DENY" else "ok")]
                      for a in doc["acls"]], "No ACLs. With an authorizer, access then follows "
                     "allow.everyone.if.no.acl.found.")
    if doc["quotas"] is None:
        quotas = h("div", {"class": "empty"}, doc["quota_note"])
    else:
        quotas = table([Col("Entity"), Col("Quota"), Col("Value", True)],
                       [[q["entity"], q["key"], fmt_num(q["value"])] for q in doc["quotas"]],
                       "No client quotas are set.")
    return layout("ACLs and quotas", "security", allow_writes,
                  live("security-live", h("h2", None, "ACLs"), acls, h("h2", None, "Client quotas"), quotas),
                  refresh_ms=10000)


def schemas(v: ClusterView, allow_writes: bool, query: dict[str, str]) -> Page:
    doc = v.schemas()
    if doc["url"] is None:
        return layout("Schemas", "schemas", allow_writes, h("div", {"class": "empty", "id": "schemas-note"},
                                                             doc["note"]))
    cards = h("div", {"class": "cards"}, card("Subjects", fmt_num(len(doc["subjects"]))),
              card("Compatibility (global)", doc["compatibility"]), card("Mode (global)", doc["mode"]))
    rows = table([Col("Subject"), Col("Type"), Col("Latest version", True), Col("Schema id", True),
                  Col("Versions"), Col("Compatibility")],
                 [[link(url("schemas", s["subject"]), s["subject"]), s["schema_type"], str(s["latest_version"]),
                   str(s["id"]), ", ".join(str(x) for x in s["versions"]), s["compatibility"]]
                  for s in doc["subjects"]], "No subjects registered yet.")
    return layout("Schemas", "schemas", allow_writes, h("p", {"class": "muted"}, f"Schema registry at {doc['url']}"),
                  live("schemas-live", cards, rows), refresh_ms=10000)


def subject(v: ClusterView, allow_writes: bool, query: dict[str, str], name: str) -> Page:
    doc = v.subject(name)
    parts: list[Markup | str] = [h("p", None, f"Compatibility: {doc['compatibility']}")]
    for ver in reversed(doc["versions"]):
        text = ver["schema"]
        try:
            text = json.dumps(json.loads(text), indent=2)
        except ValueError:
            pass
        refs = ", ".join(f"{r['name']} = {r['subject']} v{r['version']}" for r in ver.get("references") or [])
        parts += [h("h2", None, f"Version {ver['version']} · id {ver['id']} · {ver.get('schemaType', 'AVRO')}"),
                  h("p", {"class": "muted"}, f"References: {refs}") if refs else "", h("pre", None, text)]
    return layout(f"Subject {name}", "schemas", allow_writes, *parts)


def route(seg: list[str]) -> tuple[Callable[..., Page], tuple[str, ...]] | None:
    """The page for a path (its segments), with the path's arguments; None: no such page."""
    if not seg or seg == ["index.html"]:
        return overview, ()
    if seg[0] == "topics":
        if len(seg) == 1:
            return topics, ()
        if len(seg) == 2:
            return topic, (seg[1],)
        if len(seg) == 3 and seg[2] == "messages":
            return messages, (seg[1],)
    if seg[0] == "groups":
        if len(seg) == 1:
            return groups, ()
        if len(seg) == 2:
            return group, (seg[1],)
    if seg == ["transactions"]:
        return transactions, ()
    if seg == ["security"]:
        return security, ()
    if seg == ["schemas"]:
        return schemas, ()
    if len(seg) == 2 and seg[0] == "schemas":
        return subject, (seg[1],)
    return None

