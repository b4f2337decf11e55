// uPlot time charts (one per chartlist spec, lines of one or several runs on
// one x axis) and a run's energy-per-step bars.
//
// Each line is its channel's own readings (the series route drops the rows
// where the channel has none), joined with the other lines on the union of
// their times. uPlot draws straight over a join's alignment artifacts
// (undefined) and breaks only at a null, so with spanGaps off a line breaks
// exactly at the route's gap markers: where the sensor really had no reading.
import uPlot from "uplot";
import { lineLabel } from "./chartlist.js";
import { el, fmt, NOT_MEASURED, shortReason } from "./format.js";
import { getSeries } from "./api.js";
import { LIMIT_COLOUR, modelColour, shade } from "./colours.js";
import { yAxis } from "./axes.js";

// One run's channels, one colour each (colour-blind-safe, no red: red marks failed steps).
const CHANNEL_COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#332288", "#999933", "#AA4499"];
const DASHES = [[], [8, 4], [2, 3], [12, 3, 2, 3]];
// A peak channel (VmHWM beside VmRSS) is drawn as a wide pale band under its value, before the lines: where
// the two are equal (a process that only grew) both stay visible, the line in its own colour.
const isPeak = (c) => /(^|_)peak$/.test(c.name) || /HWM/.test(c.source || "");
const MAX_POINTS = 2000;

// Step-start lines closer than this (CSS pixels) are thinned out: drawn only at the first step start this
// far from the last line drawn, so that fast steps (1.7 ms each) do not merge into a grey block that reads as
// warm-up shading. Zooming in brings every step's line back.
const STEP_LINE_SPACING_PX = 8;

// Draws the steps behind a time chart, of every run at its own offset: warm-up
// grey, the failed (OOM) step red, traced steps blue, a thin line at step starts (thinned out where dense).
function stepBands(runs) {
  const draw = (u) => {
    const { ctx } = u;
    const { top, height } = u.bbox;
    const spacing = STEP_LINE_SPACING_PX * uPlot.pxRatio;
    ctx.save();
    for (const r of runs) {
      let lastLine = -Infinity;
      for (const s of r.steps) {
        const x0 = u.valToPos(s.start_s - r.t0, "x", true);
        const x1 = u.valToPos(s.end_s - r.t0, "x", true);
        const fill = s.failed ? "rgba(198,40,40,0.30)" : s.traced ? "rgba(25,118,210,0.18)"
          : s.warmup ? "rgba(128,128,128,0.22)" : null;
        if (fill) {
          ctx.fillStyle = fill;
          ctx.fillRect(x0, top, Math.max(1, x1 - x0), height);
        }
        if (x0 - lastLine >= spacing) {
          ctx.fillStyle = "rgba(128,128,128,0.35)";
          ctx.fillRect(x0, top, 1, height);
          lastLine = x0;
        }
      }
    }
    ctx.restore();
  };
  return { hooks: { drawClear: [draw] } };
}

// Keeps the x scale of every time chart in step: zoom one, zoom all.
export function zoomGroup() {
  const charts = [];
  let syncing = false;
  return {
    charts,
    hook: (u, key) => {
      if (key !== "x" || syncing) return;
      syncing = true;
      const { min, max } = u.scales.x;
      for (const other of charts) if (other !== u) other.setScale("x", { min, max });
      syncing = false;
    },
  };
}

// An empty chart: its title and the first clause of why (the whole reason on hover).
export function notMeasured(title, why) {
  return el("div", { class: "chart empty" }, el("h4", { text: title }),
    el("p", { text: `not measured: ${why ? shortReason(why) : NOT_MEASURED}`, title: why || NOT_MEASURED }));
}

function rateText(hz) {
  if (!hz) return "one reading";
  return hz >= 10 ? `${Math.round(hz)} Hz` : `${hz.toPrecision(2)} Hz`;
}

// A line's table for uPlot.join: times from its run's first measured step, values in the chart's unit.
async function lineTable(view, spec, line) {
  const r = view.runs.get(line.run);
  const s = await getSeries(line.run, line.channel.name, MAX_POINTS);
  const prefix = view.multi ? `${line.run}: ` : "";
  return {
    table: [s.t.map((t) => t - r.t0), s.max.map((v) => (v === null ? null : v / spec.scale))],
    label: `${prefix}${lineLabel(line.channel)} (${[spec.unit, rateText(s.rate_hz)].filter(Boolean).join(", ")})`,
    run: r, peak: isPeak(line.channel),
  };
}

