// Samsa console front end: hash routes over the JSON API under /api/, hand-written, no dependencies.
//
// Safety rule: every value from the cluster (topic names, message keys/values/headers, configs,
// client ids) reaches the page through el()/text nodes (textContent), never innerHTML, so message
// contents cannot inject markup; the server's Content-Security-Policy forbids inline scripts too.
"use strict";

const main = document.getElementById("main");
let timer = null;          // the current page's refresh timer
let routeToken = 0;        // bumped on each navigation: stale responses are dropped
let config = { allow_writes: false };

// ---------- DOM helpers ----------
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
const SVGNS = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}
function fmtNum(n) { return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"); }
function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; n = Number(n);
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + u[i];
}
function fmtRate(n, unit) { return unit === "B" ? fmtBytes(n) + "/s" : (Number(n || 0).toFixed(1) + " msg/s"); }
function fmtTime(ms) { return ms === null || ms === undefined || ms < 0 ? "–" : new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC"); }
function table(headers, rows, empty) {
  if (!rows.length) return el("div", { class: "empty" }, empty || "Nothing to show.");
  return el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {}, headers.map(h => el("th", { class: h.num ? "num" : null }, h.label !== undefined ? h.label : h)))),
    el("tbody", {}, rows.map(r => el("tr", {}, r.map((c, i) => el("td", { class: headers[i].num ? "num" : null }, c)))))));
}
function card(label, value, cls, id) {
  return el("div", { class: "card " + (cls || ""), "data-card": id || label }, el("div", { class: "label" }, label),
    el("div", { class: "value" }, value));
}
function errorBox(msg) { return el("div", { class: "error", role: "alert" }, msg); }
function setPage(title, ...content) {
  main.replaceChildren(el("h1", {}, title), ...content);
  document.title = title + " · Samsa console";
}
function link(href, text) { return el("a", { href }, text); }
function enc(s) { return encodeURIComponent(s); }

// ---------- API ----------
async function api(path, body) {
  const opts = body === undefined ? {} :
    { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  let resp;
  try { resp = await fetch("/api/" + path, opts); }
  catch (e) { throw new Error("cannot reach the console server: " + e.message); }
  let doc = null;
  try { doc = await resp.json(); } catch (e) { doc = null; }
  if (!resp.ok) throw new Error((doc && doc.error) || ("HTTP " + resp.status));
  return doc;
}

// ---------- charts (SVG, no library) ----------
// series: [{name, color, unit, points: [[t_seconds, value], ...]}]
function lineChart(series, opts) {
  opts = opts || {};
  const W = 800, H = 220, L = 70, R = 10, T = 10, B = 24;
  // one sample is drawn as a short flat line rather than nothing
  series = series.map(s => s.points.length === 1 ? { ...s, points: [[s.points[0][0] - 2, s.points[0][1]], s.points[0]] } : s);
  const all = series.flatMap(s => s.points);
  const box = el("div", { class: "chart", "data-chart": opts.id || "" });
  const legend = el("div", { class: "legend" }, series.map(s => el("span", {},
    el("span", { class: "swatch" }), s.name + ": " + (s.points.length ? s.format(s.points[s.points.length - 1][1]) : "–"))));
  // colours through the CSSOM: the CSP forbids style attributes in markup, not element.style
  legend.querySelectorAll(".swatch").forEach((sw, i) => { sw.style.background = series[i].color; });
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img",
    "aria-label": opts.label || "chart" });
  if (all.length < 2) {
    root.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, opts.empty || "Collecting samples…"));
    box.append(root, legend);
    return box;
  }
  const t0 = Math.min(...all.map(p => p[0])), t1 = Math.max(...all.map(p => p[0]));
  let vmax = Math.max(...all.map(p => p[1]));
  vmax = vmax <= 0 ? 1 : vmax * 1.1;
  const x = t => L + (W - L - R) * (t1 === t0 ? 1 : (t - t0) / (t1 - t0));
  const y = v => T + (H - T - B) * (1 - v / vmax);
  for (let i = 0; i <= 4; i++) {
    const v = vmax * i / 4, yy = y(v);
    root.append(svg("line", { x1: L, x2: W - R, y1: yy, y2: yy, stroke: "#e5e8ef", "stroke-width": 1 }));
    root.append(svg("text", { x: L - 6, y: yy + 4, "text-anchor": "end" }, series[0].format(v)));
  }
  root.append(svg("text", { x: L, y: H - 6 }, new Date(t0 * 1000).toLocaleTimeString()));
  root.append(svg("text", { x: W - R, y: H - 6, "text-anchor": "end" }, new Date(t1 * 1000).toLocaleTimeString()));
  for (const s of series) {
    if (!s.points.length) continue;
    const d = s.points.map((p, i) => (i ? "L" : "M") + x(p[0]).toFixed(1) + " " + y(p[1]).toFixed(1)).join(" ");
    root.append(svg("path", { d, fill: "none", stroke: s.color, "stroke-width": 2, "data-series": s.name,
      "vector-effect": "non-scaling-stroke" }));
  }
  box.append(root, legend);
  return box;
}

