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
  return { key, kind: c.kind, title: part ? `${kind.title}, ${part}` : kind.title, unit, scale, lines: [], limits: [] };
}

// The device a run ran on, in words: its board, else the log it replays, else its host.
export function deviceName(summary) {
  const d = (summary || {}).device || {};
  if (d.board) return d.board;
  if (d.replay_of) return `replay of ${String(d.replay_of).split("/").pop()}`;
  return d.hostname || "device";
}

// The RAM of each device whose runs have a system RAM line on the chart, offered (hidden until asked for)
// only on a chart of system RAM: the same quantity as the line it is compared with. One device: "device RAM";
// several: a line per device, named with it ("device RAM: replay of tx2.log").
function ramLimits(spec, runs) {
  if (spec.kind !== "memory") return [];
  const boardRuns = new Set(spec.lines.filter((l) => l.channel.device === "board").map((l) => l.run));
  const devices = new Map();
  for (const r of runs) {
    const total = (((r.summary || {}).device || {}).ram_total_bytes);
    if (!boardRuns.has(r.run) || !(total > 0)) continue;
    const name = deviceName(r.summary);
    devices.set(`${name}\u0000${total}`, { device: name, value: total / GIB });
  }
  const several = devices.size > 1;
  return [...devices.values()].map((d) => ({ ...d, label: several ? `device RAM: ${d.device}` : "device RAM" }));
}

// runs: [{run, header, summary}] -> [{key, title, unit, scale, lines: [{run, channel}], limits: [{device, value, label}]}
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
  for (const spec of specs.values()) spec.limits = ramLimits(spec, runs);
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
