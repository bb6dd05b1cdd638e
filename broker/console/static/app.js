// Samsa console: the little JavaScript the server-rendered pages use. Without it every page
// still reads (see broker/console/pages.py); with it:
//  * a page whose <body> has data-refresh="ms" is fetched again every ms and its [data-live]
//    regions are swapped in place: the cards, tables and the SVG charts the server drew
//    (that is what makes the throughput and lag charts live);
//  * the write forms (console.allow.writes=true only) are sent as JSON to the /api/ endpoints
//    (a same-origin, JSON-only API that another web site cannot drive).
// Safety rule: HTML only ever comes from this server, which escapes every value; text the
// script writes itself goes through textContent. The CSP forbids inline scripts anyway.
"use strict";

// Old #/ links (the earlier single-page console): go to the page they name.
if (location.hash.startsWith("#/")) location.replace(location.hash.slice(1));

let timer = null;
let refreshing = false;

function showResult(area, ok, text) {
  const box = document.createElement("div");
  box.className = ok ? "notice" : "error";
  if (!ok) box.setAttribute("role", "alert");
  box.textContent = text;
  area.replaceChildren(box);
}

function pageError(message) {
  const main = document.getElementById("main");
  let box = main.querySelector(".error[data-page-error]");
  if (!message) { if (box) box.remove(); return; }
  if (!box) {
    box = document.createElement("div");
    box.className = "error"; box.setAttribute("role", "alert"); box.setAttribute("data-page-error", "");
    main.querySelector("h1").after(box);
  }
  box.textContent = message;
}

async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    let resp;
    try { resp = await fetch(location.pathname + location.search, { headers: { "Accept": "text/html" } }); }
    catch (e) { pageError("Cannot reach the console server: " + e.message); return; }
    const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
    const failed = doc.querySelector("main .error");
    if (!resp.ok || failed) { pageError(failed ? failed.textContent : "HTTP " + resp.status); return; }
    pageError(null);
    for (const fresh of doc.querySelectorAll("[data-live][id]")) {
      const old = document.getElementById(fresh.id);
      if (old) old.replaceWith(document.importNode(fresh, true));
    }
  } finally {
    refreshing = false;
  }
}

function schedule() {
  const ms = Number(document.body.dataset.refresh || 0);
  if (ms > 0) timer = setInterval(refresh, ms);
}

// ---------- writes ----------
async function api(path, body) {
  let resp;
  try {
    resp = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  } catch (e) { throw new Error("cannot reach the console server: " + e.message); }
  let doc = null;
  try { doc = await resp.json(); } catch (e) { doc = null; }
  if (!resp.ok) throw new Error((doc && doc.error) || ("HTTP " + resp.status));
  return doc;
}

function values(form) { return Object.fromEntries(new FormData(form).entries()); }
function resultOf(form) { return form.parentElement.querySelector(".result"); }

const ACTIONS = {
  "create-topic": async (form, v) => {
    const configs = {};
    for (const item of (v.configs || "").split(",").map(s => s.trim()).filter(Boolean)) {
      const i = item.indexOf("=");
      if (i > 0) configs[item.slice(0, i).trim()] = item.slice(i + 1).trim();
    }
    const r = await api(form.dataset.api, { name: v.name, partitions: Number(v.partitions || -1),
      replication_factor: Number(v.replication_factor || -1), configs });
    form.reset();
    return `Created topic ${r.topic} with ${r.partitions} partition(s).`;
  },
  "add-partitions": async (form, v) => {
    const r = await api(form.dataset.api, { count: Number(v.count) });
    return `Topic ${r.topic} now has ${r.partitions} partitions.`;
  },
  "alter-config": async (form, v) => {
    await api(form.dataset.api, v.value === "" ? { delete: [v.name] } : { set: { [v.name]: v.value } });
    return v.value === "" ? `Removed the override of ${v.name}.` : `Set ${v.name}=${v.value}.`;
  },
  "delete-records": async (form, v) => {
    const topic = form.closest("[data-topic]").dataset.topic;
    if (!window.confirm(`Delete every record of ${topic}-${v.partition} before offset ${v.offset}?`)) return "Cancelled.";
    const r = await api(form.dataset.api, { partition: Number(v.partition), offset: Number(v.offset) });
    return `Partition ${r.partition} now starts at offset ${r.log_start_offset}.`;
  },
};

function bindWriteForm(form) {
  const action = ACTIONS[form.dataset.action || form.id];
  if (!action) return;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const out = resultOf(form);
    try {
      showResult(out, true, await action(form, values(form)));
      setTimeout(refresh, 500);
    } catch (err) { showResult(out, false, err.message); }
  });
}

// Reset offsets: a dry run of exactly this plan first, then Execute commits it.
function bindResetForm(form) {
  const out = resultOf(form);
  const execBtn = form.querySelector("[name=execute]");
  let planned = null;
  form.addEventListener("input", () => { planned = null; execBtn.disabled = true; });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const v = values(form);
    const body = { topic: v.topic, to: v.to, value: v.value === "" ? null : Number(v.value), execute: false };
    const key = JSON.stringify(body);
    const execute = !!(e.submitter && e.submitter.name === "execute");
    if (execute && planned !== key) { showResult(out, false, "Run the dry run first, then execute the same plan."); return; }
    try {
      const r = await api(form.dataset.api, { ...body, execute });
      planned = key;
      const rows = r.offsets.map(o => `${o.topic}-${o.partition}: ${o.previous_offset ?? "none"} → ${o.new_offset}` +
        (o.error ? ` (${o.error})` : ""));
      showResult(out, true, (r.dry_run ? "Dry run (nothing committed):\n" : "Offsets reset:\n") + rows.join("\n"));
      execBtn.disabled = !r.dry_run;
      if (!r.dry_run) setTimeout(refresh, 300);
    } catch (err) { showResult(out, false, err.message); }
  });
}

function boot() {
  document.querySelectorAll("form[data-api]").forEach(f => {
    if (f.closest("#reset-offsets")) bindResetForm(f); else bindWriteForm(f);
  });
  schedule();
}
boot();
