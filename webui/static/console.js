// Elanus console: plain JavaScript, no build step. Each page asks one JSON view of
// /api/ every few seconds and redraws its data; nothing here changes the cluster.
"use strict";

(() => {
  const REFRESH_MS = 3000;
  const state = { me: null, seq: 0, timer: null, renders: 0, loadedAt: Date.now() };
  window.elanusConsole = state; // what the browser tests read (renders, loadedAt)

  // -- building the page -------------------------------------------------------------------
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") el.textContent = value;
      else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }

  function s(tag, attrs, ...kids) {
    const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, String(value));
    for (const kid of kids) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    return el;
  }

  const dash = "–";
  const int = (n) => (n === null || n === undefined ? dash : String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ","));
  const num = (n, digits = 2) => (n === null || n === undefined ? dash : Number(n).toFixed(digits));
  const pad = (n) => String(n).padStart(2, "0");
  const when = (ms) => {
    if (!ms) return dash;
    const d = new Date(ms);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  };
  const unixTime = (seconds) => when(seconds ? seconds * 1000 : 0);
  const hybridTime = (ts) => when(ts ? Math.floor(ts / 262144) : 0); // physical ms << 18
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return dash;
    if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
    const m = Math.floor(seconds / 60), hrs = Math.floor(m / 60), days = Math.floor(hrs / 24);
    if (days) return `${days} d ${hrs % 24} h`;
    if (hrs) return `${hrs} h ${m % 60} min`;
    return `${m} min ${Math.floor(seconds % 60)} s`;
  }
  function bytes(n) {
    if (n === null || n === undefined) return dash;
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
  }

  const STATE_CLASS = {
    ok: "ok", Loaded: "ok", Finished: "ok", Flushed: "ok", Completed: "ok", completed: "ok", normal: "ok",
    Loading: "warn", InProgress: "warn", Unissued: "warn", Growing: "warn", Sealed: "warn",
    Flushing: "warn", Importing: "warn", Pending: "warn", Running: "warn", executing: "warn",
    slowing: "warn", degraded: "bad", Failed: "bad", failed: "bad", refusing: "bad", unhealthy: "bad",
  };
  const badge = (text) => h("span", { class: `badge ${STATE_CLASS[text] || ""}`, "data-state": text, text: text ?? dash });

  function progress(done, total, label) {
    const fraction = total > 0 ? Math.min(1, done / total) : 1;
    const bar = h("div", { class: fraction >= 1 ? "bar done" : "bar" });
    bar.style.width = `${(fraction * 100).toFixed(1)}%`;
    return h("div", { class: "progress", "data-progress": fraction.toFixed(3) }, bar,
      h("span", { text: label ?? `${Math.round(fraction * 100)}%` }));
  }

  function table(headers, rows, empty) {
    if (!rows.length) return h("p", { class: "muted", text: empty || "None." });
    const head = h("tr", {}, headers.map((x) => {
      const [label, cls] = Array.isArray(x) ? x : [x, ""];
      return h("th", { class: cls || null, text: label });
    }));
    const body = rows.map((row) => {
      const cells = row.cells || row;
      return h("tr", row.attrs || {}, cells.map((cell, i) => {
        const cls = Array.isArray(headers[i]) ? headers[i][1] : null;
        if (cell && cell.field !== undefined) return h("td", { class: cls, "data-field": cell.field }, cell.value);
        return h("td", { class: cls }, cell);
      }));
    });
    return h("table", {}, h("thead", {}, head), h("tbody", {}, body));
  }

  const kv = (pairs) => h("table", { class: "kv" }, h("tbody", {},
    pairs.map(([key, value]) => h("tr", { "data-key": key }, h("th", { text: key }), h("td", {}, value)))));
  const card = (label, value, sub, field) => h("div", { class: "card", "data-card": field || label },
    h("div", { class: "label", text: label }), h("div", { class: "value" }, value), sub ? h("div", { class: "sub" }, sub) : null);
  const field = (name, value) => ({ field: name, value });

  /** A part of a view: its result drawn by ``draw``, or why the user may not see it. */
  function part(p, draw) {
    if (p && p.error) {
      return h("p", { class: "denied", "data-error": p.error.code }, `${p.error.code}: ${p.error.message}`);
    }
    return draw(p ? p.ok : null);
  }
  const ok = (p, fallback) => (p && !p.error ? p.ok : fallback);

  // -- the pages ---------------------------------------------------------------------------
  function health(doc) {
    const failures = ((doc || {}).failures || []).map((f) => `${f.task}: ${f.error}`);
    return failures.length ? h("span", { class: "badge bad", title: failures.join("; "), text: "unhealthy" }) : badge("ok");
  }

  function overview(d) {
    const sessions = ok(d.sessions, {}).sessions || [];
    const hl = ok(d.health, null);
    const proxy = hl ? hl.proxy : {};
    const coord = hl ? hl.coord : {};
    const cards = h("div", { class: "cards" },
      card("Cluster", hl ? badge(hl.status) : dash, hl ? `coord ${coord.status || dash}` : null, "status"),
      card("Version", proxy.version || state.me.version, `proxy ${proxy.node_id || dash}`, "version"),
      card("Proxy uptime", duration(proxy.uptime_s), null, "proxy_uptime"),
      card("Coord uptime", duration(coord.uptime_s), coord.node_id ? `coord ${coord.node_id}` : null, "coord_uptime"),
      card("Live roles", d.sessions.error ? dash : int(sessions.length), null, "roles"),
      card("Databases", int((ok(d.databases, {}).names || []).length || null), null, "databases"),
      card("Collections", int((ok(d.collections, {}).names || []).length), "in default", "collections"));
    const roles = part(d.sessions, (doc) => table(
      ["role", "id", "address", "version", ["uptime", "num"], ["restarts", "num"], ["pid", "num"], "host",
        ["memory", "num"], "flow control", "health"],
      (doc.sessions || []).map((x) => {
        const meta = x.meta || {};
        return {
          attrs: { "data-role": x.role, "data-node": x.node_id },
          cells: [x.role, x.node_id, x.address || dash, meta.version || dash, duration(x.uptime_s),
            int(meta.restarts || 0), x.pid, x.host, bytes(meta.rss_bytes), meta.flow_control ? badge(meta.flow_control) : dash,
            health(meta.health)],
        };
      }), "No live role."));
    return [cards, h("h2", { text: "Roles" }), roles,
      h("p", { class: "muted" }, `Flight ${state.me.flight_uri}`, state.me.milvus_port ? ` · Milvus port ${state.me.milvus_port}` : "")];
  }

  function indexChips(p) {
    return part(p, (doc) => h("span", { class: "chips" }, (doc.indexes || []).map((ix) =>
      h("span", { class: `badge ${STATE_CLASS[ix.state] || ""}`, title: `${ix.index_type} ${ix.metric_type || ""}` },
        `${ix.index_name}: ${ix.state}`))));
  }

  function collections(d) {
    const note = d.total > d.shown ? h("p", { class: "muted", text: `Showing ${d.shown} of ${d.total}.` }) : null;
    return [part(d.collections, (rows) => table(
      ["collection", ["id", "num"], ["shards", "num"], ["partitions", "num"], ["fields", "num"], "load", ["rows", "num"], "indexes", "created"],
      rows.map((c) => {
        const desc = ok(c.describe, null);
        const load = ok(c.load, null);
        return {
          attrs: { "data-collection": c.name },
          cells: [
            h("a", { href: `#/collection/${encodeURIComponent(d.db)}/${encodeURIComponent(c.name)}`, text: c.name }),
            desc ? desc.collection_id : dash,
            desc ? desc.num_shards : dash,
            desc ? desc.partitions.length : dash,
            desc ? desc.schema.fields.length : dash,
            field("load", load ? (load.state === "Loading" ? progress(load.progress, 100, `Loading ${load.progress}%`) : badge(load.state)) : part(c.load, () => null)),
            field("rows", c.rows.error ? part(c.rows, () => null) : int(c.rows.ok.row_count)),
            indexChips(c.indexes),
            desc ? hybridTime(desc.created_ts) : dash,
          ],
        };
      }), `No collection in database ${d.db}.`)), note];
  }

  function collection(d) {
    const desc = ok(d.describe, null);
    const load = ok(d.load, null);
    const out = [];
    if (!desc) return [part(d.describe, () => null)];
    const schema = desc.schema || {};
    out.push(kv([
      ["database", desc.db], ["collection id", desc.collection_id],
      ["description", desc.description || schema.description || dash],
      ["shards", `${desc.num_shards} (${(desc.vchannels || []).join(", ")})`],
      ["consistency", desc.consistency_level], ["dynamic field", schema.enable_dynamic_field ? "yes" : "no"],
      ["partitions", desc.partitions.map((p) => p.name).join(", ")],
      ["aliases", (desc.aliases || []).join(", ") || dash], ["created", hybridTime(desc.created_ts)],
      ["rows (flushed)", h("span", { "data-field": "rows" }, d.rows.error ? part(d.rows, () => null) : int(d.rows.ok.row_count))],
      ["rows (loaded, growing included)", h("span", { "data-field": "live_rows" }, d.live_rows.error ? dash : int(d.live_rows.ok))],
      ["load", load ? h("span", { "data-field": "load" }, badge(load.state), ` ${load.progress}% · ${int(load.loaded_rows)} of ${int(load.persisted_rows)} persisted rows loaded`) : part(d.load, () => null)],
      ["properties", Object.entries(desc.properties || {}).map(([k, v]) => `${k}=${v}`).join(", ") || dash],
    ]));
    out.push(h("h2", { text: "Fields" }), table(["field", ["id", "num"], "type", "primary", "params"],
      (schema.fields || []).map((f) => [f.name, f.field_id, f.type, f.is_primary ? "yes" : "",
        ["dim", "max_length", "element_type", "max_capacity", "is_partition_key", "nullable", "default_value"]
          .filter((k) => f[k] !== undefined && f[k] !== null && f[k] !== false).map((k) => `${k}=${f[k]}`).join(", ")])));
    out.push(h("h2", { text: "Indexes" }), part(d.indexes, (doc) => table(
      ["index", "field", "type", "metric", "state", "built", ["pending", "num"], "failures"],
      (doc.indexes || []).map((ix) => ({
        attrs: { "data-index": ix.index_name },
        cells: [ix.index_name, ix.field, ix.index_type, ix.metric_type || dash, badge(ix.state),
          progress(ix.indexed_rows, ix.total_rows, `${int(ix.indexed_rows)} / ${int(ix.total_rows)} rows`),
          ix.pending_tasks, (ix.failed_tasks || []).map((t) => `segment ${t.segment_id}: ${t.reason}`).join("; ") || dash],
      })), "No index.")));
    out.push(h("h2", { text: "Replicas" }), d.replicas.error && d.replicas.error.code === "COLLECTION_NOT_LOADED"
      ? h("p", { class: "muted", text: "Not loaded." })
      : part(d.replicas, (doc) => table(["replica", "query nodes", "shard leaders", "serving"],
        (doc.replicas || []).map((r) => ({
          attrs: { "data-replica": r.replica_id },
          cells: [r.replica_id, (r.node_ids || []).join(", ") || dash,
            Object.entries(r.shard_leaders || {}).map(([v, n]) => `${v} → ${n}`).join(", ") || dash,
            badge(r.serving ? "ok" : "Failed")],
        })))));
    const partitions = Object.fromEntries(desc.partitions.map((p) => [p.partition_id, p.name]));
    out.push(h("h2", { text: "Segments" }), part(d.segments, (doc) => {
      const segs = (doc.segments || []).slice().sort((a, b) => b.segment_id - a.segment_id);
      const counts = {};
      for (const x of segs) counts[x.state] = (counts[x.state] || 0) + 1;
      return [h("div", { class: "chips", "data-field": "segment_states" }, Object.entries(counts).map(([k, n]) => h("span", { class: `badge ${STATE_CLASS[k] || ""}`, text: `${k} ${n}` }))),
        table(["segment", "partition", "channel", "state", ["rows", "num"], ["level", "num"], "created", "flushed", "compacted from"],
          segs.map((x) => ({
            attrs: { "data-segment": x.segment_id, "data-state": x.state },
            cells: [x.segment_id, partitions[x.partition_id] || x.partition_id, x.vchannel, badge(x.state),
              x.state === "Growing" ? dash : int(x.num_rows), `L${x.level}`, hybridTime(x.created_ts), hybridTime(x.flushed_ts),
              (x.compacted_from || []).join(", ") || dash],
          })), "No segment yet.")];
    }));
    return out;
  }

  function tasks(d) {
    const names = d.collection_names || {};
    const label = (id) => names[id] || `#${id}`;
    return [
      h("h2", { id: "index-builds", text: "Index builds" }), part(d.index_builds, (rows) => table(
        ["collection", "index", "field", "type", "state", "progress", ["pending", "num"], ["done", "num"], "failures"],
        rows.map((ix) => ({
          attrs: { "data-index": `${ix.collection}/${ix.index_name}` },
          cells: [ix.collection, ix.index_name, ix.field, ix.index_type, badge(ix.state),
            progress(ix.indexed_rows, ix.total_rows, `${int(ix.indexed_rows)} / ${int(ix.total_rows)} rows`),
            ix.pending_tasks, ix.finished_tasks, (ix.failed_tasks || []).length || dash],
        })), `No index in database ${d.db}.`)),
      h("h2", { id: "compactions", text: "Compactions" }), part(d.compactions, (doc) => table(
        ["compaction", "collections", "kind", "planned", "state", "plans", "reason"],
        (doc.compactions || []).map((c) => {
          const plans = c.pending + c.executing + c.completed + c.failed;
          return {
            attrs: { "data-compaction": c.compaction_id },
            cells: [c.compaction_id, (c.collection_ids || []).map(label).join(", ") || (c.collection_id ? label(c.collection_id) : "all"),
              c.manual ? "manual" : "automatic", hybridTime(c.planned_ts), badge(c.state),
              plans ? progress(c.completed + c.failed, plans, `${c.completed} of ${plans} done`) : "nothing to merge",
              c.reason || dash],
          };
        }), "No compaction since the coord started.")),
      h("h2", { id: "imports", text: "Imports" }), part(d.imports, (doc) => table(
        ["job", "collection", "state", "stage", "progress", ["rows", "num"], "created", "reason"],
        (doc.jobs || []).slice().reverse().map((j) => ({
          attrs: { "data-job": j.job_id },
          cells: [j.job_id, j.collection, badge(j.state), j.stage || dash,
            progress(j.progress, 1, `${Math.round((j.progress || 0) * 100)}%`),
            `${int(j.rows)} / ${int(j.total_rows)}`, hybridTime(j.created_ts), j.reason || dash],
        })), "No import job.")),
      h("h2", { id: "backups", text: "Backups" }), part(d.backups, (doc) => table(
        ["backup", "location", "state", "phase", "started", ["took", "num"], ["rows", "num"], ["files", "num"], ["size", "num"], "reason"],
        (doc.tasks || []).map((b) => ({
          attrs: { "data-backup": b.name },
          cells: [b.name, b.location, badge(b.state), b.phase, unixTime(b.started_at), duration(b.seconds),
            int(b.rows), int(b.files), bytes(b.bytes), b.reason || dash],
        })), "No backup since the coord started.")),
    ];
  }

  function requestRows(rows) {
    return table(["time", "function", "status", ["latency", "num"]], rows.map((r) => ({
      attrs: { "data-function": r.function },
      cells: [unixTime(r.at), r.function, r.status === "ok" ? badge("ok") : h("span", { class: "badge bad", text: r.status }),
        `${num(r.seconds * 1000, 1)} ms`],
    })), "None yet.");
  }

  function requests(d) {
    return part(d.requests, (doc) => [
      h("p", { class: "muted", text: `Proxy ${doc.node_id}: the latest requests of its Flight and Milvus faces (the console's own reads are not among them).` }),
      h("h2", { id: "slow", text: `Slow requests (${doc.slow_request_s} s or more)` }), requestRows(doc.slow),
      h("h2", { id: "recent", text: "Recent requests" }), requestRows(doc.recent),
    ]);
  }

  function channels(d) {
    const lim = d.limits;
    const lagClass = (lag) => (lag === null || lag === undefined ? null : lag > lim.flow_tick_lag_hard_s ? "lag-bad" : lag > lim.flow_tick_lag_soft_s ? "lag-warn" : null);
    const pendClass = (n) => (n > lim.flow_pending_hard ? "lag-bad" : n > lim.flow_pending_soft ? "lag-warn" : null);
    return [
      h("p", { class: "muted", text: `Flow control slows writes when a consumer's lag passes ${lim.flow_tick_lag_soft_s} s (or ${lim.flow_pending_soft} unfetched messages) and refuses them past ${lim.flow_tick_lag_hard_s} s (${lim.flow_pending_hard}).` }),
      part(d.proxies, (rows) => h("div", { class: "chips" }, rows.map((p) => h("span", { class: `badge ${STATE_CLASS[p.flow_control] || ""}`, text: `proxy ${p.node_id}: ${p.flow_control || dash}` })))),
      h("h2", { text: "Consumed channels" }),
      part(d.channels, (rows) => table(["channel", "role", "node", ["tick lag", "num"], ["flow lag", "num"], ["unfetched", "num"]],
        rows.map((c) => ({
          attrs: { "data-channel": `${c.vchannel}/${c.role}` },
          cells: [c.vchannel, c.role, c.node_id,
            h("span", { class: lagClass(c.flow_lag_s) }, c.tick_lag_s === null ? "no tick yet" : `${num(c.tick_lag_s)} s`),
            h("span", { class: lagClass(c.flow_lag_s) }, c.flow_lag_s === null ? dash : `${num(c.flow_lag_s)} s`),
            h("span", { class: pendClass(c.pending) }, int(c.pending))],
        })), "No channel is consumed yet (no collection?).")),
    ];
  }

  function config(d) {
    return part(d.config, (doc) => [
      h("p", { class: "muted", text: `The effective settings of proxy ${doc.node_id} (secrets that are set show as ***).` }),
      kv(Object.keys(doc.settings).sort().map((k) => [k, h("code", { text: JSON.stringify(doc.settings[k]) })])),
    ]);
  }

  function chart(c) {
    const W = 300, H = 90, P = 2;
    const pts = c.points || [];
    const last = pts.length ? pts[pts.length - 1][1] : null;
    const digits = (v) => (Number.isInteger(v) ? 0 : v < 10 ? 2 : 0);
    const box = s("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", "data-points": pts.length });
    box.append(s("line", { class: "axis", x1: 0, y1: H - P, x2: W, y2: H - P }));
    if (pts.length < 2) {
      box.append(s("text", { x: 6, y: H / 2, }, "collecting samples…"));
    } else {
      const t0 = pts[0][0], t1 = pts[pts.length - 1][0];
      const peak = Math.max(...pts.map((p) => p[1]));
      const top = Math.max(peak, 1e-9);
      const xy = pts.map(([t, v]) => [((t - t0) / Math.max(t1 - t0, 1e-9)) * W, H - P - (Math.max(v, 0) / top) * (H - 2 * P - 12)]);
      const line = xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
      box.append(s("polygon", { class: "area", points: `0,${H - P} ${line} ${W},${H - P}` }));
      box.append(s("polyline", { points: line }));
      box.append(s("text", { x: 4, y: 10 }, `max ${num(peak, digits(peak))}`));
    }
    return h("div", { class: "chart", "data-chart": c.key },
      h("div", { class: "title" }, h("b", { text: c.title }), h("span", { class: "muted", text: last === null ? dash : `${num(last, digits(last))} ${c.unit}` })),
      box);
  }

  function metrics(d) {
    return [h("p", { class: "muted", text: `This process's own metrics (docs/metrics.md), sampled every ${d.interval_s} s and while this page is open; Prometheus scrapes the same families on metrics_port.` }),
      h("div", { class: "charts" }, d.charts.map(chart))];
  }

  // -- routing -----------------------------------------------------------------------------
  const PAGES = {
    overview: { title: () => "Overview", api: () => "overview", draw: overview },
    collections: { title: () => "Collections", api: (p) => `collections?db=${encodeURIComponent(p.db)}`, draw: collections, db: true },
    collection: { title: (p) => `Collection ${p.name}`, api: (p) => `collection?db=${encodeURIComponent(p.db)}&name=${encodeURIComponent(p.name)}`, draw: collection, nav: "collections" },
    tasks: { title: () => "Tasks", api: (p) => `tasks?db=${encodeURIComponent(p.db)}`, draw: tasks, db: true },
    requests: { title: () => "Requests", api: () => "requests", draw: requests },
    channels: { title: () => "Channels", api: () => "channels", draw: channels },
    metrics: { title: () => "Metrics", api: () => "metrics", draw: metrics },
    config: { title: () => "Configuration", api: () => "config", draw: config },
  };

  function route() {
    const [path, query] = (location.hash.replace(/^#/, "") || "/").split("?");
    const params = Object.fromEntries(new URLSearchParams(query || ""));
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    let name = parts[0] || "overview";
    if (name === "collection" && parts.length >= 3) {
      params.db = parts[1];
      params.name = parts[2];
    } else if (!PAGES[name] || name === "collection") {
      name = "overview";
    }
    params.db = params.db || "default";
    return { name, params };
  }

  async function api(path, options) {
    const response = await fetch(`/api/${path}`, { cache: "no-store", headers: { Accept: "application/json" }, ...options });
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    return { status: response.status, body };
  }

  function banner(text) {
    const el = document.getElementById("banner");
    el.textContent = text || "";
    el.hidden = !text;
  }

  function who() {
    const el = document.getElementById("who");
    const me = state.me;
    document.body.classList.toggle("logged-out", !me || !me.authenticated);
    if (!me || !me.authenticated) { el.replaceChildren(); return; }
    const out = me.auth_enabled ? h("button", { type: "button", onclick: logout, text: "Log out" }) : null;
    el.replaceChildren(...[h("span", { "data-user": me.user, text: me.auth_enabled ? me.user : "open (authentication off)" }), out].filter(Boolean));
  }

  async function logout() {
    await api("logout", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    state.me = null;
    await start();
  }

  function login() {
    clearTimeout(state.timer);
    state.seq += 1;
    const view = document.getElementById("view");
    view.dataset.page = "login";
    const error = h("div", { class: "error", role: "alert" });
    const user = h("input", { name: "user", autocomplete: "username", required: true, autofocus: true });
    const password = h("input", { name: "password", type: "password", autocomplete: "current-password", required: true });
    const form = h("form", { class: "login" }, h("h1", { text: "Log in" }),
      h("p", { class: "muted", text: "The console shows what your user's privileges allow." }),
      h("label", {}, "User", h("br"), user), h("label", {}, "Password", h("br"), password),
      error, h("button", { class: "primary", type: "submit", text: "Log in" }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      error.textContent = "";
      try {
        const answer = await api("login", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ user: user.value, password: password.value }) });
        if (answer.status !== 200) { error.textContent = answer.body && answer.body.error ? answer.body.error.message : `HTTP ${answer.status}`; return; }
        await start();
      } catch (e) {
        error.textContent = `cannot reach the console: ${e.message}`;
      }
    });
    view.replaceChildren(form);
    who();
  }

  function show() {
    clearTimeout(state.timer);
    const seq = (state.seq += 1);
    const { name, params } = route();
    const page = PAGES[name];
    for (const link of document.querySelectorAll("#nav a")) link.classList.toggle("active", link.dataset.page === (page.nav || name));
    const view = document.getElementById("view");
    view.dataset.page = name;
    const data = h("div", { id: "data" }, h("p", { class: "muted", text: "Loading…" }));
    const controls = h("div", { class: "controls" });
    if (page.db) {
      const select = h("select", { id: "db", "aria-label": "database" }, h("option", { value: params.db, text: params.db }));
      select.addEventListener("change", () => { location.hash = `#/${name}?db=${encodeURIComponent(select.value)}`; });
      controls.append(h("label", {}, "Database ", select));
    }
    if (name === "collection") controls.append(h("a", { href: `#/collections?db=${encodeURIComponent(params.db)}`, text: `← collections of ${params.db}` }));
    view.replaceChildren(h("h1", { text: page.title(params) }), controls, data);
    document.title = `${page.title(params)} · Elanus console`;
    refresh(seq, page, params, data);
  }

  function fillDatabases(doc) {
    const select = document.getElementById("db");
    if (!select || !doc || !doc.databases || doc.databases.error || document.activeElement === select) return;
    const names = doc.databases.ok.names || [];
    if (names.join() === Array.from(select.options).map((o) => o.value).join()) return;
    select.replaceChildren(...names.map((n) => h("option", { value: n, text: n, selected: n === doc.db })));
  }

  async function refresh(seq, page, params, data) {
    if (!document.hidden) {
      try {
        const answer = await api(page.api(params));
        if (seq !== state.seq) return;
        if (answer.status === 401) { state.me = null; login(); return; }
        banner("");
        if (answer.status !== 200) {
          const e = answer.body && answer.body.error;
          data.replaceChildren(h("p", { class: "denied" }, e ? `${e.code}: ${e.message}` : `HTTP ${answer.status}`));
        } else {
          fillDatabases(answer.body);
          data.replaceChildren(...[page.draw(answer.body, params)].flat(Infinity).filter(Boolean));
          state.renders += 1;
          document.getElementById("view").dataset.renders = String(state.renders);
          document.getElementById("status").textContent = `Updated ${when(Date.now())} · refreshes every ${REFRESH_MS / 1000} s`;
        }
      } catch (e) {
        if (seq !== state.seq) return;
        banner(`Cannot reach the console's server: ${e.message}. Retrying…`);
      }
    }
    if (seq === state.seq) state.timer = setTimeout(() => refresh(seq, page, params, data), REFRESH_MS);
  }

  async function start() {
    try {
      const answer = await api("me");
      state.me = answer.body;
    } catch (e) {
      banner(`Cannot reach the console's server: ${e.message}`);
      state.timer = setTimeout(start, REFRESH_MS);
      return;
    }
    if (!state.me || !state.me.authenticated) { login(); return; }
    who();
    show();
  }

  window.addEventListener("hashchange", () => { if (state.me && state.me.authenticated) show(); });
  start();
})();