// ---------- pages ----------
async function pageOverview(token) {
  const [ov, tp] = await Promise.all([api("overview"), api("throughput")]);
  if (token !== routeToken) return;
  const h = tp.history;
  const brokers = table(
    [{ label: "ID" }, { label: "Host" }, { label: "Port", num: true }, { label: "Rack" }, { label: "Role" },
     { label: "Leaders", num: true }, { label: "Kafka version" }],
    ov.brokers.map(b => [String(b.id), b.host, String(b.port), b.rack || "–",
      b.id === ov.controller ? el("span", { class: "badge ok" }, "controller") : "broker",
      fmtNum(b.leaders), b.kafka_version || "–"]), "No brokers reported.");
  const rates = ov.rates || {};
  setPage("Cluster overview",
    el("div", { class: "cards" },
      card("Cluster id", ov.cluster_id, "wide", "cluster_id"), card("Controller", "broker " + ov.controller, "", "controller"),
      card("Brokers", fmtNum(ov.brokers.length), "", "brokers"), card("Samsa version", ov.samsa_version, "", "version"),
      card("Topics", fmtNum(ov.topics), "", "topics"), card("Partitions", fmtNum(ov.partitions), "", "partitions"),
      card("Under-replicated", fmtNum(ov.under_replicated), ov.under_replicated ? "bad" : "ok", "under_replicated"),
      card("Offline", fmtNum(ov.offline), ov.offline ? "bad" : "ok", "offline"),
      card("Bytes in", fmtRate(rates.bytes_in, "B"), "", "bytes_in"),
      card(rates.source === "metrics" ? "Bytes out" : "Bytes out (groups, est.)", fmtRate(rates.bytes_out, "B"), "", "bytes_out"),
      card("Messages in", fmtRate(rates.messages_in), "", "messages_in")),
    el("h2", {}, "Throughput"),
    lineChart([
      { name: "bytes in/s", color: "#2f6fdd", format: v => fmtBytes(v) + "/s", points: h.map(p => [p.t, p.bytes_in]) },
      { name: "bytes out/s", color: "#e07b00", format: v => fmtBytes(v) + "/s", points: h.map(p => [p.t, p.bytes_out]) },
    ], { id: "throughput", label: "bytes in and out per second" }),
    el("p", { class: "muted", id: "rates-source" }, rates.source === "metrics"
      ? "Bytes in/out: the brokers' BytesInPerSec/BytesOutPerSec counters from their metrics endpoints, sampled every 2 s."
      : "Bytes in: growth of each partition's log on its leader. Bytes out: records committed by consumer groups times " +
        "the partition's mean record size (estimated; set metrics.listener for exact counters). Sampled every 2 s over the Kafka protocol."),
    el("h2", {}, "Brokers"), brokers);
  schedule(() => pageOverview(token), 2000, token);
}

