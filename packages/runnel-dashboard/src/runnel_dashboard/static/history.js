// The history charts: samples kept in the store (/api/history), drawn as plain SVG with
// time on the x axis and labelled values on the y axis. Nothing is fetched but the API.
"use strict";

(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 560;
  const HEIGHT = 200;
  const PAD = { left: 52, right: 12, top: 10, bottom: 26 };
  const COLOURS = ["#2f6fd6", "#c0362c", "#1f8a4c", "#b86e00", "#7b3fb8", "#2a8f9c", "#8a6d3b", "#d14f9c"];
  let span = "1h";

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

  function svg(tag, attrs, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function clock(seconds, withDate, withSeconds) {
    const d = new Date(seconds * 1000);
    const hm = d.toTimeString().slice(0, withSeconds ? 8 : 5);
    const day = `${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
    return withDate ? `${day} ${hm}` : hm;
  }

  function number(v) {
    if (v === 0) return "0";
    if (Math.abs(v) >= 1000) return `${(v / 1000).toFixed(v >= 10000 ? 0 : 1)}k`;
    return Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 2 : 1);
  }

  // The y axis's top: a round number at or above the highest value (1 when all are 0).
  function roundUp(v) {
    if (v <= 0) return 1;
    const magnitude = 10 ** Math.floor(Math.log10(v));
    const step = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].find((m) => m * magnitude >= v * (1 - 1e-9));
    return step * magnitude;
  }

  // A chart of series [{label, points: [[at, value|null], ...]}] over [from, to].
  function chart(title, unit, series, from, to, every, note) {
    const values = series.flatMap((s) => s.points.map((p) => p[1]).filter((v) => v !== null));
    const top = roundUp(Math.max(0, ...values));
    const w = WIDTH - PAD.left - PAD.right;
    const h = HEIGHT - PAD.top - PAD.bottom;
    const x = (at) => PAD.left + ((at - from) / Math.max(1, to - from)) * w;
    const y = (v) => PAD.top + h - (v / top) * h;
    const root = svg("svg", { width: WIDTH, height: HEIGHT, viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart" });
    // y axis: 0, half and top, labelled; grid lines across.
    for (const v of [0, top / 2, top]) {
      root.append(svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: y(v), y2: y(v), class: "grid" }));
      root.append(svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end", class: "tick y" }, number(v)));
    }
    // x axis: five times, with the date when the span passes a day boundary.
    const days = new Date(from * 1000).toDateString() !== new Date(to * 1000).toDateString();
    for (let i = 0; i <= 4; i++) {
      const at = from + ((to - from) * i) / 4;
      root.append(svg("line", { x1: x(at), x2: x(at), y1: PAD.top + h, y2: PAD.top + h + 4, class: "axis" }));
      const anchor = i === 0 ? "start" : i === 4 ? "end" : "middle";
      const label = clock(at, days, to - from < 600);
      root.append(svg("text", { x: x(at), y: HEIGHT - 6, "text-anchor": anchor, class: "tick x" }, label));
    }
    root.append(svg("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: PAD.top + h, y2: PAD.top + h, class: "axis" }));
    root.append(svg("line", { x1: PAD.left, x2: PAD.left, y1: PAD.top, y2: PAD.top + h, class: "axis" }));
    series.forEach((s, i) => {
      const colour = COLOURS[i % COLOURS.length];
      let run = [];
      const flush = () => {
        if (run.length === 1) {
          root.append(svg("circle", { cx: run[0][0], cy: run[0][1], r: 2, fill: colour }));
        } else if (run.length) {
          root.append(svg("polyline", { points: run.map((p) => p.join(",")).join(" "), stroke: colour, class: "series" }));
        }
        run = [];
      };
      // An unknown value, or samples missing for more than two intervals (no dashboard
      // ran, or the store was away), breaks the line.
      let before = null;
      for (const [at, v] of s.points) {
        if (v === null || (before !== null && at - before > 2 * every)) flush();
        if (v !== null) run.push([x(at).toFixed(1), y(v).toFixed(1)]);
        before = at;
      }
      flush();
    });
    const legend = el(
      "ul",
      { class: "legend" },
      series.map((s, i) => {
        const known = s.points.filter((p) => p[1] !== null);
        const last = known.length ? number(known[known.length - 1][1]) : "-";
        return el(
          "li",
          {},
          el("span", { class: "swatch", style: `background:${COLOURS[i % COLOURS.length]}` }),
          `${s.label}: `,
          el("b", {}, last),
        );
      }),
    );
    return el("figure", { class: "history-chart", "data-title": title, title: note }, el("figcaption", {}, title, el("span", { class: "sub" }, ` (${unit})`)), root, legend);
  }

  function keyed(samples, field) {
    const names = new Set();
    for (const s of samples) for (const name of Object.keys(s[field] || {})) names.add(name);
    return [...names].sort().map((name) => ({
      label: name,
      points: samples.map((s) => [s.at, (s[field] || {})[name] ?? null]),
    }));
  }

  function draw(body) {
    const box = document.getElementById("history");
    const samples = body.samples;
    box.dataset.samples = String(samples.length);
    box.dataset.first = samples.length ? String(samples[0].at) : "";
    const note = `${samples.length} samples, one every ${body.every}s; the store keeps ${body.hours} h (at most ${body.bound} samples)`;
    if (!samples.length) {
      box.replaceChildren(el("p", { class: "empty" }, `no samples yet: ${note}`));
      return;
    }
    // From the first sample shown (or the span's start, if samples reach that far).
    const from = Math.max(body.now - body.span, samples[0].at);
    const to = body.now;
    // The time between two samples: the interval, or more where the server thinned a
    // long span down to its most points (then evenly spaced over it).
    const thinned = samples.length >= 720 ? (samples[samples.length - 1].at - samples[0].at) / (samples.length - 1) : 0;
    const spacing = Math.max(body.every, thinned);
    const figures = [
      chart("Throughput per processor", "events per second", keyed(samples, "processed"), from, to, spacing, NOTES.processed),
      chart("Backlog per processor", "events waiting or unacknowledged", keyed(samples, "backlog"), from, to, spacing, NOTES.backlog),
      chart("Lag per processor", "events not yet delivered", keyed(samples, "lag"), from, to, spacing, NOTES.gauge),
    ];
    if (samples.some((s) => s.job_failures_per_second !== null && s.job_failures_per_second !== undefined)) {
      figures.push(
        chart(
          "Job rates",
          "per second",
          [
            { label: "jobs finished", points: samples.map((s) => [s.at, s.jobs_per_second ?? null]) },
            { label: "failed tries", points: samples.map((s) => [s.at, s.job_failures_per_second ?? null]) },
          ],
          from,
          to,
          spacing,
          `${NOTES.jobs} ${NOTES.failures}`,
        ),
      );
    }
    const failures = [
      ...keyed(samples, "dead_letters").map((s) => ({ ...s, label: `${s.label}: dead letters` })),
      ...keyed(samples, "quarantined").map((s) => ({ ...s, label: `${s.label}: quarantined partitions` })),
    ];
    if (failures.length) figures.push(chart("Failures", "dead letters held, partitions quarantined", failures, from, to, spacing, NOTES.gauge));
    const first = clock(samples[0].at, true);
    box.replaceChildren(el("p", { class: "sub history-note" }, `${note}; first shown ${first}`), el("div", { class: "charts" }, figures));
  }

  let timer = null;

  async function load() {
    clearTimeout(timer);
    let every = 10;
    try {
      const answer = await fetch(`api/history?span=${span}`, { cache: "no-store" });
      const body = await answer.json();
      if (!answer.ok) throw new Error(body.error || `HTTP ${answer.status}`);
      every = body.every;
      draw(body);
      document.getElementById("history-section").dataset.loaded = "yes";
    } catch (err) {
      document.getElementById("history").replaceChildren(el("p", { class: "problem" }, `cannot read the history: ${err.message}`));
    }
    timer = setTimeout(load, Math.max(2000, every * 1000));
  }

  const chooser = document.getElementById("history-span");
  chooser.addEventListener("change", () => {
    span = chooser.value;
    load();
  });
  window.addEventListener("runnel:refresh", load);
  load();
})();
