"""The background sampler, driven by the synthetic sensor (a known signal).

Lambda signals cannot be pickled, so their sampler process is forked; the module-level signals of
``helpers.picklable`` are sampled by a process started fresh."""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest

from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sampling.stats import SamplingStats
from tf_mobileperf.sensors import SyntheticSensor

from helpers import picklable
from helpers.sampler_wait import wait_for_rows


@pytest.mark.parametrize("mode,start", [("process", "spawn"), ("process", "fork"), ("thread", "auto")])
def test_synthetic_signal_sampled_on_monotonic_clock(mode, start):
    signal = picklable.offset_sine(2.0) if start == "spawn" else lambda t: 2.0 + math.sin(t)
    sampler = Sampler([SyntheticSensor(power_w={"VDD_IN": signal})], period_s=0.005, mode=mode)
    assert sampler.start_method == (start if mode == "process" else None)
    sampler.start()
    sampler.start()  # idempotent
    assert sampler.wait_for_first_row()
    time.sleep(0.5)
    rows = sampler.drain()
    sampler.stop()
    sampler.stop()
    assert len(rows) > 40
    assert np.all(np.diff(rows.t) > 0)
    # Read within 20 ms of its row's time even on a busy machine (a thread preempted, or a read
    # moved to its own thread after overrunning its budget, which lands a tick late).
    np.testing.assert_allclose(rows.values[:, 0], 2.0 + np.sin(rows.t), atol=0.02)
    assert abs(rows.t[-1] - time.monotonic()) < 1.0


def test_failing_sensor_leaves_nan_gap_and_sampling_goes_on():
    t0 = time.monotonic()

    def flaky(t):
        if 0.1 < t - t0 < 0.2:
            raise OSError("EIO")
        return 1.0

    class Raising(SyntheticSensor):
        def read(self):
            if time.monotonic() - t0 > 0.1:
                raise OSError("vanished")
            return super().read()

    sampler = Sampler(
        [SyntheticSensor(power_w={"a": flaky}), Raising(power_w={"b": lambda t: 3.0})], 0.005, mode="process"
    )
    with sampler:
        time.sleep(0.35)
    rows = sampler.drain()
    a, b = rows.values[:, 0], rows.values[:, 1]
    in_gap = (rows.t - t0 > 0.12) & (rows.t - t0 < 0.18)
    assert np.isnan(a[in_gap]).all() and (a[rows.t - t0 > 0.25] == 1.0).all()
    assert np.isnan(b[rows.t - t0 > 0.12]).all()
    assert sampler.errors()["synthetic"] > 0
    assert sampler.error_texts() == {"b": "OSError: vanished"}  # "a" read NaN: the synthetic sensor's no reading


def test_slow_sensor_read_at_its_own_rate():
    slow = SyntheticSensor(util={"u": lambda t: 50.0}, min_period_s=0.05)
    fast = SyntheticSensor(power_w={"p": lambda t: 1.0})
    with Sampler([slow, fast], 0.005) as sampler:
        time.sleep(0.5)
    rows = sampler.drain()
    readings = np.isfinite(rows.values[:, 0]).sum()
    assert 5 <= readings <= 12
    assert np.isfinite(rows.values[:, 1]).all()


def test_drain_is_incremental_and_overflow_counts_drops():
    sampler = Sampler([SyntheticSensor(power_w={"p": lambda t: 1.0})], 0.001, capacity=64)
    with sampler:
        wait_for_rows(sampler, 200, timeout_s=10)
        first = sampler.drain()
        written = sampler.rows_written
        time.sleep(0.03)
    second = sampler.drain()
    assert 60 <= len(first) <= 64  # rows the writer overtook during the copy are dropped, not torn
    assert sampler.dropped >= 200 - 64
    assert sampler.dropped + len(first) + len(second) == sampler.rows_written
    assert written >= 200 and second.t[0] > first.t[-1]


@pytest.mark.parametrize(
    "bad,error",
    [
        (0, ValueError),
        (-0.005, ValueError),
        (0.0001, ValueError),
        ("0.005", TypeError),
        (math.nan, TypeError),
        (True, TypeError),
    ],
)
def test_bad_period(bad, error):
    with pytest.raises(error):
        Sampler([SyntheticSensor(power_w={"p": lambda t: 1.0})], bad)


def test_duplicate_channel_names_rejected():
    s = SyntheticSensor(power_w={"p": lambda t: 1.0})
    with pytest.raises(ValueError, match="more than one sensor"):
        Sampler([s, SyntheticSensor(power_w={"p": lambda t: 1.0})])


@pytest.mark.parametrize("mode,start", [("process", "spawn"), ("process", "fork"), ("thread", "auto")])
def test_health_is_none_while_sampling_and_after_a_deliberate_stop(mode, start):
    sampler = Sampler([picklable.rail("p", 1.0)], 0.005, mode=mode, start=start)
    assert sampler.owner_pid == os.getpid() and sampler.health() is None
    with sampler:
        assert sampler.wait_for_first_row()
        time.sleep(0.2)
        assert sampler.health() is None
        sampler.restart()  # on a healthy sampler too: the row count goes on
        assert sampler.wait_for_first_row() and sampler.health() is None
    assert sampler.health() is None and not sampler.running
    rows = sampler.drain()
    assert len(rows) == sampler.rows_written and np.all(np.diff(rows.t) > 0) and np.all(rows.values == 1.0)


def test_outage_recorded_then_closed_appears_once_in_the_summary():
    stats = SamplingStats(0.005, [])
    assert stats.summary(None)["sampler_outages"] == []
    stats.add_outage(10.0, None, "sampler process exited (killed by SIGKILL)")
    assert stats.summary(None)["sampler_outages"] == [
        {"start_s": 10.0, "end_s": None, "reason": "sampler process exited (killed by SIGKILL)"}
    ]
    stats.add_outage(10.0, 11.5, "sampler process exited (killed by SIGKILL)")
    stats.add_outage(20.0, 20.75, "sampler wrote no row for 1.2 s")
    assert stats.summary(None)["sampler_outages"] == [
        {"start_s": 10.0, "end_s": 11.5, "reason": "sampler process exited (killed by SIGKILL)"},
        {"start_s": 20.0, "end_s": 20.75, "reason": "sampler wrote no row for 1.2 s"},
    ]
