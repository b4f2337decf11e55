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
    """Longest stretch without a valid sample that is still jitter, not a hole."""
    return max(gap_factor * period_s, min_gap_s)


def median_spacing(t: np.ndarray, at_most: int = 4096) -> float | None:
    """The median interval of the increasing ``t`` (None with fewer than two), from at most ``at_most``
    intervals spread over it: a robust typical spacing, cheap for a million samples (the collector asks for
    it per channel at every join)."""
    spacing = np.diff(t)
    if len(spacing) > at_most:
        spacing = spacing[:: len(spacing) // at_most]
    return float(np.median(spacing)) if len(spacing) else None


def own_period_s(t: np.ndarray, column: np.ndarray) -> float | None:
    """A channel's own period: the median interval between its finite readings (None with fewer than 3)."""
    valid_t = t[np.isfinite(column)]
    return median_spacing(valid_t) if len(valid_t) > 2 else None
