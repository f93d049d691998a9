// The streams views: dead letters per stream, quarantined partitions, failures per
// processor, events lost to trimming; from /api/streams. Plain DOM building (textContent
// only), so nothing read from the store can inject markup. Action buttons carry
// data-action, data-args and data-confirm; the page's action handler sends them.
"use strict";

(() => {
  const POLL_MS = 5000;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function grid(headers, rows) {
    const head = el("tr", {}, headers.map(([text, cls]) => el("th", { class: cls || "" }, text)));
    return el("table", {}, el("thead", {}, head), el("tbody", {}, rows));
  }

  function button(name, args, confirm, label, cls) {
    return el(
      "button",
      { class: cls, "data-action": name, "data-args": JSON.stringify(args), "data-confirm": confirm },
      label,
    );
  }

  function when(seconds) {
    return seconds == null ? "-" : new Date(seconds * 1000).toISOString().slice(0, 19) + "Z";
  }

  function deadCard(d, allowed) {
    const more = d.count != null && d.count > d.shown ? `, the oldest ${d.shown} shown` : "";
    const parts = d.by_partition.map((p) => `partition ${p.partition ?? "?"}: ${p.shown}`).join(", ");
    const heading = el(
      "h3",
      {},
      `dead letters of ${d.stream} `,
      el("span", { class: "sub" }, `${d.count ?? "?"} in dead.${d.stream}${more}`),
    );
    const processors = d.processors.join(", ") || "-";
    const tools = [];
    if (allowed && d.letters.length) {
      for (const p of d.by_partition) {
        const ids = d.letters.filter((x) => x.partition === p.partition).map((x) => x.id);
        const args = { stream: d.stream, partition: p.partition, ids };
        const where = `partition ${p.partition ?? "?"} of ${d.stream}`;
        tools.push(
          button("stream-dead-replay", args, `Send the ${ids.length} dead letters of ${where} back to it?`, `replay partition ${p.partition ?? "?"} (${ids.length})`, "replay"),
          " ",
          button("stream-dead-purge", args, `Delete the ${ids.length} dead letters of ${where} for good?`, `purge partition ${p.partition ?? "?"} (${ids.length})`, "purge"),
          " ",
        );
      }
    }
    const headers = [["partition", "num"], ["dead letter id"], ["event id"], ["processor"], ["failed"], ["error"]];
    if (allowed) headers.push([""]);
    // Grouped by partition (those of no partition last), each in the sink's order.
    const order = (x) => (x.partition === null ? Infinity : x.partition);
    const grouped = [...d.letters].sort((a, b) => order(a) - order(b));
    const rows = grouped.map((x) => {
      const args = { stream: d.stream, partition: x.partition, ids: [x.id] };
      return el(
        "tr",
        { class: "stream-dead", "data-stream": d.stream, "data-id": x.id },
        el("td", { class: "num" }, x.partition ?? "?"),
        el("td", { class: "mono" }, x.id),
        el("td", { class: "mono" }, x.source_id || "-"),
        el("td", {}, processors),
        el("td", { class: "mono" }, x.failed),
        el("td", { class: "error" }, x.error || "-"),
        allowed
          ? el(
              "td",
              {},
              button("stream-dead-replay", args, `Send dead letter ${x.id} back to ${d.stream}?`, "replay", "replay"),
              " ",
              button("stream-dead-purge", args, `Delete dead letter ${x.id} of ${d.stream} for good?`, "purge", "purge"),
            )
          : null,
      );
    });
    return el(
      "div",
      { class: "card stream-dead-letters", "data-stream": d.stream, "data-count": d.count ?? "" },
      heading,
      el("p", { class: "sub" }, `forwarded by ${processors}`, parts ? `; listed per partition: ${parts}` : ""),
      tools.length ? el("p", { class: "tools" }, tools) : null,
      rows.length ? grid(headers, rows) : el("p", { class: "empty" }, "no dead letters"),
    );
  }

  function drawDead(body) {
    const box = document.getElementById("stream-dead");
    if (!body.dead.length) {
      box.replaceChildren(el("p", { class: "empty" }, "no stream has a dead-letter sink (DeadLetterMiddleware)"));
      return;
    }
    box.replaceChildren(
      el("p", { class: "sub" }, `at most ${body.dead_shown} listed per stream, the oldest first; the count is all of them`),
      ...body.dead.map((d) => deadCard(d, body.allow_actions)),
    );
  }

  function drawQuarantine(body) {
    const rows = [];
    for (const p of body.processors) {
      for (const q of p.quarantined) {
        const args = { processor: p.processor, stream: p.stream, partition: q.partition };
        // The skip names the event its confirmation names, so that a page gone stale
        // (the partition since stopped on another event) skips nothing else.
        const skipArgs = q.failing_id ? { ...args, id: q.failing_id } : args;
        const where = `partition ${q.partition} of ${p.processor}`;
        rows.push(
          el(
            "tr",
            { class: "quarantined", "data-processor": p.processor, "data-number": q.partition },
            el("td", {}, p.processor),
            el("td", {}, p.stream),
            el("td", { class: "num" }, q.partition),
            el("td", { class: "mono" }, q.failing_id || "-"),
            el("td", { class: "mono" }, when(q.since)),
            el("td", { class: "error" }, q.error),
            body.allow_actions
              ? el(
                  "td",
                  {},
                  button("partition-skip", skipArgs, `Acknowledge the failing event ${q.failing_id || ""} of ${where} without processing it, and resume?`, "skip event", "purge"),
                  " ",
                  button("partition-resume", args, `Resume ${where}, trying the failing event again?`, "resume", "replay"),
                )
              : null,
          ),
        );
      }
    }
    const headers = [["processor"], ["stream"], ["partition", "num"], ["failing event id"], ["since"], ["error"]];
    if (body.allow_actions) headers.push([""]);
    document
      .getElementById("quarantine")
      .replaceChildren(rows.length ? grid(headers, rows) : el("p", { class: "empty" }, "no partition is quarantined"));
  }

  function drawFailures(body) {
    const rows = body.processors.map((p) =>
      el(
        "tr",
        { class: "failures", "data-processor": p.processor },
        el("td", {}, p.processor),
        el("td", {}, p.stream),
        el("td", { class: "mono" }, p.policy),
        el("td", { class: p.dead_letters ? "num alarm" : "num" }, p.dead_letters ?? "-"),
        el("td", { class: p.quarantined.length ? "num alarm" : "num" }, p.quarantined.length),
        el("td", { class: p.lost_total ? "num alarm" : "num" }, p.lost_total),
      ),
    );
    const headers = [["processor"], ["stream"], ["on failure"], ["dead letters", "num"], ["quarantined", "num"], ["lost events", "num"]];
    document
      .getElementById("failures")
      .replaceChildren(rows.length ? grid(headers, rows) : el("p", { class: "empty" }, "this app declares no processors"));
  }

  function drawLost(body) {
    const rows = [];
    for (const p of body.processors) {
      for (const x of p.lost) {
        rows.push(
          el(
            "tr",
            { class: "lost-events", "data-processor": p.processor, "data-number": x.partition },
            el("td", {}, p.processor),
            el("td", {}, p.stream),
            el("td", { class: "num" }, x.partition),
            el("td", { class: "num lost" }, x.lost),
            el("td", { class: "num" }, x.length ?? "?"),
          ),
        );
      }
    }
    const headers = [["processor"], ["stream"], ["partition", "num"], ["lost", "num"], ["stored now", "num"]];
    document
      .getElementById("lost")
      .replaceChildren(rows.length ? grid(headers, rows) : el("p", { class: "empty" }, "no events lost to trimming"));
  }

  let timer = null;

  async function load() {
    clearTimeout(timer);
    const status = document.getElementById("streams-problem");
    try {
      const answer = await fetch("api/streams", { cache: "no-store" });
      const body = await answer.json();
      if (!answer.ok) throw new Error(body.error || `HTTP ${answer.status}`);
      drawDead(body);
      drawQuarantine(body);
      drawFailures(body);
      drawLost(body);
      status.hidden = true;
      document.getElementById("streams-section").dataset.loaded = "yes";
    } catch (err) {
      status.textContent = `cannot update the streams views: ${err.message}`;
      status.hidden = false;
    }
    timer = setTimeout(load, POLL_MS);
  }

  window.addEventListener("runnel:refresh", load);
  load();
})();
