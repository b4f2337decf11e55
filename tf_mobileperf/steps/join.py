"""Join samples to training steps: energy, mean, peak per step and channel.

Every function here is vectorized over steps and samples (``searchsorted``,
``interp`` and ``reduceat``); nothing loops over samples in Python.

Energy of a step from a power channel is the integral of power over exactly
[start, end]: the trapezoid rule between samples, with the power at the two
edges linearly interpolated, so a constant power P gives P * duration to
float precision.

Energy of a step from a cumulative energy counter (kind "energy") is the
counter's increase over the step, read off the instants the counter
*changed* (``steps.counter``), interpolated to each step's start and end;
over contiguous steps the per-step values add up to the counter's own
difference.

A channel's *update period* is the median spacing of the instants its value
changed (``update_period_s``), which is not its read period. Between its
change points a counter's energy is shared among the steps and the gaps
by a fitted model (``steps.attribution``), not by time. Every step states
a bound on its energy (``StepValues.bound``) and a summary of it
(``StepValues.method``: "measured" where the bound is within
``MEASURED_WITHIN`` of the energy, else "interpolated"). A channel whose
value never changed is taken to update at every read.

A window that the samples do not cover on both sides, or that overlaps a gap
between two valid samples longer than the channel's allowed gap (see
``join``), gets NaN and is flagged incomplete instead of being integrated
across the hole. A counter window must also lie between the series' first
and last points, and may not overlap a backwards step of the counter (a
driver reload, a wrap): the energy there is unknown, never negative.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from tf_mobileperf.format.gaps import GAP_FACTOR, MIN_GAP_S, allowed_gap_s, own_period_s
from tf_mobileperf.sensors.base import RAIL_KINDS, Channel
from tf_mobileperf.steps.counter import update_period_s
from tf_mobileperf.steps.integrate import (
    CounterWindows,
    coverage,
    power_bound,
    window_counter_delta,
    window_energy,
    window_peak,
)
from tf_mobileperf.steps.reductions import BY_KIND


@dataclasses.dataclass
class StepValues:
    """Per-step results of one channel: every reduction its kind has (NaN where unknown), and ``complete``.

    ``value`` is the kind's main reduction (``PRIMARY``): energy for power
    rails and energy counters, the mean for utilization, clocks and
    temperatures, the peak for memory and states. Power and energy channels
    also have their ``update_period_s`` (None where it could not be told)
    and, per step, the energy's ``bound`` (J: the half-width of an interval
    that holds the true energy; NaN where unknown) and its summary
    (``method``: MEASURED where the bound is within ``MEASURED_WITHIN`` of
    the energy, else INTERPOLATED; None where the energy is unknown).
    Utilization, clocks and the other kinds keep the ``update_period_s`` of
    their values too: a utilization reading is the device's busy share over
    that window, not the step's own.
    """

    channel: Channel
    reductions: dict[str, np.ndarray]
    complete: np.ndarray
    update_period_s: float | None = None
    method: np.ndarray | None = None
    bound: np.ndarray | None = None

    @property
    def value(self) -> np.ndarray:
        return self.reductions[PRIMARY[self.channel.kind]]


#: Each kind's main reduction (``StepValues.value``).
PRIMARY = {kind: reductions[0].name for kind, reductions in BY_KIND.items()}


MEASURED, INTERPOLATED = "measured", "interpolated"


#: A step's energy is summarised as MEASURED where its bound is at most this share of it.
MEASURED_WITHIN = 0.05


def energy_method(energy: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Per window, a summary of its bound: MEASURED where it is at most ``MEASURED_WITHIN`` of the energy.

    Args:
        energy: Each window's energy (J; NaN: unknown).
        bound: Each window's bound (J; NaN: unknown).

    Returns:
        An object array: MEASURED, else INTERPOLATED (an unknown bound included); None where the energy is unknown.
    """
    within = np.abs(bound) <= MEASURED_WITHIN * np.abs(energy)  # False where the bound is NaN
    method = np.where(within, MEASURED, INTERPOLATED).astype(object)
    method[~np.isfinite(energy)] = None
    return method


