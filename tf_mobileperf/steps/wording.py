"""The report's words for its rules and for why a rail has no energy in a step: what ``steps.report`` states
beside its numbers, in one place."""

from __future__ import annotations

from tf_mobileperf.steps.join import MEASURED_WITHIN
from tf_mobileperf.steps.records import Roles

#: How a step's energy method is chosen (``steps.join.energy_method``), as the report states it.
METHOD_RULE = (
    "a summary of each step's energy_bound_j (the half-width of an interval holding the step's true energy): "
    f"measured where the bound is at most {MEASURED_WITHIN:.0%} of the step's energy, interpolated otherwise "
    "or where no bound is known"
)
#: What ``gpu_util`` of a step is, as the report states it.
GPU_UTIL_RULE = (
    "the time-weighted mean over the step of the GPU's utilization readings; each reading is the busy share "
    "of the GPU over its own window (gpu_util_window_s, NVML's ~200 ms before the reading), which straddles "
    "the step and the gaps around it: a step's value is that average, not the step's own busy share"
)

#: Why a rail that has valid readings in the run has no energy in some step.
NOT_COVERED = "no valid readings cover those steps (a read that failed, or a gap: see sampling.channel_gaps)"

#: Why an energy counter that froze has no energy in the steps since (``sampling.frozen_counters``).
FROZEN = (
    "the counter stopped changing at {since_s:.3f} s while it was still read (a stuck counter or driver): "
    "the steps since have no energy from it"
)


def total_parts(roles: Roles) -> str:
    """What the total's energy is, so a step without it says which rails to look at.

    Args:
        roles: The run's channel roles.

    Returns:
        A clause: the input rail whose energy is the total, or the rails it sums.
    """
    if roles.input_rail is not None:
        return f"the total is the input rail {roles.input_rail}'s energy"
    return f"the total sums {', '.join(c.name for c in roles.total)}, and is unknown where one of them is"
