"""Per-step records: what each training step cost, and running totals of the measured steps.

A ``StepRecord`` keeps every reduction the join computed for every channel
(``channels``: energy, mean, peak, ... by the channel's kind) and the paper's
quantities derived from them by the channels' roles (``Roles``): energy and
power per rail and in total, the energy above the idle baseline
(``energy_active_j``), CPU utilization overall and per core, GPU
utilization, peak memory of the board (system RAM: ``mem_peak_gb``) and of
the GPU's allocator (``gpu_mem_peak_gb``, set by the monitor from the
Keras backend, see ``tf_mobileperf.session.gpu_memory``), whether the board
throttled (``throttled``), and per rail how its energy was obtained
(``energy_bound_j``: the half-width of an interval holding the true energy,
and its summary ``energy_method``: "measured" or "interpolated", see
``steps.join``; the total's bound is the sum of its rails', and it is
"measured" only when each of its rails is). Their running totals: ``steps.totals``."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps import reductions
from tf_mobileperf.steps.columns import Columns
from tf_mobileperf.steps.join import INTERPOLATED, MEASURED, StepValues

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
    energy_active_j: dict[str, float | None] = dataclasses.field(default_factory=dict)  # energy - idle power x time
    power_w: dict[str, float | None] = dataclasses.field(default_factory=dict)
    energy_bound_j: dict[str, float | None] = dataclasses.field(default_factory=dict)  # rail -> the energy's bound
    energy_method: dict[str, str | None] = dataclasses.field(default_factory=dict)  # rail -> MEASURED/INTERPOLATED
    cpu_util: float | None = None
    cpu_util_per_core: dict[str, float | None] = dataclasses.field(default_factory=dict)
    process_cpu_util: float | None = None  # the training process's own CPU, % of all cores (session.contention)
    gpu_util: float | None = None
    mem_peak_gb: float | None = None  # system RAM in use (a board memory channel)
    gpu_mem_peak_gb: float | None = None  # the framework allocator's peak on the GPU (not NVML's device memory)
    throttled: bool | None = None  # a throttle state above 0 in the step; None without a throttle sensor
    incomplete: list[str] = dataclasses.field(default_factory=list)
    gap_before_s: float | None = None  # since the previous step ended: input, callbacks, the loop's own work
    channels: dict[str, dict[str, float | None]] = dataclasses.field(default_factory=dict)  # name -> reduction -> value

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    def csv_row(self) -> dict[str, Any]:
        """The step as one ``steps.csv`` row: column (``csv_fields``) -> value."""
        row: dict[str, Any] = {
            "step": self.step,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "duration_s": self.duration_s,
            "batches": self.batches,
            "warmup": int(self.warmup),
            "traced": int(self.traced),
            "failed": int(self.failed),
            "cpu_util": self.cpu_util,
            "process_cpu_util": self.process_cpu_util,
            "gpu_util": self.gpu_util,
            "mem_peak_gb": self.mem_peak_gb,
            "gpu_mem_peak_gb": self.gpu_mem_peak_gb,
            "gap_before_s": self.gap_before_s,
        }
        if self.throttled is not None:  # a column only with a throttle sensor (csv_fields)
            row["throttled"] = int(self.throttled)
        row |= {f"energy_j/{k}": v for k, v in self.energy_j.items()}
        row |= {f"energy_active_j/{k}": v for k, v in self.energy_active_j.items()}
        row |= {f"power_w/{k}": v for k, v in self.power_w.items()}
        row |= {f"energy_bound_j/{k}": v for k, v in self.energy_bound_j.items()}
        row |= {f"energy_method/{k}": v for k, v in self.energy_method.items()}
        row |= {f"{name}/{r}": v for name, values in self.channels.items() for r, v in values.items()}
        return row


#: The columns of ``steps.csv`` that every run has.
BASE_FIELDS = [
    "step",
    "start_s",
    "end_s",
    "duration_s",
    "batches",
    "warmup",
    "traced",
    "failed",
    "cpu_util",
    "process_cpu_util",
    "gpu_util",
    "mem_peak_gb",
    "gpu_mem_peak_gb",
    "gap_before_s",
]


def csv_fields(channels: list[Channel]) -> list[str]:
    """The columns of ``steps.csv``.

    Args:
        channels: The run's channels.

    Returns:
        The paper's columns, ``throttled`` with a throttle sensor, energy, active energy, power, energy bound and
        energy method per rail (and "total" where there is a rail), then every channel's reductions.
    """
    rails = [c.name for c in energy_rails(channels)]
    rails += ["total"] if rails else []
    throttled = ["throttled"] if Roles.of(channels).throttle else []
    return (
        BASE_FIELDS
        + throttled
        + [
            f"{q}/{r}"
            for q in ("energy_j", "energy_active_j", "power_w", "energy_bound_j", "energy_method")
            for r in rails
        ]
        + [f"{c.name}/{r}" for c in channels for r in reductions.names(c.kind)]
    )


def energy_rails(channels: list[Channel]) -> list[Channel]:
    """Channels that give a rail's energy: energy counters, and power channels of rails without one.

    A rail measured both ways (NVML's power and its energy counter) uses the
    counter, which the hardware integrates itself; the report's
    ``energy_sources`` names, per rail, the channel used and the power
    channels left out (``unused_power``).

    Args:
        channels: The run's channels.

    Returns:
        Those channels, in the order of ``channels``.
    """
    counted = {c.rail for c in channels if c.kind == "energy"}
    return [c for c in channels if c.kind == "energy" or (c.kind == "power" and c.rail not in counted)]


def unused_power(rail: Channel, channels: list[Channel]) -> list[str]:
    """The power channels of a rail that its energy does not come from (a counter wins).

    Args:
        rail: The channel the rail's energy comes from (one of ``energy_rails``).
        channels: The run's channels.

    Returns:
        The names of the rail's other power channels.
    """
    return [c.name for c in channels if c.kind == "power" and c.rail == rail.rail and c is not rail]


@dataclasses.dataclass
class Roles:
    """The channels that give each of the paper's quantities, chosen by their roles, never by their names."""

    rails: list[Channel]  # energy per rail
    total: list[Channel]  # the rails whose sum is the total: the "total" rail, else every rail but sub-zones
    cpu: list[Channel]  # overall CPU utilization (no core)
    cores: list[Channel]  # utilization of each CPU core
    gpus: list[Channel]  # GPU utilization, averaged over the GPUs
    memory: list[Channel]  # memory used on the board: its peak is the paper's mem_peak_gb
    throttle: list[Channel]  # states of group "throttle": above 0 while the board holds a clock down

    @classmethod
    def of(cls, channels: list[Channel]) -> Roles:
        """The channels of each role among a run's channels.

        Args:
            channels: The run's channels.

        Returns:
            The roles; a role no channel has is an empty list.
        """
        rails = energy_rails(channels)
        util = [c for c in channels if c.kind == "util"]
        return cls(
            rails=rails,
            total=[c for c in rails if c.group == "total"] or [c for c in rails if c.group != "subzone"],
            cpu=[c for c in util if c.device == "cpu" and c.core is None],
            cores=[c for c in util if c.device == "cpu" and c.core is not None],
            gpus=[c for c in util if c.device == "gpu"],
            memory=[c for c in channels if c.kind == "memory" and c.device == "board"][:1],
            throttle=[c for c in channels if c.kind == "state" and c.group == "throttle"],
        )

    @property
    def input_rail(self) -> str | None:
        """The board's input rail (group "total"), whose energy is the total; None when the total is a sum."""
        inputs = [c.name for c in self.total if c.group == "total"]
        return inputs[0] if len(inputs) == 1 else None


def _fill_energy(
    step: StepRecord, joined: dict[str, Columns], roles: Roles, i: int, idle_w: dict[str, float | None]
) -> None:
    duration = step.duration_s
    for rail in roles.rails:
        columns = joined[rail.name]
        energy = columns.value[i]
        step.energy_j[rail.name] = energy
        step.energy_bound_j[rail.name] = None if columns.bound is None or energy is None else columns.bound[i]
        step.energy_method[rail.name] = None if columns.method is None else columns.method[i]
        step.power_w[rail.name] = _num(energy / duration) if energy is not None and duration > 0 else None
        if not columns.complete[i]:
            step.incomplete.append(rail.name)
    if roles.rails:
        parts = [step.energy_j[c.name] for c in roles.total]
        known = [p for p in parts if p is not None]
        step.energy_j["total"] = sum(known) if len(known) == len(parts) else None
        step.power_w["total"] = (
            step.energy_j["total"] / duration if step.energy_j["total"] is not None and duration > 0 else None
        )
        step.energy_method["total"] = _total_method([step.energy_method[c.name] for c in roles.total])
        bounds = [step.energy_bound_j[c.name] for c in roles.total]
        step.energy_bound_j["total"] = None if None in bounds else sum(b for b in bounds if b is not None)
    for name, energy in step.energy_j.items():
        idle = idle_w.get(name)
        step.energy_active_j[name] = energy - idle * duration if energy is not None and idle is not None else None


def _total_method(parts: list[str | None]) -> str | None:
    """MEASURED when every rail of the total is, INTERPOLATED when one is; None when one is unknown."""
    if not parts or any(p is None for p in parts):
        return None
    return MEASURED if all(p == MEASURED for p in parts) else INTERPOLATED


def _throttled(step: StepRecord, throttle: list[Channel]) -> bool | None:
    """True when a throttle state rose above 0 in the step, False when each stayed at 0; None without a
    throttle state, or when one had no reading in the step and none rose."""
    peaks = [step.channels[c.name].get("peak") for c in throttle]
    if any(p is not None and p > 0 for p in peaks):
        return True
    return None if not peaks or any(p is None for p in peaks) else False


def fill_steps(
    steps: list[StepRecord],
    joined: dict[str, StepValues],
    channels: list[Channel],
    idle_w: dict[str, float | None] | None = None,
) -> None:
    """Writes the joined per-step values into ``steps``: every channel's reductions, then the paper's quantities.

    Args:
        steps: The steps the values were joined for, in the same order; changed in place.
        joined: Channel name -> its per-step values (one entry per step).
        channels: The run's channels.
        idle_w: Idle power (W) per rail and "total"; no active energy for a rail without one (None: for any).
    """
    roles = Roles.of(channels)
    columns = {name: Columns.of(values) for name, values in joined.items()}
    for i, step in enumerate(steps):
        step.channels = {name: {r: v[i] for r, v in c.reductions.items()} for name, c in columns.items()}
        _fill_energy(step, columns, roles, i, idle_w or {})
        step.throttled = _throttled(step, roles.throttle)
        if roles.cpu:
            step.cpu_util = columns[roles.cpu[0].name].value[i]
        step.cpu_util_per_core = {f"cpu{c.core}": columns[c.name].value[i] for c in roles.cores}
        if roles.gpus:
            gpus = [u for c in roles.gpus if (u := columns[c.name].value[i]) is not None]
            step.gpu_util = sum(gpus) / len(gpus) if len(gpus) == len(roles.gpus) else None
        if roles.memory:
            peak = columns[roles.memory[0].name].value[i]
            step.mem_peak_gb = None if peak is None else peak / GIB
