// The step table: every step the report kept, with every reduction of every
// channel (energy, mean, peak, min by the channel's kind) next to the seed's
// numbers, sortable by any column, and the steps shown as a CSV download.
// Long runs show their last MAX_ROWS steps; steps.csv has them all.
import { el, fmt } from "./format.js";
import { sortableTable } from "./runs.js";

const MAX_ROWS = 500;
const UNIT_SCALE = { B: [2 ** 30, "GiB"], Hz: [1e6, "MHz"] };
const KIND = (s) => (s.failed ? "failed" : s.warmup ? "warm-up" : s.traced ? "traced" : "measured");
const VALUE = (v) => (v == null ? "–" : fmt(v)); // "–": the channel had no reading over the step

// One column per channel and reduction, as the steps carry them (a report
// older than per-channel reductions has none: the table shows the seed's).
function columns(steps, header) {
  const out = [{ title: "step", get: (s) => s.step }, { title: "kind", get: KIND },
    { title: "time (ms)", get: (s) => (s.duration_s == null ? null : s.duration_s * 1e3), text: VALUE },
    { title: "process CPU (%)", get: (s) => s.process_cpu_util ?? null, text: VALUE }];
  const first = steps.find((s) => s.channels && Object.keys(s.channels).length) || { channels: {} };
  for (const c of header.channels) {
    const [scale, unit] = UNIT_SCALE[c.unit] || [1, c.unit];
    for (const r of Object.keys(first.channels[c.name] || {})) {
      const energy = r === "energy_j";
      const shown = energy ? "J" : unit;
      const by = energy ? 1 : scale;
      out.push({ title: `${c.name} ${energy ? "energy" : r}${shown ? ` (${shown})` : ""}`,
        get: (s) => { const v = ((s.channels || {})[c.name] || {})[r]; return v == null ? null : v / by; }, text: VALUE });
    }
  }
  return out;
}

const csvField = (v) => (v == null ? "" : /[",\n]/.test(String(v)) ? `"${String(v).replaceAll('"', '""')}"` : String(v));

/** The rows as CSV text: a header of the column titles, full precision, empty where not measured. */
export function toCsv(cols, rows) {
  return [cols.map((c) => csvField(c.title)), ...rows.map((row) => cols.map((c) => csvField(c.get(row))))]
    .map((line) => line.join(",")).join("\n") + "\n";
}

export function stepTable(steps, header, run = "run") {
  const cols = columns(steps, header);
  const shown = steps.slice(-MAX_ROWS);
  const csv = URL.createObjectURL(new Blob([toCsv(cols, shown)], { type: "text/csv" }));
  const name = `${String(run).replace(/[^\w.-]+/g, "_")}-steps.csv`;
  return el("details", { class: "steps" },
    el("summary", { text: `Every step: ${cols.length - 3} values of ${header.channels.length} channels` +
      (steps.length > shown.length ? ` (the last ${shown.length} of ${steps.length} steps; steps.csv has all)` : "") }),
    el("a", { class: "csv", href: csv, download: name, text: `download these ${shown.length} steps as CSV` }),
    el("div", { class: "scroll" }, sortableTable(cols, shown, { attrs: { class: "step-table" }, rowClass: KIND })));
}
