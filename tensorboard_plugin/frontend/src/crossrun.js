// Across runs: one quantity against batch size, the seed's sweep. One series per
// model (or per run folder; per board and model where the runs come from several
// boards, with their best batch sizes in a table under the chart), x on a log2
// axis labelled 1, 2, 4, ..., y picked from
// every per-run quantity the reports carry. Where several runs share a point
// (one series, one batch size) it is their mean, with their count and range in
// the legend ("0.128 J (n=2, 0.0740–0.182)") and a bar from the lowest to the
// highest. A configuration that failed is a red cross at its batch size (on
// its series' value where it has one, else on the x axis) with its cause on
// hover, and listed under the chart.
import uPlot from "uplot";
import { el, fmt } from "./format.js";
import { bestBatchTable, boardAndModel, boardsOf, successStats } from "./boards.js";
import { modelColour, shade } from "./colours.js";
import { channelsOf, processPeak } from "./header.js";
import { energyPerStep, naturalCompare } from "./runs.js";

const finite = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);

// The run's folder, without the train (or validation) folder the callback writes:
// a sweep's configuration is in the sweep's folder ("tx2/cnn-bs4/train" -> "tx2"),
// a run directly in the logdir is in its own ("cnn-bs4/train" -> "cnn-bs4").
function folderOf(run) {
  const parts = run.split("/");
  if (parts.length > 1 && ["train", "validation"].includes(parts[parts.length - 1])) parts.pop();
  return parts.length > 1 ? parts.slice(0, -1).join("/") : parts[0];
}
const GROUPINGS = [
  ["model", (r) => r.summary.model ?? "(no model)"],
  ["run folder", (r) => folderOf(r.run)],
];
// Several boards: a line per board and model first.
const groupings = (runs) => (boardsOf(runs).length > 1 ? [["board and model", boardAndModel], ...GROUPINGS] : GROUPINGS);

// Mean power of a rail group: the total is the report's own (the input rail, or
// the sum of the rails); another group sums its rails' means.
function groupPower(s, group) {
  if (group === "total") return s.power_avg;
  const rails = channelsOf(s).filter((c) => c.kind === "power" && (c.group || c.name) === group);
  const watts = rails.map((c) => finite((s.power_avg_w || {})[c.name]));
  return watts.length && !watts.includes(null) ? watts.reduce((a, b) => a + b, 0) : null;
}

// Every quantity the runs carry: {label, unit, get(summary)}.
function quantities(runs) {
  const all = (f) => [...new Set(runs.flatMap((r) => f(r.summary)))].sort(naturalCompare);
  const powerGroups = all((s) => channelsOf(s).filter((c) => c.kind === "power").map((c) => c.group || c.name));
  const clusters = all((s) => Object.keys(s.cpu_util_per_cluster || {}));
  return [
    { label: "energy per step", unit: "J", get: energyPerStep },
    { label: "energy per sample", unit: "J", get: (s) => s.energy_per_sample_j },
    { label: "samples per second", unit: "samples/s", get: (s) => s.samples_per_s },
    { label: "step time (mean)", unit: "ms", get: (s) => (s.step_time_s && s.step_time_s.mean != null ? s.step_time_s.mean * 1e3 : null) },
    ...powerGroups.map((g) => ({ label: `mean power: ${g} rail group`, unit: "W", get: (s) => groupPower(s, g) })),
    { label: "GPU utilization", unit: "%", get: (s) => s.gpu_util_avg },
    { label: "CPU utilization (all cores)", unit: "%", get: (s) => s.cpu_util_avg },
    ...clusters.map((c) => ({ label: `CPU utilization: ${c} cluster`, unit: "%", get: (s) => (s.cpu_util_per_cluster || {})[c] })),
    { label: "peak memory: process (peak RSS)", unit: "GiB", get: (s) => (processPeak(s) || {}).gib },
    { label: "peak memory: system RAM in use", unit: "GiB", get: (s) => s.mem_peak_gb },
    { label: "peak memory: GPU allocator", unit: "GiB", get: (s) => s.gpu_mem_peak_gb },
  ];
}

