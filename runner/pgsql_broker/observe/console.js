"use strict";
// The console page: JSON from /api/*, rendered with DOM nodes and text only (never innerHTML): job names, SQL,
// errors and tenants are the enqueuers' text. The token lives in this tab's sessionStorage and goes out only
// as an Authorization header of this page's own fetch() calls.
const STATES = ["pending", "running", "completed", "failed", "cancelled"];
let session = {token_configured: false, authenticated: false, databases: []};
let openJob = null;  // {id, tenant}
let before = null;   // the job list's page: the jobs below this id (null: the newest)
let chartsAt = 0, chartsFor = null;   // when the charts were last read, for which database
let graphAt = 0, graphFor = null;     // when the open job's workflow was last read, for which database and job

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") node.addEventListener("click", v); else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
  return node;
}
function table(headers, rows, numeric) {
  if (!rows.length) return el("div", {class: "muted"}, "none");
  const t = el("table", {}, el("tr", {}, ...headers.map(h => el("th", {}, h))));
  for (const r of rows) t.append(el("tr", {}, ...r.map((v, i) => el("td", numeric && numeric.includes(i) ? {class: "num"} : {}, v))));
  return t;
}
function stateBadge(code, job) {
  const name = STATES[code] || String(code);
  let label = name;
  if (job && name === "pending" && job.pending_deps > 0) label = `pending (waits on ${job.pending_deps})`;
  return el("span", {class: "badge state-" + name, "data-state": name}, label);
}
function time(value) { return value ? String(value).replace("T", " ").slice(0, 19) : ""; }
function token() { return sessionStorage.getItem("console-token"); }
function database() { return document.getElementById("database").value || session.databases[0] || ""; }
function say(text) { document.getElementById("message").textContent = text || ""; }

async function api(path, options) {
  const headers = Object.assign({}, (options && options.headers) || {});
  if (token()) headers["Authorization"] = "Bearer " + token();
  const response = await fetch(path, Object.assign({cache: "no-store"}, options || {}, {headers}));
  const body = await response.json().catch(() => ({error: "HTTP " + response.status}));
  if (response.status === 401 && token()) {
    sessionStorage.removeItem("console-token"); session.authenticated = false; showSession();
  }
  if (!response.ok) throw new Error(body.error || "HTTP " + response.status);
  return body;
}
async function act(path, tenant) {
  try {
    const result = await api(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                    body: JSON.stringify({database: database(), tenant: tenant})});
    const done = result.result && typeof result.result === "object" ? `job ${result.result.job_id}` : result.result;
    say(`${result.action} ${result.target}: done (${done})`);
  } catch (e) { say(e.message); }
  graphAt = 0;   // an action changes states the picture shows
  refresh();
}
function actionsAllowed() { return session.token_configured && session.authenticated; }
function button(label, id, onclick) { return el("button", {type: "button", id: id, onclick: onclick}, label); }

function showSession() {
  const signedIn = session.authenticated && !!token();
  document.getElementById("login").hidden = !session.token_configured || signedIn;
  document.getElementById("signed-in").hidden = !signedIn;
  document.getElementById("signed-in-as").textContent = signedIn && session.user ? ` as ${session.user}` : "";
  document.getElementById("mode").textContent = !session.token_configured ? "read-only: no console token configured"
    : signedIn ? "actions enabled" : "read-only: sign in for actions and job SQL";
}
async function loadSession() {
  try { session = await api("/api/session"); } catch (e) { session.authenticated = false; say(e.message); }
  const select = document.getElementById("database");
  if (select.options.length !== session.databases.length) {
    select.replaceChildren(...session.databases.map(d => el("option", {value: d}, d)));
  }
  document.getElementById("database-choice").hidden = session.databases.length < 2;
  showSession();
}

