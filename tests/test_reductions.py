"""The reductions registry: a reduction declared once is computed by the join, combined over the run by its
rule, and given a steps.csv column (synthetic samples)."""

from __future__ import annotations

import numpy as np

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps import reductions
from tf_mobileperf.steps.join import join
from tf_mobileperf.steps.records import StepRecord, csv_fields, fill_steps
from tf_mobileperf.steps.totals import StepTotals

UTIL = Channel("cpu_util", "util", "synthetic", group="cpu", device="cpu")


def test_every_kind_lists_its_main_reduction_first_and_each_name_combines_one_way():
    assert reductions.names("power") == ("energy_j", "mean", "peak")
    assert reductions.names("clock") == ("mean", "min")
    assert reductions.COMBINE == {"energy_j": "sum", "mean": "mean", "peak": "max", "min": "min"}


def test_a_new_reduction_is_one_registry_entry(monkeypatch):
    """A lowest utilization per step, added to the registry alone, reaches the join, steps.csv and the summary."""
    lowest = reductions.Reduction("low", "lowest", "min")
    monkeypatch.setitem(reductions.BY_KIND, "util", (*reductions.BY_KIND["util"], lowest))
    monkeypatch.setitem(reductions.COMBINE, "low", "min")
    t = np.arange(0.0, 2.0, 0.005)
    ramp = 10.0 + 40.0 * t  # 10 % at 0 s to 90 % at 2 s
    starts, ends = np.array([0.2, 1.0]), np.array([0.6, 1.5])
    joined = join(t, ramp[:, None], [UTIL], starts, ends, 0.005)
    np.testing.assert_allclose(joined["cpu_util"].reductions["low"], 10.0 + 40.0 * starts)
    assert "cpu_util/low" in csv_fields([UTIL])
    steps = [StepRecord(step=i, start_s=s, end_s=e) for i, (s, e) in enumerate(zip(starts, ends))]
    fill_steps(steps, joined, [UTIL])
    totals = StepTotals()
    totals.add_steps(steps)
    assert totals.channel_summary([UTIL])["cpu_util"]["low"] == 10.0 + 40.0 * 0.2


def test_a_channel_that_only_a_later_step_of_a_join_has_is_combined():
    first = StepRecord(step=0, start_s=0.0, end_s=0.1)
    later = StepRecord(step=1, start_s=0.1, end_s=0.2)
    later.channels = {"cpu_util": {"mean": 40.0, "peak": 70.0}}
    totals = StepTotals()
    totals.add_steps([first, later])
    assert totals.channel_summary([UTIL])["cpu_util"] == {"mean": 40.0, "peak": 70.0}
