"""The sample-to-step join against exact integrals (synthetic signals)."""

from __future__ import annotations

import numpy as np
import pytest

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.integrate import window_energy, window_peak
from tf_mobileperf.steps.join import join

P = Channel("VDD_IN", "power", "synthetic", group="total")


def grid(period=0.005, seconds=2.0, jitter=0.0, seed=0):
    t = np.arange(0, seconds, period) + 100.0
    if jitter:
        t = t + np.random.default_rng(seed).uniform(0, jitter, len(t))
    return np.sort(t)


def test_constant_power_is_p_times_duration_to_float_precision():
    t = grid(jitter=0.002)
    starts = np.array([100.0031, 100.5, 101.23456])
    ends = np.array([100.4999, 101.2, 101.9])
    energy, complete = window_energy(t, np.full(len(t), 7.5), starts, ends, 0.02)
    assert complete.all()
    np.testing.assert_allclose(energy, 7.5 * (ends - starts), rtol=1e-12)


def test_linear_power_is_exact_and_edges_are_clipped():
    t = grid()
    power = 2.0 * (t - 100.0)
    s, e = np.array([100.0031]), np.array([100.0077])  # inside two sample intervals
    energy, _ = window_energy(t, power, s, e, 0.02)
    exact = (e - 100.0) ** 2 - (s - 100.0) ** 2
    np.testing.assert_allclose(energy, exact, rtol=1e-9)


def test_sine_energy_error_below_half_percent():
    t = grid(seconds=10.0)
    power = 5.0 + 3.0 * np.sin(2 * np.pi * 3.0 * t)
    starts = np.arange(100.01, 109.9, 0.137)
    ends = starts + 0.1
    energy, complete = window_energy(t, power, starts, ends, 0.02)

    def F(x):  # the integral of the power
        return 5.0 * x - 3.0 * np.cos(2 * np.pi * 3.0 * x) / (2 * np.pi * 3.0)

    exact = F(ends) - F(starts)
    assert complete.all()
    assert abs(energy.sum() - exact.sum()) / exact.sum() < 0.005


def test_uncovered_and_gapped_windows_are_nan_and_incomplete():
    t = grid()
    power = np.full(len(t), 3.0)
    power[(t > 100.8) & (t < 101.0)] = np.nan  # sensor failed for 200 ms
    starts = np.array([99.0, 100.1, 100.7, 101.5])
    ends = np.array([100.05, 100.3, 101.1, 103.0])
    energy, complete = window_energy(t, power, starts, ends, 0.02)
    assert complete.tolist() == [False, True, False, False]
    assert np.isnan(energy[[0, 2, 3]]).all() and energy[1] == pytest.approx(0.6)


def test_peak_includes_samples_inside_and_edges():
    t = grid()
    mem = np.where(np.abs(t - 100.5) < 0.003, 9.0, 1.0)
    peak, _ = window_peak(t, mem, np.array([100.4, 100.6, 100.6011]), np.array([100.6, 100.7, 100.6019]), 0.02)
    assert peak.tolist() == [9.0, 1.0, 1.0]


def test_join_by_kind_with_slow_channel():
    t = grid()
    values = np.full((len(t), 3), np.nan)
    values[:, 0] = 4.0
    values[::10, 1] = 50.0  # utilization read every 50 ms
    values[:, 2] = np.linspace(1e9, 2e9, len(t))
    channels = [P, Channel("cpu0_util", "util", "synthetic"), Channel("ram_used", "memory", "synthetic")]
    out = join(t, values, channels, np.array([100.2]), np.array([100.7]), period_s=0.005)
    assert out["VDD_IN"].value[0] == pytest.approx(2.0)
    assert out["cpu0_util"].value[0] == pytest.approx(50.0)
    assert out["ram_used"].value[0] == pytest.approx(np.interp(100.7, t, values[:, 2]))


def test_bad_windows_rejected():
    with pytest.raises(ValueError):
        join(grid(), np.ones((400, 1)), [P], np.array([1.0]), np.array([0.5]), 0.005)


def test_scheduling_hiccup_is_jitter_but_a_dead_sensor_is_a_hole():
    t = grid(seconds=3.0)
    values = np.full((len(t), 1), 4.0)
    values[(t > 100.50) & (t < 100.54), 0] = np.nan  # a 40 ms hiccup
    values[(t > 101.50) & (t < 101.80), 0] = np.nan  # 300 ms without an answer
    out = join(t, values, [P], np.array([100.1, 101.1]), np.array([101.0, 102.5]), period_s=0.005)
    assert out["VDD_IN"].complete.tolist() == [True, False]
    assert out["VDD_IN"].value[0] == pytest.approx(4.0 * 0.9)


def test_every_kind_keeps_all_its_reductions_synthetic_signals():
    """A ramp per kind: energy is the integral, mean the time average, peak/min the window's extremes."""
    t = grid()
    ramp = 10.0 * (t - 100.0)  # 0 .. 20 over the two seconds
    kinds = ["power", "energy", "util", "clock", "memory", "temperature", "state"]
    channels = [Channel(f"c_{k}", k, "synthetic") for k in kinds]
    values = np.column_stack([ramp] * len(kinds))
    s, e = np.array([100.5]), np.array([101.5])  # ramp goes 5 -> 15: mean 10, integral 10, rise 10
    out = join(t, values, channels, s, e, period_s=0.005)
    got = {k: {name: float(v[0]) for name, v in out[f"c_{k}"].reductions.items()} for k in kinds}
    assert got["power"] == pytest.approx({"energy_j": 10.0, "mean": 10.0, "peak": 15.0})
    assert got["energy"] == pytest.approx({"energy_j": 10.0, "mean": 10.0})  # a counter's increase
    assert got["util"] == pytest.approx({"mean": 10.0, "peak": 15.0})
    assert got["clock"] == pytest.approx({"mean": 10.0, "min": 5.0})
    assert got["memory"] == pytest.approx({"peak": 15.0, "mean": 10.0})
    assert got["temperature"] == pytest.approx({"mean": 10.0, "peak": 15.0})
    assert got["state"] == pytest.approx({"peak": 15.0})
    assert out["c_power"].value[0] == pytest.approx(10.0) and out["c_memory"].value[0] == pytest.approx(15.0)
