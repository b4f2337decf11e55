"""Join samples to training steps: energy, mean, peak per step and channel.

Every function here is vectorized over steps and samples (``searchsorted``
and ``reduceat``); nothing loops over samples in Python.

Energy of a step is the integral of power over exactly [start, end]: the
trapezoid rule between samples, with the power at the two edges linearly
interpolated, so a constant power P gives P * duration to float precision.
A window that the samples do not cover on both sides, or that overlaps a gap
between two valid samples longer than the channel's allowed gap (see
``join``), gets NaN and is flagged incomplete instead of being integrated
across the hole.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf_tensorboard.metadata import GAP_FACTOR, MIN_GAP_S, allowed_gap_s, own_period_s


def _cumulative(t: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Cumulative trapezoid integral of v over t, F[0] = 0."""
    out = np.zeros_like(v)
    np.cumsum(0.5 * (v[1:] + v[:-1]) * np.diff(t), out=out[1:])
    return out


def _integral_to(t: np.ndarray, v: np.ndarray, cum: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Integral from t[0] to each x (t[0] <= x <= t[-1]) of the piecewise-linear v."""
    k = np.clip(np.searchsorted(t, x, side="right") - 1, 0, len(t) - 2)
    dt = t[k + 1] - t[k]
    frac = np.divide(x - t[k], dt, out=np.zeros_like(x), where=dt > 0)
    vx = v[k] + frac * (v[k + 1] - v[k])
    return cum[k] + 0.5 * (v[k] + vx) * (x - t[k])


def integral_at(t: np.ndarray, v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Integral of the piecewise-linear v from t[0] to each x (clipped to [t[0], t[-1]])."""
    return _integral_to(t, v, _cumulative(t, v), np.clip(x, t[0], t[-1]))


def _range_reduce(ufunc: np.ufunc, values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """ufunc.reduce(values[lo[i]:hi[i]]) for every i; NaN where the range is empty."""
    out = np.full(len(lo), np.nan)
    used = hi > lo
    if used.any():
        idx = np.empty(2 * used.sum(), dtype=np.intp)
        idx[0::2], idx[1::2] = lo[used], hi[used]
        padded = np.append(values, np.nan)  # hi may equal len(values)
        out[used] = ufunc.reduceat(padded, idx)[0::2]
    return out


def _coverage(t: np.ndarray, starts: np.ndarray, ends: np.ndarray, max_gap_s: float) -> np.ndarray:
    """True where samples bracket the window and no interval inside it exceeds max_gap_s."""
    if len(t) < 2:
        return np.zeros(len(starts), dtype=bool)
    covered = (t[0] <= starts) & (ends <= t[-1])
    # Intervals overlapping [s, e] are k in [first, last], interval k = [t[k], t[k+1]].
    first = np.clip(np.searchsorted(t, starts, side="right") - 1, 0, len(t) - 2)
    last = np.clip(np.searchsorted(t, ends, side="left") - 1, 0, len(t) - 2)
    longest = _range_reduce(np.maximum, np.diff(t), first, np.maximum(last + 1, first + 1))
    return covered & (longest <= max_gap_s)


@dataclasses.dataclass
class StepValues:
    """Per-step results of one channel: every reduction its kind has (NaN where unknown), and ``complete``.

    ``value`` is the kind's main reduction (``PRIMARY``): energy for power
    rails and energy counters, the mean for utilization, clocks and
    temperatures, the peak for memory and states.
    """

    channel: Channel
    reductions: dict[str, np.ndarray]
    complete: np.ndarray

    @property
    def value(self) -> np.ndarray:
        return self.reductions[PRIMARY[self.channel.kind]]


def _per_window(compute, t, values, starts, ends, max_gap_s) -> tuple[np.ndarray, np.ndarray]:
    """Runs ``compute(t, v, s, e)`` on the finite samples for the complete windows only."""
    ok = np.isfinite(values)
    t, values = t[ok], values[ok]
    complete = _coverage(t, starts, ends, max_gap_s)
    out = np.full(len(starts), np.nan)
    if complete.any():
        out[complete] = compute(t, values, starts[complete], ends[complete])
    return out, complete


def _energy(t, power, s, e):
    cum = _cumulative(t, power)
    return _integral_to(t, power, cum, e) - _integral_to(t, power, cum, s)


def _counter_delta(t, counter, s, e):
    return np.interp(e, t, counter) - np.interp(s, t, counter)


def _peak(t, values, s, e):
    inside = _range_reduce(np.fmax, values, np.searchsorted(t, s, "left"), np.searchsorted(t, e, "right"))
    return np.fmax(inside, np.maximum(np.interp(s, t, values), np.interp(e, t, values)))


def window_energy(t, power, starts, ends, max_gap_s) -> tuple[np.ndarray, np.ndarray]:
    """Energy (J) of each window from power samples (W); NaN where incomplete."""
    return _per_window(_energy, t, power, starts, ends, max_gap_s)


def window_counter_delta(t, counter, starts, ends, max_gap_s) -> tuple[np.ndarray, np.ndarray]:
    """Increase of a cumulative counter (J) over each window, interpolated at the edges."""
    return _per_window(_counter_delta, t, counter, starts, ends, max_gap_s)


def window_peak(t, values, starts, ends, max_gap_s) -> tuple[np.ndarray, np.ndarray]:
    """Largest value in each window: samples inside it and the edge interpolations."""
    return _per_window(_peak, t, values, starts, ends, max_gap_s)


#: The reductions of each channel kind, in order; the first is the kind's main one (``StepValues.value``).
#: "energy_j" of a power rail is its integral; of an energy counter, its increase.
REDUCTIONS = {
    "power": ("energy_j", "mean", "peak"),
    "energy": ("energy_j", "mean"),
    "util": ("mean", "peak"),
    "clock": ("mean", "min"),
    "memory": ("peak", "mean"),
    "temperature": ("mean", "peak"),
    "state": ("peak",),
}
PRIMARY = {kind: names[0] for kind, names in REDUCTIONS.items()}


def _reduce(kind: str, t, column, starts, ends, max_gap) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every reduction of ``kind`` over the windows, and which windows are complete."""
    duration = ends - starts

    def per_second(total: np.ndarray) -> np.ndarray:
        return np.divide(total, duration, out=np.full(len(starts), np.nan), where=duration > 0)

    if kind == "energy":
        delta, complete = window_counter_delta(t, column, starts, ends, max_gap)
        return {"energy_j": delta, "mean": per_second(delta)}, complete
    integral, complete = window_energy(t, column, starts, ends, max_gap)
    out = {"energy_j": integral} if kind == "power" else {}
    out["mean"] = per_second(integral)
    names = REDUCTIONS[kind]
    if "peak" in names:
        out["peak"] = window_peak(t, column, starts, ends, max_gap)[0]
    if "min" in names:
        out["min"] = -window_peak(t, -column, starts, ends, max_gap)[0]
    return {name: out[name] for name in names}, complete


def join(
    t: np.ndarray,
    values: np.ndarray,
    channels: list[Channel],
    starts: np.ndarray,
    ends: np.ndarray,
    period_s: float,
    gap_factor: float = GAP_FACTOR,
    min_gap_s: float = MIN_GAP_S,
) -> dict[str, StepValues]:
    """Joins samples (``t`` (n,), ``values`` (n, channels)) to step windows.

    Every channel gets the reductions of its kind (``REDUCTIONS``): power
    rails their energy in J (the integral), mean and peak power; energy
    counters their increase and mean power; utilization, clocks, memory and
    temperatures time-weighted means and their peak (the lowest clock);
    states their peak.

    Args:
        period_s: The sampler period. A channel's allowed gap between two
            valid samples is ``gap_factor`` times the larger of this and the
            channel's own slower rate (estimated from its samples), and at
            least ``min_gap_s``: a scheduling hiccup of a few periods is
            sampling jitter (counted in the report's ``sampling.gaps``), a
            sensor that stopped answering is a hole.
    """
    t = np.asarray(t, dtype=np.float64)
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if starts.shape != ends.shape or np.any(ends < starts):
        raise ValueError("step windows need start <= end, one start per end")
    out = {}
    for i, channel in enumerate(channels):
        column = values[:, i]
        own = own_period_s(t, column)
        max_gap = allowed_gap_s(max(period_s, period_s if own is None else own), gap_factor, min_gap_s)
        reductions, complete = _reduce(channel.kind, t, column, starts, ends, max_gap)
        out[channel.name] = StepValues(channel, reductions, complete)
    return out