// The chart's data: x = log2(batch size) of every run, a series per group
// (the mean of its successful runs at each batch size, with their count and
// range in stats), the points of several runs, and the failed runs.
function chartData(points, groupKey, get) {
  const sizes = [...new Set(points.map((r) => r.summary.batch_size))].sort((a, b) => a - b);
  const groups = [...new Set(points.map(groupKey))].sort(naturalCompare);
  const stats = groups.map((g) => sizes.map((bs) =>
    successStats(points.filter((r) => groupKey(r) === g && r.summary.batch_size === bs), get)));
  const series = stats.map((row) => row.map((s) => s?.mean ?? null));
  const colours = groupColours(points, groupKey, groups);
  const shared = stats.flatMap((row, i) => row.flatMap((s, j) => (s && s.n > 1
    ? [{ ...s, colour: colours[i], group: groups[i], size: sizes[j], x: Math.log2(sizes[j]) }] : [])));
  const failed = points.filter((r) => r.summary.success === false).map((r) => ({
    x: Math.log2(r.summary.batch_size), y: finite(get(r.summary)), group: groupKey(r),
    text: `${r.run}: batch size ${r.summary.batch_size} failed at step ${r.summary.failed_step ?? "?"}: ${(r.summary.error || "no error recorded").split("\n")[0]}`,
  }));
  return { x: sizes.map(Math.log2), groups, series, stats, shared, failed, colours };
}

// Each line's colour: its model's (plot and dashboard alike), a shade of it for
// the model's further lines (another device); a line of several models (a run
// folder) takes the colour its name picks.
function groupColours(points, groupKey, groups) {
  const used = {};
  return groups.map((g) => {
    const models = new Set(points.filter((r) => groupKey(r) === g).map((r) => r.summary.model ?? "(no model)"));
    const base = modelColour(models.size === 1 ? [...models][0] : g);
    used[base] = (used[base] ?? -1) + 1;
    return shade(base, used[base]);
  });
}

// A value with, where several runs make it, their count and range: "0.128 J (n=2, 0.0740–0.182)".
function valueText(v, s, unit) {
  if (v == null) return "–";
  return s && s.n > 1 ? `${fmt(v, unit)} (n=${s.n}, ${fmt(s.min)}–${fmt(s.max)})` : fmt(v, unit);
}

// A bar from the lowest to the highest value at each point of several runs, in
// its series' colour; the runs, count and range are its title and data.
function drawSpreads(shared, unit) {
  return (u) => {
    for (const old of u.over.querySelectorAll(".spread")) old.remove();
    for (const s of shared) {
      const [top, bottom, colour] = [u.valToPos(s.max, "y"), u.valToPos(s.min, "y"), s.colour];
      u.over.append(el("span", { class: "spread", "data-group": s.group, "data-batch-size": String(s.size),
        "data-n": String(s.n), "data-min": String(s.min), "data-max": String(s.max),
        title: `${s.group}, batch size ${s.size}: mean of ${s.n} runs, ${valueText(s.mean, s, unit)}: ${s.runs.map((r) => r.run).join(", ")}`,
        style: `position:absolute;left:${u.valToPos(s.x, "x") - 6}px;top:${top - 1}px;width:12px;height:${bottom - top}px;`
          + `border-top:2px solid ${colour};border-bottom:2px solid ${colour};`
          + `background:linear-gradient(${colour},${colour}) center/2px 100% no-repeat;pointer-events:auto;cursor:help` }));
    }
  };
}

