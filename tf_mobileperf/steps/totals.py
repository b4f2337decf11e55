"""Running totals of the measured steps: what the report's summary needs without keeping every step, so a
long run's memory stays bounded."""

from __future__ import annotations

import array
import dataclasses

import numpy as np

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps import reductions
from tf_mobileperf.steps.join import INTERPOLATED, MEASURED, StepValues
from tf_mobileperf.steps.records import StepRecord


@dataclasses.dataclass
class RailSteps:
    """The measured steps in which one rail's energy (or the total's) is known: how many, their time and
    batches; how many were not, and the first of those."""

    complete: int = 0
    time_s: float = 0.0
    batches: int = 0
    unknown: int = 0
    first_unknown: int | None = None

    def add(self, step: StepRecord, known: bool) -> None:
        """Counts one measured step.

        Args:
            step: The measured step.
            known: Whether the rail's energy is known in ``step``.
        """
        if known:
            self.complete += 1
            self.time_s += step.duration_s
            self.batches += step.batches
        else:
            self.unknown += 1
            self.first_unknown = step.step if self.first_unknown is None else self.first_unknown


class StepTotals:
    """Running totals of the measured steps, so a long run needs no step list.

    Holds what the summary needs and nothing per step but the durations
    (8 bytes a step, for the percentiles). Each rail's energy, and the
    total's, is summed over the steps in which that rail's energy is known
    (``rails``: its count, time and batches, ``RailSteps``), so a broken
    sub-rail costs that rail only; ``energy_complete``, ``energy_time_s`` and
    ``energy_batches`` are the total's. Averages of the other quantities
    cover the steps that have them. Per rail it counts the steps whose energy
    it knows by energy method (``methods``) and keeps the update period each
    join estimated (``note_update_periods``; ``update_period_s`` is their
    median).
    """

    def __init__(self) -> None:
        self.count = 0
        self.batches = 0
        self.rails: dict[str, RailSteps] = {}  # rail and "total" -> the measured steps with its energy known
        self._durations = array.array("d")
        self._others = array.array("d")  # cpu_util - process_cpu_util of each step with both known
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self.mem_peak_gb: float | None = None
        self.gpu_mem_peak_gb: float | None = None
        self.throttled = 0  # measured steps in which the board throttled
        self.cores: list[str] | None = None
        self._extremes: dict[str, float] = {}  # "<channel>/peak" -> largest, "<channel>/min" -> smallest
        self.methods: dict[str, dict[str, int]] = {}  # rail -> method -> measured steps with its energy known
        self._update_periods: dict[str, array.array] = {}  # channel -> one estimate per join

    def add_steps(self, steps: list[StepRecord]) -> None:
        """Adds measured steps to the totals.

        Args:
            steps: Measured steps (not warm-up, not failed), one join's.
        """
        for step in steps:
            self._add(step)
        if steps:
            self._add_channels([s.channels for s in steps])

    def _add(self, step: StepRecord) -> None:
        """Adds one step's quantities, all but its channels."""
        self.count += 1
        self.batches += step.batches
        self._durations.append(step.duration_s)
        if self.cores is None:
            self.cores = list(step.cpu_util_per_core)
        values = {
            "cpu_util": step.cpu_util,
            "process_cpu_util": step.process_cpu_util,
            "gpu_util": step.gpu_util,
            "gap_before_s": step.gap_before_s,
        }
        if step.cpu_util is not None and step.process_cpu_util is not None:
            self._others.append(step.cpu_util - step.process_cpu_util)
        values |= {f"core/{core}": u for core, u in step.cpu_util_per_core.items()}
        for rail, energy in step.energy_j.items():
            self.rails.setdefault(rail, RailSteps()).add(step, energy is not None)
            if energy is not None:
                values |= {
                    f"energy/{rail}": energy,
                    f"active/{rail}": step.energy_active_j.get(rail),
                    f"bound/{rail}": step.energy_bound_j.get(rail),
                }
        for rail, method in step.energy_method.items():
            if method is not None:
                counts = self.methods.setdefault(rail, {MEASURED: 0, INTERPOLATED: 0})
                counts[method] += 1
        for key, value in values.items():
            if value is not None:
                self._sums[key] = self._sums.get(key, 0.0) + value
                self._counts[key] = self._counts.get(key, 0) + 1
        if step.mem_peak_gb is not None:
            self.mem_peak_gb = max(self.mem_peak_gb or 0.0, step.mem_peak_gb)
        if step.gpu_mem_peak_gb is not None:
            self.gpu_mem_peak_gb = max(self.gpu_mem_peak_gb or 0.0, step.gpu_mem_peak_gb)
        self.throttled += bool(step.throttled)

    def _add_channels(self, rows: list[dict[str, dict[str, float | None]]]) -> None:
        """Adds each channel's reductions over steps, one reduction at a time (``steps.reductions.COMBINE``); a
        channel or reduction that only some steps have counts over those."""
        pairs = dict.fromkeys((name, reduction) for row in rows for name, values in row.items() for reduction in values)
        for name, reduction in pairs:
            combine = reductions.COMBINE.get(reduction)
            if combine not in ("max", "min", "mean"):
                continue
            known = [v for row in rows if (v := row.get(name, {}).get(reduction)) is not None]
            if not known:
                continue
            key = f"{name}/{reduction}"
            if combine == "mean":
                self._sums[key] = self._sums.get(key, 0.0) + sum(known)
                self._counts[key] = self._counts.get(key, 0) + len(known)
            else:
                pick = max if combine == "max" else min
                self._extremes[key] = pick(self._extremes.get(key, known[0]), pick(known))

    def note_update_periods(self, joined: dict[str, StepValues]) -> None:
        """Keeps the update period of each channel that one join estimated.

        Args:
            joined: One join's values, by channel; channels without an estimated update period are skipped.
        """
        for name, values in joined.items():
            if values.update_period_s is not None:
                self._update_periods.setdefault(name, array.array("d")).append(values.update_period_s)

    def update_period_s(self, channel: str) -> float | None:
        """The median of the update periods the joins estimated for a channel.

        Args:
            channel: The channel's name.

        Returns:
            The median update period (s); None if no join estimated one.
        """
        periods = self._update_periods.get(channel)
        return float(np.median(periods)) if periods else None

    def channel_summary(self, channels: list[Channel]) -> dict[str, dict[str, float | None]]:
        """Each channel over the measured steps: the mean of its step means, its highest peak, its lowest minimum.

        Args:
            channels: The channels to summarize.

        Returns:
            Channel name -> reduction name -> value (None where no step has it). Summed reductions are left
            out (energy is in the report's ``energy_j``).
        """
        out = {}
        for c in channels:
            out[c.name] = {
                r.name: (
                    self.mean(f"{c.name}/{r.name}") if r.combine == "mean" else self._extremes.get(f"{c.name}/{r.name}")
                )
                for r in reductions.BY_KIND[c.kind]
                if r.combine != "sum"
            }
        return out

    def total(self, key: str) -> float | None:
        """Sum of a value over the measured steps.

        Args:
            key: The value's key ("cpu_util", "energy/<rail>", "<channel>/<reduction>"...).

        Returns:
            The sum; None unless every measured step has the value.
        """
        return self._sums[key] if self.count and self._counts.get(key) == self.count else None

    def rail(self, rail: str) -> RailSteps:
        """The measured steps with the energy of a rail known.

        Args:
            rail: The rail, or "total".

        Returns:
            Its ``RailSteps``; an empty one for a rail never seen.
        """
        return self.rails.get(rail, RailSteps())

    @property
    def energy_complete(self) -> int:
        """Measured steps with the total's energy known."""
        return self.rail("total").complete

    @property
    def energy_time_s(self) -> float:
        """The time of the measured steps with the total's energy known."""
        return self.rail("total").time_s

    @property
    def energy_batches(self) -> int:
        """The batches of the measured steps with the total's energy known."""
        return self.rail("total").batches

    def energy(self, rail: str) -> float | None:
        """Energy of a rail over the measured steps with its energy known.

        Args:
            rail: The rail, or "total".

        Returns:
            The energy (J); None if no step has it.
        """
        return self._sums.get(f"energy/{rail}") if self.rail(rail).complete else None

    def energy_bound(self, rail: str) -> float | None:
        """The bound on a rail's energy over the measured steps with it known: the sum of their bounds.

        Args:
            rail: The rail, or "total".

        Returns:
            The bound (J; each step's error may have either sign); None unless each of those steps has one.
        """
        complete = self.rail(rail).complete
        known = complete and self._counts.get(f"bound/{rail}", 0) == complete
        return self._sums[f"bound/{rail}"] if known else None

    def energy_active(self, rail: str) -> float | None:
        """Energy of a rail above its idle power over the measured steps with its energy known.

        Args:
            rail: The rail, or "total".

        Returns:
            The active energy (J); None unless each of those steps has it.
        """
        complete = self.rail(rail).complete
        return self._sums[f"active/{rail}"] if complete and self._counts.get(f"active/{rail}") == complete else None

    def mean(self, key: str) -> float | None:
        """Mean of a value over the measured steps that have it.

        Args:
            key: The value's key ("cpu_util", "core/<core>", "<channel>/<reduction>"...).

        Returns:
            The mean; None if no step has the value.
        """
        n = self._counts.get(key, 0)
        return self._sums[key] / n if n else None

    @property
    def durations(self) -> np.ndarray:
        return np.frombuffer(self._durations, dtype=np.float64) if self.count else np.empty(0)

    @property
    def others(self) -> np.ndarray:
        """Per measured step with both known, the CPU not this process's: ``cpu_util - process_cpu_util`` (%)."""
        return np.frombuffer(self._others, dtype=np.float64) if len(self._others) else np.empty(0)
