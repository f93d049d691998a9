// The jobs views: lists of recent, running, retrying, scheduled and dead jobs with their
// filters (#/jobs?list=dead&name=send&queue=bulk), a job's own page (#/jobs/ID), and the
// figures per job name. Uses app.js's el, table, stateBadge, actionButton and actions
// (loaded first); redraws on "runnel:refresh" after an action.
"use strict";

const JOBS_POLL_MS = 2000;
const LISTS = ["recent", "running", "retrying", "scheduled", "dead"];
const WHEN = { recent: "finished", running: "started", retrying: "due", scheduled: "due", dead: "finished" };

function seconds(value) {
  if (value === null || value === undefined) return "-";
  if (value < 1) return `${(value * 1000).toFixed(1)} ms`;
  if (value < 120) return `${value.toFixed(2)} s`;
  return `${(value / 60).toFixed(1)} min`;
}

function route() {
  // "#/jobs/ID": a job's page; "#/jobs?list=..": the lists, filtered; else the lists.
  const hash = decodeURIComponent(location.hash.slice(1));
  if (hash.startsWith("/jobs/")) return { job: hash.slice("/jobs/".length) };
  const query = new URLSearchParams(hash.startsWith("/jobs?") ? hash.slice("/jobs?".length) : "");
  const list = LISTS.includes(query.get("list")) ? query.get("list") : "recent";
  return { list, name: query.get("name") || "", queue: query.get("queue") || "" };
}

function listHash(list, name, queue) {
  const query = new URLSearchParams({ list });
  if (name) query.set("name", name);
  if (queue) query.set("queue", queue);
  return `#/jobs?${query}`;
}

async function getJSON(path) {
  const answer = await fetch(path, { cache: "no-store" });
  const body = await answer.json().catch(() => ({}));
  if (!answer.ok) throw Object.assign(new Error(body.error || `HTTP ${answer.status}`), { status: answer.status });
  return body;
}

function jobButtons(job) {
  // What can be done to a job in this state; only when the server allows actions.
  if (!actions) return [];
  const out = [];
  const id = job.id;
  if (job.status === "RETRY" || (job.status === "SENT" && job.due)) {
    out.push(actionButton("job-retry", { id }, `Run job ${id} (${job.name}) now instead of at its due time?`, "retry now", "retry-now"));
  }
  if (!["SUCCESS", "DEAD", "CANCELLED", "UNKNOWN"].includes(job.status)) {
    out.push(actionButton("job-cancel", { id }, `Cancel job ${id} (${job.name})? It will not run (again).`, "cancel", "cancel"));
  }
  if (job.status === "DEAD") {
    out.push(actionButton("dead-job-replay", { ids: [id] }, `Enqueue the dead job ${id} again, tries reset?`, "replay", "replay"));
    out.push(actionButton("dead-job-purge", { ids: [id] }, `Delete the dead job ${id} for good?`, "purge", "purge"));
  }
  return out.flatMap((b, i) => (i ? [" ", b] : [b]));
}

// --- the lists ----------------------------------------------------------------------

function select(label, name, values, chosen, onchange) {
  const box = el("select", { name, onchange: (e) => onchange(e.target.value) }, el("option", { value: "" }, `any ${label}`));
  for (const v of values) {
    const option = el("option", { value: v }, v);
    if (v === chosen) option.selected = true;
    box.append(option);
  }
  return el("label", {}, `${label} `, box);
}

function drawControls(where, data) {
  const tabs = el(
    "nav",
    { class: "tabs" },
    LISTS.map((l) =>
      el("a", { href: listHash(l, where.name, where.queue), class: l === where.list ? "tab chosen" : "tab", "data-list": l }, l),
    ),
  );
  const search = el(
    "form",
    {
      class: "search",
      onsubmit: (e) => {
        e.preventDefault();
        const id = e.target.elements.id.value.trim();
        if (id) location.hash = `#/jobs/${encodeURIComponent(id)}`;
      },
    },
    el("input", { name: "id", type: "search", placeholder: "job id", "aria-label": "job id" }),
    el("input", { type: "submit", value: "open" }),
  );
  const filters = el(
    "div",
    { class: "filters" },
    select("job", "name", data.names, where.name, (v) => (location.hash = listHash(where.list, v, where.queue))),
    select("queue", "queue", data.queues, where.queue, (v) => (location.hash = listHash(where.list, where.name, v))),
  );
  return el("div", { class: "controls" }, tabs, filters, search);
}

function drawList(where, data) {
  const headers = [["job id"], ["name"], ["queue"], ["status"], ["try", "num"], [WHEN[where.list]], ["run time", "num"], ["last error"]];
  if (actions) headers.push([""]);
  const body = data.jobs.length
    ? table(
        headers,
        data.jobs.map((j) =>
          el(
            "tr",
            { class: "job-row", "data-id": j.id, "data-status": j.status },
            el("td", { class: "mono" }, el("a", { href: `#/jobs/${encodeURIComponent(j.id)}` }, j.id)),
            el("td", {}, j.name),
            el("td", { class: "mono" }, j.queue),
            el("td", {}, stateBadge(j.status)),
            el("td", { class: "num" }, `${j.tries}/${j.retries + 1}`),
            el("td", { class: "mono" }, j[WHEN[where.list]] || "-"),
            el("td", { class: "num" }, seconds(j.runtime)),
            el("td", { class: "error" }, j.error || ""),
            actions ? el("td", {}, jobButtons(j)) : null,
          ),
        ),
      )
    : el("p", { class: "empty" }, `no ${where.list} jobs${where.name || where.queue ? " matching" : ""}`);
  const more = data.more ? ` (the first ${data.shown} shown: filter to see others)` : "";
  return [el("p", { class: "sub count-line" }, `${data.jobs.length} ${where.list}${more}`), body];
}