function renderRunner(state) {
  document.getElementById("meta").textContent = `${state.name} ${state.version} · host ${state.host} · pid ${state.pid}`;
  const parts = [table(["database", "role", "listening", "instance", "next schedule fire", "error"],
    state.databases.map(d => [d.database, el("span", {class: "badge " + d.role}, d.role), d.listening ? "yes" : "no",
                              d.instance_id, d.next_schedule_fire, el("span", {class: "error"}, d.error)]))];
  for (const d of state.databases)
    if (d.unserved_queues && d.unserved_queues.length)
      parts.push(el("p", {class: "error"}, `${d.database}: jobs ready in queue(s) ${d.unserved_queues.join(", ")}, which this runner does not serve`));
  // the jobs this process claimed: executing now, or waiting (for their turn, or for their transaction's commit)
  const claimed = state.databases.flatMap(d => (d.running || []).map(j => [d.database, jobLink(j.job_id, null), j.job_name, j.queue,
    j.tenant, j.age_seconds, j.activity === "waiting" ? "waiting (its turn, or its transaction's commit)" : j.activity]));
  if (claimed.length) {
    parts.push(el("h3", {}, "Claimed by this runner"));
    parts.push(table(["database", "job", "name", "queue", "tenant", "age (s)", "now"], claimed, [5]));
  }
  document.getElementById("runner").replaceChildren(...parts);
}
function renderQueues(data) {
  const rows = data.queues.map(q => {
    const target = `/api/queues/${Number(q.job_queue)}/`;
    const control = !actionsAllowed() ? "" : q.paused
      ? button("Resume", `resume-${q.job_queue}-${q.tenant_id || ""}`, () => act(target + "resume", q.tenant_id))
      : button("Pause", `pause-${q.job_queue}-${q.tenant_id || ""}`, () => act(target + "pause", q.tenant_id));
    return [q.job_queue, q.tenant_id == null ? "(every tenant)" : q.tenant_id,
            q.paused ? el("span", {class: "badge paused"}, "paused") : "", q.ready, q.blocked, q.delayed, q.running,
            Math.round(q.oldest_ready_seconds || 0), q.completed_last_hour, q.failed_last_hour, q.cancelled_last_hour,
            q.lost_last_hour, control];
  });
  document.getElementById("queues").replaceChildren(table(["queue", "tenant", "", "ready", "blocked", "delayed", "running",
    "oldest ready (s)", "completed 1h", "failed 1h", "cancelled 1h", "lost 1h", ""], rows, [3, 4, 5, 6, 7, 8, 9, 10, 11]));
  document.getElementById("instances").replaceChildren(table(["id", "name", "host", "pid", "status", "started", "last ping"],
    data.instances.map(i => [i.instance_id, i.instance_name, i.hostname, i.os_pid, i.status, time(i.started_at), time(i.last_ping_at)])));
}
// flow control: each tenant's part of its queues, each concurrency key's limit and use (broker_tenant_stats, broker_key_stats)
function renderFlow(data) {
  const share = s => s == null ? "" : `${Math.round(100 * s)}%`;
  document.getElementById("flow").replaceChildren(
    el("h3", {}, "Tenants"),
    table(["queue", "tenant", "weight", "ready", "running", "served (1 min)", "share served"],
      data.tenants.map(t => [t.job_queue, t.tenant_id, t.weight, t.ready, t.running, t.served, share(t.share_served)]), [2, 3, 4, 5, 6]),
    el("h3", {}, "Limits"),
    table(["key", "tenant", "running/cap", "rate", "waiting"],
      data.limits.map(k => [k.concurrency_key, k.tenant_id == null ? "(all tenants)" : k.tenant_id,
                            `${k.running}/${k.max_running == null ? "-" : k.max_running}`,
                            k.per_second == null ? "" : `${k.per_second}/s burst ${k.burst}`, k.waiting]), [2, 4]));
}
// What is shown lives in the URL (#database=..&state=..&queue=..&tenant=..&name=..&before=..&job=..&job_tenant=..):
// a link to a job, a filter or a page is the address bar, and back and forward move between them.
const FILTERS = ["state", "queue", "tenant", "name", "finished_within"];
function viewParams(changes) {
  const params = new URLSearchParams();
  if (database()) params.set("database", database());
  for (const name of FILTERS) {
    const value = document.getElementById("filter-" + name).value.trim();
    if (value) params.set(name, value);
  }
  if (before) params.set("before", String(before));
  if (openJob) { params.set("job", String(openJob.id)); if (openJob.tenant) params.set("job_tenant", openJob.tenant); }
  for (const [k, v] of Object.entries(changes || {})) { if (v == null || v === "") params.delete(k); else params.set(k, String(v)); }
  return params;
}
function writeView() {
  const text = "#" + viewParams().toString();
  if (location.hash !== text) history.pushState(null, "", text);
}
function readView() {
  const params = new URLSearchParams(location.hash.slice(1));
  const select = document.getElementById("database");
  if (params.get("database") && [...select.options].some(o => o.value === params.get("database"))) select.value = params.get("database");
  for (const name of FILTERS) document.getElementById("filter-" + name).value = params.get(name) || "";
  before = /^[0-9]{1,18}$/.test(params.get("before") || "") ? Number(params.get("before")) : null;
  const job = params.get("job");
  openJob = /^[0-9]{1,18}$/.test(job || "") ? {id: Number(job), tenant: params.get("job_tenant")} : null;
  if (!openJob) document.getElementById("job-section").hidden = true;
}
function filterQuery() {
  const params = viewParams({job: null, job_tenant: null});
  return params;
}
function jobLink(id, tenant, text) {
  return el("a", {href: "#" + viewParams({job: Number(id), job_tenant: tenant}).toString(), "data-job": String(Number(id)),
                  onclick: (e) => { e.preventDefault(); openJob = {id: Number(id), tenant: tenant}; writeView(); refreshJob(); }},
            text == null ? String(id) : text);
}
// Cancel or retry every job the filter matches (at most 1,000), after a confirmation that names how many and a
// sample; the server acts only if the filter still matches that many (else: look again)
function bulkButton(data) {
  const state = document.getElementById("filter-state").value;
  const action = ["pending", "running"].includes(state) ? "cancel" : ["failed", "cancelled"].includes(state) ? "retry" : null;
  if (!actionsAllowed() || !action || !data.count || data.count_capped || data.count > 1000) return "";
  const label = `${action === "cancel" ? "Cancel" : "Retry"} all ${data.count}`;
  return button(label, "bulk-" + action, async () => {
    const filters = Object.fromEntries([...viewParams({database: null, before: null, job: null, job_tenant: null})]);
    // (names are enqueuers' text: on one line each, and short, so that none can pad the dialog with text of its own)
    const sample = data.jobs.slice(0, 5).map(j => `${j.job_id} ${String(j.job_name).replace(/\s+/g, " ").slice(0, 60)}`).join(", ");
    if (!window.confirm(`${label} jobs matching ${new URLSearchParams(filters)}? For example: ${sample}`)) return;
    try {
      const result = await api("/api/jobs/bulk/" + action, {method: "POST", headers: {"Content-Type": "application/json"},
        body: JSON.stringify({database: database(), tenant: filters.tenant || null, filters: filters, expect: data.count})});
      say(`${result.action}: ${result.result} of ${result.jobs.length} jobs (${result.target})`);
    } catch (e) { say(e.message); }
    refresh();
  });
}
function renderJobs(data) {
  const count = `${data.count.toLocaleString("en")}${data.count_capped ? "+" : ""} job${data.count === 1 ? "" : "s"} match`;
  const pager = el("div", {class: "controls"}, el("span", {class: "muted", id: "jobs-count"}, count),
    before == null ? "" : el("span", {class: "muted", id: "jobs-page"}, ` · below job ${before}`),
    before == null ? "" : button("Newest", "jobs-newest", () => { before = null; writeView(); refresh(); }),
    data.jobs.length < 50 ? "" : button("Older", "jobs-older", () => {
      before = Number(data.jobs[data.jobs.length - 1].job_id); writeView(); refresh(); }),
    bulkButton(data));
  document.getElementById("jobs").replaceChildren(pager, table(["job", "name", "tenant", "queue", "state", "attempts", "created", "finished", "last error"],
    data.jobs.map(j => [jobLink(j.job_id, j.tenant_id), jobLink(j.job_id, j.tenant_id, j.job_name), j.tenant_id, j.job_queue,
                        stateBadge(j.complete_status, j), `${j.attempts}/${j.max_attempts}`, time(j.created_at),
                        time(j.finished_at), el("span", {class: "error"}, j.complete_status === 2 ? "" : j.last_error_message)]), [3]));
}
// schedules of the tenant the job filter names (else the console login's own): fire times on each schedule's own
// clock (wall time in its zone, and its UTC offset then), Run now, Pause and Resume for its owner
function renderSchedules(data) {
  const tenant = document.getElementById("filter-tenant").value.trim() || null;
  document.getElementById("schedules").replaceChildren(table(["name", "cron", "zone", "", "next fire", "last fire", "last job", "error", ""],
    data.schedules.map(x => {
      const target = `/api/schedules/${encodeURIComponent(x.schedule_name)}/`;
      const id = encodeURIComponent(x.schedule_name).replace(/[^A-Za-z0-9_-]/g, "_");
      const controls = !actionsAllowed() ? "" : el("span", {},
        button("Run now", `run-now-${id}`, () => act(target + "run-now", tenant)),
        x.enabled ? button("Pause", `pause-schedule-${id}`, () => act(target + "pause", tenant))
                  : button("Resume", `resume-schedule-${id}`, () => act(target + "resume", tenant)));
      return [x.schedule_name, x.cron_expr, x.time_zone, x.enabled ? "" : el("span", {class: "badge paused"}, "paused"),
              x.next_fire_in_zone, x.last_fire_in_zone,
              x.last_job_id == null ? "" : jobLink(x.last_job_id, x.tenant_id), el("span", {class: "error"}, x.last_error), controls];
    })));
}
// Charts: jobs finished per minute over the last three hours, one small chart per queue and tenant (the busiest
// twelve), bars stacked by final state; what an operator looks at to see a queue slow down or start failing
function renderCharts(data) {
  const end = Date.parse(data.now_minute), minutes = 180, series = {};
  for (const r of data.finished) {
    const key = `${r.job_queue}|${r.tenant_id}`;
    const s = series[key] = series[key] || {queue: r.job_queue, tenant: r.tenant_id, total: 0, bars: {}};
    const at = minutes - 1 - Math.round((end - Date.parse(r.finished_minute)) / 60000);
    if (at < 0 || at >= minutes) continue;
    const bar = s.bars[at] = s.bars[at] || {2: 0, 3: 0, 4: 0};
    bar[r.complete_status] = (bar[r.complete_status] || 0) + Number(r.jobs);
    s.total += Number(r.jobs);
  }
  const busiest = Object.values(series).sort((a, b) => b.total - a.total).slice(0, 12);
  if (!busiest.length) { document.getElementById("charts").replaceChildren(el("div", {class: "muted"}, "no job finished in the last 3 hours")); return; }
  const charts = busiest.map(s => {
    const top = Math.max(1, ...Object.values(s.bars).map(b => b[2] + b[3] + b[4]));
    const picture = svg("svg", {width: 372, height: 70, viewBox: "0 0 372 70", role: "img",
                                id: `chart-${Number(s.queue)}-${String(s.tenant).replace(/[^A-Za-z0-9_-]/g, "_")}`});
    picture.append(svg("title", {}, `queue ${s.queue}, tenant ${s.tenant}: ${s.total} finished in 3 h (most in a minute: ${top})`));
    for (const [at, bar] of Object.entries(s.bars)) {
      let y = 60;
      for (const code of [2, 3, 4]) {
        const h = Math.round(55 * bar[code] / top);
        if (!h) continue;
        y -= h;
        picture.append(svg("rect", {x: 6 + 2 * Number(at), y: y, width: 2, height: h, fill: STATE_COLORS[STATES[code]],
                                    "data-state": STATES[code]}));
      }
    }
    picture.append(svg("line", {x1: 6, y1: 60.5, x2: 366, y2: 60.5, stroke: "#a0aec0"}),
                   svg("text", {x: 6, y: 69, "font-size": 8}, "-3 h"), svg("text", {x: 350, y: 69, "font-size": 8}, "now"));
    return el("figure", {}, el("figcaption", {}, `queue ${s.queue} · ${s.tenant} · ${s.total} (max ${top}/min)`), picture);
  });
  document.getElementById("charts").replaceChildren(...charts,
    el("div", {class: "muted"}, "green completed · red failed · gray cancelled"));
}
// A job's workflow as a picture: what it waits on to the left, what waits on it to the right, each job a box
// colored by its state and a link, each group a dashed box (text set as text, never markup)
const STATE_COLORS = {pending: "#b7791f", running: "#3182ce", completed: "#2f855a", failed: "#c53030", cancelled: "#718096"};
function svg(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text != null) node.textContent = String(text);
  return node;
}
function renderGraph(data) {
  const depths = [...new Set(data.nodes.map(n => n.depth))].sort((a, b) => a - b);
  const at = {}, rows = {};
  for (const n of data.nodes) {
    const col = depths.indexOf(n.depth), row = rows[col] = (rows[col] || 0) + 1;
    at[n.key] = {x: 10 + col * 200, y: 10 + (row - 1) * 40};
  }
  const height = 20 + 40 * Math.max(1, ...Object.values(rows)), width = 20 + 200 * depths.length;
  const picture = svg("svg", {width: width, height: height, viewBox: `0 0 ${width} ${height}`, id: "job-graph", role: "img"});
  for (const e of data.edges) {   // from the waiter to what it waits on
    const a = at[e.from], b = at[e.to];
    picture.append(svg("line", {x1: a.x, y1: a.y + 14, x2: b.x + 160, y2: b.y + 14, stroke: "#a0aec0", "stroke-width": 1.5}));
  }
  for (const n of data.nodes) {
    const p = at[n.key];
    if (n.kind === "group") {
      picture.append(svg("rect", {x: p.x, y: p.y, width: 160, height: 28, rx: 4, fill: "#fff", stroke: "#4a5568", "stroke-dasharray": "4 3"}),
                     svg("text", {x: p.x + 8, y: p.y + 18, "font-size": 12}, `group ${n.job_group}`.slice(0, 24)));
      continue;
    }
    const state = STATES[n.complete_status] || "pending";
    const link = svg("a", {href: "#" + viewParams({job: n.job_id, job_tenant: n.tenant_id}).toString(),
                           id: `graph-job-${Number(n.job_id)}`, "data-state": state});
    link.addEventListener("click", (e) => { e.preventDefault(); openJob = {id: Number(n.job_id), tenant: n.tenant_id}; writeView(); refreshJob(); });
    link.append(svg("rect", {x: p.x, y: p.y, width: 160, height: 28, rx: 4, fill: STATE_COLORS[state],
                             stroke: n.job_id === data.job_id ? "#1a202c" : "none", "stroke-width": 2}),
                svg("text", {x: p.x + 8, y: p.y + 18, "font-size": 12, fill: "#fff"}, `${n.job_id} ${n.job_name}`.slice(0, 24)),
                svg("title", {}, `job ${n.job_id} ${n.job_name}: ${state}`));
    picture.append(link);
  }
  document.getElementById("job-graph-box").replaceChildren(picture);
}
function fields(pairs) {
  const dl = el("dl", {class: "fields"});
  for (const [k, v] of pairs) dl.append(el("dt", {}, k), el("dd", {}, v));
  return dl;
}
function renderJob(data) {
  const j = data.job;
  document.getElementById("job-section").hidden = false;
  document.getElementById("job-title").textContent = `Job ${j.job_id}: ${j.job_name}`;
  const controls = el("div", {class: "controls"});
  if (actionsAllowed() && (j.complete_status === 0 || j.complete_status === 1))
    controls.append(button("Cancel", "cancel-job", () => act(`/api/jobs/${Number(j.job_id)}/cancel`, j.tenant_id)));
  if (actionsAllowed() && (j.complete_status === 3 || j.complete_status === 4))
    controls.append(button("Retry", "retry-job", () => act(`/api/jobs/${Number(j.job_id)}/retry`, j.tenant_id)));
  const last = j.attempt_history.find(a => a.outcome === "completed");
  const parts = [controls, fields([
    ["state", stateBadge(j.complete_status, j)],
    ["waiting", el("span", {id: "job-waiting"}, j.waiting ? j.waiting.replace(/^waiting: /, "") : "")],
    ["concurrency key", j.concurrency_key], ["tenant", j.tenant_id], ["group", j.job_group],
    j.job_language === "task" ? ["task", j.job_name] : ["queue", j.job_queue],
    ["priority", j.job_priority], ["attempts", `${j.attempts}/${j.max_attempts}`], ["run as", j.run_as],
    ["enqueued by", j.enqueued_by], ["created", time(j.created_at)], ["run after", time(j.run_after)],
    ["started", time(j.started_at)], ["finished", time(j.finished_at)], ["cancel reason", j.cancel_reason],
    ["last error", el("span", {class: "error", id: "job-error"}, j.last_error_sqlstate ? `${j.last_error_sqlstate}: ${j.last_error_message}` : "")],
    ["output", el("span", {id: "job-output"}, last ? [last.command_status, last.output].filter(x => x != null).join(" · ") : "")]])];
  // a task (run by application code): its name is the task, its text its JSON arguments
  parts.push(el("h3", {}, j.job_language === "task" ? "Task arguments (JSON)" : "SQL"),
    data.sql_shown ? el("pre", {class: "sql", id: "job-sql"}, j.execute_str)
    : el("div", {class: "muted", id: "job-sql-hidden"}, "hidden: sign in with the console token to see job SQL"));
  if (data.sql_shown && j.execute_str_cut) parts.push(el("div", {class: "muted"}, "(the first 100,000 characters)"));
  parts.push(el("h3", {}, "Attempts (newest first)"), table(["attempt", "outcome", "started", "finished", "instance", "SQLSTATE", "error", "status", "rows", "output"],
    j.attempt_history.map(a => [a.attempt, a.outcome, time(a.started_at), time(a.finished_at), a.instance_id, a.error_sqlstate,
                                el("span", {class: "error"}, a.error_message), a.command_status, a.rows_affected, a.output])));
  parts.push(el("h3", {}, "Workflow"), el("div", {id: "job-graph-box", class: "graph"}));
  parts.push(el("h3", {}, "Actions"), table(["when", "action", "by", "reason"],
    (j.actions || []).map(a => [time(a.requested_at), a.action, a.requested_by, a.reason])));
  parts.push(el("h3", {}, "Waits on"), table(["job", "name", "state"], j.waits_on.map(d => d.job_id == null
    ? [`group ${d.job_group}`, "", ""] : [jobLink(d.job_id, j.tenant_id), d.job_name, stateBadge(d.complete_status)])));
  parts.push(el("h3", {}, "Waited on by"), table(["job", "name", "state"],
    j.waited_on_by.map(d => [jobLink(d.job_id, j.tenant_id), d.job_name, stateBadge(d.complete_status)])));
  document.getElementById("job").replaceChildren(...parts);
}

