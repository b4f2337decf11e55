"""How a training step's time, power and energy scale with the batch size B, fitted from a few measured sizes.

Step time follows how training uses a device: a fixed cost per step (launching kernels, the optimizer's update,
Python), a cost per sample while the device still has idle parallel units (``b1``), and, past the batch size where
the device saturates (``Bs``), a larger cost per sample (``b2 >= b1``): time grows linearly after it::

    t(B) = a + b1 * B + (b2 - b1) * max(0, B - Bs),   a, b1, b2 - b1 >= 0

On a CPU the opposite bend is measured too: the cost per sample falls as the batch grows (wider matrix products use
the cores better) until it settles (b2 < b1, concave: the CNN here costs 0.9 ms per sample from 4 to 16 and 0.5 ms
from 16 to 32); the fit tries both bends, each with a, b1, b2 >= 0.

A third shape is a step up: the char-LSTM here costs ~1.25 ms per sample at every size, and from batch 16 on ~25 ms
more per step (another kernel takes over), which no bend follows. The law then has a step of ``jump`` at ``Bj``
instead of a bend: ``t(B) = a + b1 * B + jump * [B >= Bj]``. The measurements place it only within the gap between
two measured sizes; the fit puts it at the gap's geometric middle, and every other place in the gap is among the
plausible fits below, so a prediction inside the gap has an interval that holds both levels
(``size_choice.choose_sizes`` spends its budget narrowing that gap).

Each shape is fitted by weighted non-negative least squares for each candidate ``Bs`` or ``Bj`` (every measured
size, and points between them), keeping its best (``hinge``); the law predicts by every shape's best fit, each
weighted by its Akaike weight (a penalty of 2 per parameter on the weighted sum of squares; ``hinge.AveragedLaw``):
a straight line (no saturation seen) outweighs a bend that does not fit clearly better, and a step and a bend that
fit alike (a rise seen in the last measured gap only) share the prediction. Each measured size weighs by the inverse
square of its mean's standard error (from the 95% interval its run reports, ``step_time_s_ci95``).

Uncertainty: a parametric bootstrap, and every saturation point the measurements cannot rule out (profile
likelihood: a weighted sum of squares within 3.84 of the best). Each bootstrap resample draws each measured mean
from its interval widened by the run-to-run noise (how far the measured means scatter about the fit beyond their own
intervals, or ``RUN_NOISE`` where too few sizes were measured to tell), refits, and predicts; the stated 95%
interval of a prediction spans the bootstrap's 2.5..97.5 percentiles and those saturation points' fits, widened by
the run-to-run noise of a new run at that size (a prediction is of what a run at B will measure).

Power and energy per step: ``analysis.power_model``.

``size_choice.choose_sizes`` picks the sizes to measure: 1, 4, 16, then doubling while the marginal cost per sample
is still changing (the device not yet saturated), within a budget.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from tf_mobileperf.analysis.hinge import AveragedLaw, Hinge
from tf_mobileperf.steps.precision import ci95, relative_half_width

#: Relative run-to-run noise of a mean step time (between fresh processes), used where too few sizes were measured
#: to estimate it from the residuals. Measured on this 2-core machine: the means of repeated runs of one size
#: scatter by 2-5%.
RUN_NOISE = 0.04
#: Bootstrap resamples of a fit.
RESAMPLES = 400
#: z of a two-sided 95% interval.
Z95 = 1.959964


def precision_reached(durations: Sequence[float], precision: float, min_steps: int = 10) -> bool:
    """Whether the 95% interval of the mean of ``durations`` is within ``precision``, with enough of them.

    Args:
        durations: The steps' durations so far (s).
        precision: The largest relative half-width of the interval that counts as reached (0.05: +-5%).
        min_steps: The fewest durations that may count as reached (never fewer than 2).

    Returns:
        True where reached; False too where the mean is not above 0.
    """
    if len(durations) < max(min_steps, 2):
        return False
    interval = ci95(durations)
    if interval is None:  # not reached: the length check above leaves at least two
        return False
    return interval[0] > 0 and relative_half_width(*interval) <= precision


def _other_side(h: Hinge, law: Hinge, batch_size: float) -> bool:
    """Whether ``h`` has its step up on the other side of ``batch_size`` than ``law`` (with or without one)."""
    return h.bj is not None and (batch_size >= h.bj) != (law.bj is not None and batch_size >= law.bj)


@dataclasses.dataclass
class Estimate:
    """A predicted value and its 95% interval (None: unknown)."""

    value: float | None
    low: float | None = None
    high: float | None = None
    reason: str | None = None  # why value is None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class StepTimeModel:
    """The fitted step-time law of one (model, device), its bootstrap and its noise."""

    law: AveragedLaw  # each shape's best fit, by its Akaike weight
    sizes: list[float]
    means: list[float]
    sds: list[float]  # standard errors of the measured means
    run_noise: float  # relative run-to-run noise
    run_noise_from: str
    resamples: list[AveragedLaw]
    plausible: list[Hinge]  # fits whose saturation point the measurements cannot rule out

    @classmethod
    def fit(
        cls, points: Sequence[tuple[int, float, tuple[float, float] | None]], resamples: int = RESAMPLES, seed: int = 0
    ) -> StepTimeModel:
        """The law fitted to the measured sizes, with its run-to-run noise, bootstrap and plausible fits.

        Args:
            points: (batch size, mean step time in s, its 95% interval or None) of each measured size.
            resamples: Number of bootstrap resamples.
            seed: Seed of the bootstrap's random generator.

        Returns:
            The fitted model.

        Raises:
            ValueError: fewer than two different batch sizes.
        """
        points = sorted(points)
        if len({p[0] for p in points}) < 2:
            raise ValueError(f"need at least two different batch sizes to fit step time, got {[p[0] for p in points]}")
        b = np.array([p[0] for p in points], float)
        y = np.array([p[1] for p in points], float)
        sd = np.array([(p[2][1] - p[2][0]) / 2 / Z95 if p[2] else RUN_NOISE * p[1] for p in points])
        sd = np.maximum(sd, 0.005 * y)  # an interval of a few steps can be too narrow to believe
        first, _ = Hinge.fit(b, y, np.sqrt(sd**2 + (RUN_NOISE * y) ** 2))
        params = first.parameters
        rel_resid = (y - first(b)) / y
        if len(b) > params + 1:
            excess = float((rel_resid**2).sum() / (len(b) - params)) - float(((sd / y) ** 2).mean())
            noise, source = math.sqrt(max(excess, 0.01**2)), f"residuals of {len(b)} sizes"
            noise = max(noise, 0.02)
        else:
            noise, source = RUN_NOISE, f"assumed ({len(b)} sizes are too few to tell)"
        total_sd = np.sqrt(sd**2 + (noise * y) ** 2)
        _, best = Hinge.fit(b, y, total_sd)
        law = AveragedLaw.fit(b, y, total_sd)
        # Saturation points the measurements cannot tell from the best one (profile likelihood, 95%: chi2 + 3.84).
        plausible = [h for h, chi2 in Hinge.fit_all(b, y, total_sd) if chi2 <= best + 3.84]
        rng = np.random.default_rng(seed)
        drawn = (np.maximum(y + rng.normal(0.0, total_sd), 1e-9) for _ in range(resamples))
        boots = [AveragedLaw.fit(b, resample, total_sd) for resample in drawn]
        return cls(law, b.tolist(), y.tolist(), sd.tolist(), noise, source, boots, plausible)

    def predict(self, batch_size: float) -> Estimate:
        """The law at ``batch_size`` and the 95% interval of what a new run there measures: the bootstrap's
        and the plausible laws' spread, each widened by a new run's own scatter (``run_noise``) about it.

        Args:
            batch_size: The batch size B.

        Returns:
            An ``Estimate``: the mean step time (s) and its 95% interval, its low end at least 0.
        """
        value = float(self.law(batch_size))
        boot = np.array([float(h(batch_size)) for h in self.resamples])
        lo, hi = np.percentile(boot, [2.5, 97.5])
        others = [float(h(batch_size)) for h in self.plausible]
        lo, hi = min([lo, *others]), max([hi, *others])
        scatter = Z95 * self.run_noise
        low, high = value - math.hypot(value - lo, scatter * value), value + math.hypot(hi - value, scatter * value)
        # A step up that may lie on either side of B makes two outcomes, not one spread: the other level
        # gets the scatter of its own.
        other_level = [float(h(batch_size)) for h in self.plausible if _other_side(h, self.law.best, batch_size)]
        if other_level:
            low, high = min(low, min(other_level) * (1 - scatter)), max(high, max(other_level) * (1 + scatter))
        return Estimate(value, max(low, 0.0), high)

    def fit_spread(self, batch_size: float) -> float:
        """Relative half-width of the bootstrap's 95% interval of the law at ``batch_size`` (no new-run noise).

        Args:
            batch_size: The batch size B.

        Returns:
            The half-width as a share of the law's value (0.03: +-3%), the plausible laws' spread included.
        """
        boot = np.array([float(h(batch_size)) for h in self.resamples])
        lo, hi = np.percentile(boot, [2.5, 97.5])
        others = [float(h(batch_size)) for h in self.plausible]
        lo, hi = min([lo, *others]), max([hi, *others])
        return float((hi - lo) / 2 / self.law(batch_size))

    def describe(self) -> dict:
        """The best shape's parameters (the prediction weighs every shape by its weight: ``shapes``), the noise."""
        law = self.law.best
        return {
            "a_s": law.a,
            "b1_s_per_sample": law.b1,
            "b2_s_per_sample": law.b2,
            "saturates_at": law.bs,
            "step_up_s": law.jump,
            "steps_up_at": law.bj,
            "run_noise": self.run_noise,
            "run_noise_from": self.run_noise_from,
            "law": "t(B) = a + b1*B + (b2-b1)*max(0, B - saturates_at) + step_up*[B >= steps_up_at]",
            "shapes": self.law.shapes(),
        }
