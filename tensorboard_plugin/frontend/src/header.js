// A run's header (the seed's numbers and the sampling quality), and a multi-worker
// run's combined view. Every number says on hover (its title) what it is, over
// which steps, and from which sensor channel, or why it was not measured.
import { modelColour } from "./colours.js";
import { el, fmt, NOT_MEASURED } from "./format.js";

const GIB = 2 ** 30;

// Every channel of the run's sensors, with its sensor's name.
export const channelsOf = (s) => (s.sensors || []).flatMap((sensor) => (sensor.channels || []).map((c) => ({ ...c, sensor: sensor.name })));
const from = (cs) => (cs.length ? `; from ${cs.map((c) => `${c.name} (${c.sensor}: ${c.source})`).join(", ")}` : "");
const why = (s, key) => `not measured: ${(s.unavailable || {})[key] || "no value in the report"}`;

// Which steps a header number is over.
const overSteps = (s) => `over the ${s.steps_measured ?? 0} measured steps (the ${s.warmup_steps ?? 0} warm-up steps left out)`;

// The process's own peak memory: the highest peak of its memory channels (VmHWM, VmRSS) as
// [value, hover text], or why there is none (no such channel; no step ran; none read a value).
function processPeak(s) {
  const channels = channelsOf(s).filter((c) => c.kind === "memory" && c.device === "process");
  const peaks = channels.map((c) => ((s.channels || {})[c.name] || {}).peak).filter((v) => v != null);
  if (peaks.length) return [fmt(Math.max(...peaks) / GIB, "GiB"), `highest resident memory of the training process (its peak RSS) ${overSteps(s)}${from(channels)}`];
  if (!channels.length) return [NOT_MEASURED, "not measured: no memory channel of the process"];
  return [NOT_MEASURED, s.steps_measured === 0 ? why(s, "step_time_s") : `not measured: no valid reading of ${channels.map((c) => c.name).join(", ")}`];
}

// The run's status as the server found it ("running" only while its process is alive; "ended without a
// report: ..." when it died), or, from an older server, as its summary says.
export function statusText(s) {
  if (s.status_text) return s.status_text;
  if (s.status === "running") return "running";
  return s.success ? "trained" : `failed at step ${s.failed_step}`;
}

// Whether the run failed: it trained no further, ended without a report, or its summary cannot be read.
export const isFailed = (s) => s.success === false || s.status === "unreadable";

