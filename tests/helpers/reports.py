"""A run's Report over steps the test made itself: a success without sampling, sensors or device facts."""

from __future__ import annotations

from tf_mobileperf.steps.report import Report
from tf_mobileperf.steps.totals import StepTotals


def report_of(steps, channels, batch_size=None, idle_w=None, joined=None) -> Report:
    """The Report of ``steps`` (all measured, no warm-up); ``joined``: the join whose update periods it keeps."""
    totals = StepTotals()
    if joined is not None:
        totals.note_update_periods(joined)
    totals.add_steps(steps)
    return Report(
        success=True,
        failed_step=None,
        error=None,
        warmup_steps=0,
        steps=steps,
        totals=totals,
        channels=channels,
        sampling={},
        sensors=[],
        device={},
        unavailable={},
        batch_size=batch_size,
        idle_power_w=idle_w,
    )
