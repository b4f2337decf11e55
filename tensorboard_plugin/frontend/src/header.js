// A run's header (the seed's numbers and the sampling quality), and a multi-worker run's combined view.
import { el, fmt, NOT_MEASURED } from "./format.js";

export function runHeader(run, s, profile) {
  const sampling = s.sampling || {};
  const clusters = Object.entries(s.cpu_util_per_cluster || {}).map(([k, v]) => `${k} ${fmt(v, "%")}`).join(", ");
  const items = [
    ["status", s.status === "running" ? "running" : s.success ? "trained" : `failed at step ${s.failed_step}`],
    ["steps measured", `${s.steps_measured ?? "?"} (after ${s.warmup_steps ?? "?"} warm-up)`],
    ["energy total", fmt(s.energy_total, "J")], ["mean power", fmt(s.power_avg, "W")],
    ["J/sample", fmt(s.energy_per_sample_j, "J")], ["samples/s", fmt(s.samples_per_s)],
    ["peak memory", fmt(s.mem_peak_gb, "GiB")], ["GPU util", fmt(s.gpu_util_avg, "%")],
    ["CPU util", fmt(s.cpu_util_avg, "%")], ["CPU clusters", clusters || NOT_MEASURED],
    ["between steps (input, callbacks)", s.between_steps_fraction == null ? NOT_MEASURED : fmt(s.between_steps_fraction * 100, "% of the time")],
    ["step time", s.step_time_s && s.step_time_s.mean != null ? `${fmt(s.step_time_s.mean * 1e3, "ms")} mean, ${fmt(s.step_time_s.p99 * 1e3, "ms")} p99` : NOT_MEASURED],
    ["sampling", sampling.achieved_hz ? `${fmt(sampling.achieved_hz, "Hz")} of ${fmt(sampling.requested_hz, "Hz")}, p99 interval error ${fmt(sampling.interval_error_p99_ms, "ms")}, ${sampling.gaps} gaps` : NOT_MEASURED],
  ];
  const box = el("div", {}, el("h3", { text: `${run}${s.model ? " — " + s.model : ""}${s.batch_size ? ", batch " + s.batch_size : ""}` }));
  const line = el("div", { class: "header" });
  for (const [k, v] of items) line.append(el("span", {}, el("b", { text: `${k}: ` }), v));
  box.append(line);
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
  const line = el("div", { class: "header" });
  for (const [k, v] of [
    ["status", s.success ? "trained" : s.missing_hosts && s.missing_hosts.length ? `missing: ${s.missing_hosts.join(", ")}` : "failed"],
    ["steps measured", String(s.steps_measured)], ["energy total (all hosts)", fmt(s.energy_total, "J")],
    ["mean power (all hosts)", fmt(s.power_avg, "W")],
    ["step time (slowest host)", s.step_time_s && s.step_time_s.mean != null ? fmt(s.step_time_s.mean * 1e3, "ms") : NOT_MEASURED],
  ]) line.append(el("span", {}, el("b", { text: `${k}: ` }), v));
  const table = el("table", { class: "hosts" }, el("tr", {}, ...["host", "hostname", "status", "energy (J)", "peak memory (GiB)", "slowest in steps"].map((t) => el("th", { text: t }))));
  for (const [task, h] of hosts) {
    const status = h.missing ? `missing (died at step ${h.failed_step ?? "?"}; ${h.steps_on_disk} steps on disk)` : h.success ? "ok" : `failed at step ${h.failed_step}`;
    table.append(el("tr", {}, ...[task, h.hostname ?? "", status, fmt(h.energy_total), fmt(h.mem_peak_gb), String((s.slowest_host_steps || {})[task] ?? 0)].map((t) => el("td", { text: t }))));
  }
  box.append(line, table);
  return box;
}
