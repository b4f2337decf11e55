"""Energy counters read faster than they update (synthetic staircases, as NVML's total-energy counter on an
H200: read every 10 ms, updated every ~100 ms): the join reads them off their change points, says which
steps it resolved ("measured") and which it only interpolated, and never gives a negative energy."""

from __future__ import annotations

import numpy as np
import pytest

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.counter import counter_series, settled_until
from tf_mobileperf.steps.join import INTERPOLATED, MEASURED, join

COUNTER = Channel("gpu0_energy", "energy", "synthetic staircase counter", device="gpu", rail="gpu0")
POWER = Channel("gpu0_power", "power", "synthetic staircase power", device="gpu", rail="gpu0")

T0, UPDATE_S, READ_S = 100.0, 0.1, 0.01


def power(t):
    """The synthetic GPU's power (W): slow enough that a chord over one 100 ms update stays within 0.2 J."""
    return 200.0 + 50.0 * np.sin(2 * np.pi * 0.25 * (t - T0))


def energy(t):
    """The exact integral of ``power`` from T0 (J)."""
    return 200.0 * (t - T0) - 50.0 / (2 * np.pi * 0.25) * (np.cos(2 * np.pi * 0.25 * (t - T0)) - 1.0)


def staircase(seconds=4.0, read_phase=0.0037, update_s=UPDATE_S, read_s=READ_S):
    """Reads every ``read_s`` of a counter that takes the exact energy every ``update_s`` and holds it between."""
    t = T0 + read_phase + np.arange(0.0, seconds, read_s)
    last_update = T0 + np.floor((t - T0) / update_s + 1e-9) * update_s
    return t, energy(last_update), power(last_update)


def contiguous(first, durations):
    edges = first + np.concatenate([[0.0], np.cumsum(durations)])
    return edges[:-1], edges[1:]


def test_staircase_counter_resolves_300ms_steps_within_1_percent_and_marks_them_measured():
    t, counter, _ = staircase()
    # 0.26 .. 0.34 s: a window holds two or three updates, so reading the staircase directly is off by a third
    starts, ends = contiguous(T0 + 0.5, np.tile([0.26, 0.30, 0.34], 3))
    out = join(t, counter[:, None], [COUNTER], starts, ends, period_s=READ_S)["gpu0_energy"]
    exact = energy(ends) - energy(starts)
    assert out.complete.all()
    np.testing.assert_allclose(out.value, exact, rtol=0.01)
    assert out.method.tolist() == [MEASURED] * len(starts)
    assert out.update_period_s == pytest.approx(UPDATE_S, rel=1e-6)


@pytest.mark.parametrize("phase", [0.0037, 0.0113, 0.0211])
def test_reads_frozen_for_up_to_150ms_neither_shift_the_grid_nor_its_period(phase):
    # Read every 29.7 ms (0.3 of the update period, as NVML's counter is), the reader frozen 30-150 ms at
    # random times (a VM descheduled by its host): the changes seen across a freeze have brackets that wide,
    # their midpoints far from the change. Placed with them, the grid drifted by up to 48 ms and its period
    # came out 97.8 ms, and 300 ms steps said "measured" were 4-12% off.
    t, counter, _ = staircase(seconds=6.0, read_phase=phase, read_s=0.0297)
    rng = np.random.default_rng(int(phase * 1e4))
    keep = np.ones(len(t), dtype=bool)
    at = T0 + 0.3
    while at < T0 + 5.5:
        keep &= ~((t > at) & (t < at + rng.uniform(0.03, 0.15)))
        at += rng.uniform(0.3, 0.8)
    t, counter = t[keep], counter[keep]
    series = counter_series(t, counter)
    assert series.update_period_s == pytest.approx(UPDATE_S, rel=0.005)
    placed = series.t[1:-1] - T0
    np.testing.assert_allclose(placed, np.rint(placed / UPDATE_S) * UPDATE_S, atol=0.005)
    starts, ends = contiguous(T0 + 0.5, np.full(16, 0.3))
    out = join(t, counter[:, None], [COUNTER], starts, ends, period_s=0.0297)["gpu0_energy"]
    known = np.isfinite(out.value)  # a step over a freeze is incomplete
    assert known.sum() >= 6
    exact = energy(ends) - energy(starts)
    np.testing.assert_allclose(out.value[known], exact[known], rtol=0.01)
    # each inside its bound, which says it is known to ~4-11% (three residuals of the fit)
    assert (np.abs(out.value - exact)[known] <= out.bound[known]).all() and (
        out.bound[known] < 0.12 * exact[known]
    ).all()


def test_staircase_counter_gives_10ms_steps_the_interpolated_share_and_the_exact_total():
    t, counter, _ = staircase()
    starts, ends = contiguous(T0 + 0.5, np.full(250, 0.01))
    out = join(t, counter[:, None], [COUNTER], starts, ends, period_s=READ_S)["gpu0_energy"]
    exact = energy(ends) - energy(starts)
    assert out.complete.all()
    assert abs(out.value.sum() - exact.sum()) / exact.sum() < 0.01
    # Each step gets the mean power of its update interval times its duration, never 0 J or a whole update.
    np.testing.assert_allclose(out.value, exact, rtol=0.05)
    assert out.method.tolist() == [INTERPOLATED] * len(starts)


def test_the_sum_of_contiguous_steps_from_one_counter_update_to_another_is_the_counters_own_difference():
    t, counter, _ = staircase()
    series = counter_series(t, counter)
    first, last = series.t[6], series.t[19]  # two update instants as placed
    starts, ends = contiguous(first, np.full(100, (last - first) / 100))
    out = join(t, counter[:, None], [COUNTER], starts, ends, period_s=READ_S)["gpu0_energy"]
    assert out.value.sum() == pytest.approx(series.cum[19] - series.cum[6], rel=1e-12)


