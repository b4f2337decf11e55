"""Which batch sizes a prediction measures: a few small ones, then where the fitted step-time model is least sure."""

from __future__ import annotations

import math
from collections.abc import Callable

from tf_mobileperf.analysis.step_model import RUN_NOISE, Z95, StepTimeModel

#: The sizes every choice starts with.
FIRST_SIZES = (1, 4, 16)


def choose_sizes(
    measure: Callable[[int], tuple[float, tuple[float, float] | None] | None],
    largest: int,
    budget: int = 7,
    tolerance: float = 0.15,
    goal: float = 0.04,
) -> tuple[list[int], list[str], list]:
    """Sizes to measure for predictions at 1..``largest``, why each was chosen, and their measured points.

    Starts with 1, 4, 16 (those not above ``largest``, and ``largest`` where it is below 16); then doubles the
    largest size until the cost per sample has risen (by more than ``tolerance`` and the runs' noise: the device
    began to saturate) and the last two costs per sample agree within ``tolerance`` (time is linear in B), never
    above ``largest`` (measured last if the doubling would pass it); then, while the budget lasts, measures the
    geometric middle of the gap between measured sizes where the fit is least certain (``StepTimeModel.fit_spread``
    there), until it is within ``goal`` at every gap's middle. A size that fails ends the choice.

    Args:
        measure: ``measure(B)`` runs batch size B and returns (mean step time in s, its 95% interval or None), or
            None where it failed (out of memory).
        largest: The largest batch size to predict at; no larger size is measured.
        budget: The most sizes measured in all.
        tolerance: How far (relative) two costs per sample may differ and count as the same.
        goal: The relative half-width of the fit's 95% interval at every gap's middle that ends the choice.

    Returns:
        (the sizes in the order measured; why each was chosen, and why the choice stopped; the points of the
        sizes that did not fail, (B, mean, interval) as ``StepTimeModel.fit`` takes them).
    """
    chooser = _Chooser(measure)
    starting = {b for b in FIRST_SIZES if b <= largest} | ({largest} if largest < FIRST_SIZES[-1] else set())
    for b in sorted(starting):
        if not chooser.run(b, "starting size (1: the fixed cost; 1, 4, 16: the cost per sample)"):
            return chooser.result()
    if chooser.double_until_saturated(largest, budget, tolerance):
        chooser.fill_least_certain_gaps(budget, goal)
    return chooser.result()


class _Chooser:
    """The sizes chosen so far, why each, and the points they measured."""

    def __init__(self, measure: Callable[[int], tuple[float, tuple[float, float] | None] | None]):
        self.measure = measure
        self.chosen: list[int] = []
        self.why: list[str] = []
        self.points: dict[int, tuple[int, float, tuple[float, float] | None]] = {}

    def result(self) -> tuple[list[int], list[str], list]:
        return self.chosen, self.why, list(self.points.values())

    def run(self, b: int, reason: str) -> bool:
        """Measures ``b``; False where it failed (the choice stops there)."""
        self.chosen.append(b)
        self.why.append(f"{b}: {reason}")
        got = self.measure(b)
        if got is None:
            self.why.append(f"stopped: {b} failed")
            return False
        self.points[b] = (b, got[0], got[1])
        return True

    def double_until_saturated(self, largest: int, budget: int, tolerance: float) -> bool:
        """Doubles the largest size while the cost per sample still changes; False where a size failed."""
        points, bent = self.points, False
        while len(self.chosen) < budget and len(points) >= 3:
            b0, b1, b2 = sorted(points)[-3:]
            t = {b: points[b][1] for b in (b0, b1, b2)}
            s1, s2 = (t[b1] - t[b0]) / (b1 - b0), (t[b2] - t[b1]) / (b2 - b1)
            slopes = f"{b0}..{b1}: {s1 * 1e3:.3g} ms, {b1}..{b2}: {s2 * 1e3:.3g} ms per sample"
            if s1 > 0 and abs(s2 / s1 - 1) <= tolerance and bent:
                self.why.append(
                    f"doubling stopped: past the bend the cost per sample agrees within {tolerance:.0%} "
                    f"({slopes}): time is linear in B, the device is saturated"
                )
                return True
            # The cost per sample rose, by more than the runs' noise can make it: the device began to saturate.
            noise = {b: math.hypot(RUN_NOISE * t[b], _sd_of(points[b][2])) for b in (b0, b1, b2)}
            slope_sd = math.sqrt(
                (noise[b0] ** 2 + noise[b1] ** 2) / (b1 - b0) ** 2 + (noise[b1] ** 2 + noise[b2] ** 2) / (b2 - b1) ** 2
            )
            bent = bent or (s2 > s1 * (1 + tolerance) and s2 - s1 > 2 * slope_sd)
            if b2 >= largest:
                self.why.append(f"doubling stopped at the largest target {largest}")
                return True
            if not self.run(min(2 * b2, largest), f"the cost per sample still changes ({slopes}): not yet saturated"):
                return False
        return True

    def fill_least_certain_gaps(self, budget: int, goal: float) -> None:
        """While the budget lasts, measures the middle of the gap where the fit is least certain."""
        points = self.points
        while len(self.chosen) < budget and len(points) >= 2:
            model = StepTimeModel.fit(list(points.values()), resamples=100)
            sizes = sorted(points)
            middles = {round(math.sqrt(lo * hi)) for lo, hi in zip(sizes, sizes[1:])} - set(sizes)
            widths = {b: model.fit_spread(b) for b in middles}
            if not widths:
                return
            worst = max(widths, key=lambda b: widths[b])
            if widths[worst] <= goal:
                self.why.append(
                    f"stopped: the fit is known within {goal:.0%} between the measured sizes (95%, the widest "
                    f"+-{widths[worst]:.1%} at {worst})"
                )
                return
            if not self.run(worst, f"the middle of the gap where the fit is least certain (95% +-{widths[worst]:.1%})"):
                return
        if len(self.chosen) >= budget:
            self.why.append(f"stopped: the budget of {budget} sizes is spent")


def _sd_of(interval: tuple[float, float] | None) -> float:
    """The standard error a 95% interval (low, high) stands for; 0 without one."""
    return (interval[1] - interval[0]) / 2 / Z95 if interval else 0