// Each line's colour and dash. One run: a colour per channel. Overlaid runs: the run's model's colour (a
// shade of it for a second run of that model), a dash per channel of the run in this chart.
export function lineStyles(lines, multi) {
  const nth = new Map();
  return lines.map((l, i) => {
    const k = nth.get(l.run) || 0;
    nth.set(l.run, k + 1);
    const colour = multi ? shade(modelColour(l.run.model), l.run.variant) : CHANNEL_COLOURS[i % CHANNEL_COLOURS.length];
    return { colour, dash: multi ? DASHES[k % DASHES.length] : [] };
  });
}

function lineSeries(lines, multi) {
  return lineStyles(lines, multi).map(({ colour, dash }, i) => (lines[i].peak
    ? { label: `${lines[i].label}, pale band`, stroke: `${colour}66`, dash: [], width: 6, spanGaps: false }
    : { label: lines[i].label, stroke: colour, dash, width: 1.5, spanGaps: false }));
}

// The training process's own CPU in each step (process_cpu_util), flat over the step and broken between
// steps: a line of its own on the CPU chart, beside the machine's utilization, which counts every process.
function processCpuTables(view) {
  return [...view.runs.entries()].flatMap(([name, r]) => {
    const t = [];
    const v = [];
    for (const s of r.steps || []) {
      if (s.process_cpu_util == null || s.start_s == null || s.end_s == null) continue;
      t.push(s.start_s - r.t0, s.end_s - r.t0, s.end_s - r.t0 + 1e-6);
      v.push(s.process_cpu_util, s.process_cpu_util, null);
    }
    const label = `${view.multi ? `${name}: ` : ""}this process's CPU (%, per step)`;
    return t.length ? [{ table: [t, v], label, run: r, peak: false }] : [];
  });
}

// Every run's first and last row, as a table of x values only: all charts
// share the x range of the runs, whatever span one channel has. Runs of one
// row span a second around it (uPlot would draw a single x as 0 to 100).
function extentTable(view) {
  const xs = [...view.runs.values()].flatMap((r) => [r.first - r.t0, r.last - r.t0]).filter(Number.isFinite);
  if (new Set(xs).size === 1) xs.push(xs[0] - 0.5, xs[0] + 0.5);
  return [[...new Set(xs)].sort((a, b) => a - b)];
}

function limitNote(spec) {
  const one = spec.limits.length === 1;
  const values = spec.limits.map((l) => `${one ? "" : l.device + " "}${l.value.toPrecision(3)} GiB`).join(", ");
  return el("p", { class: "note", text: `device RAM: ${values}, the limit of the system RAM line${one ? "" : " of each device's runs"} `
    + `(click "${one ? spec.limits[0].label : "device RAM: …"}" in the legend to draw it)` });
}

export async function timeChart(view, spec) {
  if (spec.empty !== undefined) return notMeasured(spec.title, spec.empty);
  const lines = await Promise.all(spec.lines.map((line) => lineTable(view, spec, line)));
  if (spec.key === "util/CPU") lines.push(...processCpuTables(view));
  // Peak bands first, so that every line is drawn over them in its own colour; each keeps the colour of
  // its place among the channels.
  const styled = lineSeries(lines, view.multi);
  const order = lines.map((_, i) => i).sort((a, b) => Number(lines[b].peak) - Number(lines[a].peak));
  const data = uPlot.join([extentTable(view), ...order.map((i) => lines[i].table)]);
  const series = [{ label: "time (s)" }, ...order.map((i) => styled[i])];
  const box = el("div", { class: "chart time-chart", "data-chart": spec.key }, el("h4", { text: spec.unit ? `${spec.title} (${spec.unit})` : spec.title }));
  // A device's RAM, one line per device of the runs (hidden until asked for), in the limit colour.
  spec.limits.forEach((limit, i) => {
    data.push(data[0].map(() => limit.value));
    series.push({ label: limit.label, stroke: LIMIT_COLOUR, dash: DASHES[(i + 1) % DASHES.length], width: 1.2, show: false });
  });
  if (spec.limits.length) box.append(limitNote(spec));
  const chart = new uPlot({
    width: view.width, height: 220, series,
    scales: { x: { time: false } },
    axes: [{ label: "seconds since the first measured step", stroke: "currentColor" }, yAxis(spec.unit)],
    cursor: { sync: { key: view.syncKey } },
    plugins: [stepBands([...view.runs.values()])],
    hooks: { setScale: [view.zoom.hook, (u, key) => key === "x" && box.setAttribute("data-x-range", `${u.scales.x.min},${u.scales.x.max}`)] },
  }, data, box);
  view.zoom.charts.push(chart);
  return box;
}

