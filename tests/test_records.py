"""Per-step records: every channel's reductions kept, the seed's quantities derived by role (synthetic samples)."""

from __future__ import annotations

import numpy as np
import pytest

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.join import join
from tf_mobileperf.steps.records import GIB, StepRecord, csv_fields, energy_rails, fill_steps

from helpers.records import CHANNELS, IDLE_W, report_of, steps_of


def test_every_channel_keeps_its_reductions():
    (step,) = steps_of([(1.0, 1.5)])
    assert set(step.channels) == {c.name for c in CHANNELS}
    assert step.channels["VDD_IN"] == pytest.approx({"energy_j": 3.0, "mean": 6.0, "peak": 6.0})
    assert step.channels["gpu0_energy"] == pytest.approx({"energy_j": 20.0, "mean": 40.0})
    assert step.channels["cpu0_freq"] == pytest.approx({"mean": 2.0e9, "min": 2.0e9})
    assert step.channels["proc_peak"] == pytest.approx({"peak": 1.5 * GIB, "mean": 1.5 * GIB})
    assert step.channels["soc_temp"] == pytest.approx({"mean": 45.0, "peak": 45.0})
    assert step.channels["ram_used"]["peak"] == pytest.approx(2.5 * GIB)


def test_seed_quantities_are_derived_by_role_not_by_name():
    (step,) = steps_of([(1.0, 1.5)])
    # NVML's counter wins over its power channel of the same rail; the total is the "total" rail.
    assert [c.name for c in energy_rails(CHANNELS)] == ["VDD_IN", "VDD_SYS_GPU", "gpu0_energy"]
    assert step.energy_j == pytest.approx({"VDD_IN": 3.0, "VDD_SYS_GPU": 1.0, "gpu0_energy": 20.0, "total": 3.0})
    assert step.power_w["total"] == pytest.approx(6.0)
    assert step.cpu_util == pytest.approx(40.0)
    assert step.cpu_util_per_core == pytest.approx({"cpu0": 30.0, "cpu1": 50.0})
    assert step.gpu_util == pytest.approx(90.0)
    assert step.mem_peak_gb == pytest.approx(2.5)  # the board's memory, not the process's


def test_active_energy_is_each_rails_energy_above_its_idle_power():
    (step,) = steps_of([(1.0, 1.5)], idle_w=IDLE_W)
    # 6 W against 2 W idle, 2 W against 0.5 W, over 0.5 s; a rail without an idle power has none.
    assert step.energy_active_j == pytest.approx(
        {"VDD_IN": 2.0, "VDD_SYS_GPU": 0.75, "gpu0_energy": None, "total": 2.0}
    )
    assert step.energy_j["total"] == pytest.approx(3.0)
    row = step.csv_row()
    assert row["energy_active_j/VDD_SYS_GPU"] == pytest.approx(0.75)
    assert {"energy_active_j/VDD_IN", "energy_active_j/total"} <= set(csv_fields(CHANNELS)) and set(row) <= set(
        csv_fields(CHANNELS)
    )


def test_the_summary_totals_active_energy_per_rail_and_per_sample():
    summary = report_of(
        steps_of([(0.5, 1.0), (1.0, 2.0), (2.0, 3.5)], idle_w=IDLE_W), batch_size=8, idle_w=IDLE_W
    ).summary()
    assert summary["idle_power_w"] == IDLE_W
    assert summary["energy_active_total"] == pytest.approx(4.0 * 3.0)  # (6 - 2) W over 3 s
    assert summary["energy_active_j"] == pytest.approx(
        {"VDD_IN": 12.0, "VDD_SYS_GPU": 4.5, "gpu0_energy": None, "total": 12.0}
    )
    assert summary["energy_active_per_sample_j"] == pytest.approx(12.0 / 24)  # 3 steps of 8 samples
    assert summary["energy_total"] == pytest.approx(18.0)


def test_without_an_idle_baseline_active_energy_is_null_not_zero():
    steps = steps_of([(1.0, 1.5)])
    assert steps[0].energy_active_j == {"VDD_IN": None, "VDD_SYS_GPU": None, "gpu0_energy": None, "total": None}
    summary = report_of(steps).summary()
    assert summary["idle_power_w"] is None and summary["energy_active_j"] is None
    assert summary["energy_active_total"] is None and summary["energy_active_per_sample_j"] is None


THROTTLE = Channel("clk_cap", "state", "synthetic", group="throttle", device="board")


def throttle_steps(windows, channels):
    """Synthetic: a throttle state that is 1 from t = 2.0 s to 2.6 s, beside a 6 W input rail."""
    t = np.arange(0.0, 4.0, 0.005)
    state = ((t >= 2.0) & (t < 2.6)).astype(float)
    columns = {"VDD_IN": np.full(len(t), 6.0), "clk_cap": state}
    joined = join(
        t,
        np.column_stack([columns[c.name] for c in channels]),
        channels,
        np.array([w[0] for w in windows]),
        np.array([w[1] for w in windows]),
        period_s=0.005,
    )
    steps = [StepRecord(step=i, start_s=s, end_s=e) for i, (s, e) in enumerate(windows)]
    fill_steps(steps, joined, channels)
    return steps


