"""Peak-keeping downsampling of a sample series for charts.

Each bucket of consecutive samples becomes its min and its max, so a spike
of one sample survives any zoom level. Vectorized with ``reduceat``.
"""

from __future__ import annotations

import math

import numpy as np


def min_max(t: np.ndarray, v: np.ndarray, max_points: int) -> dict[str, list]:
    """Returns {"t", "min", "max"}: raw samples if they fit, else per-bucket extremes.

    ``max_points`` counts output points; each bucket contributes two values
    (min and max) at its first timestamp, so there are ``max_points // 2``
    buckets.
    """
    n = len(t)
    if n <= max_points:
        return {"t": _list(t), "min": _list(v), "max": _list(v)}
    buckets = max(1, max_points // 2)
    edges = np.linspace(0, n, buckets + 1).astype(np.intp)[:-1]
    edges = np.unique(edges)
    lo = np.fmin.reduceat(v, edges)
    hi = np.fmax.reduceat(v, edges)
    return {"t": _list(t[edges]), "min": _list(lo), "max": _list(hi)}


def _list(v: np.ndarray) -> list:
    """JSON-safe list: NaN and infinities (a failed read, a corrupt file) become None, a gap, not a zero."""
    return [x if math.isfinite(x) else None for x in v.tolist()]