// What each header number is: name -> [value, hover text].
function explained(s) {
  const cs = channelsOf(s);
  const n = s.steps_measured ?? 0;
  const done = s.energy_steps_complete || {};
  const energySteps = `over the ${done.complete ?? n} measured steps with complete energy` +
    (done.complete != null && done.complete < n ? ` (of ${n}; the others had a hole in their samples)` : "");
  const rails = cs.filter((c) => c.kind === "power");
  const totals = rails.filter((c) => c.group === "total");
  const rail = totals.length ? `total rail ${totals.map((c) => c.name).join(", ")}` : `the sum of the rails ${rails.map((c) => c.name).join(", ")}`;
  const util = (device) => cs.filter((c) => c.kind === "util" && c.device === device && c.core == null);
  const clusters = Object.entries(s.cpu_util_per_cluster || {});
  const steps = s.step_time_s || {};
  const sampling = s.sampling || {};
  const measured = (value, key, text) => (value == null ? why(s, key) : text);
  return [
    ["status", statusText(s),
      s.success ? (s.steps_measured === 0 ? "it ended before its first measured step: no value below was measured" : "every step ran") : s.status === "running" ? "its process is alive and measuring"
        : `training stopped at step ${s.failed_step ?? "?"}: ${(s.error || "").split("\n")[0]}`,
      isFailed(s) ? "failed" : ""],
    ["steps measured", `${s.steps_measured ?? "?"} (after ${s.warmup_steps ?? "?"} warm-up)`,
      "steps in every average and total below; the warm-up steps are recorded and left out"],
    ["energy total", fmt(s.energy_total, "J"), measured(s.energy_total, "energy", `energy total: ${rail}, the integral of its power over each step's window, summed ${energySteps}${from(totals.length ? totals : rails)}`)],
    ["mean power", fmt(s.power_avg, "W"), measured(s.power_avg, "power", `mean power: ${rail} ${energySteps} (their energy over their time)${from(totals.length ? totals : rails)}`)],
    ["J/sample", fmt(s.energy_per_sample_j, "J"), measured(s.energy_per_sample_j, "energy_per_sample_j", `energy per sample: the energy total over the samples (batch size ${s.batch_size} × batches) of the steps with complete energy, ${rail}`)],
    ["samples/s", fmt(s.samples_per_s), measured(s.samples_per_s, "samples_per_s", `samples per second: batch size ${s.batch_size} × the batches of the ${n} measured steps, over their summed step time`)],
    ["peak memory (system)", fmt(s.mem_peak_gb, "GiB"), measured(s.mem_peak_gb, "mem_peak_gb", `highest system RAM in use (MemTotal - MemAvailable; on a Jetson, CPU and GPU memory together) ${overSteps(s)}${from(cs.filter((c) => c.kind === "memory" && c.device === "board"))}`)],
    ["peak memory (process)", ...processPeak(s)],
    ["GPU peak (allocator)", fmt(s.gpu_mem_peak_gb, "GiB"), measured(s.gpu_mem_peak_gb, "gpu_mem_peak_gb", `highest GPU memory held by the framework's allocator for tensors (${s.gpu_mem_source}) ${overSteps(s)}; ${s.gpu_mem_peak_cumulative ? "JAX cannot reset its peak: each step's value is the running peak since the process started" : "reset at each step's begin, so each step has its own peak"}; not system RAM, not the device memory NVML shows`)],
    ["GPU memory in use (device)", fmt(s.gpu_device_mem_peak_gb, "GiB"), measured(s.gpu_device_mem_peak_gb, "gpu_device_mem_peak_gb", `highest GPU memory in use by NVML (every process's, the allocator's cache included) ${overSteps(s)}${from(cs.filter((c) => c.kind === "memory" && c.device === "gpu"))}`)],
    ["GPU util", fmt(s.gpu_util_avg, "%"), measured(s.gpu_util_avg, "gpu_util", `mean GPU utilization ${overSteps(s)}${from(util("gpu"))}`)],
    ["CPU util", fmt(s.cpu_util_avg, "%"), measured(s.cpu_util_avg, "cpu_util", `mean CPU utilization of all cores ${overSteps(s)}${from(util("cpu"))}`)],
    ["CPU util (process)", fmt(s.process_cpu_util_avg, "%"), measured(s.process_cpu_util_avg, "process_cpu_util_avg", `mean CPU of the training process itself (all its threads, its child processes apart) as a share of all cores ${overSteps(s)}; CPU util above is every process's`)],
    machineItem(s),
    ["CPU clusters", clusters.map(([k, v]) => `${k} ${fmt(v, "%")}`).join(", ") || NOT_MEASURED,
      clusters.length ? `mean utilization of each cluster's cores (the mean of its cores' means) ${overSteps(s)}${from(cs.filter((c) => c.kind === "util" && c.core != null))}` : why(s, "cpu_util")],
    ["between steps (input, callbacks)", s.between_steps_fraction == null ? NOT_MEASURED : fmt(s.between_steps_fraction * 100, "% of the time"),
      s.between_steps_fraction == null && s.steps_measured === 0 ? why(s, "step_time_s")
        : `time between one step's end and the next one's begin (input pipeline, callbacks, Python) as a share of that time plus the steps' own, ${overSteps(s)}`],
    ["step time", steps.mean != null ? `${fmt(steps.mean * 1e3, "ms")} mean, ${fmt(steps.p99 * 1e3, "ms")} p99` : NOT_MEASURED,
      steps.mean != null ? `each step's window, on_train_batch_begin to on_train_batch_end on time.monotonic: mean and 99th percentile ${overSteps(s)}; median ${fmt(steps.p50 * 1e3, "ms")}` : why(s, "step_time_s")],
    ["sampling", sampling.achieved_hz ? `${fmt(sampling.achieved_hz, "Hz")} of ${fmt(sampling.row_hz ?? sampling.requested_hz, "Hz")}${sampling.row_hz && sampling.row_hz < sampling.requested_hz ? ` (on a ${fmt(sampling.requested_hz, "Hz")} grid, woken only when a sensor is due)` : ""}, p99 interval error ${fmt(sampling.interval_error_p99_ms, "ms")}, ${sampling.gaps} gaps`
      : sampling.samples != null ? `${sampling.samples} row${sampling.samples === 1 ? "" : "s"}: too few for a rate` : NOT_MEASURED,
      `the sampler (${sampling.mode || "?"}${sampling.realtime ? ", real-time priority" : ""}) over the whole run: rows per second achieved of requested, 99th percentile of |interval - period|, intervals longer than 2 periods; ${sampling.samples ?? "?"} samples, ${sampling.dropped ?? "?"} dropped`],
  ];
}