async function pageTopics(token) {
  const doc = await api("topics");
  if (token !== routeToken) return;
  const rows = doc.topics.map(t => [
    link("#/topics/" + enc(t.name), t.name), t.internal ? el("span", { class: "badge" }, "internal") : "",
    fmtNum(t.partitions), fmtNum(t.replication_factor), fmtBytes(t.size), fmtNum(t.messages),
    Number(t.messages_per_sec || 0).toFixed(1),
    t.under_replicated || t.offline ? el("span", { class: "badge bad" }, `${t.under_replicated} under-replicated, ${t.offline} offline`)
      : el("span", { class: "badge ok" }, "ok")]);
  const existing = document.getElementById("create-topic-box");  // keep what the operator is typing
  setPage("Topics",
    config.allow_writes ? (existing || createTopicForm()) : null,
    table([{ label: "Topic" }, { label: "" }, { label: "Partitions", num: true }, { label: "RF", num: true },
      { label: "Size", num: true }, { label: "Messages", num: true }, { label: "Msg/s", num: true }, { label: "Health" }],
    rows, "No topics yet. Produce to a topic, or create one" + (config.allow_writes ? " above." : " with samsa topics --create.")));
  schedule(() => pageTopics(token), 5000, token);
}

function resultArea() { return el("div", { class: "result", "aria-live": "polite" }); }
function showResult(area, ok, text) { area.replaceChildren(ok ? el("div", { class: "notice" }, text) : errorBox(text)); }
function formValues(form) { return Object.fromEntries(new FormData(form).entries()); }

function createTopicForm() {
  const out = resultArea();
  const form = el("form", { class: "inline", id: "create-topic", onsubmit: async (e) => {
    e.preventDefault();
    const v = formValues(form);
    const configs = {};
    for (const item of (v.configs || "").split(",").map(s => s.trim()).filter(Boolean)) {
      const i = item.indexOf("="); if (i > 0) configs[item.slice(0, i).trim()] = item.slice(i + 1).trim();
    }
    try {
      const r = await api("topics", { name: v.name, partitions: Number(v.partitions || -1),
        replication_factor: Number(v.replication_factor || -1), configs });
      showResult(out, true, `Created topic ${r.topic} with ${r.partitions} partition(s).`);
      form.reset();
      setTimeout(route, 600);
    } catch (err) { showResult(out, false, err.message); }
  } },
    el("label", {}, "New topic", el("input", { name: "name", required: true, placeholder: "orders" })),
    el("label", {}, "Partitions", el("input", { name: "partitions", type: "number", min: 1, value: 1 })),
    el("label", {}, "Replication factor", el("input", { name: "replication_factor", type: "number", min: 1, value: 1 })),
    el("label", {}, "Configs (k=v, …)", el("input", { name: "configs", placeholder: "retention.ms=86400000" })),
    el("button", { type: "submit" }, "Create topic"));
  return el("div", { id: "create-topic-box" }, form, out);
}

async function pageTopic(token, name) {
  const t = await api("topics/" + enc(name));
  if (token !== routeToken) return;
  const parts = table(
    [{ label: "Partition", num: true }, { label: "Leader", num: true }, { label: "Epoch", num: true }, { label: "Replicas" },
     { label: "ISR" }, { label: "Log start", num: true }, { label: "Log end", num: true }, { label: "Size", num: true },
     { label: "" }],
    t.partitions.map(p => [String(p.partition), p.leader < 0 ? el("span", { class: "badge bad" }, "offline") : String(p.leader),
      fmtNum(p.leader_epoch), p.replicas.join(", "),
      el("span", { class: p.isr.length < p.replicas.length ? "badge warn" : "" }, p.isr.join(", ")),
      fmtNum(p.log_start_offset), fmtNum(p.log_end_offset), fmtBytes(p.size),
      link(`#/topics/${enc(name)}/messages?partition=${p.partition}`, "messages")]));
  const configs = table([{ label: "Name" }, { label: "Value" }, { label: "Source" }],
    t.configs.map(c => [c.name, c.sensitive ? "(sensitive)" : (c.value === null ? "null" : c.value),
      el("span", { class: c.source === "DYNAMIC_TOPIC_CONFIG" ? "badge warn" : "badge" }, c.source)]));
  setPage("Topic " + name,
    el("p", { class: "muted" }, `Topic id ${t.topic_id} · ${t.partitions.length} partition(s) · ` +
      `${Number(t.messages_per_sec || 0).toFixed(1)} msg/s`),
    el("h2", {}, "Partitions"), parts,
    config.allow_writes ? topicWriteForms(name, t) : null,
    el("h2", {}, "Configs"), configs);
}

