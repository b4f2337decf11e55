// The MobilePerf tab: TensorBoard imports this module in the plugin's iframe
// and calls render(). Per selected run: a header with the seed's numbers and
// the sampling quality, then time charts sharing one zoom, then energy bars.
// Across runs: a sortable table and energy/memory against batch size.
// A multi-worker run's "combined" run: its totals and its hosts side by side.
// Traced steps: energy per op type and per layer, and the Perfetto trace.
// Ticking runs redraws the details; a redraw still loading when the next
// starts is dropped (it draws into a detached box and stops at its next await).
import uPlotCss from "uplot/dist/uPlot.min.css";
import { getChannels, getSteps, listRuns } from "./api.js";
import { batchSizeChart, energyPerStep, runCharts } from "./charts.js";
import { el, fmt, NOT_MEASURED } from "./format.js";
import { stepTable } from "./steps.js";

const STYLE = `
body { font-family: Roboto, "Helvetica Neue", sans-serif; font-size: 13px; margin: 16px; color: #212121; background: #fff; }
@media (prefers-color-scheme: dark) { body { color: #e0e0e0; background: #303030; } th { background: #424242 !important; } }
h2 { font-size: 18px; font-weight: 500; } h3 { font-size: 15px; font-weight: 500; margin: 24px 0 8px; } h4 { font-size: 13px; font-weight: 500; margin: 8px 0; }
table { border-collapse: collapse; margin: 8px 0; } th, td { padding: 4px 10px; border-bottom: 1px solid rgba(128,128,128,0.3); text-align: right; }
th { cursor: pointer; background: #f5f5f5; user-select: none; } td:first-child, th:first-child, td:nth-child(2) { text-align: left; }
.runs label { margin-right: 16px; } .header { display: flex; flex-wrap: wrap; gap: 4px 24px; margin: 6px 0; }
.header span b { font-weight: 500; } .failed { color: #c62828; } .ok { color: #2e7d32; }
.chart { margin: 8px 0 16px; } .empty p { color: #757575; font-style: italic; } .note { color: #757575; }
.error { color: #c62828; } .scroll { overflow-x: auto; max-height: 420px; } .step-table td, .step-table th { white-space: nowrap; }
.step-table tr.failed td { color: #c62828; } .step-table tr.warm-up td { color: #757575; }
`;

const COLUMNS = [
  ["run", "run", (s, r) => r.run],
  ["model", "model", (s) => s.model ?? ""],
  ["batch size", "batch", (s) => s.batch_size ?? null],
  ["success", "success", (s) => (s.status === "running" ? "running" : s.success ? "yes" : `no (step ${s.failed_step})`)],
  ["energy/step (J)", "eps", (s) => energyPerStep(s)],
  ["J/sample", "jps", (s) => s.energy_per_sample_j ?? null],
  ["samples/s", "sps", (s) => s.samples_per_s ?? null],
  ["mean power (W)", "pw", (s) => s.power_avg ?? null],
  ["peak memory (GiB)", "mem", (s) => s.mem_peak_gb ?? null],
  ["GPU util (%)", "gpu", (s) => s.gpu_util_avg ?? null],
];

function runTable(runs) {
  let sortKey = 0;
  let ascending = true;
  const table = el("table", { id: "runs-table" });
  const draw = () => {
    const rows = [...runs].sort((a, b) => {
      const va = COLUMNS[sortKey][2](a.summary, a);
      const vb = COLUMNS[sortKey][2](b.summary, b);
      const order = va === vb ? 0 : va === null ? 1 : vb === null ? -1 : va < vb ? -1 : 1;
      return ascending ? order : -order;
    });
    table.replaceChildren(
      el("tr", {}, ...COLUMNS.map(([title], i) => el("th", {
        text: title + (i === sortKey ? (ascending ? " ▲" : " ▼") : ""),
        onclick: () => { ascending = i === sortKey ? !ascending : true; sortKey = i; draw(); },
      }))),
      ...rows.map((r) => el("tr", {}, ...COLUMNS.map(([, , get]) => {
        const v = get(r.summary, r);
        const text = typeof v === "number" ? (Number.isInteger(v) ? String(v) : fmt(v)) : v === null ? NOT_MEASURED : String(v);
        return el("td", { text });
      }))),
    );
  };
  draw();
  return table;
}