// Whether others used the machine during the measured steps: the report's contention block, "busy" in orange.
function machineItem(s) {
  const c = s.contention;
  if (!c) return ["machine", NOT_MEASURED, why(s, "contention")];
  return ["machine", `${c.verdict}: others ${fmt(c.other_cpu_pct, "%")}, steal ${fmt(c.steal_pct, "%")}`,
    `over the measured steps (${fmt(c.window_s, "s")}): ${c.said}; this process's children ${fmt(c.children_cpu_util, "%")}`,
    c.busy ? "busy" : ""];
}

const list = (values) => Object.entries(values || {}).filter(([k]) => k !== "total").map(([k, v]) => `${k} ${fmt(v, "W")}`).join(", ");

// The power mode the board ran in: device.power_mode {mode_id, mode_name, jetson_clocks, unavailable}, or jtop's keys.
function powerMode(device) {
  const given = device.power_mode || (device.nvpmodel_mode != null ? { mode_id: device.nvpmodel_mode, mode_name: device.nvpmodel_name, jetson_clocks: device.jetson_clocks } : null);
  const why = Object.values((given || {}).unavailable || {})[0] || "nvpmodel was not found: not a Jetson, or no nvpmodel on PATH";
  if (!given || given.mode_id == null) return [NOT_MEASURED, `not measured: ${why}`];
  const mode = { id: given.mode_id, name: given.mode_name, jetson_clocks: given.jetson_clocks };
  const clocks = mode.jetson_clocks == null ? "" : `, jetson_clocks ${mode.jetson_clocks ? "on" : "off"}`;
  return [`${mode.name ?? "?"} (mode ${mode.id ?? "?"})${clocks}`,
    `nvpmodel power mode ${mode.id ?? "?"} (${mode.name ?? "no name"}) during the run${mode.jetson_clocks == null ? "; jetson_clocks state unknown" : `; jetson_clocks ${mode.jetson_clocks ? "on: clocks held at their maximum" : "off: clocks follow the governor"}`}`];
}

// The board around the steps: idle baseline, energy above it, throttling, power mode, what the total sums.
function boardItems(s) {
  const n = s.steps_measured ?? 0;
  const idle = s.idle_power_w;
  const total = s.input_rail ? `the input rail ${s.input_rail}` : `the sum of ${(s.total_rails || []).join(" + ") || "no rail"}`;
  const throttle = channelsOf(s).filter((c) => c.kind === "state" && c.group === "throttle");
  return [
    ["idle power", fmt(idle && idle.total, "W"), idle && idle.total != null
      ? `mean power of ${total} over the idle seconds sampled before the first step, with nothing training; per rail: ${list(idle)}` : why(s, "idle_power_w")],
    ["active energy", fmt(s.energy_active_total, "J"), s.energy_active_total != null
      ? `energy total above the idle baseline: each step's energy minus the idle power × its time, summed over the measured steps with complete energy (energy total ${fmt(s.energy_total, "J")}); ${fmt(s.energy_active_per_sample_j, "J")} a sample` : why(s, "energy_active")],
    ["throttled steps", s.throttled_steps == null ? NOT_MEASURED : `${s.throttled_steps} of ${n}`, s.throttled_steps == null ? why(s, "throttled_steps")
      : `measured steps in which the board held a clock down (a throttle state above 0 in the step)${from(throttle)}`],
    ["power mode", ...powerMode(s.device || {})],
    ["total", s.input_rail ? s.input_rail : (s.total_rails || []).join(" + ") || NOT_MEASURED,
      (s.total_rails || []).length ? `energy total and mean power are ${total}${s.input_rail ? ", which the board measures at its input" : `: ${(s.unavailable || {}).input_rail || "no input rail"}`}` : why(s, "input_rail")],
  ];
}

