"""A 2-hour run, simulated: memory stays bounded.

The sampler is replaced by one that emits 200 Hz rows of a synthetic 5 W
rail on a simulated clock, and the monitor takes its step windows on the
same clock, so two hours of 100 ms steps (72,000 steps, 1.44 million
samples) pass in seconds. The test flushes every 5 simulated seconds, as
the collector thread does every ``flush_s`` of real time. Samples and steps
are spilled to disk; the test measures the Python heap (tracemalloc) at 30
minutes and at 2 hours."""

from __future__ import annotations

import csv
import math
import tracemalloc

import numpy as np
import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.sampling.samples import Samples
from tf_mobileperf.sensors import SyntheticSensor

PERIOD_S = 0.005
STEP_S = 0.1


class SimulatedClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SimulatedSampler:
    """Rows every 5 ms of simulated time, up to the clock's now, on each drain."""

    mode, realtime_granted, dropped = "simulated", False, 0
    realtime, priority_reason, tick_loop, row_period_s = False, "", "simulated", PERIOD_S
    pid = None  # no sampler process: it runs in the trainer's

    def __init__(self, clock: SimulatedClock, sensor: SyntheticSensor):
        self.clock, self.sensors, self.channels = clock, [sensor], sensor.channels
        self.period_s = PERIOD_S
        self._next = clock.now

    def start(self):
        return self

    def wait_for_first_row(self) -> bool:
        return True

    def stop(self) -> None:
        pass

    def errors(self) -> dict:
        return {}

    def health(self) -> None:
        return None  # always writing

    def drain(self) -> Samples:
        n = max(0, math.floor((self.clock.now - self._next) / PERIOD_S) + 1)
        t = self._next + PERIOD_S * np.arange(n)
        self._next += n * PERIOD_S
        return Samples(t, np.full((n, 1), 5.0), self.channels)


@pytest.mark.slow
def test_two_hour_run_memory_is_bounded(tmp_path):
    clock = SimulatedClock()
    sensor = SyntheticSensor(power_w={"VDD_IN": lambda t: 5.0}, groups={"VDD_IN": "total"})
    perf = PerfMonitor(tmp_path, idle_s=0, sensors=[sensor], clock=clock, flush_s=3600, keep_steps=1000)
    perf.sampler = SimulatedSampler(clock, sensor)
    steps = int(2 * 3600 / STEP_S)
    tracemalloc.start()
    try:
        with perf:
            for i in range(1, steps + 1):
                with perf.step():
                    clock.now += STEP_S
                if i % 50 == 0:
                    perf.flush()
                if i == steps // 4:  # 30 simulated minutes: past keep_steps, all buffers in steady state
                    at_30_min = tracemalloc.get_traced_memory()[0]
            at_end = tracemalloc.get_traced_memory()[0]
            clock.now += 1.0  # the samples past the last step's end
    finally:
        tracemalloc.stop()
    growth = at_end - at_30_min
    # What may grow: 8 bytes of step time per step (54,000 steps after minute 30) and list slack.
    assert growth < 2 * 2**20, f"heap grew by {growth / 2**20:.1f} MiB over 90 simulated minutes"
    report = perf.report.to_dict()
    assert report["steps_measured"] == steps - 3
    assert report["energy_total"] == pytest.approx(5.0 * STEP_S * (steps - 3), rel=1e-9)
    assert len(report["steps"]) <= 1000 + 100 + 3 and report["steps_not_kept"] + len(report["steps"]) == steps
    assert report["sampling"]["samples"] == pytest.approx(2 * 3600 / PERIOD_S, rel=1e-3)
    with open(tmp_path / "steps.csv") as f:
        assert sum(1 for _ in csv.reader(f)) == steps + 1  # every step on disk, with the header
    assert (tmp_path / "train/plugins/mobileperf/samples.bin").stat().st_size == 16 * report["sampling"]["samples"]
