"""How well a run knows its mean step time: the 95% interval of the mean (Student t), and whether it was steady."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike


def ci95(durations: ArrayLike) -> tuple[float, float, float] | None:
    """The 95% interval of the mean step time (Student t).

    Args:
        durations: The steps' durations (s).

    Returns:
        (mean, low, high) in s; None for fewer than two durations.
    """
    x = np.asarray(durations, float)
    if len(x) < 2:
        return None
    mean = float(x.mean())
    half = _t95(len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return mean, mean - half, mean + half


def relative_half_width(mean: float, low: float, high: float) -> float:
    """An interval's half-width as a share of its mean.

    Args:
        mean, low, high: The interval (``ci95``'s); ``mean`` not 0.

    Returns:
        The share (0.03: +-3%).
    """
    return (high - low) / 2 / mean


def _t95(df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, df))


#: A run's mean step time is not steady when its 95% interval's half-width is over ``WIDE`` of the mean, or
#: when its second half of steps is slower or faster than its first by more than ``DRIFT`` (runs disturbed by
#: other processes moved 2-3x; an undisturbed run of 1 ms steps on a loaded 2-core VM had +-6%).
WIDE = 0.10
DRIFT = 0.25
#: Beyond these the run was disturbed, and says so as a warning (within them, at info level).
WARN_WIDE = 0.25
WARN_DRIFT = 0.50
#: Fewer measured steps than this are too few to judge (a sweep that measures fewer is warned about as such).
MIN_STEPS = 10


def drift(durations: ArrayLike) -> float | None:
    """The second half's mean step time over the first half's, minus 1.

    Args:
        durations: The steps' durations (s), in order; with an odd count the middle one is in neither half.

    Returns:
        The change (0.1: 10% slower); None with fewer than 4 steps or a first half's mean not above 0.
    """
    x = np.asarray(durations, float)
    if len(x) < 4:
        return None
    first, second = x[: len(x) // 2].mean(), x[len(x) - len(x) // 2 :].mean()
    return float(second / first - 1) if first > 0 else None


def unsteady(durations: ArrayLike, wide: float = WIDE, drifted: float = DRIFT) -> str | None:
    """Why the mean of ``durations`` is not a steady step time: its interval too wide, or its halves drifted apart.

    Args:
        durations: The steps' durations (s), in order.
        wide: The largest half-width of the 95% interval, as a share of the mean, of a steady run.
        drifted: The largest ``drift`` (either sign) of a steady run.

    Returns:
        Each reason in words, joined by "; "; None where it is steady, or with fewer than ``MIN_STEPS`` steps.
    """
    if len(np.asarray(durations)) < MIN_STEPS:
        return None
    interval, change = ci95(durations), drift(durations)
    said = []
    if interval is not None and interval[0] > 0 and (half := relative_half_width(*interval)) > wide:
        mean, low, high = interval
        said.append(
            f"its mean {mean * 1e3:.3g} ms has a 95% interval of {low * 1e3:.3g}-{high * 1e3:.3g} ms (+-{half:.0%})"
        )
    if change is not None and abs(change) > drifted:
        said.append(f"the second half of the steps took {change:+.0%} against the first")
    return "; ".join(said) or None