function drawStats(stats) {
  const minutes = (stats.window / 60).toFixed(1);
  const caption = el("p", { class: "sub" }, `over the last ${minutes} min (since ${stats.since}; at most ${stats.bound} ended jobs)`);
  if (!stats.jobs.length) return [caption, el("p", { class: "empty" }, "no jobs")];
  const pct = (v) => (v === null ? "-" : `${(v * 100).toFixed(1)}%`);
  return [
    caption,
    table(
      [["job"], ["succeeded", "num"], ["dead", "num"], ["cancelled", "num"], ["per minute", "num"], ["failure ratio", "num"], ["run time p50", "num"], ["p95", "num"]],
      stats.jobs.map((s) =>
        el(
          "tr",
          { class: "job-stats", "data-name": s.name },
          el("td", {}, el("a", { href: listHash("recent", s.name, "") }, s.name)),
          el("td", { class: "num" }, s.succeeded),
          el("td", { class: `num${s.dead ? " alarm" : ""}` }, s.dead),
          el("td", { class: "num" }, s.cancelled),
          el("td", { class: "num" }, s.per_minute.toFixed(2)),
          el("td", { class: "num" }, pct(s.failure_ratio)),
          el("td", { class: "num" }, seconds(s.p50)),
          el("td", { class: "num" }, seconds(s.p95)),
        ),
      ),
    ),
  ];
}

// --- one job ------------------------------------------------------------------------

function pre(value) {
  return el("pre", { class: "value" }, value === null || value === undefined ? "-" : JSON.stringify(value, null, 2));
}

function drawJob(job) {
  const facts = [
    ["name", job.name],
    ["queue", job.queue],
    ["status", stateBadge(job.status)],
    ["tries", `${job.tries} of ${job.retries + 1}`],
    ["created", job.created],
    ["due", job.due],
    ["started", job.started],
    ["finished", job.finished],
    ["run time", seconds(job.runtime)],
    ["executor", job.executor],
    ["workflow", job.workflow],
    ["waiting", job.waiting],
    ["progress", job.progress ? `${Math.floor(job.progress.fraction * 100 + 1e-9)}% ${job.progress.message}` : null],
  ];
  const list = el(
    "dl",
    { class: "job-facts" },
    facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v === null || v === undefined ? "-" : v)]),
  );
  const parts = [
    el("h2", {}, "Job ", el("span", { class: "mono" }, job.id), " ", stateBadge(job.status)),
    el("p", {}, el("a", { href: "#/" }, "back to the dashboard")),
    el("div", { class: "job-actions" }, jobButtons(job)),
    list,
    el("h3", {}, "Arguments"),
    el("div", { class: "args" }, pre(job.args)),
    el("h3", {}, "Keyword arguments"),
    el("div", { class: "kwargs" }, pre(job.kwargs)),
    el("h3", {}, "Result"),
    el("div", { class: "result" }, "result" in job ? pre(job.result) : el("p", { class: "empty" }, "none kept")),
  ];
  if (job.error) {
    parts.push(
      el("h3", {}, "Error"),
      el("p", { class: "error" }, `${job.error.type}: ${job.error.message}`),
      el("pre", { class: "traceback" }, job.error.traceback || "(no traceback)"),
    );
  }
  return parts;
}

// --- drawing and polling ------------------------------------------------------------

let jobsTimer = null;
let drawing = 0; // a draw that a newer one overtook (the address changed) draws nothing

async function drawJobsViews() {
  clearTimeout(jobsTimer);
  const mine = ++drawing;
  const shown = location.hash;
  const where = route();
  const page = document.getElementById("job-page");
  document.querySelector("main").hidden = Boolean(where.job);
  page.hidden = !where.job;
  try {
    if (where.job) {
      try {
        const job = await getJSON(`api/jobs/${encodeURIComponent(where.job)}`);
        if (mine !== drawing) return;
        page.replaceChildren(...drawJob(job));
      } catch (err) {
        if (err.status !== 404) throw err;
        if (mine !== drawing) return;
        page.replaceChildren(
          el("h2", {}, "Job ", el("span", { class: "mono" }, where.job)),
          el("p", {}, el("a", { href: "#/" }, "back to the dashboard")),
          el("p", { class: "error missing" }, err.message),
        );
      }
    } else {
      const query = new URLSearchParams({ list: where.list });
      if (where.name) query.set("name", where.name);
      if (where.queue) query.set("queue", where.queue);
      const [data, stats] = await Promise.all([getJSON(`api/jobs?${query}`), getJSON("api/job-stats")]);
      if (mine !== drawing) return;
      const box = document.getElementById("jobs-browser");
      box.dataset.list = where.list;
      // The controls stay as they are while nothing they show changed (a search being
      // typed survives the redraw).
      const key = JSON.stringify([where, data.names, data.queues]);
      let controls = box.querySelector(".controls");
      if (!controls || controls.dataset.key !== key) {
        controls = drawControls(where, data);
        controls.dataset.key = key;
      }
      box.replaceChildren(controls, ...drawList(where, data));
      document.getElementById("job-stats").replaceChildren(...drawStats(stats));
    }
    document.body.dataset.jobsLoaded = shown; // the address drawn (for the tests)
  } catch (err) {
    if (mine !== drawing) return;
    showProblem(`cannot update the jobs: ${err.message}`);
  }
  jobsTimer = setTimeout(drawJobsViews, JOBS_POLL_MS);
}

window.addEventListener("hashchange", drawJobsViews);
window.addEventListener("runnel:refresh", drawJobsViews);
if (document.getElementById("jobs-browser")) drawJobsViews();