function topicWriteForms(name, t) {
  const out = resultArea();
  const act = (fn) => async (e) => {
    e.preventDefault();
    try { showResult(out, true, await fn(formValues(e.target))); setTimeout(route, 800); }
    catch (err) { showResult(out, false, err.message); }
  };
  return el("div", {}, el("h2", {}, "Change this topic"),
    el("form", { class: "inline", id: "add-partitions", onsubmit: act(async v => {
      const r = await api(`topics/${enc(name)}/partitions`, { count: Number(v.count) });
      return `Topic ${r.topic} now has ${r.partitions} partitions.`;
    }) }, el("label", {}, "Total partitions", el("input", { name: "count", type: "number", min: t.partitions.length + 1,
      value: t.partitions.length + 1, required: true })), el("button", { type: "submit" }, "Add partitions")),
    el("form", { class: "inline", id: "alter-config", onsubmit: act(async v => {
      const body = v.value === "" ? { delete: [v.name] } : { set: { [v.name]: v.value } };
      await api(`topics/${enc(name)}/configs`, body);
      return v.value === "" ? `Removed the override of ${v.name}.` : `Set ${v.name}=${v.value}.`;
    }) }, el("label", {}, "Config", el("input", { name: "name", required: true, placeholder: "retention.ms" })),
      el("label", {}, "Value (empty: back to default)", el("input", { name: "value" })),
      el("button", { type: "submit" }, "Alter config")),
    el("form", { class: "inline", id: "delete-records", onsubmit: act(async v => {
      if (!window.confirm(`Delete every record of ${name}-${v.partition} before offset ${v.offset}?`)) return "Cancelled.";
      const r = await api(`topics/${enc(name)}/delete-records`, { partition: Number(v.partition), offset: Number(v.offset) });
      return `Partition ${r.partition} now starts at offset ${r.log_start_offset}.`;
    }) }, el("label", {}, "Partition", el("input", { name: "partition", type: "number", min: 0, value: 0, required: true })),
      el("label", {}, "Delete records before offset", el("input", { name: "offset", type: "number", min: 0, required: true })),
      el("button", { type: "submit" }, "Delete records")),
    out);
}

function renderField(label, f) {
  const badge = el("span", { class: "badge" }, f.format + (f.size ? ` · ${fmtBytes(f.size)}` : "") + (f.truncated ? " · truncated" : ""));
  return el("div", { class: "field", "data-field": label }, el("div", { class: "name" }, label + " ", badge),
    f.format === "null" ? el("pre", { class: "muted" }, "null") : el("pre", {}, f.text));
}

