// Energy per operation of the traced steps: by op type and by layer, and the Perfetto trace.
// The rows come ranked (by energy on the rank rail where power is measured, else
// by time); the tables show the first TOP and a "show all", sortable by any column.
import { el, fmt } from "./format.js";
import { sortableTable } from "./runs.js";

const TOP = 15;

export function opEnergyView(result, traceUrl) {
  const rail = result.rank_rail;
  const title = rail ? `Energy per operation in the traced steps (rail ${rail}, J)`
    : "Time per operation in the traced steps (no power rail: by time)";
  const box = el("div", { class: "op-energy" }, el("h4", { text: title }));
  if (rail) {
    const shares = result.steps.map((s) => `step ${s.step}: ${fmt((s.no_op_share || {})[rail] * 100, "%")}`).join(", ");
    box.append(el("div", { class: "note", text: `share of ${rail}'s energy while no op ran (idle, stalls, Python, input): ${shares}` }));
  }
  for (const [heading, rows, key] of [["op type", result.by_op_type, "op_type"], ["layer (name scope)", result.by_layer, "layer"]]) {
    const cols = [{ title: heading, get: (r) => r[key] }, { title: "count", get: (r) => r.count },
      { title: "time (ms)", get: (r) => r.time_s * 1e3 }];
    if (rail) cols.push({ title: `energy on ${rail} (J)`, get: (r) => r.energy_j[rail] ?? null });
    box.append(sortableTable(cols, rows, { limit: TOP, attrs: { class: "ops", "data-by": key } }));
  }
  const what = rail ? "the trace with the power rails" : "the trace of the ops";
  if (traceUrl) box.append(el("div", {}, el("a", { href: traceUrl, download: "", text: `download ${what} (open in ui.perfetto.dev or chrome://tracing)` })));
  return box;
}
