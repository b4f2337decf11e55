"""How well a run knows its mean step time: the 95% interval of the mean (Student t)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def ci95(durations: Sequence[float]) -> tuple[float, float, float] | None:
    """(mean, low, high) of the mean of ``durations`` (Student t, 95%); None for fewer than two."""
    x = np.asarray(durations, float)
    if len(x) < 2:
        return None
    mean = float(x.mean())
    half = _t95(len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return mean, mean - half, mean + half


def _t95(df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, df))
