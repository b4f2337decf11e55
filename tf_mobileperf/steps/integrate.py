"""Per-window reductions of one channel's samples: the integral of power over each window, the
largest value in it, a cumulative counter's increase over it, and the bound on each window's energy.

Every function is vectorized over windows and samples (``searchsorted``, ``interp`` and ``reduceat``);
nothing loops over samples in Python. A window that the samples do not cover, or that overlaps a gap
longer than ``max_gap_s``, gets NaN and is flagged incomplete (``steps.join`` says how each is used).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from tf_mobileperf.steps import attribution
from tf_mobileperf.steps.counter import counter_series


def _cumulative(t: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Cumulative trapezoid integral of v over t, F[0] = 0."""
    out = np.zeros_like(v)
    np.cumsum(0.5 * (v[1:] + v[:-1]) * np.diff(t), out=out[1:])
    return out


def _interval_of(t: np.ndarray, x: np.ndarray, side: Literal["left", "right"] = "right") -> np.ndarray:
    """The index k of the interval [t[k], t[k+1]] that holds each x (``side``: which one at a sample), clipped
    to the first and last (np.minimum and np.maximum: np.clip's fixed cost is several times theirs)."""
    return np.minimum(np.maximum(np.searchsorted(t, x, side=side) - 1, 0), len(t) - 2)


