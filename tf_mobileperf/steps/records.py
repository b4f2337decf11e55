"""Per-step records: what each training step cost, and running totals of the measured steps.

``fill_steps`` turns the join's per-step values into ``StepRecord`` fields;
``StepTotals`` keeps what the report's summary needs without keeping every
step, so a long run's memory stays bounded.
"""

from __future__ import annotations

import array
import dataclasses
import math
from typing import Any

import numpy as np

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.join import StepValues

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
