"""``Report.summary`` on fixed synthetic runs, pinned to a stored copy: its keys, their order and their values
(tests/data/summary_golden.json). A change of the summary's code that is meant to change none of it keeps this
green; one that changes the report regenerates the copy: ``python tests/test_summary_golden.py``."""

from __future__ import annotations

import json
from pathlib import Path

from tf_mobileperf.steps.report import Report
from tf_mobileperf.steps.totals import StepTotals

from helpers.records import CHANNELS, IDLE_W, report_of, steps_of

GOLDEN = Path(__file__).parent / "data" / "summary_golden.json"


def _empty() -> Report:
    """A run with no measured step: every quantity's empty branch."""
    return Report(
        success=False,
        failed_step=0,
        error="RuntimeError: boom",
        warmup_steps=3,
        steps=[],
        totals=StepTotals(),
        channels=CHANNELS,
        sampling={"period_s": 0.005},
        sensors=[{"name": "synthetic"}],
        device={"board": "synthetic"},
        unavailable={"energy": "no step ran"},
        model="m",
    )


def summaries() -> dict[str, dict]:
    windows = [(0.5, 1.0), (1.0, 2.0), (2.1, 3.5)]
    gapped = steps_of(windows, idle_w=IDLE_W)
    for step, gap in zip(gapped, [0.25, 0.0, 0.1]):
        step.gap_before_s = gap  # as the collector sets it: the time since the previous step ended
    return {
        "idle_and_batch": report_of(gapped, batch_size=8, idle_w=IDLE_W).summary(),
        "plain": report_of(steps_of(windows)).summary(),
        "empty": _empty().summary(),
    }


def _text() -> str:
    return json.dumps(summaries(), indent=1) + "\n"


def test_the_summary_is_unchanged_keys_order_and_values():
    assert _text() == GOLDEN.read_text()


if __name__ == "__main__":
    GOLDEN.write_text(_text())
