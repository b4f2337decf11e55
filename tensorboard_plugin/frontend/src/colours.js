// One colour per model, from the file `mobileperf plot` reads too
// (tf_mobileperf/analysis/model_colours.json, bundled by esbuild): a zoo
// model's own colour, else a fallback picked by a hash of its name that
// tf_mobileperf/analysis/colours.py computes alike. None is red: red marks
// failures. Limit lines have a colour of their own (LIMIT_COLOUR).
import COLOURS from "../../../tf_mobileperf/analysis/model_colours.json";

export const LIMIT_COLOUR = COLOURS.limit;

// h = h * 31 + code point, mod 2^32, over the name's characters.
export function nameHash(name) {
  let h = 0;
  for (const ch of String(name)) h = (Math.imul(h, 31) + ch.codePointAt(0)) >>> 0;
  return h;
}

// The colour of model `name` ("#0072B2" for "cnn").
export function modelColour(name) {
  const own = COLOURS.models[name];
  if (own) return own;
  return COLOURS.fallback[nameHash(name) % COLOURS.fallback.length];
}

// The k-th shade of a colour (k = 0: the colour itself; then darker, lighter, ...): several runs of one model
// drawn on one chart keep their model's hue and are told apart.
export function shade(colour, k) {
  if (!k) return colour;
  const rgb = [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16));
  const toward = k % 2 ? 0 : 255;
  const amount = Math.min(0.6, 0.35 * Math.ceil(k / 2));
  return `#${rgb.map((v) => Math.round(v + (toward - v) * amount).toString(16).padStart(2, "0")).join("")}`;
}
