// The table under the cross-run chart where the runs come from several boards: per board and model, the
// best batch size for samples/s and for J/sample, as the server's analysis (tf_mobileperf/analysis/crossrun.py)
// picked them; the same table report.html shows. Drawn only: no value is computed here.
import { el } from "./format.js";
import { sortableTable } from "./runs.js";

/** The route's `best` ({columns, rows} of text) as a sortable table; null where there is none (one board). */
export function bestBatchTable(best) {
  if (!best) return null;
  const columns = best.columns.map((title, i) => ({ title, get: (row) => row[i] }));
  return el("div", { class: "best-batch" }, el("h4", { text: "Best batch size per board" }),
    el("p", { class: "note", text: "Among the successful runs (the mean where a batch size ran more than once): the most samples/s and the fewest joules per sample." }),
    sortableTable(columns, best.rows, { attrs: { id: "best-batch" } }));
}