// Each measured step's stated bound (energy_bound_j: the half-width of an interval holding its true
// energy) as a whisker over its bar, from energy - bound to energy + bound; the numbers are its title.
function drawBounds(x, measured, bound, offset) {
  return (u) => {
    for (const old of u.over.querySelectorAll(".bound")) old.remove();
    measured.forEach((energy, i) => {
      const b = bound[i];
      if (energy === null || b === null || !(b > 0)) return;
      const [top, bottom] = [u.valToPos(energy + b, "y"), u.valToPos(Math.max(energy - b, 0), "y")];
      const left = u.valToPos(x[i] + offset, "x");
      u.over.append(el("span", { class: "bound", "data-step": String(x[i]), "data-energy": String(energy), "data-bound": String(b),
        title: `step ${x[i]}: ${fmt(energy)} ± ${fmt(b)} J (its stated bound)`,
        style: `position:absolute;left:${left - 4}px;top:${top}px;width:8px;height:${Math.max(bottom - top, 1)}px;`
          + "border-top:1px solid #212121;border-bottom:1px solid #212121;box-sizing:border-box;"
          + "background:linear-gradient(#212121,#212121) center/1px 100% no-repeat;pointer-events:auto;cursor:help" }));
    });
  };
}

// A run's energy per step (total rail), each measured step with its stated bound as a whisker; with an idle
// baseline, each measured step's energy above it (energy_active_j) stands beside its total bar.
export function energyBars(steps, width, unavailable) {
  steps = steps.filter((s) => s.energy_j && s.energy_j.total !== undefined);
  if (!steps.length) return notMeasured("Energy per step", unavailable);
  const x = steps.map((s) => s.step);
  const measured = steps.map((s) => (s.warmup || s.failed ? null : s.energy_j.total));
  const other = steps.map((s) => (s.warmup || s.failed ? s.energy_j.total : null));
  const active = steps.map((s) => (s.warmup || s.failed ? null : (s.energy_active_j || {}).total ?? null));
  const bound = steps.map((s, i) => (measured[i] === null ? null : (s.energy_bound_j || {}).total ?? null));
  const withActive = active.some((v) => v !== null);
  const withBounds = bound.some((b) => b > 0);
  const bars = (align) => ({ paths: uPlot.paths.bars({ size: [withActive ? 0.4 : 0.8], align: withActive ? align : 0 }), points: { show: false } });
  // The scale fits the measured steps and their bounds: a warm-up step (graph tracing, often 100x a step) is
  // cut at the top.
  const top = Math.max(...measured.map((v, i) => (v === null ? 0 : v + (bound[i] || 0))), 0) * 1.15 || null;
  const clipped = top !== null && other.some((v) => v !== null && v > top);
  const box = el("div", { class: "chart" }, el("h4", {
    text: `Energy per step (J, total rail${withActive ? "; green: above the idle baseline" : ""}; warm-up grey, failed red`
      + `${withBounds ? "; whiskers: each step's stated bound" : ""}${clipped ? "; warm-up bars cut at the top" : ""})` }));
  const series = [{ label: "step" },
    { label: "measured step", fill: "rgba(25,118,210,0.6)", stroke: "#1976d2", ...bars(-1) },
    { label: "warm-up / failed", fill: "rgba(128,128,128,0.5)", stroke: "#888", ...bars(-1) }];
  if (withActive) series.push({ label: "above idle", fill: "rgba(46,125,50,0.6)", stroke: "#2e7d32", ...bars(1) });
  new uPlot({
    width, height: 180, series,
    // Half a step of room on each side, so the first and last steps' bars are drawn whole.
    scales: { x: { time: false, range: (u, lo, hi) => [lo - 0.5, hi + 0.5] }, y: top === null ? {} : { range: () => [0, top] } },
    axes: [{ label: "step", stroke: "currentColor" }, yAxis("J")],
    hooks: { draw: [drawBounds(x, measured, bound, withActive ? -0.2 : 0)] },
  }, withActive ? [x, measured, other, active] : [x, measured, other], box);
  return box;
}
