"""A channel's line for charts: its own readings, its real gaps, its peaks.

Rows of ``samples.bin`` come at the sampler's rate, but a slow channel has a
reading only in some of them (NaN in the others: no reading, or a failed
one). A chart draws a channel from its finite readings only, so a 50 ms
channel is one continuous line between 5 ms rows; the line breaks only where
two readings are further apart than the channel's allowed gap
(``format.gaps.allowed_gap_s``, the same rule that marks a step's energy
incomplete), with a ``None`` marker between them. Long series are cut to
each bucket's min and max, so a spike of one sample survives any zoom level;
buckets never straddle a gap. Vectorized with ``reduceat``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from tf_mobileperf.format.gaps import allowed_gap_s, own_period_s


@dataclasses.dataclass
class ChannelRate:
    """How often a channel has a reading, and the longest stretch without one that is still jitter."""

    period_s: float | None
    max_gap_s: float

    @classmethod
    def of(cls, t: np.ndarray, v: np.ndarray, declared_s: float | None = None) -> ChannelRate:
        """The channel's rate and allowed gap, from the rows' times and the channel's column, as the join estimates it.

        Args:
            t: The rows' times, in seconds.
            v: The channel's column, NaN in rows without a reading.
            declared_s: The period its source declared, in seconds (a channel's ``period_s`` in ``channels.json``,
                or a replayed log's line interval over its speed: the sampler reads the line in force at every
                row); None: estimate it from the readings.

        Returns:
            The rate: ``period_s`` is ``declared_s`` or the readings' own period (None where neither is known);
            ``max_gap_s`` is the allowed gap for the longer of the rows' median period and that own period.
        """
        rows_period = float(np.median(np.diff(t))) if len(t) > 2 else 0.0
        own = own_period_s(t, v)
        return cls(declared_s or own, allowed_gap_s(max(rows_period, own or 0.0)))

    def to_dict(self) -> dict:
        """JSON form: ``period_s``, ``rate_hz`` (None where the period is unknown) and ``max_gap_s``."""
        rate = 1.0 / self.period_s if self.period_s else None
        return {"period_s": self.period_s, "rate_hz": rate, "max_gap_s": self.max_gap_s}


def declared_period_s(header: dict, channel: str) -> float | None:
    """The ``period_s`` a run's ``channels.json`` declares for ``channel``, in seconds.

    Args:
        header: The run's parsed ``channels.json``.
        channel: The channel's name.

    Returns:
        The declared period; None where none is declared or it is not a positive number.
    """
    period = next((c.get("period_s") for c in header.get("channels", []) if c.get("name") == channel), None)
    return float(period) if isinstance(period, (int, float)) and not isinstance(period, bool) and period > 0 else None


def min_max(t: np.ndarray, v: np.ndarray, max_points: int, max_gap_s: float = math.inf) -> dict[str, list]:
    """Returns {"t", "min", "max"} of the finite readings, with a None marker in every gap.

    Raw readings if they fit in ``max_points``, else per-bucket extremes at
    each bucket's first timestamp (``max_points // 2`` buckets, each
    contributing two values, plus one bucket per gap).

    Args:
        t: The rows' times, in seconds.
        v: The channel's values per row; NaN (no reading) rows are dropped.
        max_points: The most raw readings returned before bucketing.
        max_gap_s: A gap is two consecutive readings more than this apart, in seconds; its marker (``t`` halfway
            between them, ``None`` in ``min`` and ``max``) breaks the line. Default: no gaps.

    Returns:
        Lists ``t``, ``min`` and ``max`` of equal length; empty where there are no finite readings.
    """
    keep = np.isfinite(v)
    t, v = np.asarray(t, dtype=np.float64)[keep], np.asarray(v, dtype=np.float64)[keep]
    if not len(t):
        return {"t": [], "min": [], "max": []}
    after_gap = np.flatnonzero(np.diff(t) > max_gap_s) + 1
    if len(t) <= max_points:
        edges = np.arange(len(t))
    else:
        edges = np.unique(
            np.concatenate([np.linspace(0, len(t), max(1, max_points // 2) + 1).astype(np.intp)[:-1], after_gap])
        )
    lo, hi, bt = np.fmin.reduceat(v, edges), np.fmax.reduceat(v, edges), t[edges]
    at = np.searchsorted(edges, after_gap)
    marks = (t[after_gap - 1] + t[after_gap]) / 2
    return {
        "t": np.insert(bt, at, marks).tolist(),
        "min": _list(np.insert(lo, at, np.nan)),
        "max": _list(np.insert(hi, at, np.nan)),
    }


def _list(v: np.ndarray) -> list:
    """JSON-safe list: NaN (a gap marker) becomes None, a break in the line, not a zero."""
    return [x if math.isfinite(x) else None for x in v.tolist()]
