// Across runs: one quantity against batch size, the seed's sweep. One series per
// model (or per run folder; per board and model where the runs come from several
// boards, with their best batch sizes in a table under the chart), x on a log2
// axis labelled 1, 2, 4, ..., y picked from
// every per-run quantity the reports carry. Where several runs share a point
// (one series, one batch size) it is their mean, with their count and range in
// the legend ("0.128 J (n=2, 0.0740–0.182)") and a bar from the lowest to the
// highest. A configuration that failed is a red cross at its batch size (on
// its series' value where it has one, else on the x axis) with its cause on
// hover, and listed under the chart.
//
// What is drawn is the server's analysis (the /crossrun route, tf_mobileperf/analysis/crossrun.py, which
// `mobileperf plot` and report.html use too): the quantities and groupings to pick from, the lines with
// their colours and points (mean, n, range, runs), the failures and the best batch sizes. Here it is only
// laid out: log2 positions, the legend's text, the bars and crosses over the plot.
import uPlot from "uplot";
import { getCrossrun } from "./api.js";
import { el, fmt } from "./format.js";
import { bestBatchTable } from "./boards.js";
import { yAxis } from "./axes.js";

// The route's answer as the chart draws it: x = log2(batch size), a series per line (its points' means),
// the points of several runs, and the failed runs.
function chartData(data) {
  const stats = data.lines.map((line) => line.points);
  const shared = data.lines.flatMap((line) => line.points.flatMap((p) => (p && p.n > 1
    ? [{ ...p, colour: line.colour, group: line.label, size: p.batch_size, x: Math.log2(p.batch_size) }] : [])));
  return {
    x: data.x.map(Math.log2), groups: data.lines.map((line) => line.label), stats,
    series: stats.map((row) => row.map((p) => p?.mean ?? null)), shared,
    failed: data.failed.map((f) => ({ ...f, x: Math.log2(f.batch_size) })),
    colours: data.lines.map((line) => line.colour),
  };
}

// A value with, where several runs make it, their count and range: "0.128 J (n=2, 0.0740–0.182)".
function valueText(v, s, unit) {
  if (v == null) return "–";
  return s && s.n > 1 ? `${fmt(v, unit)} (n=${s.n}, ${fmt(s.min)}–${fmt(s.max)})` : fmt(v, unit);
}

// A bar from the lowest to the highest value at each point of several runs, in
// its series' colour; the runs, count and range are its title and data.
function drawSpreads(shared, unit) {
  return (u) => {
    for (const old of u.over.querySelectorAll(".spread")) old.remove();
    for (const s of shared) {
      const [top, bottom, colour] = [u.valToPos(s.max, "y"), u.valToPos(s.min, "y"), s.colour];
      u.over.append(el("span", { class: "spread", "data-group": s.group, "data-batch-size": String(s.size),
        "data-n": String(s.n), "data-min": String(s.min), "data-max": String(s.max),
        title: `${s.group}, batch size ${s.size}: mean of ${s.n} runs, ${valueText(s.mean, s, unit)}: ${s.runs.join(", ")}`,
        style: `position:absolute;left:${u.valToPos(s.x, "x") - 6}px;top:${top - 1}px;width:12px;height:${bottom - top}px;`
          + `border-top:2px solid ${colour};border-bottom:2px solid ${colour};`
          + `background:linear-gradient(${colour},${colour}) center/2px 100% no-repeat;pointer-events:auto;cursor:help` }));
    }
  };
}

// Red crosses over the plot, positioned on each redraw; the cause is their title.
function drawFailures(failed) {
  return (u) => {
    for (const old of u.over.querySelectorAll(".failed-mark")) old.remove();
    for (const f of failed) {
      const top = f.y === null ? u.over.clientHeight : u.valToPos(f.y, "y");
      u.over.append(el("span", { class: "failed-mark", title: f.text, "data-group": f.group,
        style: `position:absolute;left:${u.valToPos(f.x, "x") - 7}px;top:${top - 10}px;color:#c62828;font:bold 16px sans-serif;pointer-events:auto;cursor:help` }, "✕"));
    }
  };
}

