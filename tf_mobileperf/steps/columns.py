"""A join's per-step values as Python lists: converted from its arrays once per join, not value by value per step."""

from __future__ import annotations

import dataclasses

import numpy as np

from tf_mobileperf.steps.join import PRIMARY, StepValues


def _column(values: np.ndarray) -> list[float | None]:
    """The values as JSON-safe numbers, in one pass over the array: NaN and infinities become None."""
    out: list[float | None] = values.astype(np.float64).tolist()
    for i in np.flatnonzero(~np.isfinite(values)).tolist():
        out[i] = None
    return out


@dataclasses.dataclass
class Columns:
    """One channel's joined values as Python lists, converted once for all of a join's steps."""

    reductions: dict[str, list[float | None]]
    value: list[float | None]
    complete: list[bool]
    bound: list[float | None] | None
    method: list[str | None] | None

    @classmethod
    def of(cls, values: StepValues) -> Columns:
        """The lists of one channel's values.

        Args:
            values: The channel's values from one join.
        """
        reductions = {r: _column(v) for r, v in values.reductions.items()}
        return cls(
            reductions=reductions,
            value=reductions[PRIMARY[values.channel.kind]],
            complete=values.complete.tolist(),
            bound=None if values.bound is None else _column(values.bound),
            method=None if values.method is None else list(values.method),
        )
