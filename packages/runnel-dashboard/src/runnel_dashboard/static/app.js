// The dashboard page: polls /api/state and redraws. Plain DOM building (textContent
// only, never HTML strings), so nothing read from the store can inject markup.
"use strict";

const POLL_MS = 2000;
const token = document.querySelector('meta[name="runnel-token"]').content;
const actions = document.querySelector('meta[name="runnel-actions"]').content === "true";
const SVG = "http://www.w3.org/2000/svg";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function table(headers, rows) {
  // A header may carry a tooltip, its third item (how fresh its column's figures are).
  const head = el("tr", {}, headers.map(([text, cls, note]) => el("th", note ? { class: cls || "", title: note } : { class: cls || "" }, text)));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, rows));
}

function stateBadge(text) {
  const cls = String(text).toLowerCase().replace(/\s+/g, "-");
  return el("span", { class: `state ${cls}` }, text);
}

function ago(iso, now) {
  if (!iso) return "-";
  const secs = Math.round(Date.parse(iso) / 1000 - now);
  const span = Math.abs(secs) < 120 ? `${Math.abs(secs)}s` : `${Math.round(Math.abs(secs) / 60)}m`;
  return secs >= 0 ? `in ${span}` : `${span} ago`;
}

// --- throughput ---------------------------------------------------------------------

function sparkline(values, width = 280, height = 52) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const top = Math.max(1, ...values.filter((v) => v !== null));
  const step = values.length > 1 ? width / (values.length - 1) : width;
  // A missing sample (the store could not be read) breaks the line.
  let points = [];
  const flush = () => {
    if (points.length) {
      const line = document.createElementNS(SVG, "polyline");
      line.setAttribute("points", points.join(" "));
      svg.append(line);
    }
    points = [];
  };
  values.forEach((v, i) => {
    if (v === null) return flush();
    const y = height - 3 - (v / top) * (height - 6);
    points.push(`${(i * step).toFixed(1)},${y.toFixed(1)}`);
  });
  flush();
  return svg;
}

function spark(label, values, unit, note) {
  const known = values.filter((v) => v !== null);
  const last = known.length ? known[known.length - 1] : null;
  const fmt = (v) => (v === null ? "-" : Number.isInteger(v) ? v : v.toFixed(1));
  const peak = known.length ? Math.max(...known) : null;
  return el(
    "figure",
    { class: "spark", title: note },
    el("figcaption", {}, `${label}: `, el("b", {}, fmt(last)), ` ${unit} (peak ${fmt(peak)})`),
    sparkline(values),
  );
}

// What each figure is and how fresh it is, shown as its tooltip (docs/operations.md).
const NOTES = {
  jobs:
    "Job tries finished (succeeded, retried or dead) per second between two samples: the growth of the counts the store " +
    "keeps as it records each outcome, over the time between the two reads.",
  failures: "Failed tries (retried or dead) per second between two samples, counted as jobs finished are.",
  processed:
    "Events acknowledged per second between two samples: the events appended to the stream (a count trimming does " +
    "not lower) less the growth of the backlog and of the events lost to trimming, over the time between the reads.",
  backlog: "Lag plus pending, as read at each sample.",
  gauge: "As read at each sample.",
};

function drawThroughput(state) {
  const samples = state.throughput;
  const box = document.getElementById("throughput");
  if (samples.length < 2) {
    box.replaceChildren(
      el("p", { class: "empty" }, `collecting: one sample every ${state.sample_every}s`),
    );
    return;
  }
  const figures = [];
  if (state.jobs) {
    figures.push(spark("jobs finished", samples.map((s) => s.jobs_per_second), "per second", NOTES.jobs));
  }
  for (const proc of state.processors) {
    const of = (series) => samples.map((s) => (s[series] || {})[proc.name] ?? null);
    figures.push(spark(`${proc.name} processed`, of("processed"), "events per second", NOTES.processed));
    figures.push(spark(`${proc.name} backlog`, of("backlog"), "events waiting or unacknowledged", NOTES.backlog));
  }
  const minutes = ((samples[samples.length - 1].at - samples[0].at) / 60).toFixed(1);
  figures.push(el("p", { class: "empty" }, `${samples.length} samples over ${minutes} min`));
  box.replaceChildren(...figures);
}

// --- processors ---------------------------------------------------------------------

function partitionState(p) {
  // A state in the report (e.g. QUARANTINED) wins; otherwise owned or not.
  return p.state || (p.owner ? "owned" : "unowned");
}

