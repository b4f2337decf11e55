"""A run's step time states how well it is known: the 95% interval of its mean and the drift between its
halves, in the report; a run whose step time was not steady says so once, at its end."""

from __future__ import annotations

import logging
import time

import numpy as np
import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.steps import precision


def test_the_interval_and_the_drift_of_known_step_times():
    mean, low, high = precision.ci95([0.010, 0.012, 0.011, 0.013])
    assert mean == pytest.approx(0.0115) and (low, high) == pytest.approx((0.0094458, 0.0135542), rel=1e-4)
    assert precision.drift([0.01, 0.01, 0.02, 0.02]) == pytest.approx(1.0)
    assert precision.drift([0.01] * 3) is None and precision.ci95([0.01]) is None
    assert precision.unsteady(np.full(50, 0.01) + np.tile([0.0, 1e-4], 25)) is None
    assert precision.unsteady(np.full(40, 0.01) * np.tile([0.9, 1.1], 20)) is None  # +-3%: steady enough
    why = precision.unsteady([0.01] * 20 + [0.02] * 20)
    assert "the second half of the steps took +100% against the first" in why and "95% interval" in why


def run(logdir, step_s: list[float]) -> dict:
    with PerfMonitor(logdir, sensors="none", warmup_steps=0, idle_s=0) as perf:
        for s in step_s:
            with perf.step():
                time.sleep(s)
    return perf.report.summary()


def test_a_run_that_slowed_down_says_so_once_and_a_steady_one_does_not(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="tf_mobileperf"):
        summary = run(tmp_path / "slowed", [0.01] * 8 + [0.04] * 8)
    said = [r.getMessage() for r in caplog.records if "not steady" in r.getMessage()]
    assert len(said) == 1 and "second half of the steps took" in said[0]
    assert summary["step_time_drift"] > 1.0
    low, high = summary["step_time_ci95_s"]
    assert low < summary["step_time_s"]["mean"] < high
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tf_mobileperf"):
        summary = run(tmp_path / "steady", [0.1] * 12)  # sleeps: under load they overshoot by ms, not 5%
    assert not [r for r in caplog.records if "not steady" in r.getMessage()]
    assert abs(summary["step_time_drift"]) < 0.3  # sleeps overshoot under load: 10.6% seen in a whole-suite run
