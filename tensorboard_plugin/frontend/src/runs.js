// The table of all runs: one row per run, sortable by any column.
import { energyPerStep } from "./crossrun.js";
import { el, fmt, NOT_MEASURED } from "./format.js";

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

export function runTable(runs) {
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