function drawProcessor(proc) {
  const executors = proc.executors.length
    ? table(
        [["executor"], ["host"], ["pid", "num"], ["state"], ["partitions"]],
        proc.executors.map((ex) =>
          el(
            "tr",
            { class: "executor", "data-id": ex.id },
            el("td", { class: "mono" }, ex.id),
            el("td", {}, ex.host ?? "?"),
            el("td", { class: "num" }, ex.pid ?? "?"),
            el("td", {}, stateBadge(ex.alive ? "alive" : "NOT BEATING")),
            el("td", {}, ex.partitions.join(", ") || "-"),
          ),
        ),
      )
    : el("p", { class: "empty" }, "no workers");
  const partitions = table(
    [["partition", "num"], ["owner"], ["state"], ["lag", "num"], ["pending", "num"], ["lost", "num"], ["failing id"]],
    proc.partitions.map((p) =>
      el(
        "tr",
        { class: "partition", "data-processor": proc.name, "data-number": p.number },
        el("td", { class: "num" }, p.number),
        el("td", { class: "mono owner" }, p.owner || "-"),
        el("td", {}, stateBadge(partitionState(p))),
        el("td", { class: "num" }, p.lag ?? "?"),
        el("td", { class: "num" }, p.pending),
        el("td", { class: p.lost ? "num lost" : "num" }, p.lost ? `lost ${p.lost}` : "0"),
        el("td", { class: "mono" }, p.failing_id || ""),
      ),
    ),
  );
  return el(
    "div",
    { class: "card processor", "data-name": proc.name },
    el(
      "h3",
      {},
      proc.name,
      " ",
      el("span", { class: "sub" }, `stream ${proc.stream}`, proc.length == null ? "" : `, ${proc.length} events stored`),
    ),
    executors,
    partitions,
  );
}

function drawProcessors(state) {
  const box = document.getElementById("processors");
  if (!state.processors.length) {
    box.replaceChildren(el("p", { class: "empty" }, "this app declares no processors"));
    return;
  }
  box.replaceChildren(...state.processors.map(drawProcessor));
}

function drawTables(state) {
  const box = document.getElementById("tables");
  const tables = state.tables || [];
  document.getElementById("tables-section").hidden = !tables.length;
  box.replaceChildren(
    ...tables.map((t) => {
      const w = t.windows;
      const columns = [["partition", "num"], ["keys", "num"]];
      if (w) columns.push(["watermark", "num"], ["late events", "num"]);
      const shape = w
        ? Object.entries(w)
            .filter(([k]) => k !== "kind")
            .map(([k, v]) => `${k} ${v}`)
            .join(", ")
        : "";
      return el(
        "div",
        { class: "card state-table", "data-name": t.name },
        el("h3", {}, t.name, " ", el("span", { class: "sub" }, `of stream ${t.stream}, ${t.keys} keys`)),
        w ? el("p", { class: "sub windows" }, `${w.kind} windows (${shape}); late events ${t.late}`) : "",
        table(
          columns,
          t.partitions.map((p) =>
            el(
              "tr",
              { class: "table-partition", "data-table": t.name, "data-number": p.number },
              el("td", { class: "num" }, p.number),
              el("td", { class: "num" }, p.keys),
              ...(w
                ? [
                    el("td", { class: "num watermark" }, p.watermark === null ? "-" : String(p.watermark)),
                    el("td", { class: `num late${p.late ? " alarm" : ""}` }, p.late),
                  ]
                : []),
            ),
          ),
        ),
      );
    }),
  );
}

// --- job queue ----------------------------------------------------------------------

function count(label, value, extra, alarm) {
  return el(
    "div",
    { class: `count${alarm ? " alarm" : ""}`, "data-count": label },
    el("b", {}, value),
    el("span", {}, label, extra ? ` (${extra})` : ""),
  );
}

function progressBar(fraction) {
  // Whole percent, rounded down: 100% only once the job says it is all done.
  const pct = Math.floor(fraction * 100 + 1e-9);
  return el(
    "span",
    { class: "bar", title: `${pct}%` },
    el("span", { class: "fill", style: `width: ${pct}%` }),
    el("span", { class: "pct" }, `${pct}%`),
  );
}

// --- actions ------------------------------------------------------------------------
// Any <button data-action="NAME" data-args='JSON' data-confirm="TEXT"> in the page, drawn
// by any script: confirmed, posted to api/actions/NAME with the page's token, its outcome
// shown in #outcome, then "runnel:refresh" is dispatched and every view redraws.

