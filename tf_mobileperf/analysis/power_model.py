"""How a training step's mean power scales with the batch size B, and its energy per step from that.

The mean power of a step, P(B) = energy per step / step time, is fitted as ``p0 + p1 * min(B, Bp)`` (rising,
then flat once the device is saturated), and energy per step is predicted as t(B) * P(B) from the step-time
law (``analysis.step_model``), with the relative uncertainties of both combined. Without measured energy (no
power sensor) there is no energy prediction, and the reason is given.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy.optimize import nnls

from tf_mobileperf.analysis.step_model import RUN_NOISE, Z95, Estimate


@dataclasses.dataclass(frozen=True)
class Saturating:
    """P(B) = p0 + p1 * min(B, bp): rising, then flat once the device is saturated (``bp`` None: flat)."""

    p0: float
    p1: float
    bp: float | None

    def __call__(self, b):
        b = np.asarray(b, float)
        return self.p0 + (self.p1 * np.minimum(b, self.bp) if self.bp is not None else 0.0)

    @classmethod
    def fit(cls, b: ArrayLike, y: ArrayLike) -> tuple[Saturating, float | None]:
        """The least-squares fit and the relative residual SD; a rise is kept only where it fits clearly better
        than flat (20% less squared error), its ``bp`` one of the measured sizes but the smallest.

        Args:
            b: The measured batch sizes.
            y: The mean power at each (W).

        Returns:
            (the fit, the residuals' SD as a share of the mean of ``y``); the SD is None where there are no more
            points than the fit has parameters (1 flat, 3 rising).
        """
        bx, yx = np.asarray(b, float), np.asarray(y, float)
        best, best_sse = cls(float(yx.mean()), 0.0, None), float(((yx - yx.mean()) ** 2).sum())
        for bp in sorted(set(bx.tolist()))[1:]:
            x = np.column_stack([np.ones_like(bx), np.minimum(bx, bp)])
            theta, _ = nnls(x, yx)
            sse = float(((x @ theta - yx) ** 2).sum())
            if sse < best_sse * 0.8 - 1e-15:  # a rise kept only where it fits clearly better than flat
                best, best_sse = cls(float(theta[0]), float(theta[1]), bp), sse
        n, p = len(bx), 1 if best.bp is None else 3
        rel = None if n <= p else math.sqrt(best_sse / (n - p)) / float(yx.mean())
        return best, rel


def predict_energy(
    time: Estimate, power_points: Sequence[tuple[int, float]], batch_size: int, no_power_reason: str | None = None
) -> tuple[Estimate, Estimate, dict | None]:
    """Energy per step and per sample at ``batch_size``: the predicted step time times the fitted mean power.

    Args:
        time: The predicted step time at ``batch_size`` (s) with its 95% interval; a value of None gives no energy.
        power_points: (B, mean power in W) of each measured size; empty where no power was measured.
        batch_size: The batch size B.
        no_power_reason: The reason given where there is no energy (None: that no power sensor measured any).

    Returns:
        (energy per step in J, energy per sample in J, the power law's parameters for prediction.json); the
        intervals combine the relative uncertainties of time and power. Without power or time: both Estimates
        None with the reason, and no parameters (None).

    Raises:
        ValueError: ``time`` has a value other than 0 but no interval.
    """
    if len(power_points) < 1 or time.value is None:
        reason = no_power_reason or "no energy measured at the measured sizes (no power sensor)"
        return Estimate(None, reason=reason), Estimate(None, reason=reason), None
    b, p = zip(*sorted(power_points))
    power, rel = Saturating.fit(b, p)
    rel = RUN_NOISE if rel is None else max(rel, 0.01)
    watts = float(power(batch_size))
    t_rel = 0.0
    if time.value:
        if time.low is None or time.high is None:
            raise ValueError("a predicted step time needs its 95% interval (low, high) to predict energy")
        t_rel = max(time.value - time.low, time.high - time.value) / time.value / Z95
    e = time.value * watts
    e_rel = math.hypot(t_rel, rel) * Z95
    low, high = max(e * (1 - e_rel), 0.0), e * (1 + e_rel)
    energy = Estimate(e, low, high)
    per_sample = Estimate(e / batch_size, low / batch_size, high / batch_size)
    return (
        energy,
        per_sample,
        {
            "p0_w": power.p0,
            "p1_w_per_sample": power.p1,
            "saturates_at": power.bp,
            "relative_sd": rel,
            "law": "P(B) = p0 + p1*min(B, saturates_at)",
        },
    )
