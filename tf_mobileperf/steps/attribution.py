"""A counter's energy attributed to steps finer than its update period, with a bound on every step.

An energy counter that updates every ~100 ms (NVML's) gives the exact energy
of each *update interval*, nothing finer. A training step is rarely a whole
number of intervals: its edges fall inside intervals that it shares with the
gaps between steps, exactly where the power changes (the GPU draws more in a
step's kernels than in the input pipeline, Python and callbacks between
steps). Interpolating the counter linearly in time across such an interval
moves energy from the steps into the gaps.

The monitor knows where every step and gap lies inside each interval, so
the split is done by a model fitted over every interval of the samples
joined: one power level while a step runs (``busy_w``) and one between steps
(``idle_w``), by least squares of each interval's energy on its busy and
idle seconds. Steps fall at random phases against the update grid, so the
run as a whole resolves the two levels far finer than one interval does
(equivalent-time sampling, as a sampling oscilloscope does). Each interval's
exact energy is then shared among the steps and gaps inside it in
proportion to the model's energy for each part: the counter is interpolated
against the model's cumulative energy instead of against time
(``Split.cumulative``). Every interval keeps its exact energy, so over
contiguous windows the energies add up to the counter's own difference;
with equal levels this is plain linear interpolation.

Bound. A window's energy is exact over the intervals wholly inside it; each
interval that it only partly covers adds an error, the model's miss on that
interval's split. Its size is taken from the fit's residuals: ``Z`` times
their scale from one interval to the next (which holds both a level's miss
and the update instants' placement error), in proportion to the interval's
length, never more than the hard limit (the window's share of an interval lies between 0 and the interval's
whole energy). A window's ``bound_j`` is the root sum of squares of its
partial intervals' errors: the half-width of an interval that holds its true
energy.

What it assumes: power is roughly constant inside steps and inside gaps,
within the fitted samples (a few seconds), apart from what the residuals
show; the device works in the steps' windows, or in them shifted by a few
ms where that fits clearly better (the distance to the unshifted fit is
then added to each bound). Where the intervals cannot tell the levels apart (no gaps
between steps, every interval the same mix, or a power that does not follow
the steps), one level is fitted, chosen by the Bayesian information
criterion: plain linear interpolation, its bound from its residuals.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

#: A window's error from one partly covered interval: this many root-mean-square residuals of the fit.
Z = 3.0
#: Intervals needed for a two-level fit with residuals to spare; fewer fit one level.
MIN_INTERVALS = 8
#: Where the device's work may lie against a step's window: its start and its end each moved by one of these
#: (s), then by one of ``FINE_S`` around the best (kernels start after the step's Python does, and an
#: asynchronous device works on past the step's end).
SHIFTS_S = np.arange(-0.02, 0.0401, 0.004)
FINE_S = np.arange(-0.003, 0.0031, 0.001)
#: The busy shares of the intervals must spread at least this much (standard deviation) to tell two levels.
MIN_SPREAD = 0.05


def _busy_to(starts: np.ndarray, ends: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Seconds inside the windows (sorted, disjoint) from before the first one to each ``x``."""
    if not len(starts):
        return np.zeros(len(x))
    done = np.concatenate([[0.0], np.cumsum(ends - starts)])
    i = np.searchsorted(ends, x, side="right")  # windows ended by x
    partial = np.clip(x - starts[np.minimum(i, len(starts) - 1)], 0.0, None)
    partial = np.where(i < len(starts), np.minimum(partial, (ends - starts)[np.minimum(i, len(starts) - 1)]), 0.0)
    return done[i] + partial