async function pageMessages(token, name, params) {
  const q = new URLSearchParams();
  q.set("partition", params.get("partition") || "0");
  if (params.get("timestamp")) q.set("timestamp", params.get("timestamp"));
  else if (params.get("offset")) q.set("offset", params.get("offset"));
  q.set("limit", params.get("limit") || "20");
  const page = await api(`topics/${enc(name)}/messages?` + q.toString());
  if (token !== routeToken) return;
  const go = (extra) => { const p = new URLSearchParams({ partition: String(page.partition), limit: String(page.limit), ...extra });
    location.hash = `#/topics/${enc(name)}/messages?` + p.toString(); };
  const form = el("form", { class: "inline", id: "browse", onsubmit: (e) => {
    e.preventDefault();
    const v = formValues(form);
    const extra = {};
    if (v.from === "timestamp") {
      const ms = /^\d+$/.test(v.at) ? Number(v.at) : Date.parse(v.at);
      if (Number.isNaN(ms)) { showResult(out, false, "Give a timestamp in ms or an ISO date, e.g. 2026-11-23T10:00:00Z"); return; }
      extra.timestamp = String(ms);
    } else if (v.at !== "") extra.offset = v.at;
    const p = new URLSearchParams({ partition: v.partition, limit: v.limit, ...extra });
    location.hash = `#/topics/${enc(name)}/messages?` + p.toString();
  } },
    el("label", {}, "Partition", el("input", { name: "partition", type: "number", min: 0, value: page.partition })),
    el("label", {}, "From", el("select", { name: "from" },
      el("option", { value: "offset", selected: !params.get("timestamp") }, "offset"),
      el("option", { value: "timestamp", selected: !!params.get("timestamp") }, "timestamp"))),
    el("label", {}, "Offset / time (empty: newest)", el("input", { name: "at",
      value: params.get("timestamp") || params.get("offset") || "" })),
    el("label", {}, "Page size", el("input", { name: "limit", type: "number", min: 1, max: 200, value: page.limit })),
    el("button", { type: "submit" }, "Show"));
  const out = resultArea();
  const msgs = page.messages.map(m => el("article", { class: "msg", "data-offset": m.offset },
    el("div", { class: "meta" }, el("span", {}, "offset " + m.offset), el("span", {}, fmtTime(m.timestamp) + " (" + m.timestamp_type + ")")),
    renderField("key", m.key), renderField("value", m.value),
    m.headers.length ? el("div", { class: "field" }, el("div", { class: "name" }, "headers"),
      m.headers.map(hd => el("div", { "data-header": hd.key }, el("pre", {}, hd.key + ": " + (hd.value.format === "null" ? "null" : hd.value.text))))) : null));
  const prevStart = Math.max(page.log_start_offset, page.start_offset - page.limit);
  setPage(`Messages in ${name}`,
    el("p", {}, link("#/topics/" + enc(name), "← topic " + name), el("span", { class: "muted" },
      ` · partition ${page.partition}: offsets ${fmtNum(page.log_start_offset)} to ${fmtNum(page.log_end_offset)} (exclusive)`)),
    form, out,
    el("div", { class: "pager" },
      el("button", { class: "secondary", disabled: page.start_offset <= page.log_start_offset, onclick: () => go({ offset: String(prevStart) }) }, "← Older"),
      el("span", { class: "muted" }, page.messages.length ? `offsets ${page.messages[0].offset}–${page.messages[page.messages.length - 1].offset}` : ""),
      el("button", { class: "secondary", disabled: page.next_offset >= page.log_end_offset, onclick: () => go({ offset: String(page.next_offset) }) }, "Newer →")),
    msgs.length ? el("div", { id: "messages" }, msgs) : el("div", { class: "empty" }, "No messages in this range."));
}

async function pageGroups(token) {
  const doc = await api("groups");
  if (token !== routeToken) return;
  setPage("Consumer groups", table([{ label: "Group" }, { label: "State" }, { label: "Type" }, { label: "Protocol" },
    { label: "Total lag", num: true }],
    doc.groups.map(g => [link("#/groups/" + enc(g.group), g.group), stateBadge(g.state), g.type || "classic",
      g.protocol_type || "–", fmtNum(g.lag)]),
    "No consumer groups yet. They appear here once a consumer joins a group or commits offsets."));
  schedule(() => pageGroups(token), 4000, token);
}
function stateBadge(s) {
  const cls = s === "Stable" ? "badge ok" : (s === "Dead" ? "badge bad" : "badge warn");
  return el("span", { class: cls }, s || "–");
}

