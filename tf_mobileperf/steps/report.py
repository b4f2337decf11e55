"""The report of a run: the seed's numbers, per step and in total.

The summary keys keep the seed's names and meaning (``success``,
``gpu_util_avg``, ``cpu_util_avg``, ``power_avg``, ``energy_total``,
``mem_peak_gb``). Averages and totals cover measured steps only; warm-up
steps are listed, marked, and left out. A quantity no sensor measured is
``None`` (JSON null) with the reason in ``unavailable``, never 0.

A step whose energy is incomplete (a sensor gap, a sampler outage, the
process stopped by Ctrl-Z) costs that step, not the run: energy and power
cover the complete measured steps, and ``energy_steps_complete`` says how
many of the measured steps that is and how much time they cover.
"""

from __future__ import annotations

import array
import dataclasses
import math
from typing import Any

import numpy as np

from tf_mobileperf.steps.join import StepValues
from tf_mobileperf.sensors.base import Channel

GIB = float(2**30)


def _num(x: float | None) -> float | None:
    """A JSON-safe number: NaN and None become None."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) or math.isinf(x) else x


@dataclasses.dataclass
class StepRecord:
    """One training step (one hook call; ``batches`` > 1 with steps_per_execution)."""

    step: int
    start_s: float
    end_s: float
    batches: int = 1
    warmup: bool = False
    traced: bool = False
    failed: bool = False
    energy_j: dict[str, float | None] = dataclasses.field(default_factory=dict)
    power_w: dict[str, float | None] = dataclasses.field(default_factory=dict)
    cpu_util: float | None = None
    cpu_util_per_core: dict[str, float | None] = dataclasses.field(default_factory=dict)
    gpu_util: float | None = None
    mem_peak_gb: float | None = None
    incomplete: list[str] = dataclasses.field(default_factory=list)
    gap_before_s: float | None = None  # since the previous step ended: input, callbacks, the loop's own work

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def csv_row(self) -> dict[str, Any]:
        row = {"step": self.step, "start_s": self.start_s, "end_s": self.end_s, "duration_s": self.duration_s,
               "batches": self.batches, "warmup": int(self.warmup), "traced": int(self.traced),
               "failed": int(self.failed), "cpu_util": self.cpu_util, "gpu_util": self.gpu_util,
               "mem_peak_gb": self.mem_peak_gb, "gap_before_s": self.gap_before_s}
        row |= {f"energy_j/{k}": v for k, v in self.energy_j.items()}
        row |= {f"power_w/{k}": v for k, v in self.power_w.items()}
        return row


def energy_rails(channels: list[Channel]) -> list[Channel]:
    """Channels that give a rail's energy: power rails and energy counters.

    A device with both (NVML ``gpuN_power`` and ``gpuN_energy``) uses the
    counter, which the hardware integrates itself.
    """
    counters = {c.name.removesuffix("_energy") for c in channels if c.kind == "energy"}
    return [c for c in channels if c.kind == "energy" or (c.kind == "power" and c.name.removesuffix("_power") not in counters)]


def fill_steps(steps: list[StepRecord], joined: dict[str, StepValues], channels: list[Channel]) -> None:
    """Writes the joined per-step values into ``steps`` (same order)."""
    rails = energy_rails(channels)
    total_rails = [c for c in rails if c.group == "total"] or [c for c in rails if c.group != "subzone"]
    util_cores = [c for c in channels if c.kind == "util" and c.group == "cpu" and c.name != "cpu_util"]
    gpu_utils = [c for c in channels if c.kind == "util" and c.group == "gpu"]
    memory = [c for c in channels if c.kind == "memory" and c.name == "ram_used"]
    for i, step in enumerate(steps):
        duration = step.duration_s
        for rail in rails:
            energy = _num(joined[rail.name].value[i])
            step.energy_j[rail.name] = energy
            step.power_w[rail.name] = _num(energy / duration) if energy is not None and duration > 0 else None
            if not joined[rail.name].complete[i]:
                step.incomplete.append(rail.name)
        if rails:
            parts = [step.energy_j[c.name] for c in total_rails]
            step.energy_j["total"] = None if any(p is None for p in parts) else sum(parts)
            step.power_w["total"] = (step.energy_j["total"] / duration
                                     if step.energy_j["total"] is not None and duration > 0 else None)
        if "cpu_util" in joined:
            step.cpu_util = _num(joined["cpu_util"].value[i])
        step.cpu_util_per_core = {c.name.removesuffix("_util"): _num(joined[c.name].value[i]) for c in util_cores}
        if gpu_utils:
            values = [joined[c.name].value[i] for c in gpu_utils]
            step.gpu_util = _num(np.mean(values)) if np.isfinite(values).all() else None
        if memory:
            peak = joined[memory[0].name].value[i]
            step.mem_peak_gb = _num(peak / GIB)


class StepTotals:
    """Running totals of the measured steps, so a long run needs no step list.

    Holds what the summary needs and nothing per step but the durations
    (8 bytes a step, for the percentiles). Energy is summed over the steps
    whose every rail is known (``energy_complete`` of ``count``, covering
    ``energy_time_s`` and ``energy_batches``), so rails and total cover the
    same steps; averages of the other quantities cover the steps that have
    them.
    """

    def __init__(self) -> None:
        self.count = 0
        self.batches = 0
        self.energy_complete = 0
        self.energy_time_s = 0.0
        self.energy_batches = 0
        self._durations = array.array("d")
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self.mem_peak_gb: float | None = None
        self.cores: list[str] | None = None

    def add(self, step: StepRecord) -> None:
        """Adds one measured (not warm-up, not failed) step."""
        self.count += 1
        self.batches += step.batches
        self._durations.append(step.duration_s)
        if self.cores is None:
            self.cores = list(step.cpu_util_per_core)
        values = {"cpu_util": step.cpu_util, "gpu_util": step.gpu_util, "gap_before_s": step.gap_before_s}
        values |= {f"core/{core}": u for core, u in step.cpu_util_per_core.items()}
        if step.energy_j and all(e is not None for e in step.energy_j.values()):
            self.energy_complete += 1
            self.energy_time_s += step.duration_s
            self.energy_batches += step.batches
            values |= {f"energy/{rail}": e for rail, e in step.energy_j.items()}
        for key, value in values.items():
            if value is not None:
                self._sums[key] = self._sums.get(key, 0.0) + value
                self._counts[key] = self._counts.get(key, 0) + 1
        if step.mem_peak_gb is not None:
            self.mem_peak_gb = max(self.mem_peak_gb or 0.0, step.mem_peak_gb)

    def total(self, key: str) -> float | None:
        """Sum over the measured steps; None unless every step has the value."""
        return self._sums[key] if self.count and self._counts.get(key) == self.count else None

    def energy(self, rail: str) -> float | None:
        """Energy of ``rail`` over the energy-complete steps; None if there are none."""
        return self._sums.get(f"energy/{rail}") if self.energy_complete else None

    def mean(self, key: str) -> float | None:
        """Mean over the measured steps that have the value; None if none has it."""
        n = self._counts.get(key, 0)
        return self._sums[key] / n if n else None

    @property
    def durations(self) -> np.ndarray:
        return np.frombuffer(self._durations, dtype=np.float64) if self.count else np.empty(0)


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

    @property
    def measured(self) -> list[StepRecord]:
        """The measured steps among those kept."""
        return [s for s in self.steps if not s.warmup and not s.failed]

    def summary(self) -> dict[str, Any]:
        totals = self.totals
        durations = totals.durations
        total_time = float(durations.sum())
        rails = [c.name for c in energy_rails(self.channels)]
        energy_j = {r: totals.energy(r) for r in rails + (["total"] if rails else [])}
        energy_time = totals.energy_time_s
        power_avg_w = {r: (e / energy_time if e is not None and energy_time > 0 else None) for r, e in energy_j.items()}
        clusters: dict[str, list[str]] = {}
        for c in self.channels:
            if c.kind == "util" and c.group == "cpu" and c.cluster:
                clusters.setdefault(c.cluster, []).append(c.name.removesuffix("_util"))
        per_core = {core: totals.mean(f"core/{core}") for core in totals.cores or []}
        per_cluster = {name: _mean_known([per_core.get(core) for core in cores]) for name, cores in clusters.items()}
        samples = self.batch_size * totals.batches if self.batch_size else None
        energy_samples = self.batch_size * totals.energy_batches if self.batch_size else None
        energy_total = energy_j.get("total")
        measured = len(durations) > 0
        gaps = totals.total("gap_before_s")
        return {
            "model": self.model,
            "success": self.success,
            "failed_step": self.failed_step,
            "error": self.error,
            "steps_measured": totals.count,
            "warmup_steps": self.warmup_steps,
            "gpu_util_avg": totals.mean("gpu_util"),
            "cpu_util_avg": totals.mean("cpu_util"),
            "power_avg": power_avg_w.get("total"),
            "energy_total": energy_total,
            "mem_peak_gb": totals.mem_peak_gb,
            "power_avg_w": power_avg_w,
            "energy_j": energy_j,
            "energy_steps_complete": {"complete": totals.energy_complete, "measured": totals.count,
                                      "time_s": energy_time, "measured_time_s": total_time},
            "cpu_util_per_core": per_core,
            "cpu_util_per_cluster": per_cluster,
            "step_time_s": {
                "mean": float(durations.mean()) if measured else None,
                "p50": float(np.percentile(durations, 50)) if measured else None,
                "p99": float(np.percentile(durations, 99)) if measured else None,
            },
            "gap_before_step_s": {"mean": gaps / totals.count if gaps is not None else None},
            "between_steps_fraction": gaps / (gaps + total_time) if gaps is not None and gaps + total_time > 0 else None,
            "batch_size": self.batch_size,
            "energy_per_sample_j": (energy_total / energy_samples
                                    if energy_total is not None and energy_samples else None),
            "samples_per_s": samples / total_time if samples and total_time > 0 else None,
            "sampling": self.sampling,
            "sensors": self.sensors,
            "device": self.device,
            "unavailable": self.unavailable,
            "steps_not_kept": self.steps_not_kept,
        }

    def to_dict(self) -> dict[str, Any]:
        out = self.summary()
        out["steps"] = [
            dataclasses.asdict(s) | {"duration_s": s.duration_s} for s in self.steps
        ]
        return out


def _mean_known(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None