function drawChart(box, answer, width) {
  if (answer.empty_reason) {
    box.append(el("p", { class: "note", text: answer.empty_reason }));
    return;
  }
  const data = chartData(answer);
  const q = answer.quantities.find((c) => c.key === answer.quantity);
  const values = [...data.series.flat(), ...data.failed.map((f) => f.y)].filter((v) => v !== null);
  const [lo, hi] = [Math.min(...data.x), Math.max(...data.x)];
  const ticks = [];
  for (let v = Math.ceil(lo); v <= Math.floor(hi); v++) ticks.push(v);
  box.setAttribute("data-x-ticks", ticks.map((v) => 2 ** v).join(","));
  new uPlot({
    width, height: 260,
    series: [{ label: "batch size", value: (u, v) => (v == null ? "–" : String(Math.round(2 ** v))) },
      ...data.groups.map((g, i) => ({ label: g, stroke: data.colours[i], width: 2, spanGaps: true,
        points: { show: true, size: 8 }, value: (u, v, si, idx) => valueText(v, data.stats[si - 1][idx], q.unit) }))],
    scales: { x: { time: false, range: () => [lo - 0.5, hi + 0.5] },
      y: { range: () => uPlot.rangeNum(Math.min(0, ...values), Math.max(...values), 0.1, true) } },
    axes: [{ label: "batch size", stroke: "currentColor", splits: () => ticks, values: (u, splits) => splits.map((v) => String(2 ** v)) },
      yAxis(q.unit)], // the select above names the quantity
    hooks: { draw: [drawSpreads(data.shared, q.unit), drawFailures(data.failed)] },
  }, [data.x, ...data.series], box);
  if (data.shared.length) {
    box.append(el("p", { class: "note shared", text: "Where several runs share a point it is their mean: "
      + "n and their range (lowest–highest) are in the legend, and a bar spans the range." }));
  }
  if (data.failed.length) {
    box.append(el("ul", { class: "failed" }, ...data.failed.map((f) => el("li", { text: `✕ ${f.text}` }))));
  }
}

// The chart's box, once the route's first answer is drawn; picking another quantity or grouping asks the
// route again (the box's data-ready is "false" until that answer is drawn).
export async function batchSizeChart(width) {
  const box = el("div", { class: "chart crossrun", "data-ready": "false" }, el("h4", { text: "Across runs, against batch size" }));
  let first;
  try {
    first = await getCrossrun();
  } catch (err) {
    box.append(el("p", { class: "error", text: String(err.message || err) }));
    box.setAttribute("data-ready", "true");
    return box;
  }
  if (!first.quantities.length) {
    box.append(el("p", { text: first.empty_reason }));
    box.setAttribute("data-ready", "true");
    return box;
  }
  const quantity = el("select", { class: "quantity" }, ...first.quantities.map((q) => el("option", { value: q.key,
    text: `${q.label} (${q.unit})${q.measured ? "" : ": not measured"}` })));
  quantity.value = first.quantity;
  const grouping = el("select", { class: "grouping" }, ...first.groupings.map((g) => el("option", { value: g.key, text: g.label })));
  grouping.value = first.grouping;
  const chart = el("div");
  let asked = 0;
  const draw = (answer) => {
    chart.replaceChildren();
    drawChart(chart, answer, width);
    box.setAttribute("data-ready", "true");
  };
  const redraw = async () => {
    const mine = ++asked;
    box.setAttribute("data-ready", "false");
    try {
      const answer = await getCrossrun(quantity.value, grouping.value);
      if (mine === asked) draw(answer);
    } catch (err) {
      if (mine !== asked) return;
      chart.replaceChildren(el("p", { class: "error", text: String(err.message || err) }));
      box.setAttribute("data-ready", "true");
    }
  };
  quantity.addEventListener("change", redraw);
  grouping.addEventListener("change", redraw);
  box.append(el("div", {}, el("label", {}, "y: ", quantity), " one line per ", el("label", {}, grouping)), chart);
  const best = bestBatchTable(first.best);
  if (best) box.append(best);
  draw(first);
  return box;
}