// a section is rebuilt only when what it shows changed: no flicker, and what the operator points at stays put
const shown = {};
function render(section, data, draw) {
  const key = JSON.stringify([data, actionsAllowed()]);
  if (shown[section] !== key) { shown[section] = key; draw(data); }
}
async function refreshJob() {
  if (!openJob) return;
  const params = new URLSearchParams({database: database()});
  if (openJob.tenant) params.set("tenant", openJob.tenant);
  try {
    render("job", await api(`/api/jobs/${openJob.id}?${params}`), renderJob);
    // the picture is read when another job opens and every 10 s (a few lookups per node, up to 200 nodes)
    const graphKey = `${database()}/${openJob.id}`;
    if (graphFor !== graphKey || Date.now() - graphAt > 10000 || !document.getElementById("job-graph")) {
      graphAt = Date.now(); graphFor = graphKey;
      const graph = await api(`/api/jobs/${openJob.id}/graph?${params}`);
      if (shown.job_graph !== JSON.stringify(graph) || !document.getElementById("job-graph")) {
        shown.job_graph = JSON.stringify(graph); renderGraph(graph);
      }
    }
  } catch (e) { say(e.message); }
}
async function refresh() {
  try {
    const state = await api("/api/state");
    render("runner", state, renderRunner);
    render("queues", await api("/api/queues?" + new URLSearchParams({database: database()})), renderQueues);
    render("flow", await api("/api/flow?" + new URLSearchParams({database: database()})), renderFlow);
    if (!chartsAt || Date.now() - chartsAt > 30000 || chartsFor !== database()) {   // (minutes: every 30 s is enough)
      chartsAt = Date.now(); chartsFor = database();
      render("charts", await api("/api/charts?" + new URLSearchParams({database: database()})), renderCharts);
    }
    render("jobs", await api("/api/jobs?" + filterQuery()), renderJobs);
    const scheduleQuery = new URLSearchParams({database: database()});
    if (document.getElementById("filter-tenant").value.trim()) scheduleQuery.set("tenant", document.getElementById("filter-tenant").value.trim());
    render("schedules", await api("/api/schedules?" + scheduleQuery), renderSchedules);
    await refreshJob();
  } catch (e) { say(e.message); }
}

document.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("login").addEventListener("submit", async (e) => {
    e.preventDefault();
    sessionStorage.setItem("console-token", document.getElementById("token").value);
    document.getElementById("token").value = "";
    await loadSession();
    say(session.authenticated ? "" : "wrong console token");
    refresh();
  });
  document.getElementById("sign-out").addEventListener("click", async () => {
    sessionStorage.removeItem("console-token"); await loadSession(); refresh();
  });
  document.getElementById("filters").addEventListener("submit", (e) => {
    e.preventDefault(); say(""); before = null; writeView(); refresh(); });
  document.getElementById("database").addEventListener("change", () => {
    openJob = null; before = null; document.getElementById("job-section").hidden = true; writeView(); refresh(); });
  // back and forward, and a URL pasted into this tab's address bar
  window.addEventListener("popstate", () => { readView(); refresh(); });
  window.addEventListener("hashchange", () => { readView(); refresh(); });
  await loadSession();
  readView();
  await refresh();
  setInterval(refresh, 2000);
});