async function pageGroup(token, id) {
  const g = await api("groups/" + enc(id));
  if (token !== routeToken) return;
  const members = table([{ label: "Member" }, { label: "Client id" }, { label: "Host" }, { label: "Assigned partitions" }],
    g.members.map(m => [m.member_id, m.client_id || "–", m.host || "–", m.partitions.map(p => `${p.topic}-${p.partition}`).join(", ") || "–"]),
    "No active members (the group is " + (g.state || "unknown") + ").");
  const offsets = table([{ label: "Topic" }, { label: "Partition", num: true }, { label: "Committed", num: true },
    { label: "Log end", num: true }, { label: "Lag", num: true }, { label: "Consumer" }],
  g.offsets.map(o => [link("#/topics/" + enc(o.topic), o.topic), String(o.partition), fmtNum(o.current_offset),
    fmtNum(o.log_end_offset), fmtNum(o.lag), o.consumer_id || "–"]), "No committed offsets.");
  const existing = document.getElementById("reset-offsets");
  setPage("Consumer group " + id,
    el("div", { class: "cards" }, card("State", g.state || "–", "", "state"), card("Members", fmtNum(g.members.length), "", "members"),
      card("Total lag", fmtNum(g.total_lag), g.total_lag ? "bad" : "ok", "total_lag"), card("Coordinator", "broker " + g.coordinator, "", "coordinator"),
      card("Strategy", g.assignment_strategy || "–", "", "strategy"), card("Type", g.type || "classic", "", "type")),
    el("h2", {}, "Lag over time"),
    lineChart([{ name: "total lag", color: "#b42318", format: v => fmtNum(Math.round(v)), points: g.lag_history.map(p => [p.t, p.lag]) }],
      { id: "lag", label: "total lag over time" }),
    el("h2", {}, "Lag per partition"), offsets,
    el("h2", {}, "Members"), members,
    config.allow_writes ? (existing || resetForm(id, g)) : null);
  schedule(() => pageGroup(token, id), 2000, token);
}

function resetForm(id, g) {
  const out = resultArea();
  const topics = [...new Set(g.offsets.map(o => o.topic))];
  let planned = null;
  const form = el("form", { class: "inline", onsubmit: async (e) => {
    e.preventDefault();
    const v = formValues(form);
    const body = { topic: v.topic, to: v.to, value: v.value === "" ? null : Number(v.value), execute: false };
    const key = JSON.stringify(body);
    const execute = e.submitter && e.submitter.name === "execute";
    if (execute && planned !== key) { showResult(out, false, "Run the dry run first, then execute the same plan."); return; }
    try {
      const r = await api(`groups/${enc(id)}/reset-offsets`, { ...body, execute });
      planned = key;
      const rows = r.offsets.map(o => `${o.topic}-${o.partition}: ${o.previous_offset ?? "none"} → ${o.new_offset}` + (o.error ? ` (${o.error})` : ""));
      showResult(out, true, (r.dry_run ? "Dry run (nothing committed):\n" : "Offsets reset:\n") + rows.join("\n"));
      execBtn.disabled = r.dry_run ? false : true;
    } catch (err) { showResult(out, false, err.message); }
  } },
    el("label", {}, "Topic", el("input", { name: "topic", required: true, value: topics[0] || "", list: "group-topics" })),
    el("datalist", { id: "group-topics" }, topics.map(t => el("option", { value: t }))),
    el("label", {}, "Reset to", el("select", { name: "to" }, ["earliest", "latest", "offset", "timestamp", "shift"].map(o => el("option", { value: o }, o)))),
    el("label", {}, "Value (offset, ms or shift)", el("input", { name: "value", type: "number" })),
    el("button", { type: "submit", name: "dry-run" }, "Dry run"));
  const execBtn = el("button", { type: "submit", name: "execute", disabled: true }, "Execute");
  form.append(execBtn);
  form.addEventListener("input", () => { planned = null; execBtn.disabled = true; });
  return el("div", { id: "reset-offsets" }, el("h2", {}, "Reset offsets"),
    el("p", { class: "muted" }, "The group must be empty (no running consumers). A dry run shows the plan first."), form, out);
}

