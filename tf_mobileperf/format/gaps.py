"""How a stored series is read: the gap rule.

A channel's allowed gap between two valid samples is ``GAP_FACTOR`` of its
periods, and at least ``MIN_GAP_S``. Longer is a hole (the sensor stopped
answering): the join marks a step over it incomplete, the dashboard breaks
the line there; shorter is sampling jitter. No TensorFlow.
"""

from __future__ import annotations

import numpy as np

GAP_FACTOR = 3.0
MIN_GAP_S = 0.1


def allowed_gap_s(period_s: float, gap_factor: float = GAP_FACTOR, min_gap_s: float = MIN_GAP_S) -> float:
    """The longest stretch without a valid sample that is still jitter, not a hole.

    Args:
        period_s: The channel's read period (s).
        gap_factor: How many periods a stretch may last.
        min_gap_s: The shortest allowed stretch, whatever the period.

    Returns:
        Seconds: ``gap_factor`` periods, at least ``min_gap_s``.
    """
    return max(gap_factor * period_s, min_gap_s)


def median(values: np.ndarray) -> float:
    """The median of finite values, equal to ``np.median``'s, from one sort: ``np.median``'s fixed cost is
    about ten sorts of the few hundred values a join looks at, per channel.

    Args:
        values: A non-empty 1-D array of finite values.

    Returns:
        The middle value; the mean of the two middle ones for an even count.
    """
    ordered = np.sort(values)
    half = len(ordered) // 2
    return float(ordered[half] if len(ordered) % 2 else (ordered[half - 1] + ordered[half]) / 2)


def median_spacing(t: np.ndarray, at_most: int = 4096) -> float | None:
    """The median interval of the increasing ``t``: a robust typical spacing, cheap for a million samples
    (the join asks for it per sensor at every join).

    Args:
        t: Increasing times (s).
        at_most: The most intervals looked at, spread evenly over ``t``.

    Returns:
        Seconds; None with fewer than two times.
    """
    spacing = np.diff(t)
    if len(spacing) > at_most:
        spacing = spacing[:: len(spacing) // at_most]
    return median(spacing) if len(spacing) else None


def own_period_s(t: np.ndarray, column: np.ndarray) -> float | None:
    """A channel's own period: the median interval between its finite readings.

    Args:
        t: The rows' times (s).
        column: The channel's values in those rows (NaN: no reading).

    Returns:
        Seconds; None with fewer than three readings.
    """
    valid_t = t[np.isfinite(column)]
    return median_spacing(valid_t) if len(valid_t) > 2 else None
