import uPlot from "uplot";

// A chart's y axis, as wide as its longest tick label: uPlot's fixed 50 px left "15,000" under the rotated
// axis title. The title is drawn in its own band (labelSize) outside this width.

// The axis's width in CSS pixels: its ticks, the gap, and the widest of the tick labels drawn now.
function fitTicks(u, values, axisIdx, cycleNum) {
  const axis = u.axes[axisIdx];
  if (cycleNum > 1) return axis._size; // uPlot asks again while the layout settles: keep the first answer
  const widest = (values || []).reduce((a, v) => (String(v).length > a.length ? String(v) : a), "");
  u.ctx.font = axis.font[0];
  return Math.ceil(axis.ticks.size + axis.gap + u.ctx.measureText(widest).width / uPlot.pxRatio) + 2;
}

// A y axis titled ``label`` in the page's text colour, sized to its tick labels.
export const yAxis = (label) => ({ label, stroke: "currentColor", size: fitTicks });
