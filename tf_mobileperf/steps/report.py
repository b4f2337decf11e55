"""The report of a run: the paper's numbers, per step and in total.

The summary keys keep the paper's names and meaning (``success``,
``gpu_util_avg``, ``cpu_util_avg``, ``power_avg``, ``energy_total``,
``mem_peak_gb``). Averages and totals cover measured steps only; warm-up
steps are listed, marked, and left out. A quantity no sensor measured is
``None`` (JSON null) with the reason in ``unavailable``, never 0.

A step whose energy is incomplete (a sensor gap, a sampler outage, the
process stopped by Ctrl-Z) costs that step, not the run, and a rail without
energy in a step costs that rail only: each rail's energy and power, and the
total's, cover the measured steps in which that rail's energy is known (the
total's: its input rail's, or, where the total is a sum, those in which every
rail it sums is known). ``energy_steps_complete`` says how many measured steps
the total covers and how much time; ``energy_steps_complete_per_rail`` the
same for each rail; ``incomplete_rails`` names each rail (and "total") missing
from some measured steps, with how many, the first, and why.

Beside each energy is the energy above the idle baseline (``energy_active_j``,
``energy_active_total``: energy minus the rail's idle power, measured before
the first step, times the time), and the summary says which rails the total
sums (``total_rails``; ``input_rail`` when the board measures its input) and
in how many measured steps the board throttled (``throttled_steps``).

``energy_sources`` says, per rail, where its energy comes from: the channel,
whether it is a counter's difference ("counter") or integrated power
("power"), the power channels of the same rail left out because a counter
measures it (NVML's ``gpu0_power`` beside ``gpu0_energy``), the sensor's
update period, and how many measured steps with its energy known had a bound
within 5% of it ("measured") or not ("interpolated"; ``steps.join``);
``energy_total_methods`` counts the same for the total. Each step states
its energy's bound per rail (``energy_bound_j``), and ``energy_bound_j`` of
the summary bounds each rail's run total (the sum of its steps' bounds).
``gpu_util_avg`` is the mean of the steps' ``gpu_util``, each an average of
readings over the GPU's own window (``gpu_util_window_s``,
``gpu_util_rule``). ``cpu_util_avg`` is the machine's (every process);
``process_cpu_util_avg`` the training process's own, and ``contention``
what other processes and the hypervisor took (``session.contention``).
Energy totals are sums of per-step values taken from one interpolation of
each counter, so over contiguous steps a counter rail's total is the
counter's own difference from the first step's start to the last step's end.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps import precision
from tf_mobileperf.steps.cores import core_clusters, mean_known
from tf_mobileperf.steps.join import INTERPOLATED, MEASURED
from tf_mobileperf.steps.records import Roles, StepRecord, energy_rails, unused_power
from tf_mobileperf.steps.totals import StepTotals
from tf_mobileperf.steps.wording import FROZEN, GPU_UTIL_RULE, METHOD_RULE, NOT_COVERED, total_parts


@dataclasses.dataclass
class Report:
    """What a run cost. ``to_dict()`` is JSON-ready (NaN never appears).

    ``totals`` covers every measured step; ``steps`` are the steps kept in
    memory: all of them, unless the run outgrew the monitor's ``keep_steps``;
    then the warm-up and failed steps and the latest ones, and
    ``steps_not_kept`` counts the others (they are all in ``steps.csv``).
    """

    success: bool
    failed_step: int | None
    error: str | None
    warmup_steps: int
    steps: list[StepRecord]
    totals: StepTotals
    channels: list[Channel]
    sampling: dict
    sensors: list[dict]
    device: dict
    unavailable: dict[str, str]
    batch_size: int | None = None
    model: str | None = None
    steps_not_kept: int = 0
    idle_power_w: dict[str, float | None] | None = None  # per rail and "total"; None: no baseline measured
    gpu_memory: dict[str, Any] = dataclasses.field(default_factory=dict)  # see session.gpu_memory.report_fields
    contention: dict[str, Any] | None = None  # session.contention.Contention.to_dict(); None: see unavailable

    @property
    def measured(self) -> list[StepRecord]:
        """The measured steps among those kept."""
        return [s for s in self.steps if not s.warmup and not s.failed]

    def summary(self) -> dict[str, Any]:
        """The run's quantities, by concern: the run, its headline numbers, energy, CPU and channels,
        step timing, throughput, and what it was measured with."""
        energy_j = self._energy_j()
        power_avg_w = {r: _per_second(e, self.totals.rail(r).time_s) for r, e in energy_j.items()}
        return (
            self._run_fields()
            | self._headline(energy_j, power_avg_w)
            | self._energy_fields(energy_j, power_avg_w)
            | self._completeness(list(energy_j))
            | self._cpu_and_channels()
            | self._timing()
            | self._throughput(energy_j.get("total"))
            | self._context()
        )

    def _energy_j(self) -> dict[str, float | None]:
        """Energy per rail and, with any rail, in total, over the measured steps with it known."""
        rails = [c.name for c in energy_rails(self.channels)]
        return {r: self.totals.energy(r) for r in rails + (["total"] if rails else [])}

    def _run_fields(self) -> dict[str, Any]:
        """Which run and how it ended."""
        return {
            "model": self.model,
            "success": self.success,
            "failed_step": self.failed_step,
            "error": self.error,
            "steps_measured": self.totals.count,
            "warmup_steps": self.warmup_steps,
        }

    def _headline(self, energy_j: dict[str, float | None], power_avg_w: dict[str, float | None]) -> dict[str, Any]:
        """The paper's quantities (utilization, power, energy, memory) and the GPU allocator's memory."""
        gpus = Roles.of(self.channels).gpus
        windows = [w for w in (self.totals.update_period_s(c.name) for c in gpus) if w is not None]
        return {
            "gpu_util_avg": self.totals.mean("gpu_util"),
            "gpu_util_window_s": max(windows) if windows else None,
            "gpu_util_rule": GPU_UTIL_RULE if gpus else None,
            "cpu_util_avg": self.totals.mean("cpu_util"),
            "process_cpu_util_avg": self.totals.mean("process_cpu_util"),
            "power_avg": power_avg_w.get("total"),
            "energy_total": energy_j.get("total"),
            "mem_peak_gb": self.totals.mem_peak_gb,
            **self.gpu_memory,
        }

    def _energy_fields(self, energy_j: dict[str, float | None], power_avg_w: dict[str, float | None]) -> dict[str, Any]:
        """Energy and power per rail, above idle, which rails the total sums, throttling, and where energy came from."""
        roles = Roles.of(self.channels)
        return {
            "power_avg_w": power_avg_w,
            "energy_j": energy_j,
            "energy_bound_j": {r: self.totals.energy_bound(r) for r in energy_j},
            **self._active_energy(list(energy_j)),
            "total_rails": [c.name for c in roles.total],
            "input_rail": roles.input_rail,
            "throttled_steps": self.totals.throttled if roles.throttle else None,
            "energy_sources": self._energy_sources(),
            "energy_method_rule": METHOD_RULE,
            "energy_total_methods": self.totals.methods.get("total"),
        }

    def _completeness(self, rails: list[str]) -> dict[str, Any]:
        """In how many measured steps, and over how much time, the total's and each rail's energy is known."""
        totals = self.totals
        return {
            "energy_steps_complete": {
                "complete": totals.energy_complete,
                "measured": totals.count,
                "time_s": totals.energy_time_s,
                "measured_time_s": float(totals.durations.sum()),
            },
            "energy_steps_complete_per_rail": {
                r: {"complete": totals.rail(r).complete, "time_s": totals.rail(r).time_s} for r in rails
            },
            "incomplete_rails": self._incomplete_rails(rails, Roles.of(self.channels)),
        }

    def _cpu_and_channels(self) -> dict[str, Any]:
        """CPU utilization per core and per cluster, and every channel over the measured steps."""
        per_core = {core: self.totals.mean(f"core/{core}") for core in self.totals.cores or []}
        per_cluster = {
            name: mean_known([per_core.get(core) for core in cores])
            for name, cores in core_clusters(Roles.of(self.channels).cores).items()
        }
        return {
            "cpu_util_per_core": per_core,
            "cpu_util_per_cluster": per_cluster,
            "contention": self.contention,
            "channels": self.totals.channel_summary(self.channels),
        }

    def _timing(self) -> dict[str, Any]:
        """Step times, and the time between steps."""
        durations = self.totals.durations
        total_time, measured = float(durations.sum()), len(durations) > 0
        gaps = self.totals.total("gap_before_s")
        return {
            "step_time_s": {
                "mean": float(durations.mean()) if measured else None,
                "p50": float(np.percentile(durations, 50)) if measured else None,
                "p99": float(np.percentile(durations, 99)) if measured else None,
            },
            "step_time_ci95_s": list(interval[1:]) if (interval := precision.ci95(durations)) else None,
            "step_time_drift": precision.drift(durations),
            "gap_before_step_s": {"mean": gaps / self.totals.count if gaps is not None else None},
            "between_steps_fraction": gaps / (gaps + total_time)
            if gaps is not None and gaps + total_time > 0
            else None,
        }

    def _throughput(self, energy_total: float | None) -> dict[str, Any]:
        """Per sample: energy and rate; None without a batch size."""
        samples = self.batch_size * self.totals.batches if self.batch_size else None
        total_time = float(self.totals.durations.sum())
        return {
            "batch_size": self.batch_size,
            "energy_per_sample_j": self._per_sample(energy_total),
            "samples_per_s": samples / total_time if samples and total_time > 0 else None,
        }

    def _context(self) -> dict[str, Any]:
        """What the run was measured with and on, and why a quantity has no value."""
        return {
            "sampling": self.sampling,
            "sensors": self.sensors,
            "device": self.device,
            "unavailable": self.unavailable,
            "steps_not_kept": self.steps_not_kept,
        }

    def _energy_sources(self) -> dict[str, dict[str, Any]]:
        """Per rail: the channel its energy comes from and how, its update period, measured steps by energy
        method (those with the rail's energy known)."""
        out = {}
        for rail in energy_rails(self.channels):
            counts = self.totals.methods.get(rail.name, {})
            out[rail.name] = {
                "rail": rail.rail,
                "channel": rail.name,
                "from": "counter" if rail.kind == "energy" else "power",
                "power_not_used": unused_power(rail, self.channels),
                "update_period_s": self.totals.update_period_s(rail.name),
                "steps_measured": counts.get(MEASURED, 0),
                "steps_interpolated": counts.get(INTERPOLATED, 0),
            }
        return out

    def _incomplete_rails(self, rails: list[str], roles: Roles) -> dict[str, str]:
        """Each rail (and "total") whose energy is unknown in some measured step: in how many, the first, why."""
        out = {}
        for rail in rails:
            steps = self.totals.rail(rail)
            if steps.unknown:
                out[rail] = (
                    f"energy unknown in {steps.unknown} of {self.totals.count} measured steps, the first at "
                    f"step {steps.first_unknown}: {self._why_unknown(rail, roles)}"
                )
        return out

    def _why_unknown(self, rail: str, roles: Roles) -> str:
        """Why ``rail``'s energy is unknown in some measured step: a part of the total, a counter that froze
        (``sampling.frozen_counters``), a sensor's reason, or no readings over those steps."""
        frozen = self.sampling.get("frozen_counters", {})
        if rail == "total":
            return total_parts(roles)
        if rail in frozen:
            return FROZEN.format(since_s=frozen[rail])
        return self.unavailable.get(rail, NOT_COVERED)

    def _per_sample(self, energy: float | None) -> float | None:
        """``energy`` of the energy-complete steps per sample they trained; None without a batch size."""
        samples = self.batch_size * self.totals.energy_batches if self.batch_size else None
        return energy / samples if energy is not None and samples else None

    def _active_energy(self, rails: list[str]) -> dict[str, Any]:
        """The idle baseline and the energy above it, per rail and in total."""
        active = {r: self.totals.energy_active(r) for r in rails} if self.idle_power_w is not None else None
        total = active.get("total") if active else None
        return {
            "idle_power_w": self.idle_power_w,
            "energy_active_j": active,
            "energy_active_total": total,
            "energy_active_per_sample_j": self._per_sample(total),
        }

    def to_dict(self) -> dict[str, Any]:
        """The report as ``report.json`` holds it: ``summary()`` and ``steps``, each kept step with its duration."""
        out = self.summary()
        out["steps"] = [dataclasses.asdict(s) | {"duration_s": s.duration_s} for s in self.steps]
        return out


def _per_second(energy: float | None, time_s: float) -> float | None:
    return energy / time_s if energy is not None and time_s > 0 else None