def test_a_step_in_which_a_throttle_state_rose_is_throttled_and_counted():
    channels = [CHANNELS[0], THROTTLE]
    steps = throttle_steps([(1.0, 1.5), (1.9, 2.2), (2.2, 2.5), (3.0, 3.5)], channels)
    assert [s.throttled for s in steps] == [False, True, True, False]
    assert "throttled" in csv_fields(channels) and steps[1].csv_row()["throttled"] == 1
    assert report_of(steps, channels).summary()["throttled_steps"] == 2


def test_without_a_throttle_channel_throttled_is_null_not_false():
    steps = throttle_steps([(1.0, 1.5), (2.2, 2.5)], [CHANNELS[0]])
    assert [s.throttled for s in steps] == [None, None]
    assert "throttled" not in csv_fields([CHANNELS[0]]) and "throttled" not in steps[0].csv_row()
    assert report_of(steps, [CHANNELS[0]]).summary()["throttled_steps"] is None


def test_the_summary_says_which_rails_the_total_sums():
    tx2 = report_of(steps_of([(1.0, 1.5)])).summary()
    assert tx2["input_rail"] == "VDD_IN" and tx2["total_rails"] == ["VDD_IN"]
    # Built like AGX Orin's INA3221 rails: no input rail, so the total is the sum of the rails, sub-zones left out.
    orin = [
        Channel("VDD_GPU_SOC", "power", "synthetic", group="gpu"),
        Channel("VDD_CPU_CV", "power", "synthetic", group="cpu+gpu+cv"),
        Channel("VIN_SYS_5V0", "power", "synthetic", group="sys"),
        Channel("VDD_DDR", "power", "synthetic", group="subzone"),
    ]
    t = np.arange(0.0, 2.0, 0.005)
    joined = join(
        t,
        np.column_stack([np.full(len(t), w) for w in (3.0, 2.0, 4.0, 1.0)]),
        orin,
        np.array([0.5]),
        np.array([1.0]),
        period_s=0.005,
    )
    step = StepRecord(step=0, start_s=0.5, end_s=1.0)
    fill_steps([step], joined, orin)
    summary = report_of([step], orin).summary()
    assert summary["input_rail"] is None and summary["total_rails"] == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]
    assert summary["energy_total"] == pytest.approx((3.0 + 2.0 + 4.0) * 0.5)


def test_renamed_channels_keep_their_roles():
    renamed = [
        Channel("aggregate", "util", "synthetic", device="cpu"),
        Channel("core_a", "util", "synthetic", device="cpu", core=3, cluster="X"),
        Channel("dram", "memory", "synthetic", device="board"),
    ]
    t = np.arange(0.0, 2.0, 0.005)
    joined = join(
        t,
        np.column_stack([np.full(len(t), 10.0), np.full(len(t), 20.0), np.full(len(t), GIB)]),
        renamed,
        np.array([0.5]),
        np.array([1.0]),
        period_s=0.005,
    )
    step = StepRecord(step=0, start_s=0.5, end_s=1.0)
    fill_steps([step], joined, renamed)
    assert step.cpu_util == pytest.approx(10.0) and step.mem_peak_gb == pytest.approx(1.0)
    assert step.cpu_util_per_core == pytest.approx({"cpu3": 20.0})


def test_steps_csv_has_a_column_for_every_reduction_and_the_row_fills_it():
    (step,) = steps_of([(1.0, 1.5)])
    fields = csv_fields(CHANNELS)
    row = step.csv_row()
    assert {
        "VDD_IN/energy_j",
        "VDD_IN/mean",
        "VDD_IN/peak",
        "cpu0_freq/min",
        "soc_temp/peak",
        "proc_peak/peak",
        "energy_j/total",
        "power_w/gpu0_energy",
    } <= set(fields)
    assert set(row) <= set(fields) and row["cpu0_freq/mean"] == pytest.approx(2.0e9)


def test_the_summary_carries_each_channel_over_the_measured_steps():
    steps = steps_of([(0.5, 1.0), (1.0, 2.0), (2.0, 3.5)])
    report = report_of(steps)
    summary = report.summary()
    assert summary["channels"]["ram_used"] == pytest.approx(
        {"peak": 4.5 * GIB, "mean": GIB * (1 + (0.75 + 1.5 + 2.75) / 3)}
    )
    assert summary["channels"]["cpu0_freq"] == pytest.approx({"mean": 2.0e9, "min": 2.0e9})
    assert "energy_j" not in summary["channels"]["VDD_IN"]  # energy is in summary["energy_j"]
    assert summary["cpu_util_per_cluster"] == pytest.approx({"Denver2": 30.0, "A57": 50.0})
    assert summary["energy_j"]["total"] == pytest.approx(6.0 * 3.0)
