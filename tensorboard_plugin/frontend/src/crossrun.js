// Across runs: energy per step and peak memory against batch size (the seed's sweep).
import uPlot from "uplot";
import { el } from "./format.js";

export function batchSizeChart(runs, width) {
  const points = runs.filter((r) => r.summary.batch_size).sort((a, b) => a.summary.batch_size - b.summary.batch_size);
  const box = el("div", { class: "chart" }, el("h4", { text: "Energy per step and peak memory against batch size" }));
  if (!points.length) {
    box.append(el("p", { text: "no run reports its batch size (pass batch_size= to the callback)" }));
    return box;
  }
  const x = points.map((r) => r.summary.batch_size);
  const energy = points.map((r) => energyPerStep(r.summary));
  const mem = points.map((r) => r.summary.mem_peak_gb ?? null);
  new uPlot({
    width, height: 220,
    series: [{ label: "batch size" },
      { label: "energy per step (J)", stroke: "#1976d2", scale: "J", points: { size: 8 }, width: 1 },
      { label: "peak memory (GiB)", stroke: "#e65100", scale: "GiB", points: { size: 8 }, width: 1 }],
    scales: { x: { time: false, distr: 2 } },
    axes: [{ label: "batch size", stroke: "currentColor" }, { scale: "J", label: "J per step", stroke: "currentColor" },
      { scale: "GiB", side: 1, label: "GiB", stroke: "currentColor", grid: { show: false } }],
  }, [x, energy, mem], box);
  return box;
}

export function energyPerStep(summary) {
  return summary.energy_total != null && summary.steps_measured ? summary.energy_total / summary.steps_measured : null;
}
