// uPlot charts of one run: power per rail, memory, CPU per cluster, GPU, energy per step.
import uPlot from "uplot";
import { el, NOT_MEASURED } from "./format.js";
import { getSeries } from "./api.js";

const COLORS = ["#1976d2", "#e65100", "#2e7d32", "#6a1b9a", "#c62828", "#00838f", "#f9a825", "#4e342e"];
const MAX_POINTS = 2000;
const GIB = 2 ** 30;

// Draws the steps behind a time chart: warm-up shaded grey, the failed (OOM)
// step red, traced steps blue, a thin line at every step start.
function stepBands(steps, t0) {
  return {
    hooks: {
      drawClear: [
        (u) => {
          const { ctx } = u;
          const { top, height } = u.bbox;
          ctx.save();
          for (const s of steps) {
            const x0 = u.valToPos(s.start_s - t0, "x", true);
            const x1 = u.valToPos(s.end_s - t0, "x", true);
            const fill = s.failed ? "rgba(198,40,40,0.30)" : s.traced ? "rgba(25,118,210,0.18)"
              : s.warmup ? "rgba(128,128,128,0.22)" : null;
            if (fill) {
              ctx.fillStyle = fill;
              ctx.fillRect(x0, top, Math.max(1, x1 - x0), height);
            }
            ctx.fillStyle = "rgba(128,128,128,0.35)";
            ctx.fillRect(x0, top, 1, height);
          }
          ctx.restore();
        },
      ],
    },
  };
}

// Keeps the x scale of every time chart of a run in step: zoom one, zoom all.
function zoomGroup() {
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

function notMeasured(title, why) {
  return el("div", { class: "chart empty" }, el("h4", { text: title }), el("p", { text: `${NOT_MEASURED}${why ? ": " + why : ""}` }));
}

async function timeChart(ctx, title, channels, { scale = 1, unit = "", limit = null } = {}) {
  if (!channels.length) return notMeasured(title, ctx.unavailable);
  const tables = await Promise.all(
    channels.map(async (c) => {
      const s = await getSeries(ctx.run, c.name, MAX_POINTS);
      return [s.t.map((t) => t - ctx.t0), s.max.map((v) => (v === null ? null : v / scale))];
    }),
  );
  const data = uPlot.join(tables);
  const series = [{ label: "time (s)" }, ...channels.map((c, i) => ({
    label: c.cluster ? `${c.name} (${c.cluster})` : c.name, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: false,
  }))];
  if (limit !== null) {
    data.push(data[0].map(() => limit));
    series.push({ label: "device limit", stroke: "#c62828", dash: [6, 4], width: 1 });
  }
  const box = el("div", { class: "chart" }, el("h4", { text: title }));
  const chart = new uPlot({
    width: ctx.width, height: 220, series,
    scales: { x: { time: false } },
    axes: [{ label: "seconds since the first sample", stroke: "currentColor" }, { label: unit, stroke: "currentColor" }],
    cursor: { sync: { key: `mobileperf-${ctx.run}` } },
    plugins: [stepBands(ctx.steps, ctx.t0)],
    hooks: { setScale: [ctx.zoom.hook] },
  }, data, box);
  ctx.zoom.charts.push(chart);
  return box;
}

function energyBars(ctx) {
  const steps = ctx.steps.filter((s) => s.energy_j && s.energy_j.total !== undefined);
  if (!steps.length) return notMeasured("Energy per step", ctx.unavailable);
  const box = el("div", { class: "chart" }, el("h4", { text: "Energy per step (J, total rail; warm-up grey, failed red)" }));
  const x = steps.map((s) => s.step);
  const measured = steps.map((s) => (s.warmup || s.failed ? null : s.energy_j.total));
  const other = steps.map((s) => (s.warmup || s.failed ? s.energy_j.total : null));
  new uPlot({
    width: ctx.width, height: 180,
    series: [{ label: "step" },
      { label: "measured step", fill: "rgba(25,118,210,0.6)", stroke: "#1976d2", paths: uPlot.paths.bars({ size: [0.8] }), points: { show: false } },
      { label: "warm-up / failed", fill: "rgba(128,128,128,0.5)", stroke: "#888", paths: uPlot.paths.bars({ size: [0.8] }), points: { show: false } }],
    scales: { x: { time: false } },
    axes: [{ label: "step", stroke: "currentColor" }, { label: "J", stroke: "currentColor" }],
  }, [x, measured, other], box);
  return box;
}

export async function runCharts(run, header, steps, summary, width) {
  const channels = header.channels;
  const ctx = { run, t0: header.t0, steps, width, zoom: zoomGroup(), unavailable: (summary.unavailable || {}).power };
  const power = channels.filter((c) => c.kind === "power");
  const memory = channels.filter((c) => c.kind === "memory");
  // Channels are chosen by their roles (kind, device, core), as the report chooses them; never by name.
  const gpu = channels.filter((c) => c.kind === "util" && c.device === "gpu");
  const cores = channels.filter((c) => c.kind === "util" && c.device === "cpu" && c.core != null);
  const clusters = [...new Set(cores.map((c) => c.cluster || "cores"))];
  const ramTotal = (summary.device || {}).ram_total_bytes;
  const parts = [
    timeChart(ctx, "Power per rail (W)", power, { unit: "W" }),
    timeChart({ ...ctx, unavailable: (summary.unavailable || {}).mem_peak_gb }, "Memory (GiB)", memory,
      { scale: GIB, unit: "GiB", limit: ramTotal ? ramTotal / GIB : null }),
    ...(clusters.length
      ? clusters.map((k) => timeChart(ctx, `CPU utilization, ${k} (%)`, cores.filter((c) => (c.cluster || "cores") === k), { unit: "%" }))
      : [Promise.resolve(notMeasured("CPU utilization per core", (summary.unavailable || {}).cpu_util))]),
    gpu.length ? timeChart(ctx, "GPU utilization (%)", gpu, { unit: "%" })
      : Promise.resolve(notMeasured("GPU utilization", (summary.unavailable || {}).gpu_util)),
  ];
  const boxes = await Promise.all(parts);
  boxes.push(energyBars(ctx));
  return boxes;
}
