"""A cumulative counter's change points: when each of its values appeared, on its fitted update grid.

Energy of a step from a cumulative energy counter (kind "energy") is the
counter's increase over the step, read off the instants the counter
*changed*, not off every reading. A counter is often read faster than it
updates (NVML's total energy: read every 10 ms, updated every ~100 ms), and
its readings are then a staircase; interpolating the readings would give a
10 ms step either 0 J or a whole update's energy. So the readings are
reduced to change points (``counter_series``): each new value gets the
instant it appeared, known to lie between the last reading still showing
the old value and the first showing the new one; a counter that updates on
a regular grid is placed on the grid fitted through those brackets
(``_on_update_grid``; a change whose bracket a stalled reader widened
past 1.5 times the median one does not place the grid, and is put at the
last update inside its bracket), else at their midpoints (error: +-half a
read interval). The first reading's value appeared one update period before the
first change, and the series starts there. Where the counter changes at nearly every read (its update
period is under 1.5 read intervals), each reading is the counter at its own
read instant instead. The series ends at the last change, or, for a value
held longer than one update period, one update period before the last
reading (it is known until then); a window ending later is incomplete until
the counter updates again. The counter is interpolated linearly between
these points to each step's start and end; over contiguous steps the
per-step values add up to the counter's own difference.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tf_mobileperf.format.gaps import median, median_spacing
from tf_mobileperf.sensors.base import Channel


def _changes(t: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, float | None]:
    """Where valid readings changed value: the index of each first reading of a new value, the midpoint
    between it and the reading before, and the update period (None with fewer than two changes).

    The period is the midpoints' span over the number of periods in it, each spacing rounded to whole
    periods of their median spacing: read at 30 ms, a 100 ms counter's spacings are 90 or 120 ms and
    their median alone is either."""
    j = np.flatnonzero(v[1:] != v[:-1]) + 1
    midpoints = 0.5 * (t[j - 1] + t[j])
    median = median_spacing(midpoints)
    if not median:
        return j, midpoints, median
    narrow = midpoints[_narrow(t[j - 1], t[j])]
    spacing = np.diff(narrow)
    single = spacing[spacing < 1.5 * median]  # one update apart: alternately short and long, right on average
    first = float(single.mean()) if len(single) else median
    periods = np.maximum(1.0, np.rint(spacing / first)).sum()
    return j, midpoints, float((narrow[-1] - narrow[0]) / periods) if periods else median


def _narrow(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """The changes whose bracket is at most ``WIDE`` times the median one (all of them where fewer than
    three are): a bracket that a stalled reader widened (a descheduled thread, a frozen VM) does not place
    the grid, its midpoint far from the change."""
    width = after - before
    narrow = width <= WIDE * median(width)
    return narrow if narrow.sum() >= 3 else np.ones(len(width), dtype=bool)


def update_period_s(t: np.ndarray, v: np.ndarray) -> float | None:
    """The period at which the readings change (``_changes``: spacings rounded to whole periods).

    Args:
        t: The rows' times (s), increasing.
        v: A channel's readings in those rows (NaN: no reading).

    Returns:
        Seconds; None with fewer than two changes.
    """
    ok = np.isfinite(v)
    return _changes(t[ok], v[ok])[2]


#: Changes on each side of a change that place it on the grid (``_on_update_grid``).
GRID_WINDOW = 16


#: A change's bracket (the readings before and after it) wider than this many times the median one was
#: widened by a stalled reader (``_narrow``).
WIDE = 1.5


def _on_update_grid(before: np.ndarray, after: np.ndarray, period_s: float) -> np.ndarray:
    """The instants a counter changed, each known to lie in (``before``, ``after``]: a counter that updates
    on a regular grid (NVML's, every ~100 ms) is placed on that grid, clipped into each bracket.

    The grid's rate is the least-squares line through the brackets' midpoints against each change's index
    on the grid (every spacing rounded to whole periods, so a skipped update keeps its place). Its offset
    near each change is what the brackets of the ``GRID_WINDOW`` changes on either side allow together
    (the middle of their intersection): read at a rate that is no divisor of the update period, the
    brackets fall at other phases of the grid and their intersection is much narrower than any one of
    them. Where they do not intersect (an update clock that jitters), the mean of their midpoints. The
    clip keeps each instant inside what was read, so it is never worse than its own bracket."""
    mid = 0.5 * (before + after)
    if len(mid) < 3:
        return mid
    narrow = _narrow(before, after)
    n = np.concatenate([[0.0], np.cumsum(np.maximum(1.0, np.rint(np.diff(mid[narrow]) / period_s)))])
    slope, intercept = np.polyfit(n, mid[narrow] - mid[narrow][0], 1)
    base = mid[narrow][0] + intercept
    # Each change's update on the grid: a narrow bracket's nearest; a wide one's last inside it (the value
    # read after it was reached at its last update), its nearest where the line misses the bracket.
    index = np.rint((mid - base) / slope)
    last = np.floor((after - base) / slope)
    inside = ~narrow & (base + slope * last > before)
    index[inside] = last[inside]
    line = base + slope * index
    width = 2 * GRID_WINDOW + 1
    lo = np.lib.stride_tricks.sliding_window_view(np.pad(before - line, GRID_WINDOW, constant_values=-np.inf), width)
    hi = np.lib.stride_tricks.sliding_window_view(np.pad(after - line, GRID_WINDOW, constant_values=np.inf), width)
    low, high = lo.max(axis=1), hi.min(axis=1)
    centre = np.lib.stride_tricks.sliding_window_view(np.pad(mid - line, GRID_WINDOW, constant_values=np.nan), width)
    offset = np.where(low <= high, 0.5 * (low + high), np.nanmean(centre, axis=1))
    return np.clip(line + offset, before, after)


@dataclasses.dataclass
class CounterSeries:
    """A cumulative counter reduced to the points where its value is known (see the module docstring).

    ``cum`` is the counter's increase from ``t[0]`` to each point; a backwards step (a reload) adds nothing
    and marks its interval ``broken`` (interval k = [t[k], t[k+1]])."""

    t: np.ndarray
    cum: np.ndarray
    broken: np.ndarray
    update_period_s: float | None


def counter_series(t: np.ndarray, v: np.ndarray, read_s: float | None = None) -> CounterSeries:
    """The change points of the finite counter readings ``v`` at ``t`` (at least one reading).

    A new value appeared at the midpoint between the last reading of the old value and the first of the
    new one (+-half a read interval); where the counter changes at nearly every read (its update period
    is under 1.5 read intervals ``read_s``, by default the median one), at the reading's own instant.
    Where the counter steps back (a driver reload: it starts again near 0, on an update clock of its own),
    the readings after it are a new series with its own grid, known from its first change on (when the
    reload came is unknown), and the interval between the two is ``broken``: no grid is fitted across the
    fault.

    Args:
        t: The readings' times (s), increasing.
        v: The counter's finite readings (J), at least one.
        read_s: The read interval (s); by default the median one.

    Returns:
        ``CounterSeries``.
    """
    read_s = median_spacing(t) if read_s is None else read_s
    cuts = np.flatnonzero(v[1:] < v[:-1]) + 1
    if not len(cuts):
        return _segment(t, v, read_s)
    parts = [_segment(tp, vp, read_s) for tp, vp in zip(np.split(t, cuts), np.split(v, cuts))]
    for k in range(1, len(parts)):
        if len(parts[k].t) > 1:  # when the reload came, and from what value, is unknown: from its first change
            parts[k] = CounterSeries(
                parts[k].t[1:], parts[k].cum[1:] - parts[k].cum[1], parts[k].broken[1:], parts[k].update_period_s
            )
        else:  # one value since the reload: known from its first reading on, after the last before it
            parts[k].t[0] = max(parts[k].t[0], np.nextafter(parts[k - 1].t[-1], np.inf))
    offsets = np.cumsum([0.0] + [p.cum[-1] for p in parts[:-1]])
    longest = max(parts, key=lambda p: len(p.t))
    return CounterSeries(
        np.concatenate([p.t for p in parts]),
        np.concatenate([p.cum + offset for p, offset in zip(parts, offsets)]),
        np.concatenate([np.concatenate([p.broken, [True]]) for p in parts])[:-1],
        longest.update_period_s,
    )


def _segment(t: np.ndarray, v: np.ndarray, read_s: float | None) -> CounterSeries:
    """``counter_series`` of readings that never step back: one update grid."""
    j, instants, period = _changes(t, v)
    if period is not None and read_s is not None and period < 1.5 * read_s:
        instants = t[j]
    elif period is not None:
        instants = _on_update_grid(t[j - 1], t[j], period)
    # The first reading's value appeared at the update before the first change (an update period earlier),
    # not when it was first read: placed at its read it would put a whole update's energy after it.
    first = t[:1] if period is None or not len(instants) else np.minimum(t[:1], instants[:1] - period)
    points_t = np.concatenate([first, instants])
    steps = np.diff(np.concatenate([v[:1], v[j]]))
    return CounterSeries(points_t, np.concatenate([[0.0], np.cumsum(steps)]), np.zeros(len(steps), bool), period)


#: A counter that read the same value for this many of its update periods has stopped (a stuck counter or
#: driver): the windows after its last change have no energy from it.
FROZEN_PERIODS = 10


def frozen(t: np.ndarray, v: np.ndarray) -> tuple[float, float] | None:
    """Whether a counter stopped changing while it was read: it read one value for over ``FROZEN_PERIODS`` of
    its update periods up to its last reading.

    Args:
        t: The rows' times (s), increasing.
        v: The counter's readings in those rows (NaN: no reading).

    Returns:
        (the time of the first reading of that value, seconds from it to the last reading); None while it
        changes, or with fewer than two changes.
    """
    ok = np.isfinite(v)
    j, _, period = _changes(t[ok], v[ok])
    if period is None or not len(j):
        return None
    since = float(t[ok][j[-1]])
    unchanged = float(t[ok][-1]) - since
    return (since, unchanged) if unchanged > FROZEN_PERIODS * period else None


def settled_until(t: np.ndarray, values: np.ndarray, channels: list[Channel], stale_s: float) -> float:
    """The time up to which every energy counter's series is final: the earliest last point of the counters.

    Args:
        t: The rows' times (s), increasing.
        values: The rows' values, one column per channel.
        channels: The columns' channels; those of kind "energy" are the counters.
        stale_s: A counter without a valid reading in the last ``stale_s`` is left out: its windows will be
            incomplete whatever comes.

    Returns:
        Seconds; inf without a counter.
    """
    ends = []
    for i, channel in enumerate(channels):
        if channel.kind != "energy":
            continue
        ok = np.isfinite(values[:, i])
        if ok.any() and t[ok][-1] >= t[-1] - stale_s:
            ends.append(counter_series(t[ok], values[ok, i]).t[-1])
    return min(ends, default=np.inf)
