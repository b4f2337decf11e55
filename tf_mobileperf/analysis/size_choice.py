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

    ``measure(B)`` runs batch size B and returns (mean step time, its 95% interval or None), or None where it
    failed (out of memory). Starts with 1, 4, 16 (those not above ``largest``); then doubles while the marginal
    cost per sample between the last two sizes differs by more than ``tolerance`` from the one before (the
    device not yet saturated: time is not yet linear in B), never above ``largest`` (the largest target is
    measured last if the doubling would pass it); then, while the budget lasts, halves (geometrically) the gap
    between measured sizes where the fit is least certain (the bootstrap's 95% interval of the law at the gap's
    middle), until it is within ``goal`` (relative half-width) at every gap's middle.
    At most ``budget`` sizes in all. The points are ``StepTimeModel.fit``'s.
    """
    chosen: list[int] = []
    why: list[str] = []
    points: dict[int, tuple[int, float, tuple[float, float] | None]] = {}

    def run(b: int, reason: str) -> bool:
        chosen.append(b)
        why.append(f"{b}: {reason}")
        got = measure(b)
        if got is None:
            why.append(f"stopped: {b} failed")
            return False
        points[b] = (b, got[0], got[1])
        return True

    for b in sorted({b for b in FIRST_SIZES if b <= largest} | ({largest} if largest < FIRST_SIZES[-1] else set())):
        if not run(b, "starting size (1: the fixed cost; 1, 4, 16: the cost per sample)"):
            return chosen, why, list(points.values())
    bent = False
    while len(chosen) < budget:
        if len(points) < 3:
            break
        b0, b1, b2 = sorted(points)[-3:]
        t = {b: points[b][1] for b in (b0, b1, b2)}
        s1, s2 = (t[b1] - t[b0]) / (b1 - b0), (t[b2] - t[b1]) / (b2 - b1)
        slopes = f"{b0}..{b1}: {s1 * 1e3:.3g} ms, {b1}..{b2}: {s2 * 1e3:.3g} ms per sample"
        if s1 > 0 and abs(s2 / s1 - 1) <= tolerance and bent:
            why.append(
                f"doubling stopped: past the bend the cost per sample agrees within {tolerance:.0%} "
                f"({slopes}): time is linear in B, the device is saturated"
            )
            break
        # The cost per sample rose, by more than the runs' noise can make it: the device began to saturate.
        noise = {b: math.hypot(RUN_NOISE * t[b], _sd_of(points[b][2])) for b in (b0, b1, b2)}
        slope_sd = math.sqrt(
            (noise[b0] ** 2 + noise[b1] ** 2) / (b1 - b0) ** 2 + (noise[b1] ** 2 + noise[b2] ** 2) / (b2 - b1) ** 2
        )
        bent = bent or (s2 > s1 * (1 + tolerance) and s2 - s1 > 2 * slope_sd)
        if b2 >= largest:
            why.append(f"doubling stopped at the largest target {largest}")
            break
        if not run(min(2 * b2, largest), f"the cost per sample still changes ({slopes}): not yet saturated"):
            return chosen, why, list(points.values())
    while len(chosen) < budget and len(points) >= 2:
        model = StepTimeModel.fit(list(points.values()), resamples=100)
        sizes = sorted(points)
        middles = {round(math.sqrt(lo * hi)) for lo, hi in zip(sizes, sizes[1:])} - set(sizes)
        widths = {b: model.fit_spread(b) for b in middles}
        if not widths:
            break
        worst = max(widths, key=lambda b: widths[b])
        if widths[worst] <= goal:
            why.append(
                f"stopped: the fit is known within {goal:.0%} between the measured sizes (95%, the widest "
                f"+-{widths[worst]:.1%} at {worst})"
            )
            break
        if not run(worst, f"the middle of the gap where the fit is least certain (95% +-{widths[worst]:.1%})"):
            break
    else:
        if len(chosen) >= budget:
            why.append(f"stopped: the budget of {budget} sizes is spent")
    return chosen, why, list(points.values())


def _sd_of(interval: tuple[float, float] | None) -> float:
    """The standard error a 95% interval (low, high) stands for; 0 without one."""
    return (interval[1] - interval[0]) / 2 / Z95 if interval else 0
