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

    @property
    def shape(self) -> str:
        """Which shape it is: "line", "bends up" (saturates), "bends down" (speeds up) or "steps up"."""
        if self.bj is not None:
            return "steps up"
        if self.bs is None:
            return "line"
        return "bends up" if self.c > 0 else "bends down"

    @property
    def parameters(self) -> int:
        """Its free parameters: 2 for a line (a, b1), 4 with a bend (c, bs) or a step (jump, bj)."""
        return 2 if self.shape == "line" else 4

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
        return min(fits, key=lambda f: f[1] + 2 * f[0].parameters)

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


@dataclasses.dataclass(frozen=True)
class AveragedLaw:
    """The law as the measurements leave it: the best fit of each shape, weighted by its Akaike weight.

    A shape's weight is exp(-AIC / 2), normalized, with AIC its weighted sum of squares + 2 per parameter. A shape
    that fits clearly worse weighs nothing (4 more in AIC: 12%); two that fit alike share the prediction. Measured
    at 1..16, a rise that only the last gap shows is a step up (another kernel from some size on, the level
    changes) or a bend (the cost per sample changes, it goes on growing): only sizes past it tell them apart, and
    each predicts the larger sizes by its own weight rather than by which of the two came first.

    Args:
        fits: The best fit of each shape.
        weights: Their Akaike weights (summing to 1).

    Example:
        >>> law = AveragedLaw.fit([1, 2, 4, 8, 16], [0.050, 0.049, 0.054, 0.061, 0.091], [0.002] * 5)
        >>> {shape: round(w, 2) for shape, w in law.shapes().items()}
        {'bends up': 0.5, 'steps up': 0.48, 'line': 0.02}
        >>> round(float(law(32)), 3)  # the bend alone: 0.153, the step alone: 0.118
        0.135
    """

    fits: tuple[Hinge, ...]
    weights: tuple[float, ...]

    def __call__(self, b):
        return sum(w * h(b) for h, w in zip(self.fits, self.weights))

    @property
    def best(self) -> Hinge:
        """The fit of the shape of most weight."""
        return max(zip(self.weights, self.fits), key=lambda wf: wf[0])[1]

    def shapes(self) -> dict[str, float]:
        """{shape: its weight}, heaviest first."""
        return dict(sorted(((h.shape, w) for h, w in zip(self.fits, self.weights)), key=lambda sw: -sw[1]))

    @classmethod
    def fit(cls, b: ArrayLike, y: ArrayLike, sd: ArrayLike) -> AveragedLaw:
        """The best fit of each shape to (b, y) weighted by 1/sd^2, and the shapes' Akaike weights.

        Args:
            b, y, sd: As ``Hinge.fit``'s.

        Returns:
            The averaged law.
        """
        best: dict[str, tuple[Hinge, float]] = {}
        for hinge, chi2 in Hinge.fit_all(b, y, sd):
            if hinge.shape not in best or chi2 < best[hinge.shape][1]:
                best[hinge.shape] = (hinge, chi2)
        fits = [h for h, _ in best.values()]
        aic = np.array([chi2 + 2 * h.parameters for h, chi2 in best.values()])
        weights = np.exp(-(aic - aic.min()) / 2)
        return cls(tuple(fits), tuple(float(w) for w in weights / weights.sum()))