def test_a_staircase_power_channel_states_bounds_that_hold_the_exact_energy():
    t, _, watts = staircase()
    starts = np.array([T0 + 0.5, T0 + 1.0, T0 + 2.0])
    ends = starts + np.array([0.01, 0.15, 0.3])
    out = join(t, watts[:, None], [POWER], starts, ends, period_s=READ_S)["gpu0_power"]
    assert out.update_period_s == pytest.approx(UPDATE_S, rel=1e-6)
    exact = energy(ends) - energy(starts)
    assert (np.abs(out.value - exact) <= out.bound).all()
    # A held value is the power of one instant of its 100 ms: a 10 ms step's bound is half its energy.
    assert out.bound[0] > 0.3 * exact[0] and out.method[0] == INTERPOLATED
    assert out.method[1:].tolist() == [MEASURED, MEASURED]


def test_a_counter_that_changes_at_every_read_is_read_at_its_read_instants():
    t = T0 + np.arange(0.0, 2.0, 0.005)
    out = join(t, (40.0 * (t - T0))[:, None], [COUNTER], np.array([T0 + 0.5]), np.array([T0 + 0.53]), period_s=0.005)[
        "gpu0_energy"
    ]
    assert out.value[0] == pytest.approx(40.0 * 0.03, rel=1e-9)
    assert out.method.tolist() == [MEASURED]  # 30 ms >= two 5 ms updates


def test_a_counter_going_backwards_is_a_gap_never_negative_energy():
    t, counter, _ = staircase()
    reload = T0 + 2.0  # the driver reloads: the counter starts again near 0
    counter = np.where(t >= reload, counter - energy(reload) + 3.0, counter)
    starts = np.array([T0 + 1.0, T0 + 1.95, T0 + 2.5])
    ends = starts + 0.3
    out = join(t, counter[:, None], [COUNTER], starts, ends, period_s=READ_S)["gpu0_energy"]
    assert out.complete.tolist() == [True, False, True]
    assert np.isnan(out.value[1]) and out.method[1] is None
    exact = energy(ends) - energy(starts)
    np.testing.assert_allclose(out.value[[0, 2]], exact[[0, 2]], rtol=0.01)


@pytest.mark.parametrize("shift", [0.0, 0.037, 0.05])
def test_after_a_reload_the_counter_restarts_on_its_own_grid_and_no_step_is_interpolated_across_it(shift):
    # A driver reload: the counter starts again at 3 J and updates on a clock ``shift`` s out of phase with
    # the old one. One grid fitted through both put steps 2.6% off a second before the reload and 3.9% off
    # after it, all "measured".
    t = T0 + 0.0037 + np.arange(0.0, 6.0, READ_S)
    reload = T0 + 2.0
    old = T0 + np.floor((t - T0) / UPDATE_S + 1e-9) * UPDATE_S
    new = np.maximum(reload, reload + shift + np.floor((t - reload - shift) / UPDATE_S + 1e-9) * UPDATE_S)
    counter = np.where(t < reload, energy(old), energy(new) - energy(reload) + 3.0)
    starts, ends = contiguous(T0 + 0.5, np.full(17, 0.3))
    out = join(t, counter[:, None], [COUNTER], starts, ends, period_s=READ_S)["gpu0_energy"]
    # null: the step over the last update before the reload, and the one up to the new clock's first change
    fault = (starts < reload + shift + UPDATE_S) & (ends > reload - UPDATE_S)
    assert out.complete.tolist() == (~fault).tolist()
    assert np.isnan(out.value[fault]).all() and set(out.method[fault]) == {None}
    exact = energy(ends) - energy(starts)
    np.testing.assert_allclose(out.value[~fault], exact[~fault], rtol=0.003)
    assert set(out.method[~fault]) == {MEASURED}


def test_a_step_after_the_counters_last_update_waits_for_the_next_one():
    t, counter, _ = staircase(seconds=1.0)
    series = counter_series(t, counter)
    last_change = series.t[-1]
    assert t[-1] - last_change < UPDATE_S  # the last reads still show the latest value: no point there
    starts, ends = np.array([last_change - 0.3, last_change - 0.02]), np.array([last_change - 0.01, t[-1]])
    out = join(t, counter[:, None], [COUNTER], starts, ends, period_s=READ_S)["gpu0_energy"]
    assert out.complete.tolist() == [True, False]
    assert settled_until(t, counter[:, None], [COUNTER], stale_s=1.0) == pytest.approx(last_change)


def test_a_counter_that_stopped_changing_gives_no_energy_after_its_last_change_never_zero():
    # A frozen counter (issue: steps over the freeze were "interpolated" 0 J while the GPU drew 200 W), and the
    # incremental join's case: a value held at the last reads is the energy up to its update, not up to later.
    t, counter, _ = staircase(seconds=1.0)
    counter = np.where(t > T0 + 0.6, counter[np.searchsorted(t, T0 + 0.6)], counter)  # frozen after 0.6 s
    series = counter_series(t, counter)
    assert series.t[-1] <= T0 + 0.6  # the last change point
    starts, ends = np.array([T0 + 0.3, T0 + 0.75]), np.array([T0 + 0.45, T0 + 0.85])
    out = join(t, counter[:, None], [COUNTER], starts, ends, period_s=READ_S)["gpu0_energy"]
    assert out.complete.tolist() == [True, False] and np.isnan(out.value[1]) and out.method[1] is None
    assert out.value[0] == pytest.approx(energy(ends[0]) - energy(starts[0]), rel=0.01)
