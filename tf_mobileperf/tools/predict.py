"""Predict before you run: memory, step time and energy at larger batch sizes.

Training workloads are regular (the seed's finding; Prashanthi et al.,
POMACS 2022): from a few short runs at small batch sizes, each quantity is
fitted as a straight line in the batch size B, by least squares:

* peak memory of the training process, a straight line in B (its peak RSS;
  the model, optimizer state and runtime are the intercept, activations
  grow with B);
* step time and energy per step, a power law a * B^k with 0 <= k <= 1 (a
  straight line in log-log): flat while fixed costs dominate (k near 0),
  linear once the device is busy (k = 1), saturating in between, which a
  straight line through small batches over-predicts;
* J/sample is energy per step / B.

None of these shrinks as B grows: a fit that falls across the measured
sizes (noise at B = 1, 2, 4) is made flat. Sizes further apart (1, 4, 16)
give better slopes: benchmarks/predict.py shows both.

Each prediction carries an uncertainty: two standard errors of prediction
of the line at that B (from the residuals; with only two measured sizes the
line is exact and the uncertainty unknown, None). A target is predicted to
run out of memory (``oom``) when its predicted memory above the process's
start exceeds the memory limit, and ``oom_possible`` when it does within the
uncertainty. (The limit is emulated on address space, the prediction is of
resident memory: close, not the same; the tests and benchmarks/predict.py
check the verdicts on real runs.)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

#: Quantities fitted, from a sweep row.
QUANTITIES = ("proc_peak_gb", "step_time_s_mean", "energy_per_step_j")


@dataclasses.dataclass(frozen=True)
class Line:
    """y = intercept + slope * B, fitted to ``n`` points; ``residual_sd`` None when n < 3."""

    intercept: float
    slope: float
    n: int
    mean_b: float
    sxx: float
    residual_sd: float | None

    @classmethod
    def fit(cls, b: Sequence[float], y: Sequence[float], max_slope: float = math.inf) -> "Line":
        b, y = np.asarray(b, float), np.asarray(y, float)
        if len(b) < 2 or len(set(b.tolist())) < 2:
            raise ValueError(f"need at least two different batch sizes to fit a line, got {b.tolist()}")
        slope, intercept = np.polyfit(b, y, 1)
        if not 0 <= slope <= max_slope:  # noise at small sizes: the nearest allowed slope through the mean
            slope = min(max(slope, 0.0), max_slope)
            intercept = float(y.mean() - slope * b.mean())
        residuals = y - (intercept + slope * b)
        sd = float(np.sqrt((residuals ** 2).sum() / (len(b) - 2))) if len(b) > 2 else None
        return cls(float(intercept), float(slope), len(b), float(b.mean()), float(((b - b.mean()) ** 2).sum()), sd)

    def __call__(self, b: float) -> float:
        return self.intercept + self.slope * b

    def uncertainty(self, b: float) -> float | None:
        """Two standard errors of a new observation at ``b``."""
        if self.residual_sd is None:
            return None
        return 2 * self.residual_sd * math.sqrt(1 + 1 / self.n + (b - self.mean_b) ** 2 / self.sxx)


@dataclasses.dataclass(frozen=True)
class PowerLaw:
    """y = a * B^k, 0 <= k <= 1: a Line through (log B, log y)."""

    line: Line

    @classmethod
    def fit(cls, b: Sequence[float], y: Sequence[float]) -> "PowerLaw":
        return cls(Line.fit(np.log(b), np.log(y), max_slope=1.0))

    def __call__(self, b: float) -> float:
        return math.exp(self.line(math.log(b)))

    def uncertainty(self, b: float) -> float | None:
        """Two standard errors, made back into the units of y (the upper side)."""
        log_pm = self.line.uncertainty(math.log(b))
        return None if log_pm is None else self(b) * (math.exp(log_pm) - 1)


@dataclasses.dataclass
class Prediction:
    """Predicted figures of one batch size; ``*_pm`` are the uncertainties."""

    batch_size: int
    proc_peak_gb: float | None
    proc_peak_gb_pm: float | None
    step_time_s: float | None
    step_time_s_pm: float | None
    energy_per_step_j: float | None
    energy_per_step_j_pm: float | None
    energy_per_sample_j: float | None
    oom: bool | None  # predicted memory above the start exceeds the limit; None: no limit given
    oom_possible: bool | None  # ... within the uncertainty


def fit(rows: Sequence[dict]) -> dict[str, Line | PowerLaw | None]:
    """A fit per quantity through the successful rows; None where the rows lack it."""
    good = [r for r in rows if r.get("success")]
    fits: dict[str, Line | PowerLaw | None] = {}
    for quantity in QUANTITIES:
        points = [(r["batch_size"], r[quantity]) for r in good if r.get(quantity) is not None and r[quantity] > 0]
        model = Line if quantity == "proc_peak_gb" else PowerLaw
        fits[quantity] = model.fit(*zip(*points)) if len({b for b, _ in points}) >= 2 else None
    return fits


def predict(rows: Sequence[dict], targets: Sequence[int], memory_limit_bytes: int | None = None) -> list[Prediction]:
    """Predictions at ``targets`` from measured sweep ``rows`` of one model.

    Raises:
        ValueError: fewer than two batch sizes trained successfully.
    """
    fitted = fit(rows)
    if fitted["proc_peak_gb"] is None and fitted["step_time_s_mean"] is None:
        raise ValueError("need at least two batch sizes that trained successfully to predict")
    start = [r["rss_at_start_gb"] for r in rows if r.get("success") and r.get("rss_at_start_gb") is not None]
    baseline = float(np.median(start)) if start else None
    out = []
    for b in targets:
        values = {}
        for quantity, curve in fitted.items():
            values[quantity] = (curve(b), curve.uncertainty(b)) if curve else (None, None)
        memory, memory_pm = values["proc_peak_gb"]
        energy, energy_pm = values["energy_per_step_j"]
        oom = possible = None
        if memory_limit_bytes is not None and memory is not None and baseline is not None:
            oom = (memory - baseline) * 2**30 > memory_limit_bytes
            possible = (memory + (memory_pm or 0.0) - baseline) * 2**30 > memory_limit_bytes
        out.append(Prediction(b, memory, memory_pm, *values["step_time_s_mean"], energy, energy_pm,
                              energy / b if energy is not None else None, oom, possible))
    return out


def largest_fitting_batch(rows: Sequence[dict], memory_limit_bytes: int, ceiling: int = 4096) -> int | None:
    """The largest batch size predicted not to run out of memory (None if even 1 is predicted to)."""
    fitting = [b for b, p in zip(range(1, ceiling + 1), predict(rows, range(1, ceiling + 1), memory_limit_bytes))
               if p.oom is False]
    return max(fitting) if fitting else None