async function pageTransactions(token) {
  const doc = await api("transactions");
  if (token !== routeToken) return;
  setPage("Transactions and producers",
    el("h2", {}, "Transactions"),
    table([{ label: "Transactional id" }, { label: "State" }, { label: "Producer id", num: true }, { label: "Epoch", num: true },
      { label: "Timeout ms", num: true }, { label: "Started" }, { label: "Partitions" }],
    doc.transactions.map(t => [t.transactional_id, stateBadge(t.state), String(t.producer_id), fmtNum(t.producer_epoch),
      fmtNum(t.timeout_ms), fmtTime(t.start_time_ms), t.partitions.join(", ") || "–"]),
    "No transactional producers known to the transaction coordinators."),
    el("h2", {}, "Active producers"),
    table([{ label: "Topic" }, { label: "Partition", num: true }, { label: "Producer id", num: true }, { label: "Epoch", num: true },
      { label: "Last sequence", num: true }, { label: "Last write" }, { label: "Open txn from", num: true }],
    doc.producers.map(p => [p.topic, String(p.partition), String(p.producer_id), String(p.producer_epoch), String(p.last_sequence),
      fmtTime(p.last_timestamp), p.current_transaction_start_offset >= 0 ? String(p.current_transaction_start_offset) : "–"]),
    "No idempotent or transactional producers have written to the topics."));
  schedule(() => pageTransactions(token), 5000, token);
}

async function pageSecurity(token) {
  const doc = await api("security");
  if (token !== routeToken) return;
  setPage("ACLs and quotas",
    el("h2", {}, "ACLs"),
    doc.acls === null ? el("div", { class: "empty", id: "acl-note" }, doc.acl_note) :
      table([{ label: "Resource" }, { label: "Name" }, { label: "Pattern" }, { label: "Principal" }, { label: "Host" },
        { label: "Operation" }, { label: "Permission" }],
      doc.acls.map(a => [a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
        el("span", { class: a.permission === "DENY" ? "badge bad" : "badge ok" }, a.permission)]),
      "No ACLs. With an authorizer, access then follows allow.everyone.if.no.acl.found."),
    el("h2", {}, "Client quotas"),
    doc.quotas === null ? el("div", { class: "empty" }, doc.quota_note) :
      table([{ label: "Entity" }, { label: "Quota" }, { label: "Value", num: true }],
        doc.quotas.map(q => [q.entity, q.key, fmtNum(q.value)]), "No client quotas are set."));
  schedule(() => pageSecurity(token), 10000, token);
}

// ---------- routing ----------
function schedule(fn, ms, token) {
  clearTimeout(timer);
  timer = setTimeout(() => { if (token === routeToken) fn().catch(err => showError(err, token)); }, ms);
}
function showError(err, token) {
  if (token !== routeToken) return;
  const existing = main.querySelector(".error[data-page-error]");
  const box = errorBox(err.message); box.setAttribute("data-page-error", "");
  if (existing) existing.replaceWith(box); else main.prepend(box);
}

async function route() {
  clearTimeout(timer);
  const token = ++routeToken;
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = hash.split("?");
  const params = new URLSearchParams(qs || "");
  const seg = path.split("/").filter(Boolean).map(s => { try { return decodeURIComponent(s); } catch (e) { return s; } });
  document.querySelectorAll("#nav a").forEach(a => a.classList.toggle("active", a.dataset.nav === (seg[0] || "overview")));
  try {
    if (seg.length === 0) await pageOverview(token);
    else if (seg[0] === "topics" && seg.length === 1) await pageTopics(token);
    else if (seg[0] === "topics" && seg.length === 2) await pageTopic(token, seg[1]);
    else if (seg[0] === "topics" && seg.length === 3 && seg[2] === "messages") await pageMessages(token, seg[1], params);
    else if (seg[0] === "groups" && seg.length === 1) await pageGroups(token);
    else if (seg[0] === "groups" && seg.length === 2) await pageGroup(token, seg[1]);
    else if (seg[0] === "transactions") await pageTransactions(token);
    else if (seg[0] === "security") await pageSecurity(token);
    else setPage("Not found", el("div", { class: "empty" }, "No such page. ", link("#/", "Go to the overview.")));
  } catch (err) {
    if (token !== routeToken) return;
    setPage("Error", errorBox(err.message), el("p", {}, link("#/", "Back to the overview")));
  }
}

async function boot() {
  try { config = await api("config"); } catch (e) { /* shown by the first page load */ }
  const mode = document.getElementById("mode");
  mode.textContent = config.allow_writes ? "writes allowed" : "read-only";
  mode.classList.toggle("rw", !!config.allow_writes);
  window.addEventListener("hashchange", route);
  route();
}
boot();
