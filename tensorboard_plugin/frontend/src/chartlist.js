// Which time charts a set of runs gets, derived from their channels' roles
// (kind, device, core, cluster), never from channel names: a kind the
// dashboard has not seen (a newer sensor's) still gets a chart of its own.
const GIB = 2 ** 30;

// One chart per kind, except those split further by the channel's device
// (clocks of the CPU, GPU, EMC differ by orders of magnitude) or, for
// per-core utilization, by CPU cluster.
const KINDS = {
  power: { title: "Power per rail", split: () => "" },
  energy: { title: "Energy counters", split: () => "" },
  memory: { title: "Memory", split: () => "" },
  util: { title: "Utilization", split: (c) => (c.device === "cpu" && c.core != null ? `CPU ${c.cluster || "cores"}` : c.device === "cpu" ? "CPU" : c.device.toUpperCase() || "other") },
  clock: { title: "Clocks", split: (c) => (c.device === "cpu" || c.device === "gpu" ? c.device : c.group || c.device || "other").toUpperCase() },
  temperature: { title: "Temperatures", split: () => "" },
  state: { title: "States", split: () => "" },
};

// Charts that say "not measured" (and why) when no run has their channels.
const EXPECTED = [
  { key: "power", title: "Power per rail", unit: "W", why: "power" },
  { key: "memory", title: "Memory", unit: "GiB", why: "mem_peak_gb" },
  { key: "util/CPU", title: "Utilization, CPU", unit: "%", why: "cpu_util", also: "util/CPU " },
  { key: "util/GPU", title: "Utilization, GPU", unit: "%", why: "gpu_util" },
];

const MEMORY_OF = { board: "system RAM", process: "process", gpu: "GPU memory" };

// What a line is, beside its name: the CPU cluster of a core, whose memory a memory channel is.
export function lineLabel(c) {
  if (c.kind === "memory" && MEMORY_OF[c.device]) return `${c.name}, ${MEMORY_OF[c.device]}`;
  if (c.cluster && c.core != null) return `${c.name} (${c.cluster})`;
  return c.name;
}

function specKey(c) {
  const kind = KINDS[c.kind];
  const part = kind ? kind.split(c) : "";
  return part ? `${c.kind}/${part}` : c.kind;
}

// Units as stored -> as drawn: bytes in GiB, clocks in MHz.
const SHOWN = { B: ["GiB", GIB], Hz: ["MHz", 1e6] };

function newSpec(key, c) {
  const kind = KINDS[c.kind] || { title: c.kind, split: () => "" };
  const part = key.split("/")[1];
  const [unit, scale] = SHOWN[c.unit] || [c.unit || "", 1];
  return { key, kind: c.kind, title: part ? `${kind.title}, ${part}` : kind.title, unit, scale, lines: [], limit: null };
}

// The device's RAM, offered (hidden until asked for) only on a chart of
// system RAM: the same quantity as the line it is compared with.
function ramLimit(spec, runs) {
  if (spec.kind !== "memory" || !spec.lines.some((l) => l.channel.device === "board")) return null;
  const totals = runs.map((r) => ((r.summary || {}).device || {}).ram_total_bytes).filter((v) => v > 0);
  return totals.length ? Math.max(...totals) / GIB : null;
}

// runs: [{run, header, summary}] -> [{key, title, unit, scale, lines: [{run, channel}], limit}
// or {key, title, empty: reason}], in the order of KINDS, then any other kind.
export function chartSpecs(runs) {
  const specs = new Map();
  for (const r of runs) {
    for (const c of r.header.channels) {
      const key = specKey(c);
      if (!specs.has(key)) specs.set(key, newSpec(key, c));
      specs.get(key).lines.push({ run: r.run, channel: c });
    }
  }
  for (const spec of specs.values()) spec.limit = ramLimit(spec, runs);
  const unavailable = Object.assign({}, ...runs.map((r) => (r.summary || {}).unavailable || {}));
  const keys = [...specs.keys()];
  for (const e of EXPECTED) {
    if (!keys.some((k) => k === e.key || (e.also && k.startsWith(e.also)))) {
      specs.set(e.key, { key: e.key, title: `${e.title} (${e.unit})`, empty: unavailable[e.why] || "" });
    }
  }
  const order = Object.keys(KINDS);
  const rank = (key) => {
    const i = order.indexOf(key.split("/")[0]);
    return i < 0 ? order.length : i;
  };
  return [...specs.values()].sort((a, b) => rank(a.key) - rank(b.key));
}
