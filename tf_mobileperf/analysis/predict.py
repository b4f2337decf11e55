"""Predict before you run: memory, step time and energy at larger batch sizes.

Training workloads are regular (the paper's finding; Prashanthi et al., POMACS 2022): from runs at a few batch
sizes, each quantity is fitted as a function of the batch size B:

* peak memory of the training process, a straight line in B (its peak RSS; the model, optimizer state and runtime
  are the intercept, activations grow with B);
* step time, the saturating law of ``step_model``: a fixed cost per step, a cost per sample, and a larger cost per
  sample past the batch size where the device saturates (t(B) = a + b1*B + (b2-b1)*max(0, B-Bs)), or a step up of
  the time at a batch size where another kernel takes over, with a 95% interval (bootstrap and the saturation or
  step points the measurements cannot rule out, widened by the run-to-run noise);
* energy per step, the predicted step time times the mean power at B, which is fitted as rising then flat (power
  saturates too); None, with the reason, where no energy was measured (no power sensor);
* J/sample is energy per step / B.

Past the largest measured size the step time's interval is widened by ``EXTRAPOLATION_PER_DOUBLING`` per doubling,
and past ``MAX_EXTRAPOLATION`` times it step time and energy are not predicted (``Prediction.extrapolated`` says
which). Where the step times were measured in turns in one process (``sweep.interleaved``), the drift of the
machine's speed it saw widens the intervals of time and energy each way (``drift``).

None of these shrinks as B grows. Measured sizes are best chosen by ``size_choice.choose_sizes`` (1, 4, 16, then
doubling until the device saturates, then the gaps where the fit is least certain) and each measured until its mean
step time is known to a few percent (a sweep's ``precision``): benchmarks/predict.py.

Peak memory's uncertainty is two standard errors of prediction of the line at that B (from the residuals; with only
two measured sizes the line is exact and the uncertainty unknown, None). A target is predicted to run out of memory
(``oom``) when its predicted memory above the process's start exceeds the memory limit, and ``oom_possible`` when it
does within the uncertainty. (The limit is emulated on address space, the prediction is of resident memory: close,
not the same; the tests and benchmarks/predict.py check the verdicts on real runs.)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from tf_mobileperf.analysis.power_model import predict_energy
from tf_mobileperf.analysis.step_model import Estimate, StepTimeModel


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
    def fit(cls, b: ArrayLike, y: ArrayLike) -> Line:
        """The least-squares line through the points, its slope at least 0 (a falling fit is noise: made flat).

        Args:
            b, y: Batch sizes and the quantity at each.

        Raises:
            ValueError: fewer than two different batch sizes.
        """
        bx, yx = np.asarray(b, float), np.asarray(y, float)
        if len(bx) < 2 or len(set(bx.tolist())) < 2:
            raise ValueError(f"need at least two different batch sizes to fit a line, got {bx.tolist()}")
        slope, intercept = np.polyfit(bx, yx, 1)
        if slope < 0:  # noise at small sizes: flat through the mean
            slope, intercept = 0.0, float(yx.mean())
        residuals = yx - (intercept + slope * bx)
        sd = float(np.sqrt((residuals**2).sum() / (len(bx) - 2))) if len(bx) > 2 else None
        return cls(float(intercept), float(slope), len(bx), float(bx.mean()), float(((bx - bx.mean()) ** 2).sum()), sd)

    def __call__(self, b: float) -> float:
        return self.intercept + self.slope * b

    def uncertainty(self, b: float) -> float | None:
        """Two standard errors of a new observation at batch size ``b``; None with fewer than three points.

        Args:
            b: The batch size.
        """
        if self.residual_sd is None:
            return None
        return 2 * self.residual_sd * math.sqrt(1 + 1 / self.n + (b - self.mean_b) ** 2 / self.sxx)


@dataclasses.dataclass
class Prediction:
    """Predicted figures of one batch size; ``*_pm`` are the uncertainties (the larger side of a 95% interval for
    time and energy), ``*_ci95`` the 95% intervals (low, high)."""

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
    step_time_s_ci95: tuple[float, float] | None = None
    energy_per_step_j_ci95: tuple[float, float] | None = None
    energy_per_sample_j_ci95: tuple[float, float] | None = None
    energy_unavailable: str | None = None  # why energy is None
    drift: float | None = None  # the machine's speed drift the intervals of time and energy were widened by
    extrapolated: str | None = None  # how far past the largest measured size, and what that did; None inside


def fit(rows: Sequence[dict]) -> dict:
    """The fits through the successful rows; the line and the model None where fewer than two sizes measured them.

    Args:
        rows: The sweep's rows of one model.

    Returns:
        {``proc_peak_gb``: a ``Line`` (GiB), ``step_time_s_mean``: a ``StepTimeModel``, ``power_w``: [(B, mean W)]}.
    """
    good = [r for r in rows if r.get("success")]
    memory = [(r["batch_size"], r["proc_peak_gb"]) for r in good if (r.get("proc_peak_gb") or 0) > 0]
    times = [
        (r["batch_size"], r["step_time_s_mean"], _interval(r)) for r in good if (r.get("step_time_s_mean") or 0) > 0
    ]
    power = [
        (r["batch_size"], r["energy_per_step_j"] / r["step_time_s_mean"])
        for r in good
        if (r.get("energy_per_step_j") or 0) > 0 and (r.get("step_time_s_mean") or 0) > 0
    ]
    sizes, peaks = [b for b, _ in memory], [gb for _, gb in memory]
    return {
        "proc_peak_gb": Line.fit(sizes, peaks) if len(set(sizes)) >= 2 else None,
        "step_time_s_mean": StepTimeModel.fit(times) if len({b for b, *_ in times}) >= 2 else None,
        "power_w": power,
    }


def _interval(row: dict) -> tuple[float, float] | None:
    ci = row.get("step_time_s_ci95")
    return (float(ci[0]), float(ci[1])) if ci and None not in ci else None


def no_energy_reason(rows: Sequence[dict]) -> str:
    """Why the rows have no energy to predict from: their reports' reason, or that no power sensor measured it.

    Args:
        rows: The measured sizes' rows.
    """
    for r in rows:
        said = (r.get("unavailable") or {}).get("energy")
        if said:
            return f"energy cannot be predicted: none was measured ({said})"
    return "energy cannot be predicted: none was measured at the measured sizes (no power sensor)"


def predict(
    rows: Sequence[dict], targets: Sequence[int], memory_limit_bytes: int | None = None, drift: float | None = None
) -> list[Prediction]:
    """Predictions at ``targets`` from measured sweep ``rows`` of one model.

    Args:
        rows: The sweep's rows at the measured sizes.
        targets: The batch sizes to predict.
        memory_limit_bytes: The limit the out-of-memory verdicts are against (None: no verdict).
        drift: Relative speed drift while the times were measured (0.05; None: 0), widening time's and energy's CIs.

    Returns:
        A ``Prediction`` per target, in order.

    Raises:
        ValueError: fewer than two batch sizes trained successfully.
    """
    fitted = fit(rows)
    if fitted["proc_peak_gb"] is None and fitted["step_time_s_mean"] is None:
        raise ValueError("need at least two batch sizes that trained successfully to predict")
    start = [r["rss_at_start_gb"] for r in rows if r.get("success") and r.get("rss_at_start_gb") is not None]
    baseline = float(np.median(start)) if start else None
    reason = None if fitted["power_w"] else no_energy_reason(rows)
    out = []
    for b in targets:
        line = fitted["proc_peak_gb"]
        memory, memory_pm = (line(b), line.uncertainty(b)) if line else (None, None)
        time, far = _extrapolated(fitted["step_time_s_mean"], b)
        if time.value is None and time.reason:  # past what may be extrapolated: no energy either
            energy = per_sample = Estimate(None, reason=time.reason)
        else:
            energy, per_sample, _ = predict_energy(time, fitted["power_w"], b, reason)
        time, energy, per_sample = widened(time, drift), widened(energy, drift), widened(per_sample, drift)
        oom = possible = None
        if memory_limit_bytes is not None and memory is not None and baseline is not None:
            oom = (memory - baseline) * 2**30 > memory_limit_bytes
            possible = (memory + (memory_pm or 0.0) - baseline) * 2**30 > memory_limit_bytes
        out.append(
            Prediction(
                b,
                memory,
                memory_pm,
                time.value,
                _pm(time),
                energy.value,
                _pm(energy),
                per_sample.value,
                oom,
                possible,
                _ci(time),
                _ci(energy),
                _ci(per_sample),
                energy.reason,
                drift,
                far,
            )
        )
    return out


def describe(rows: Sequence[dict]) -> dict:
    """The fitted laws, for prediction.json: step time's parameters and noise, power's, memory's line.

    Args:
        rows: The sweep's rows of one model.

    Returns:
        {``step_time``, ``power``, ``proc_peak_gb``}; None where not fitted, ``power`` {``unavailable``: why}.
    """
    fitted = fit(rows)
    line, times, power = fitted["proc_peak_gb"], fitted["step_time_s_mean"], fitted["power_w"]
    energy = predict_energy(times.predict(1), power, 1)[2] if times and power else None
    return {
        "step_time": times.describe() if times else None,
        "power": energy or {"unavailable": no_energy_reason(rows)},
        "proc_peak_gb": {"intercept": line.intercept, "slope_per_sample": line.slope} if line else None,
    }


#: Past the largest measured size, the step time's interval is widened by this much per doubling (each way):
#: nothing measured says where the device saturates further on. From 1-16, this machine's errors at 32 and 64
#: were up to 21.5% (benchmarks/results/predict_users.json, 2026-12-07).
EXTRAPOLATION_PER_DOUBLING = 0.10
#: Step time (and energy) are not predicted past this multiple of the largest measured size.
MAX_EXTRAPOLATION = 8.0


def _extrapolated(model: StepTimeModel | None, batch_size: int) -> tuple[Estimate, str | None]:
    """The step time at ``batch_size``, its interval widened by ``EXTRAPOLATION_PER_DOUBLING`` per doubling past
    the largest measured size, or None past ``MAX_EXTRAPOLATION`` of it; and what was done, in words."""
    if model is None:
        return Estimate(None), None
    largest = max(model.sizes)
    far = batch_size / largest
    if far <= 1:
        return model.predict(batch_size), None
    said = f"{far:.3g}x the largest measured size ({largest:.0f})"
    if far > MAX_EXTRAPOLATION:
        why = f"batch {batch_size} is {said}: step time and energy are not predicted past {MAX_EXTRAPOLATION:g}x"
        return Estimate(None, reason=why), why
    widen = EXTRAPOLATION_PER_DOUBLING * math.log2(far)
    said += f": the step time's interval is widened by {widen:.0%} each way for the distance"
    return widened(model.predict(batch_size), widen), said


def widened(estimate: Estimate, by: float | None) -> Estimate:
    """An estimate with its interval widened each way: low * (1 - |by|), high * (1 + |by|).

    Args:
        estimate: The estimate.
        by: The relative widening (a drift); None or 0 leaves ``estimate`` as it is.
    """
    if not by or estimate.low is None or estimate.high is None:
        return estimate
    return dataclasses.replace(estimate, low=estimate.low * (1 - abs(by)), high=estimate.high * (1 + abs(by)))


def _pm(estimate: Estimate) -> float | None:
    if estimate.value is None or estimate.low is None or estimate.high is None:
        return None
    return max(estimate.high - estimate.value, estimate.value - estimate.low)


def _ci(estimate: Estimate) -> tuple[float, float] | None:
    return None if estimate.low is None or estimate.high is None else (estimate.low, estimate.high)


def largest_fitting_batch(rows: Sequence[dict], memory_limit_bytes: int, ceiling: int = 4096) -> int | None:
    """The largest batch size predicted not to run out of memory.

    Args:
        rows, memory_limit_bytes: As ``predict``'s.
        ceiling: The largest batch size tried.

    Returns:
        The batch size; None where even 1 is predicted to run out (or memory cannot be predicted).
    """
    fitting = [
        b
        for b, p in zip(range(1, ceiling + 1), predict(rows, range(1, ceiling + 1), memory_limit_bytes))
        if p.oom is False
    ]
    return max(fitting) if fitting else None
