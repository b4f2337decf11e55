// The step table: every step the report kept, with every reduction of every
// channel (energy, mean, peak, min by the channel's kind) next to the seed's
// numbers. Long runs show their last MAX_ROWS steps; steps.csv has them all.
import { el, fmt } from "./format.js";

const MAX_ROWS = 500;
const UNIT_SCALE = { B: [2 ** 30, "GiB"], Hz: [1e6, "MHz"] };

// One column per channel and reduction, as the steps carry them (a report
// older than per-channel reductions has none: the table shows the seed's).
function columns(steps, header) {
  const out = [];
  const first = steps.find((s) => s.channels && Object.keys(s.channels).length) || { channels: {} };
  for (const c of header.channels) {
    const [scale, unit] = UNIT_SCALE[c.unit] || [1, c.unit];
    for (const r of Object.keys(first.channels[c.name] || {})) {
      const shown = r === "energy_j" ? "J" : unit;
      out.push({ title: `${c.name} ${r === "energy_j" ? "energy" : r}${shown ? ` (${shown})` : ""}`,
        get: (s) => ((s.channels || {})[c.name] || {})[r], scale: r === "energy_j" ? 1 : scale });
    }
  }
  return out;
}

export function stepTable(steps, header) {
  const cols = columns(steps, header);
  const shown = steps.slice(-MAX_ROWS);
  const box = el("details", { class: "steps" },
    el("summary", { text: `Every step: ${cols.length} values of ${header.channels.length} channels` +
      (steps.length > shown.length ? ` (the last ${shown.length} of ${steps.length} steps; steps.csv has all)` : "") }));
  const table = el("table", { class: "step-table" }, el("tr", {},
    ...["step", "kind", "time (ms)", ...cols.map((c) => c.title)].map((t) => el("th", { text: t }))));
  for (const s of shown) {
    const kind = s.failed ? "failed" : s.warmup ? "warm-up" : s.traced ? "traced" : "measured";
    table.append(el("tr", { class: kind }, el("td", { text: String(s.step) }), el("td", { text: kind }),
      el("td", { text: fmt(s.duration_s * 1e3) }),
      ...cols.map((c) => { const v = c.get(s); return el("td", { text: v == null ? "–" : fmt(v / c.scale) }); })));
  }
  box.append(el("div", { class: "scroll" }, table));
  return box;
}