function runHeader(run, s, profile) {
  const sampling = s.sampling || {};
  const clusters = Object.entries(s.cpu_util_per_cluster || {}).map(([k, v]) => `${k} ${fmt(v, "%")}`).join(", ");
  const items = [
    ["status", s.status === "running" ? "running" : s.success ? "trained" : `failed at step ${s.failed_step}`],
    ["steps measured", `${s.steps_measured ?? "?"} (after ${s.warmup_steps ?? "?"} warm-up)`],
    ["energy total", fmt(s.energy_total, "J")], ["mean power", fmt(s.power_avg, "W")],
    ["J/sample", fmt(s.energy_per_sample_j, "J")], ["samples/s", fmt(s.samples_per_s)],
    ["peak memory", fmt(s.mem_peak_gb, "GiB")], ["GPU util", fmt(s.gpu_util_avg, "%")],
    ["CPU util", fmt(s.cpu_util_avg, "%")], ["CPU clusters", clusters || NOT_MEASURED],
    ["between steps (input, callbacks)", s.between_steps_fraction == null ? NOT_MEASURED : fmt(s.between_steps_fraction * 100, "% of the time")],
    ["step time", s.step_time_s && s.step_time_s.mean != null ? `${fmt(s.step_time_s.mean * 1e3, "ms")} mean, ${fmt(s.step_time_s.p99 * 1e3, "ms")} p99` : NOT_MEASURED],
    ["sampling", sampling.achieved_hz ? `${fmt(sampling.achieved_hz, "Hz")} of ${fmt(sampling.requested_hz, "Hz")}, p99 interval error ${fmt(sampling.interval_error_p99_ms, "ms")}, ${sampling.gaps} gaps` : NOT_MEASURED],
  ];
  const box = el("div", {}, el("h3", { text: `${run}${s.model ? " — " + s.model : ""}${s.batch_size ? ", batch " + s.batch_size : ""}` }));
  const line = el("div", { class: "header" });
  for (const [k, v] of items) line.append(el("span", {}, el("b", { text: `${k}: ` }), v));
  box.append(line);
  if (s.error) box.append(el("div", { class: "failed", text: s.error.split("\n")[0] }));
  for (const p of profile || []) {
    box.append(el("div", {}, "TF profiler trace of the traced steps (blue): ",
      el("a", { href: p.url, target: "_top", text: `open in the Profile tab (${p.session})` })));
  }
  return box;
}

function combinedView(run, s) {
  const hosts = Object.entries(s.hosts || {});
  const box = el("div", {}, el("h3", { text: `${run}: ${hosts.length} hosts combined by global step` }));
  const line = el("div", { class: "header" });
  for (const [k, v] of [
    ["status", s.success ? "trained" : s.missing_hosts && s.missing_hosts.length ? `missing: ${s.missing_hosts.join(", ")}` : "failed"],
    ["steps measured", String(s.steps_measured)], ["energy total (all hosts)", fmt(s.energy_total, "J")],
    ["mean power (all hosts)", fmt(s.power_avg, "W")],
    ["step time (slowest host)", s.step_time_s && s.step_time_s.mean != null ? fmt(s.step_time_s.mean * 1e3, "ms") : NOT_MEASURED],
  ]) line.append(el("span", {}, el("b", { text: `${k}: ` }), v));
  const table = el("table", { class: "hosts" }, el("tr", {}, ...["host", "hostname", "status", "energy (J)", "peak memory (GiB)", "slowest in steps"].map((t) => el("th", { text: t }))));
  for (const [task, h] of hosts) {
    const status = h.missing ? `missing (died at step ${h.failed_step ?? "?"}; ${h.steps_on_disk} steps on disk)` : h.success ? "ok" : `failed at step ${h.failed_step}`;
    table.append(el("tr", {}, ...[task, h.hostname ?? "", status, fmt(h.energy_total), fmt(h.mem_peak_gb), String((s.slowest_host_steps || {})[task] ?? 0)].map((t) => el("td", { text: t }))));
  }
  box.append(line, table);
  return box;
}

