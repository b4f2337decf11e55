// Number formatting and DOM helpers. Text from files is only ever set with
// textContent, never parsed as HTML.
export const NOT_MEASURED = "not measured on this device";

export function fmt(value, unit = "", digits = 3) {
  if (value === null || value === undefined || Number.isNaN(value)) return NOT_MEASURED;
  return `${Number(value).toPrecision(digits)}${unit ? " " + unit : ""}`;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child);
  return node;
}

// A reason a quantity was not measured, cut to its first clause for an empty chart ("no power sensor on this
// device"); the whole reason (the sensors tried and why each is absent) goes on hover. As tf_mobileperf's
// colours.short_reason.
export function shortReason(reason, limit = 60) {
  let text = String(reason || NOT_MEASURED).trim().split(": ")[0].split(" (")[0].trim().replace(/[.;,]+$/, "");
  if (text.startsWith("no ") && text.endsWith("sensor")) text += " on this device";
  if (text.length > limit) text = `${text.slice(0, limit - 1).replace(/ [^ ]*$/, "")}…`;
  return text;
}