def _integral_to(t: np.ndarray, v: np.ndarray, cum: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Integral from t[0] to each x (t[0] <= x <= t[-1]) of the piecewise-linear v."""
    k = _interval_of(t, x)
    dt = t[k + 1] - t[k]
    frac = np.divide(x - t[k], dt, out=np.zeros_like(x), where=dt > 0)
    vx = v[k] + frac * (v[k + 1] - v[k])
    return cum[k] + 0.5 * (v[k] + vx) * (x - t[k])


def integral_at(t: np.ndarray, v: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The integral of the piecewise-linear ``v`` from ``t[0]`` to each ``x``.

    Args:
        t: Increasing times (s), at least two.
        v: The values at ``t``.
        x: Where each integral ends; clipped to [t[0], t[-1]].

    Returns:
        One integral per ``x`` (power in W gives J).
    """
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


def _interval_max(t: np.ndarray, per_interval: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Largest ``per_interval[k]`` (interval k = [t[k], t[k+1]]) over the intervals each window overlaps."""
    first = _interval_of(t, starts)
    last = _interval_of(t, ends, side="left")
    return _range_reduce(np.maximum, per_interval, first, np.maximum(last + 1, first + 1))


def coverage(t: np.ndarray, starts: np.ndarray, ends: np.ndarray, max_gap_s: float) -> np.ndarray:
    """Which windows are complete: the valid samples bracket the window and no interval inside it exceeds
    ``max_gap_s``. Channels read together share it (``steps.join`` works it out once for them).

    Args:
        t: The times of a channel's valid samples (s), increasing.
        starts, ends: Each window's start and end (s).
        max_gap_s: The longest interval a complete window may overlap.

    Returns:
        A bool per window.
    """
    if len(t) < 2:
        return np.zeros(len(starts), dtype=bool)
    covered = (t[0] <= starts) & (ends <= t[-1])
    return covered & (_interval_max(t, np.diff(t), starts, ends) <= max_gap_s)


def _per_window(compute, t, values, starts, ends, max_gap_s, complete=None) -> tuple[np.ndarray, np.ndarray]:
    """Runs ``compute(t, v, s, e)`` on the finite samples for the complete windows only (``complete``: their
    ``coverage``, where already known)."""
    ok = np.isfinite(values)
    t, values = t[ok], values[ok]
    complete = coverage(t, starts, ends, max_gap_s) if complete is None else complete
    out = np.full(len(starts), np.nan)
    if complete.any():
        out[complete] = compute(t, values, starts[complete], ends[complete])
    return out, complete


def _energy(t, power, s, e):
    cum = _cumulative(t, power)
    return _integral_to(t, power, cum, e) - _integral_to(t, power, cum, s)


def _peak(t, values, s, e):
    inside = _range_reduce(np.fmax, values, np.searchsorted(t, s, "left"), np.searchsorted(t, e, "right"))
    return np.fmax(inside, np.maximum(np.interp(s, t, values), np.interp(e, t, values)))


def window_energy(t, power, starts, ends, max_gap_s, complete=None) -> tuple[np.ndarray, np.ndarray]:
    """The energy of each window from power samples: the trapezoid integral between its edges.

    Args:
        t: The rows' times (s), increasing.
        power: The channel's values in those rows (NaN: no reading).
        starts, ends: Each window's start and end (s).
        max_gap_s: The longest stretch without a valid value a complete window may overlap.
        complete: The windows' ``coverage``, where the caller knows it already (channels read together).

    Returns:
        (energy in J per window, NaN where incomplete; which windows are complete).
    """
    return _per_window(_energy, t, power, starts, ends, max_gap_s, complete)


@dataclasses.dataclass
class CounterWindows:
    """``window_counter_delta``'s result: per window the counter's increase (NaN where incomplete),
    ``complete``, its ``bound`` (J, the half-width of an interval holding the true increase; NaN where
    incomplete); the counter's ``update_period_s`` and the fitted ``split`` (``steps.attribution``; None
    without one)."""

    delta: np.ndarray
    complete: np.ndarray
    update_period_s: float | None
    bound: np.ndarray
    split: attribution.Split | None = None


def window_counter_delta(
    t, counter, starts, ends, max_gap_s, read_s: float | None = None, busy: tuple | None = None, complete=None
) -> CounterWindows:
    """The increase of a cumulative counter over each window and its bound: each update interval's exact
    energy shared among the busy windows and the time between them by a fitted model (``steps.attribution``).

    Args:
        t: The rows' times (s), increasing.
        counter: The counter's readings in those rows (J; NaN: no reading).
        starts, ends: Each window's start and end (s).
        max_gap_s: The longest stretch without a valid reading a complete window may overlap.
        read_s: The counter's read interval (s; by default the median one).
        busy: (starts, ends) of every step around the windows, joined now or not (by default the windows).
        complete: The windows' ``coverage``, where the caller knows it already.

    Returns:
        ``CounterWindows``.
    """
    ok = np.isfinite(counter)
    t, counter = t[ok], counter[ok]
    out = np.full(len(starts), np.nan)
    complete = coverage(t, starts, ends, max_gap_s) if complete is None else complete.copy()
    if not complete.any():
        return CounterWindows(out, complete, None, out.copy())
    series = counter_series(t, counter, read_s)
    complete &= (series.t[0] <= starts) & (ends <= series.t[-1])
    if len(series.t) > 1:
        complete &= ~(_interval_max(series.t, series.broken.astype(np.float64), starts, ends) > 0)
    if len(series.t) < 2 or not complete.any():
        return CounterWindows(out, complete, series.update_period_s, out.copy())
    busy_starts, busy_ends = busy if busy is not None else (starts, ends)
    split = attribution.fit(series.t, series.cum, series.broken, busy_starts, busy_ends)
    bound = np.full(len(starts), np.nan)
    out[complete], bound[complete] = attribution.energies(split, series.t, series.cum, starts[complete], ends[complete])
    return CounterWindows(out, complete, series.update_period_s, bound, split)


def window_peak(t, values, starts, ends, max_gap_s, complete=None) -> tuple[np.ndarray, np.ndarray]:
    """The largest value in each window: of the samples inside it and the values interpolated at its edges.

    Args:
        t, values, starts, ends, max_gap_s, complete: As ``window_energy``'s (``values`` for ``power``).

    Returns:
        (the largest value per window, NaN where incomplete; which windows are complete).
    """
    return _per_window(_peak, t, values, starts, ends, max_gap_s, complete)


def power_bound(t: np.ndarray, power: np.ndarray, starts: np.ndarray, ends: np.ndarray, held: bool) -> np.ndarray:
    """Each window's bound on its energy from power samples, from its two edges: between the points around
    an edge where the value changed, the power may have moved anywhere between their two values.

    A value read as it changes (a 5 ms rail) is off by at most that change times the shorter side of the
    edge; a ``held`` one (updated slower than it is read, as NVML's power fields: each value the power of
    one instant or a part of the update interval) by the change times the whole interval.

    Args:
        t: The rows' times (s), increasing.
        power: The rail's power in those rows (W; NaN: no reading).
        starts, ends: Each window's start and end (s).
        held: Whether the values are held between updates slower than the reads.

    Returns:
        The bound in J per window (NaN with fewer than two readings).
    """
    ok = np.isfinite(power)
    t, power = t[ok], power[ok]
    if len(t) < 2:
        return np.full(len(starts), np.nan)
    keep = np.concatenate([[True], power[1:] != power[:-1]])
    keep[-1] = True
    t, power = t[keep], power[keep]

    def edge(x: np.ndarray) -> np.ndarray:
        k = _interval_of(t, x)
        side = t[k + 1] - t[k] if held else np.clip(np.minimum(x - t[k], t[k + 1] - x), 0.0, None)
        return np.abs(power[k + 1] - power[k]) * side

    return edge(starts) + edge(ends)
