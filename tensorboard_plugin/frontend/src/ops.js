// Energy per operation of the traced steps: by op type and by layer, and the Perfetto trace.
import { el, fmt } from "./format.js";

export function opEnergyView(result, traceUrl) {
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