// items: [name, value, hover text, class of the item ("failed": in red)?]
function headerLine(items) {
  const line = el("div", { class: "header" });
  for (const [k, v, title, cls] of items) line.append(el("span", { title, class: cls || "" }, el("b", { text: `${k}: ` }), v));
  return line;
}

// A run that ended before its first measured step may have had the sensors: a number missing for that reason
// (its report's "no step ran") says "no step measured", not "not measured on this device".
function overNoStep(items) {
  const noStep = (v, title) => v === NOT_MEASURED && String(title).startsWith("not measured: no step ran");
  return items.map(([k, v, title, ...rest]) => [k, noStep(v, title) ? "no step measured" : v, title, ...rest]);
}

export function runHeader(run, s, profile) {
  // The model's colour (its lines' when runs are overlaid, as in `mobileperf plot`) beside its name.
  const swatch = s.model ? [el("span", { class: "swatch", title: `${s.model}'s colour`, style: `background:${modelColour(s.model)}` })] : [];
  const box = el("div", {}, el("h3", {}, ...swatch, `${run}${s.model ? " — " + s.model : ""}${s.batch_size ? ", batch " + s.batch_size : ""}`));
  box.append(headerLine([...overNoStep(explained(s)), ...boardItems(s)]));
  if (s.error) box.append(el("div", { class: "failed", text: s.error.split("\n")[0] }));
  for (const p of profile || []) {
    box.append(el("div", {}, "TF profiler trace of the traced steps (blue): ",
      el("a", { href: p.url, target: "_top", text: `open in the Profile tab (${p.session})` })));
  }
  return box;
}

export function combinedView(run, s) {
  const hosts = Object.entries(s.hosts || {});
  const box = el("div", {}, el("h3", { text: `${run}: ${hosts.length} hosts combined by global step` }));
  const line = headerLine([
    ["status", s.success ? "trained" : s.missing_hosts && s.missing_hosts.length ? `missing: ${s.missing_hosts.join(", ")}` : "failed",
      "trained: every host's report was found and every host trained"],
    ["steps measured", String(s.steps_measured), "global steps measured on every host (aligned by step index)"],
    ["energy total (all hosts)", fmt(s.energy_total, "J"), "energy of every host's total rail, summed over the hosts and the measured global steps; none if any step lacks a host's energy"],
    ["mean power (all hosts)", fmt(s.power_avg, "W"), "the fleet's energy total over the summed step times of the slowest host"],
    ["step time (slowest host)", s.step_time_s && s.step_time_s.mean != null ? fmt(s.step_time_s.mean * 1e3, "ms") : NOT_MEASURED,
      "mean over the global steps of the slowest host's step time (each on its own clock)"],
  ]);
  const table = el("table", { class: "hosts" }, el("tr", {}, ...["host", "hostname", "status", "energy (J)", "peak memory (GiB)", "slowest in steps"].map((t) => el("th", { text: t }))));
  for (const [task, h] of hosts) {
    const status = h.missing ? `missing (died at step ${h.failed_step ?? "?"}; ${h.steps_on_disk} steps on disk)` : h.success ? "ok" : `failed at step ${h.failed_step}`;
    table.append(el("tr", {}, ...[task, h.hostname ?? "", status, fmt(h.energy_total), fmt(h.mem_peak_gb), String((s.slowest_host_steps || {})[task] ?? 0)].map((t) => el("td", { text: t }))));
  }
  box.append(line, table);
  return box;
}
