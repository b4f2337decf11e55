"""The step-time law's shapes and their fit: a line, a bend either way, a step up (``step_model`` says why).

    t(B) = a + b1 * B + (b2 - b1) * max(0, B - Bs) + jump * [B >= Bj]

Each shape is fitted by weighted non-negative least squares at every candidate place of its bend or step (the
measured sizes and points between them).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import nnls


@dataclasses.dataclass(frozen=True)
class Hinge:
    """t(B) = a + b1 * B + c * max(0, B - bs) + jump * [B >= bj]; c = b2 - b1 (0: a straight line, ``bs``
    None); b1, b2 >= 0; ``jump`` >= 0 a step up at ``bj`` (None: no step)."""

    a: float
    b1: float
    c: float
    bs: float | None
    jump: float = 0.0
    bj: float | None = None

    @property
    def b2(self) -> float:
        return self.b1 + self.c

    def __call__(self, b):
        b = np.asarray(b, float)
        bend = self.c * np.maximum(0.0, b - self.bs) if self.bs is not None else 0.0
        step = self.jump * (b >= self.bj) if self.bj is not None else 0.0
        return self.a + self.b1 * b + bend + step

    @classmethod
    def fit(cls, b: ArrayLike, y: ArrayLike, sd: ArrayLike) -> tuple[Hinge, float]:
        """The best fit to (b, y) weighted by 1/sd^2, and its weighted sum of squares.

        Args:
            b, y, sd: The measured batch sizes, the mean step time at each (s) and its standard error (s).

        Returns:
            The (fit, sum) of ``fit_all``'s with the least sum plus 2 per extra parameter (4 for a bend or a step).
        """
        fits = cls.fit_all(b, y, sd)
        extra = lambda h: 4.0 if h.bs is not None or h.bj is not None else 0.0  # noqa: E731  2 per extra parameter
        return min(fits, key=lambda f: f[1] + extra(f[0]))

    @classmethod
    def fit_all(cls, b: ArrayLike, y: ArrayLike, sd: ArrayLike) -> list[tuple[Hinge, float]]:
        """The fit of each candidate saturation point (and the straight line), with its weighted sum of squares.

        Args:
            b, y, sd: As ``fit``'s.

        Returns:
            (fit, weighted sum of squares) of the straight line, of a bend either way at each candidate saturation
            point, and of a step up at each candidate size.
        """
        bx, yx, w = np.asarray(b, float), np.asarray(y, float), 1.0 / np.asarray(sd, float)
        fits = []
        for bs in [None, *_breaks(bx)]:
            for bend in ("saturates", "speeds up") if bs is not None else ("line",):
                if bs is None:
                    third = []
                elif bend == "saturates":
                    third = [np.maximum(0.0, bx - bs)]
                else:
                    third = [np.minimum(bx, bs)] if bs else []
                x = np.column_stack([np.ones_like(bx), bx, *third])
                theta, _ = nnls(x * w[:, None], yx * w)
                chi2 = float(((((x @ theta) - yx) * w) ** 2).sum())
                a, slope, d = float(theta[0]), float(theta[1]), float(theta[2]) if third else 0.0
                if bend == "speeds up":  # a + b2*B + d*min(B, bs): b1 = b2 + d before bs, b2 after
                    hinge = cls(a, slope + d, -d, bs if d > 0 else None)
                else:
                    hinge = cls(a, slope, d, bs if d > 0 else None)
                fits.append((hinge, chi2))
        for bj in _steps(bx):
            x = np.column_stack([np.ones_like(bx), bx, (bx >= bj).astype(float)])
            theta, _ = nnls(x * w[:, None], yx * w)
            chi2 = float(((((x @ theta) - yx) * w) ** 2).sum())
            jump = float(theta[2])
            fits.append((cls(float(theta[0]), float(theta[1]), 0.0, None, jump, bj if jump > 0 else None), chi2))
        return fits


def _breaks(b: np.ndarray) -> list[float]:
    """Candidate saturation points: the measured sizes but the largest, and 7 points in each gap (log-spaced)."""
    sizes = sorted(set(b.tolist()))
    out = []
    for lo, hi in zip(sizes, sizes[1:]):
        out += [float(v) for v in np.geomspace(lo, hi, 9)[:-1]]
    return out


def _steps(b: np.ndarray) -> list[float]:
    """Candidate batch sizes of a step up: in each gap (lo, hi] between measured sizes, its geometric middle
    first (the fit the measurements cannot tell from the others in the gap keeps it), then every other whole
    size of the gap (at most 8, log-spaced), so that the plausible fits span the gap."""
    sizes = sorted(set(b.tolist()))
    out = []
    for lo, hi in zip(sizes, sizes[1:]):
        middle = float(max(lo + 1, round(math.sqrt(lo * hi))))
        inside = sorted({float(max(lo + 1, round(v))) for v in np.geomspace(lo, hi, 9)[1:]})
        out += [middle] + [v for v in inside if v != middle]
    return out
