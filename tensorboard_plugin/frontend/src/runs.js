// The table of all runs (one row per run, in natural order of their names:
// bs4 before bs16), and the sortable table it and the step and op tables are
// drawn with: click a header to sort by it, again to reverse; missing values last.
import { el, fmt, NOT_MEASURED } from "./format.js";
import { isFailed, statusText } from "./header.js";

const COLLATOR = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

/** Compares two names by their text with the numbers in them as numbers ("bs4" < "bs16"). */
export const naturalCompare = (a, b) => COLLATOR.compare(String(a), String(b));

function compareValues(a, b) {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return naturalCompare(a, b);
}

function cellText(v) {
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : fmt(v);
  return v === null || v === undefined ? NOT_MEASURED : String(v);
}

// columns: [{title, get(row) -> value, text?(value, row) -> string}]; rows shown in
// their order until a header is clicked; `limit` rows first, with a "show all".
export function sortableTable(columns, rows, { attrs = {}, sortKey = null, limit = Infinity, rowClass = () => "" } = {}) {
  let key = sortKey;
  let ascending = true;
  let showAll = false;
  const table = el("table", attrs);
  const sorted = () => {
    if (key === null) return rows;
    const get = columns[key].get;
    return [...rows].sort((ra, rb) => {
      const a = get(ra);
      const b = get(rb);
      const missingA = a === null || a === undefined;
      const missingB = b === null || b === undefined;
      if (missingA || missingB) return missingA - missingB; // missing values last, either way
      return ascending ? compareValues(a, b) : compareValues(b, a);
    });
  };
  const draw = () => {
    const all = sorted();
    const shown = showAll ? all : all.slice(0, limit);
    table.replaceChildren(
      el("tr", {}, ...columns.map((c, i) => el("th", {
        text: c.title + (i === key ? (ascending ? " ▲" : " ▼") : ""),
        onclick: () => { ascending = i === key ? !ascending : true; key = i; draw(); },
      }))),
      ...shown.map((row) => el("tr", { class: rowClass(row) },
        ...columns.map((c) => el("td", { text: (c.text || cellText)(c.get(row), row) })))),
    );
    if (shown.length < all.length) {
      table.append(el("tr", { class: "more" }, el("td", { colspan: String(columns.length) },
        el("button", { text: `show all ${all.length}`, onclick: () => { showAll = true; draw(); } }))));
    }
  };
  draw();
  return table;
}

export function energyPerStep(summary) {
  return summary.energy_total != null && summary.steps_measured ? summary.energy_total / summary.steps_measured : null;
}

// A measured column's cell: its value, or where the run has none, "no step measured" if that is why (its
// report's reason under `key` is "no step ran"), else not measured on this device.
const measured = (key) => (v, r) => (v == null && String((r.summary.unavailable || {})[key]).startsWith("no step ran")
  ? "no step measured" : cellText(v));

const COLUMNS = [
  ["run", (r) => r.run],
  ["model", (r) => r.summary.model ?? ""],
  ["batch size", (r) => r.summary.batch_size ?? null, (v) => (v == null ? "not given" : String(v))], // an input, not a measurement
  ["status", (r) => statusText(r.summary)],
  ["energy/step (J)", (r) => energyPerStep(r.summary), measured("energy")],
  ["J/sample", (r) => r.summary.energy_per_sample_j ?? null, measured("energy_per_sample_j")],
  ["samples/s", (r) => r.summary.samples_per_s ?? null, measured("samples_per_s")],
  ["mean power (W)", (r) => r.summary.power_avg ?? null, measured("power")],
  ["peak memory (GiB)", (r) => r.summary.mem_peak_gb ?? null, measured("mem_peak_gb")],
  ["GPU util (%)", (r) => r.summary.gpu_util_avg ?? null, measured("gpu_util")],
].map(([title, get, text]) => ({ title, get, text }));

export function runTable(runs) {
  return sortableTable(COLUMNS, runs, { attrs: { id: "runs-table" }, sortKey: 0,
    rowClass: (r) => (isFailed(r.summary) ? "failed" : "") });
}