function actionButton(name, args, confirmText, label, cls) {
  return el(
    "button",
    { class: cls || name, "data-action": name, "data-args": JSON.stringify(args), "data-confirm": confirmText },
    label,
  );
}

function showOutcome(text, ok) {
  const box = document.getElementById("outcome");
  box.textContent = text;
  box.className = `outcome ${ok ? "done" : "refused"}`;
  box.hidden = false;
}

async function runAction(button) {
  const name = button.dataset.action;
  let args;
  try {
    args = JSON.parse(button.dataset.args || "{}");
  } catch (err) {
    showOutcome(`${name}: its data-args are not JSON`, false);
    return;
  }
  if (!window.confirm(button.dataset.confirm || `Run ${name} on ${JSON.stringify(args)}?`)) return;
  button.disabled = true;
  try {
    const answer = await fetch(`api/actions/${encodeURIComponent(name)}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Runnel-Token": token },
      body: JSON.stringify(args),
    });
    const body = await answer.json().catch(() => ({}));
    if (answer.ok) showOutcome(body.message, true);
    else showOutcome(`${name} refused: ${body.error || `HTTP ${answer.status}`}`, false);
  } catch (err) {
    showOutcome(`${name} failed: ${err.message}`, false);
  } finally {
    button.disabled = false;
  }
  window.dispatchEvent(new Event("runnel:refresh"));
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-action]");
  if (!button) return;
  event.preventDefault();
  runAction(button);
});

function jobLink(id) {
  return el("a", { href: `#/jobs/${encodeURIComponent(id)}` }, id);
}

function drawJobs(state) {
  const box = document.getElementById("jobs");
  const q = state.jobs;
  if (!q) {
    box.replaceChildren(el("p", { class: "empty" }, "this app declares no jobs"));
    return;
  }
  const counts = el(
    "div",
    { class: "counts" },
    count("queued", q.queued),
    count("executing", q.executing),
    count("scheduled", q.scheduled, q.next_due ? `next ${ago(q.next_due, state.now)}` : ""),
    count("dead", q.dead, "", q.dead > 0),
    count("cancelled", q.cancelled),
    count("results", q.results),
  );
  const named = Object.entries(q.queues || {});
  const queues =
    named.length > 1
      ? table(
          [["queue"], ["queued", "num"], ["executing", "num"], ["scheduled", "num"], ["next due"], ["dead", "num"]],
          named.map(([name, c]) =>
            el(
              "tr",
              { class: "job-queue", "data-queue": name },
              el("td", { class: "mono" }, name),
              el("td", { class: "num" }, c.queued),
              el("td", { class: "num" }, c.executing),
              el("td", { class: "num" }, c.scheduled),
              el("td", {}, c.next_due ? ago(c.next_due, state.now) : "-"),
              el("td", { class: `num${c.dead ? " alarm" : ""}` }, c.dead),
            ),
          ),
        )
      : null;
  const beatNote = `As of the executor's last heartbeat: it sends its figures every ${state.executor_beat_every}s (job_heartbeat_timeout / 3), so they can trail the counts above by that much.`;
  const executors = q.executors.length
    ? table(
        [["executor"], ["host"], ["pid", "num"], ["state"], ["queues"], ["running", "num", beatNote], ["succeeded", "num", beatNote], ["failed tries", "num", beatNote]],
        q.executors.map((ex) =>
          el(
            "tr",
            { class: "job-executor", "data-id": ex.id },
            el("td", { class: "mono" }, ex.id),
            el("td", {}, ex.host ?? "?"),
            el("td", { class: "num" }, ex.pid ?? "?"),
            el("td", {}, stateBadge(ex.alive ? "alive" : "NOT BEATING")),
            el("td", { class: "mono" }, ex.queues ?? "default"),
            el("td", { class: "num" }, `${ex.running ?? "?"}/${ex.concurrency ?? "?"}`),
            el("td", { class: "num" }, ex.done ?? "?"),
            el("td", { class: "num" }, ex.failed ?? "?"),
          ),
        ),
      )
    : el("p", { class: "empty" }, "no job executors");
  const schedule = state.schedule.length
    ? table(
        [["timer or crontab"], ["when"], ["runs on"]],
        state.schedule.map((t) =>
          el(
            "tr",
            { class: "scheduled" },
            el("td", { class: "mono" }, t.name),
            el("td", {}, t.crontab ? `crontab ${t.crontab}` : `every ${t.every}s`),
            el("td", {}, t.on_leader ? "the leader" : "every worker"),
          ),
        ),
      )
    : el("p", { class: "empty" }, "no timers or crontabs");
  const running = state.running.length
    ? table(
        [["job id"], ["name"], ["started"], ["try", "num"], ["progress"], ["message"], ["executor"]],
        state.running.map((r) =>
          el(
            "tr",
            { class: "running-job", "data-id": r.id },
            el("td", { class: "mono" }, jobLink(r.id)),
            el("td", {}, r.name),
            el("td", {}, ago(r.started, state.now)),
            el("td", { class: "num" }, r.tries),
            el("td", { class: "progress" }, r.progress ? progressBar(r.progress.fraction) : "-"),
            el("td", { class: "message" }, r.progress ? r.progress.message : ""),
            el("td", { class: "mono" }, r.executor ?? "?"),
          ),
        ),
      )
    : el("p", { class: "empty" }, "no job running");
  const headers = [["died"], ["job id"], ["name"], ["last error"]];
  if (actions) headers.push([""]);
  const dead = state.dead.length
    ? table(
        headers,
        state.dead.map((d) =>
          el(
            "tr",
            { class: "dead", "data-id": d.id },
            el("td", { class: "mono" }, d.died ?? "?"),
            el("td", { class: "mono" }, jobLink(d.id)),
            el("td", {}, d.name),
            el("td", { class: "error" }, d.error),
            actions
              ? el(
                  "td",
                  {},
                  actionButton("dead-job-replay", { ids: [d.id] }, `Enqueue the dead job ${d.id} again, tries reset?`, "replay", "replay"),
                  " ",
                  actionButton("dead-job-purge", { ids: [d.id] }, `Delete the dead job ${d.id} for good?`, "purge", "purge"),
                )
              : null,
          ),
        ),
      )
    : el("p", { class: "empty" }, "no dead jobs");
  const more = q.dead > state.dead.length ? `, the oldest ${state.dead.length} shown` : "";
  box.replaceChildren(
    counts,
    ...(queues ? [el("h3", {}, "Queues"), queues] : []),
    el("h3", {}, "Executors"),
    executors,
    el("h3", {}, "Running jobs", el("span", { class: "sub" }, q.executing > state.running.length ? `, ${state.running.length} shown` : "")),
    running,
    el("h3", {}, "Schedule"),
    schedule,
    el("h3", {}, "Dead letters", el("span", { class: "sub" }, more)),
    dead,
    el("h3", {}, "Workflows", el("span", { class: "sub" }, " most recent first")),
    drawWorkflows(state),
  );
}

function drawWorkflows(state) {
  const flows = state.workflows || [];
  if (!flows.length) return el("p", { class: "empty" }, "no workflows");
  return table(
    [["workflow id"], ["shape"], ["status"], ["created"], ["jobs"]],
    flows.map((w) =>
      el(
        "tr",
        { class: "workflow", "data-id": w.id },
        el("td", { class: "mono" }, w.id),
        el("td", { class: "mono" }, w.shape),
        el("td", {}, stateBadge(w.status), w.failed ? el("div", { class: "error" }, `${w.failed}: ${w.error}`) : null),
        el("td", {}, ago(w.created, state.now)),
        el(
          "td",
          {},
          el(
            "details",
            {},
            el("summary", {}, `${w.jobs}: ${w.tally}`),
            table(
              [["job id"], ["name"], ["status"]],
              w.members.map((m) =>
                el(
                  "tr",
                  { class: "member", "data-id": m.id },
                  el("td", { class: "mono" }, m.id),
                  el("td", {}, m.name),
                  el("td", {}, stateBadge(m.status)),
                ),
              ),
            ),
          ),
        ),
      ),
    ),
  );
}

// --- polling ------------------------------------------------------------------------

function showProblem(text) {
  const box = document.getElementById("problem");
  box.textContent = text || "";
  box.hidden = !text;
}

let timer = null;

async function poll() {
  clearTimeout(timer);
  try {
    const answer = await fetch("api/state", { cache: "no-store" });
    const state = await answer.json();
    if (!answer.ok) throw new Error(state.error || `HTTP ${answer.status}`);
    showProblem("");
    document.getElementById("url").textContent = state.url;
    document.getElementById("leader").textContent = state.leader || "-";
    document.getElementById("updated").textContent = new Date(state.now * 1000).toLocaleTimeString();
    drawThroughput(state);
    drawProcessors(state);
    drawTables(state);
    drawJobs(state);
    document.body.dataset.loaded = "yes";
  } catch (err) {
    showProblem(`cannot update: ${err.message}`);
  }
  timer = setTimeout(poll, POLL_MS);
}

window.addEventListener("runnel:refresh", () => poll());
poll();