@dataclasses.dataclass
class Windows:
    """One channel's samples and the step windows: the computations the reductions name
    (``reductions.Reduction.computed_by``), each pass over the samples made once."""

    t: np.ndarray
    column: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    max_gap_s: float
    read_s: float
    busy: tuple[np.ndarray, np.ndarray] | None = None  # every step window around (``window_counter_delta``)
    complete: np.ndarray | None = None  # the windows the valid samples cover (``integrate.coverage``)

    @functools.cached_property
    def _integral(self) -> tuple[np.ndarray, np.ndarray]:
        return window_energy(self.t, self.column, self.starts, self.ends, self.max_gap_s, self.complete)

    @functools.cached_property
    def _counter(self) -> CounterWindows:
        return window_counter_delta(
            self.t, self.column, self.starts, self.ends, self.max_gap_s, self.read_s, self.busy, self.complete
        )

    @functools.cached_property
    def _update_period_s(self) -> float | None:
        return update_period_s(self.t, self.column)

    def _per_second(self, total: np.ndarray) -> np.ndarray:
        duration = self.ends - self.starts
        return np.divide(total, duration, out=np.full(len(self.starts), np.nan), where=duration > 0)

    def energy(self) -> np.ndarray:
        """Each window's integral of the values over time (J for power; NaN where incomplete)."""
        return self._integral[0]

    def mean(self) -> np.ndarray:
        """Each window's time-weighted mean of the values (NaN where incomplete or of zero length)."""
        return self._per_second(self._integral[0])

    def counter_delta(self) -> np.ndarray:
        """Each window's increase of the cumulative counter (J; NaN where incomplete)."""
        return self._counter.delta

    def counter_mean(self) -> np.ndarray:
        """Each window's counter increase over its length (W; NaN where incomplete or of zero length)."""
        return self._per_second(self._counter.delta)

    def bound(self, kind: str) -> np.ndarray:
        """Each window's energy bound: a counter's (``CounterWindows.bound``), else from the power samples.

        Args:
            kind: The channel's kind: "energy" for a counter, else power (``power_bound``).

        Returns:
            The bound in J per window; NaN where unknown or the window is incomplete.
        """
        if kind == "energy":
            return self._counter.bound
        held = self._update_period_s is not None and self._update_period_s > 1.5 * self.read_s
        out = power_bound(self.t, self.column, self.starts, self.ends, held)
        return np.where(self._integral[1], out, np.nan)

    def peak(self) -> np.ndarray:
        """Each window's largest value, its edges' interpolated values included (NaN where incomplete)."""
        return window_peak(self.t, self.column, self.starts, self.ends, self.max_gap_s, self.complete)[0]

    def lowest(self) -> np.ndarray:
        """Each window's smallest value, its edges' interpolated values included (NaN where incomplete)."""
        return -window_peak(self.t, -self.column, self.starts, self.ends, self.max_gap_s, self.complete)[0]

    def reduce(self, kind: str) -> tuple[dict[str, np.ndarray], np.ndarray, float | None]:
        """Every reduction of a channel kind, which windows are complete, and the values' update period.

        Args:
            kind: The channel's kind (a key of ``reductions.BY_KIND``).

        Returns:
            (reduction name -> per-window values, a bool per window, the update period in s from the instants the
            values changed: None with fewer than two changes).
        """
        values = {r.name: getattr(self, r.computed_by)() for r in BY_KIND[kind]}
        if kind == "energy":
            return values, self._counter.complete, self._counter.update_period_s
        return values, self._integral[1], self._update_period_s


def join(
    t: np.ndarray,
    values: np.ndarray,
    channels: list[Channel],
    starts: np.ndarray,
    ends: np.ndarray,
    period_s: float,
    gap_factor: float = GAP_FACTOR,
    min_gap_s: float = MIN_GAP_S,
    busy: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict[str, StepValues]:
    """Joins samples to step windows: every channel gets the reductions of its kind (``reductions.BY_KIND``).

    Args:
        t: The samples' times (s), increasing, shape (n,).
        values: The samples, shape (n, channels) (NaN: no reading).
        channels: The columns' channels, in order.
        starts, ends: Each step window's start and end (s).
        period_s: The sampler period (s). A channel's allowed gap between valid samples is ``gap_factor`` times
            the larger of this and its own slower rate (estimated from its samples), at least ``min_gap_s`` (s): a
            hiccup of a few periods is sampling jitter (in the report's ``sampling.gaps``), a longer one a hole.
        gap_factor, min_gap_s: See ``period_s``.
        busy: (starts, ends) of every step around the windows, joined now or not (a counter's update interval
            is shared among all the steps and gaps inside it); by default the windows themselves.

    Returns:
        Channel name -> ``StepValues``: power rails get their energy (J, the integral), mean and peak power; energy
        counters their increase (between change points) and mean power; utilization, clocks, memory and
        temperatures time-weighted means and their peak (the lowest clock); states their peak. Each has its update
        period; power and energy channels each step's energy bound and its summary (``energy_method``).

    Raises:
        ValueError: ``starts`` and ``ends`` differ in shape, or a window ends before it starts.
    """
    t = np.asarray(t, dtype=np.float64)
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if starts.shape != ends.shape or np.any(ends < starts):
        raise ValueError("step windows need start <= end, one start per end")
    out = {}
    # Channels read together (one sensor's) have valid values in the same rows: their own period, allowed
    # gap and covered windows are worked out once for them all.
    shared: dict[bytes, tuple[float, float, np.ndarray]] = {}
    for i, channel in enumerate(channels):
        column = values[:, i]
        valid = np.isfinite(column)
        if (key := valid.tobytes()) not in shared:
            own = own_period_s(t, column)
            read = max(period_s, period_s if own is None else own)
            max_gap = allowed_gap_s(read, gap_factor, min_gap_s)
            shared[key] = (read, max_gap, coverage(t[valid], starts, ends, max_gap))
        read, max_gap, complete = shared[key]
        windows = Windows(t, column, starts, ends, max_gap, read, busy, complete.copy())
        reductions, complete, update = windows.reduce(channel.kind)
        method = bound = None
        if channel.kind in RAIL_KINDS:
            bound = windows.bound(channel.kind)
            method = energy_method(reductions["energy_j"], bound)
        out[channel.name] = StepValues(channel, reductions, complete, update, method, bound)
    return out
