// The time view of the selected runs: every chart of chartlist, the runs
// overlaid on one x axis aligned at their first measured step (t = 0 at the
// start of the first step after warm-up), or stacked one run under another
// (a toggle). Either way every chart shares one zoom and one cursor. Overlaid,
// each run's lines are in its model's colour (colours.js, as in `mobileperf
// plot`), a second run of one model in a shade of it, and its channels told
// apart by their dash.
import { chartSpecs } from "./chartlist.js";
import { timeChart, zoomGroup } from "./charts.js";
import { el } from "./format.js";

// Where a run's time axis starts: its first measured step, else its first step, else its first row.
function origin(steps, header) {
  const measured = steps.find((s) => !s.warmup) || steps[0];
  return measured ? measured.start_s : header.t0 ?? 0;
}

// Which run of its model each run is (0 the first): overlaid runs of one model get shades of its colour.
function variants(group) {
  const seen = new Map();
  return group.map((r) => {
    const model = (r.summary || {}).model ?? "";
    const k = seen.get(model) || 0;
    seen.set(model, k + 1);
    return k;
  });
}

async function charts(group, width, zoom) {
  const k = variants(group);
  const runs = new Map(group.map((r, index) => [r.run, {
    index, steps: r.steps, t0: origin(r.steps, r.header), first: r.header.t0, last: r.header.t1,
    model: (r.summary || {}).model ?? "", variant: k[index],
  }]));
  const view = { runs, width, zoom, syncKey: "mobileperf-time", multi: group.length > 1 };
  return Promise.all(chartSpecs(group).map((spec) => timeChart(view, spec).catch((err) =>
    el("div", { class: "chart" }, el("h4", { text: spec.title }), el("p", { class: "error", text: String(err.message || err) })))));
}

const free = (group) => group.charts.forEach((chart) => chart.destroy());

// loaded: [{run, header, steps, summary}] of the runs that have samples.
// Returns the view's box; `drawn` resolves once its first drawing is in place; `destroy` frees its charts.
export function timeView(loaded, width) {
  const box = el("div", { id: "time-view", "data-drawn": "false" }, el("h3", { text: "Time view" }));
  const body = el("div");
  let stacked = false;
  let generation = 0;
  let shown = zoomGroup();
  // Charts no longer shown leave the cursor sync and free their listeners; a drawing under way is dropped.
  const destroy = () => {
    generation++;
    free(shown);
    shown = zoomGroup();
  };
  const draw = async () => {
    const mine = ++generation;
    box.setAttribute("data-drawn", "false");
    const zoom = zoomGroup();
    const groups = stacked ? loaded.map((r) => [r]) : [loaded];
    const parts = await Promise.all(groups.map(async (group) => {
      const boxes = await charts(group, width, zoom);
      return stacked ? [el("div", { class: "stacked-run", "data-run": group[0].run }, el("h4", { text: group[0].run }), ...boxes)] : boxes;
    }));
    if (mine !== generation) {
      free(zoom);
      return;
    }
    free(shown);
    shown = zoom;
    body.replaceChildren(...parts.flat());
    box.setAttribute("data-layout", stacked ? "stacked" : "overlaid");
    box.setAttribute("data-drawn", "true");
  };
  if (loaded.length > 1) {
    const toggle = el("input", { type: "checkbox", id: "stack-runs", onchange: (e) => { stacked = e.target.checked; draw(); } });
    box.append(el("label", { class: "note" }, toggle, " stack the runs, each on its own axes (else overlaid, aligned at their first measured step)"));
  }
  box.append(body);
  return { box, drawn: draw(), destroy };
}