// Red crosses over the plot, positioned on each redraw; the cause is their title.
function drawFailures(failed) {
  return (u) => {
    for (const old of u.over.querySelectorAll(".failed-mark")) old.remove();
    for (const f of failed) {
      const top = f.y === null ? u.over.clientHeight : u.valToPos(f.y, "y");
      u.over.append(el("span", { class: "failed-mark", title: f.text, "data-group": f.group,
        style: `position:absolute;left:${u.valToPos(f.x, "x") - 7}px;top:${top - 10}px;color:#c62828;font:bold 16px sans-serif;pointer-events:auto;cursor:help` }, "✕"));
    }
  };
}

function drawChart(box, data, q, width) {
  const values = [...data.series.flat(), ...data.failed.map((f) => f.y)].filter((v) => v !== null);
  if (!values.length) {
    box.append(el("p", { class: "note", text: `no run measured ${q.label} (not measured on this device)` }));
    return;
  }
  const [lo, hi] = [Math.min(...data.x), Math.max(...data.x)];
  const ticks = [];
  for (let v = Math.ceil(lo); v <= Math.floor(hi); v++) ticks.push(v);
  box.setAttribute("data-x-ticks", ticks.map((v) => 2 ** v).join(","));
  new uPlot({
    width, height: 260,
    series: [{ label: "batch size", value: (u, v) => (v == null ? "–" : String(Math.round(2 ** v))) },
      ...data.groups.map((g, i) => ({ label: g, stroke: data.colours[i], width: 2, spanGaps: true,
        points: { show: true, size: 8 }, value: (u, v, si, idx) => valueText(v, data.stats[si - 1][idx], q.unit) }))],
    scales: { x: { time: false, range: () => [lo - 0.5, hi + 0.5] },
      y: { range: () => uPlot.rangeNum(Math.min(0, ...values), Math.max(...values), 0.1, true) } },
    axes: [{ label: "batch size", stroke: "currentColor", splits: () => ticks, values: (u, splits) => splits.map((v) => String(2 ** v)) },
      { label: q.unit, stroke: "currentColor" }], // the select above names the quantity
    hooks: { draw: [drawSpreads(data.shared, q.unit), drawFailures(data.failed)] },
  }, [data.x, ...data.series], box);
  if (data.shared.length) {
    box.append(el("p", { class: "note shared", text: "Where several runs share a point it is their mean: "
      + "n and their range (lowest–highest) are in the legend, and a bar spans the range." }));
  }
  if (data.failed.length) {
    box.append(el("ul", { class: "failed" }, ...data.failed.map((f) => el("li", { text: `✕ ${f.text}` }))));
  }
}

export function batchSizeChart(runs, width) {
  const points = runs.filter((r) => r.summary.batch_size > 0 && !r.summary.combined);
  const box = el("div", { class: "chart crossrun" }, el("h4", { text: "Across runs, against batch size" }));
  if (!points.length) {
    box.append(el("p", { text: "no run reports its batch size (pass batch_size= to the callback)" }));
    return box;
  }
  const qs = quantities(points);
  const measured = qs.map((q) => points.some((r) => finite(q.get(r.summary)) !== null));
  const quantity = el("select", { class: "quantity" }, ...qs.map((q, i) => el("option", { value: String(i),
    text: `${q.label} (${q.unit})${measured[i] ? "" : ": not measured"}` })));
  quantity.value = String(Math.max(0, measured.indexOf(true)));
  const choices = groupings(points);
  const grouping = el("select", { class: "grouping" }, ...choices.map(([label], i) => el("option", { value: String(i), text: label })));
  const chart = el("div");
  const draw = () => {
    const q = qs[Number(quantity.value)];
    chart.replaceChildren();
    drawChart(chart, chartData(points, choices[Number(grouping.value)][1], q.get), q, width);
  };
  quantity.addEventListener("change", draw);
  grouping.addEventListener("change", draw);
  box.append(el("div", {}, el("label", {}, "y: ", quantity), " one line per ", el("label", {}, grouping)), chart);
  const best = bestBatchTable(points);
  if (best) box.append(best);
  draw();
  return box;
}
