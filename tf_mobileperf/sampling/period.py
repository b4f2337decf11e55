"""The sample periods the sampler takes, checked once where a period enters, and when it counts as stalled."""

from __future__ import annotations

import math

#: Below this the loop cannot keep up in Python (measured: benchmarks/sampling.py): 0.5 ms.
MIN_PERIOD_S = 0.0005
#: The slowest sample period taken: slower is no power measurement of a step (and is a period given in ms by mistake).
MAX_PERIOD_S = 10.0


def check_period(period: float, unit: str = "s") -> float:
    """The one check of a sample period.

    Args:
        period: The period, in ``unit``.
        unit: "s", or "ms" as ``MonitorOptions`` and the command line take it.

    Returns:
        ``period`` as a float.

    Raises:
        TypeError: ``period`` is not a finite number (a bool included).
        ValueError: it is shorter than the sampler can sustain (``MIN_PERIOD_S``) or longer than
            ``MAX_PERIOD_S`` (the message says when seconds look like milliseconds).
    """
    scale = {"s": 1.0, "ms": 1e3}[unit]
    if isinstance(period, bool) or not isinstance(period, (int, float)) or not math.isfinite(period):
        raise TypeError(f"sample period must be a finite number of {unit}, got {period!r}")
    if period < MIN_PERIOD_S * scale:
        raise ValueError(
            f"sample period must be >= {MIN_PERIOD_S * scale:g} {unit} (what the sampler can sustain), got {period}"
        )
    if period > MAX_PERIOD_S * scale:
        raise ValueError(
            f"sample period must be at most {MAX_PERIOD_S:g} s, got {period} {unit}"
            + (" (the period is in seconds: 5 ms is 0.005)" if unit == "s" else "")
        )
    return float(period)


def silence_limit_s(period_s: float) -> float:
    """How long without a new row before ``health()`` calls the sampler stalled.

    Args:
        period_s: The sample period, seconds.

    Returns:
        Seconds: 50 periods, at least 1 s.
    """
    return max(1.0, 50 * period_s)