@dataclasses.dataclass
class Split:
    """The fitted model: power while busy and while idle (W), the residual per interval (J, RMS; None where
    too few intervals to tell), the busy windows it was fitted on, and where these are the steps' windows
    shifted, the fit on the windows as they are (``unshifted``: a device that lags its steps and update
    instants placed off by the same time look alike in the counter, so both stay in the bound)."""

    busy_w: float
    idle_w: float
    residual_j: float | None
    busy_starts: np.ndarray
    busy_ends: np.ndarray
    unshifted: Split | None = None  # the fit with the device busy exactly in the steps' windows, where shifted

    def model_j(self, x: np.ndarray) -> np.ndarray:
        """The model's energy from the origin (time 0) to each ``x``.

        Args:
            x: Times (s).

        Returns:
            One energy (J) per ``x``.
        """
        busy = _busy_to(self.busy_starts, self.busy_ends, x)
        return self.busy_w * busy + self.idle_w * (x - busy)

    def cumulative(self, series_t: np.ndarray, series_cum: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The counter's increase from ``series_t[0]`` to each ``x``, each interval's exact energy shared in
        proportion to the model's.

        Args:
            series_t: The counter's points' times (s), increasing (``CounterSeries.t``).
            series_cum: The counter's increase from ``series_t[0]`` to each point (J; ``CounterSeries.cum``).
            x: Times (s); clamped to the series' span.

        Returns:
            One increase (J) per ``x``.
        """
        return np.interp(self.model_j(x), self.model_j(series_t), series_cum)


def _disjoint(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The windows sorted, each cut where the next begins (steps never overlap; a guard all the same)."""
    order = np.argsort(starts)
    s, e = starts[order], ends[order]
    return s, np.minimum(e, np.append(s[1:], np.inf))


def _two_levels(series_t, energy, length, use, starts, ends) -> tuple[Split, float] | None:
    """The two levels fitted with the device busy in ``starts``..``ends``, and the residuals' sum of squares
    (None where a level comes out negative)."""
    bs, be = _disjoint(starts, ends)
    busy = np.diff(_busy_to(bs, be, series_t))[use]
    design = np.column_stack([busy, length - busy])
    levels, *_ = np.linalg.lstsq(design, energy, rcond=None)
    if not (levels > 0).all():
        return None
    residual = energy - design @ levels
    return Split(float(levels[0]), float(levels[1]), _local_rms(residual), bs, be), float((residual**2).sum())


def _one_level(energy, length, starts, ends) -> tuple[Split, float]:
    """One level over all the intervals (plain linear interpolation), and the residuals' sum of squares."""
    level = float(energy.sum() / length.sum()) if len(length) else 0.0
    residual = energy - level * length
    return Split(level, level, _local_rms(residual), starts, ends), float((residual**2).sum())


def _best_fit(series_t, energy, length, use, starts, ends) -> Split:
    """The model that the Bayesian information criterion prefers (each parameter must earn its keep; noise
    alone would pick some shift): one level; two, with the device busy in the steps' windows; or two, with
    the windows' starts and ends each shifted (by ``SHIFTS_S``, then by ``FINE_S`` around the best). Where
    the intervals cannot tell a busy level from an idle one (a power that does not follow the steps, or
    steps and gaps finer than an interval in the same mix everywhere), one level wins."""
    n = len(energy)

    def bic(sse: float, k: int) -> float:
        return n * np.log(max(sse, 1e-300) / n) + k * np.log(n)

    one, one_sse = _one_level(energy, length, starts, ends)
    found = _two_levels(series_t, energy, length, use, starts, ends)
    best, score = one, bic(one_sse, 1)
    if found and bic(found[1], 2) < score:
        best, score = found[0], bic(found[1], 2)
    unshifted = best
    # The shifts are searched among many candidates: the best of so many beats the unshifted fit by chance
    # far more often than one would, so it must also pay for the search (log of the candidates, twice).
    search = 2 * np.log(len(SHIFTS_S) ** 2 + len(FINE_S) ** 2)
    centre = (0.0, 0.0)
    for grid in (SHIFTS_S, FINE_S):
        for a in centre[0] + grid:
            for b in centre[1] + grid:
                s, e = starts + a, ends + b
                keep = e > s
                shifted = _two_levels(series_t, energy, length, use, s[keep], e[keep]) if keep.any() else None
                if shifted and bic(shifted[1], 4) + search < score:
                    best, score, centre = shifted[0], bic(shifted[1], 4) + search, (a, b)
    if best is not unshifted:
        best.unshifted = unshifted
    return best


def fit(series_t, series_cum, broken, busy_starts, busy_ends) -> Split:
    """Fits the model over every unbroken interval of the series: one level, or two with the device's work
    where it fits best against the steps' windows (see the module docstring).

    Args:
        series_t, series_cum: As ``Split.cumulative``'s.
        broken: Per interval (k = [t[k], t[k+1]]), whether the counter stepped back in it; left out of the fit.
        busy_starts, busy_ends: Each step's start and end (s): the windows the device is busy in.

    Returns:
        The fitted ``Split``: one level with fewer than ``MIN_INTERVALS`` usable intervals or busy shares that
        spread less than ``MIN_SPREAD``, else the model the Bayesian information criterion prefers.
    """
    starts, ends = _disjoint(np.asarray(busy_starts, float), np.asarray(busy_ends, float))
    length = np.diff(series_t)
    energy = np.diff(series_cum)
    use = ~broken & (length > 0)
    length, energy = length[use], energy[use]
    n = len(length)
    share = np.diff(_busy_to(starts, ends, series_t))[use] / length if n else np.zeros(0)
    if n >= MIN_INTERVALS and share.std() >= MIN_SPREAD:
        return _best_fit(series_t, energy, length, use, starts, ends)
    return _one_level(energy, length, starts, ends)[0]


def _local_rms(residual: np.ndarray) -> float | None:
    """The residual's scale from one interval to the next (RMS of successive differences over root 2; None
    with fewer than three): a power that drifts over seconds moves neighbouring intervals alike and does not
    move a split inside one, while what differs from one interval to the next does."""
    return float(np.sqrt(np.mean(np.diff(residual) ** 2) / 2)) if len(residual) >= 3 else None


def energies(split: Split, series_t, series_cum, starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """Each window's energy and its bound: the bound of the best fit (``bounds``) plus, where the best fit
    shifted the device's work, how far the unshifted fit's energy lies from it.

    Args:
        split: The fit (``fit``).
        series_t, series_cum: As ``Split.cumulative``'s.
        starts, ends: Each window's start and end (s).

    Returns:
        (energy in J per window, bound in J per window).
    """
    energy = split.cumulative(series_t, series_cum, ends) - split.cumulative(series_t, series_cum, starts)
    bound = bounds(split, series_t, series_cum, starts, ends)
    if split.unshifted is not None:
        other = split.unshifted
        bound += np.abs(
            other.cumulative(series_t, series_cum, ends) - other.cumulative(series_t, series_cum, starts) - energy
        )
    return energy, bound


def bounds(split: Split, series_t, series_cum, starts, ends) -> np.ndarray:
    """Each window's bound (J): the root sum of squares of its partly covered intervals' errors, each
    ``Z`` residuals (in proportion to the interval's length against the median one: an interval that a
    stalled reader widened holds more to split) and at most the hard limit (see the module docstring).

    Args:
        split: The fit (``fit``); without a residual, each error is the hard limit.
        series_t, series_cum: As ``Split.cumulative``'s.
        starts, ends: Each window's start and end (s).

    Returns:
        The bound in J per window; 0 for a window whose edges fall on updates.
    """
    length = np.diff(series_t)
    scale = length / np.median(length[length > 0]) if (length > 0).any() else np.ones(len(length))
    per_interval = np.full(len(length), np.inf) if split.residual_j is None else Z * split.residual_j * scale
    last = len(series_t) - 2

    def edge_error(x: np.ndarray, side: Literal["left", "right"]) -> tuple[np.ndarray, np.ndarray]:
        """The interval holding each edge ``x``, and the error of the share split at ``x`` (0 on an update)."""
        k = np.clip(np.searchsorted(series_t, x, side=side) - 1, 0, last)
        cut = split.cumulative(series_t, series_cum, x)
        hard = np.maximum(cut - series_cum[k], series_cum[k + 1] - cut)
        partial = (series_t[k] < x) & (x < series_t[k + 1])
        return k, np.where(partial, np.minimum(hard, per_interval[k]), 0.0)

    k_start, start_err = edge_error(np.asarray(starts, float), "right")
    k_end, end_err = edge_error(np.asarray(ends, float), "left")
    apart = np.sqrt(start_err**2 + end_err**2)
    # A window inside one interval: one split, its share between 0 and the interval's energy.
    share = split.cumulative(series_t, series_cum, ends) - split.cumulative(series_t, series_cum, starts)
    whole = series_cum[k_start + 1] - series_cum[k_start]
    split_err = np.minimum(np.maximum(share, whole - share), per_interval[k_start])
    inside = np.where((start_err > 0) | (end_err > 0), split_err, 0.0)
    return np.where(k_start == k_end, inside, apart)
