// The MobilePerf tab: TensorBoard imports this module in the plugin's iframe
// and calls render(). The selected runs' time charts share one view (overlaid
// on one axis, or stacked) with one zoom; per selected run: a header with the
// seed's numbers and the sampling quality, energy bars, the step table.
// Across runs: a sortable table and energy/memory against batch size.
// A multi-worker run's "combined" run: its totals and its hosts side by side.
// Traced steps: energy per op type and per layer, and the Perfetto trace.
// Ticking runs redraws the details; a redraw still loading when the next
// starts is dropped (it draws into a detached box and stops at its next await).
import uPlotCss from "uplot/dist/uPlot.min.css";
import { STYLE } from "./style.js";
import { getChannels, getSteps, listRuns } from "./api.js";
import { energyBars } from "./charts.js";
import { batchSizeChart } from "./crossrun.js";
import { el } from "./format.js";
import { combinedView, runHeader } from "./header.js";
import { opEnergyView } from "./ops.js";
import { naturalCompare, runTable } from "./runs.js";
import { stepTable } from "./steps.js";
import { timeView } from "./timeview.js";

// Fills the run's section and returns what the time view needs of the run
// (null for a combined or broken run); stops as soon as isStale() says a newer redraw began.
async function showRun(section, r, width, isStale) {
  if (r.summary.combined) {
    section.append(combinedView(r.run, r.summary));
    return null;
  }
  try {
    const [steps, header] = await Promise.all([getSteps(r.run), getChannels(r.run)]);
    if (isStale()) return null;
    section.append(runHeader(r.run, r.summary, steps.profile));
    if (steps.message) section.append(el("p", { class: "note", text: steps.message }));
    section.append(energyBars(steps.steps, width, (r.summary.unavailable || {}).power));
    if (steps.steps.length) section.append(stepTable(steps.steps, header, r.run));
    if (steps.op_energy) section.append(opEnergyView(steps.op_energy, steps.trace_url));
    return header.samples ? { run: r.run, header, steps: steps.steps, summary: r.summary } : null;
  } catch (err) {
    if (!isStale()) section.append(el("h3", { text: r.run }), el("p", { class: "error", text: String(err.message || err) }));
    return null;
  }
}

export async function render() {
  document.head.append(el("style", { text: uPlotCss + STYLE }));
  const root = el("div", { id: "mobileperf" }, el("h2", { text: "MobilePerf: power, energy and memory per training step" }));
  document.body.append(root);
  const width = Math.max(480, Math.min(1200, document.body.clientWidth - 40));
  let runs;
  try {
    runs = (await listRuns()).sort((a, b) => naturalCompare(a.run, b.run));
  } catch (err) {
    root.append(el("p", { class: "error", text: String(err.message || err) }));
    return;
  }
  if (!runs.length) {
    root.append(el("p", { text: "No run with tf-mobileperf data in this logdir." }));
    return;
  }
  root.append(el("h3", { text: "All runs" }), runTable(runs), await batchSizeChart(width));
  const picker = el("div", { class: "runs" }, el("b", { text: "Show runs: " }));
  const details = el("div", { id: "run-details" });
  const selected = new Set([runs[0].run]);
  let generation = 0;
  let view = null;
  // Each selected run gets its section at once, in table order, and loads on
  // its own: a slow or broken run never holds back the others.
  const redraw = async () => {
    const mine = ++generation;
    const isStale = () => mine !== generation;
    root.setAttribute("data-ready", "false");
    const box = el("div");
    details.replaceChildren(box);
    if (view) view.destroy();
    view = null;
    const shown = runs.filter((r) => selected.has(r.run));
    const sections = shown.map((r) => el("section", { class: "run", "data-run": r.run }));
    const timeSlot = el("div");
    box.append(timeSlot, ...sections);
    const loaded = (await Promise.all(shown.map((r, i) => showRun(sections[i], r, width, isStale)))).filter(Boolean);
    if (isStale()) return;
    if (loaded.length) {
      view = timeView(loaded, width);
      timeSlot.append(view.box);
      await view.drawn;
    }
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