function opEnergyView(result, traceUrl) {
  const rail = result.rank_rail;
  const box = el("div", { class: "op-energy" }, el("h4", { text: `Energy per operation in the traced steps (${rail}, J)` }));
  const shares = result.steps.map((s) => `step ${s.step}: ${fmt((s.no_op_share || {})[rail] * 100, "%")}`).join(", ");
  box.append(el("div", { class: "note", text: `while no op ran (idle, stalls, Python, input): ${shares}` }));
  for (const [title, rows, key] of [["op type", result.by_op_type, "op_type"], ["layer (name scope)", result.by_layer, "layer"]]) {
    const table = el("table", {}, el("tr", {}, ...[title, "count", "time (ms)", `energy (J)`].map((t) => el("th", { text: t }))));
    for (const row of rows.slice(0, 12)) {
      table.append(el("tr", {}, ...[row[key], String(row.count), fmt(row.time_s * 1e3), fmt(row.energy_j[rail])].map((t) => el("td", { text: t }))));
    }
    box.append(table);
  }
  if (traceUrl) box.append(el("div", {}, el("a", { href: traceUrl, download: "", text: "download the trace with the power rails (open in ui.perfetto.dev or chrome://tracing)" })));
  return box;
}

// Fills the run's section; stops as soon as isStale() says a newer redraw began.
async function showRun(section, r, width, isStale) {
  if (r.summary.combined) {
    section.append(combinedView(r.run, r.summary));
    return;
  }
  try {
    const [steps, header] = await Promise.all([getSteps(r.run), getChannels(r.run)]);
    if (isStale()) return;
    section.append(runHeader(r.run, r.summary, steps.profile));
    if (steps.message) section.append(el("p", { class: "note", text: steps.message }));
    const charts = await runCharts(r.run, header, steps.steps, r.summary, width);
    if (isStale()) return;
    section.append(...charts);
    if (steps.steps.length) section.append(stepTable(steps.steps, header));
    if (steps.op_energy) section.append(opEnergyView(steps.op_energy, steps.trace_url));
  } catch (err) {
    if (!isStale()) section.append(el("h3", { text: r.run }), el("p", { class: "error", text: String(err.message || err) }));
  }
}

export async function render() {
  document.head.append(el("style", { text: uPlotCss + STYLE }));
  const root = el("div", { id: "mobileperf" }, el("h2", { text: "MobilePerf: power, energy and memory per training step" }));
  document.body.append(root);
  const width = Math.max(480, Math.min(1200, document.body.clientWidth - 40));
  let runs;
  try {
    runs = await listRuns();
  } catch (err) {
    root.append(el("p", { class: "error", text: String(err.message || err) }));
    return;
  }
  if (!runs.length) {
    root.append(el("p", { text: "No run with tf-mobileperf data in this logdir." }));
    return;
  }
  root.append(el("h3", { text: "All runs" }), runTable(runs), batchSizeChart(runs, width));
  const picker = el("div", { class: "runs" }, el("b", { text: "Show runs: " }));
  const details = el("div", { id: "run-details" });
  const selected = new Set([runs[0].run]);
  let generation = 0;
  // Each selected run gets its section at once, in table order, and loads on
  // its own: a slow or broken run never holds back the others.
  const redraw = async () => {
    const mine = ++generation;
    const isStale = () => mine !== generation;
    root.setAttribute("data-ready", "false");
    const box = el("div");
    details.replaceChildren(box);
    const shown = runs.filter((r) => selected.has(r.run));
    const sections = shown.map((r) => el("section", { class: "run", "data-run": r.run }));
    box.append(...sections);
    await Promise.all(shown.map((r, i) => showRun(sections[i], r, width, isStale)));
    if (!isStale()) root.setAttribute("data-ready", "true");
  };
  for (const r of runs) {
    const box = el("input", { type: "checkbox", onchange: (e) => { e.target.checked ? selected.add(r.run) : selected.delete(r.run); redraw(); } });
    box.checked = selected.has(r.run);
    picker.append(el("label", {}, box, r.run));
  }
  root.append(picker, details);
  await redraw();
}
