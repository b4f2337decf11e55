"""A real session (sampler process, join, report) over the fake NVML modelled on a measured H200
(helpers/fake_nvml_h200.py); no GPU is read.

The fake is as hard as the device: a handle is valid only in the process that
initialised NVML (a forked sampler of the old sensor got "Uninitialized" on
every call and the report said ``energy_total: null``), the energy counter
and the power field change every 100 ms, the counter call takes ~4 ms. Its
power is a known function of time, so each step's exact energy is an
integral the test computes (``fake.exact_energy_j``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.sensors.nvml import nvml_sensors

from helpers import fake_nvml_h200 as fake

LIBRARY = "helpers.fake_nvml_h200"
WARMUP = 2


def measure(logdir: Path, steps: int, step_s: float) -> dict:
    with PerfMonitor(
        logdir, sensors=nvml_sensors(library=LIBRARY), warmup_steps=WARMUP, idle_s=1.0, batch_size=8
    ) as perf:
        for _ in range(steps):
            with perf.step():
                end = time.monotonic() + step_s
                while time.monotonic() < end:  # a step that keeps a core busy, as training does
                    pass
    return json.loads((logdir / "report.json").read_text())


def exact(gpu: int, steps: list[dict]) -> float:
    return sum(fake.exact_energy_j(gpu, s["start_s"], s["end_s"]) for s in steps)


def test_steps_longer_than_two_counter_updates_are_measured_within_1_percent(tmp_path):
    report = measure(tmp_path, steps=WARMUP + 5, step_s=0.3)
    assert report["sampling"]["sensor_errors"] == {"nvml": 0, "nvml energy": 0}
    measured = [s for s in report["steps"] if not s["warmup"]]
    for gpu in range(fake.GPUS):
        rail = f"gpu{gpu}_energy"
        methods = [step["energy_method"][rail] for step in measured]
        # A step with an edge where the reads stalled past an update (a loaded machine) says interpolated
        # (test_energy_method); every step that says measured is within 1% on a quiet machine, and was seen
        # 1.04% off once while the host stole up to 80% of this VM's time: 1.5% each, the run within 1%.
        assert methods.count("measured") >= 3 and set(methods) <= {"measured", "interpolated"}
        for step in measured:
            if step["energy_method"][rail] == "measured":
                assert step["energy_j"][rail] == pytest.approx(exact(gpu, [step]), rel=0.015)
        source = report["energy_sources"][rail]
        assert source["from"] == "counter" and source["power_not_used"] == [f"gpu{gpu}_power"]
        assert source["update_period_s"] == pytest.approx(fake.ENERGY_UPDATE_S, rel=0.1)
        assert report["energy_j"][rail] == pytest.approx(exact(gpu, measured), rel=0.01)
    assert report["gpu_util_avg"] is not None


def test_steps_shorter_than_an_update_are_interpolated_and_the_run_total_is_within_1_percent(tmp_path):
    report = measure(tmp_path, steps=WARMUP + 200, step_s=0.01)
    measured = [s for s in report["steps"] if not s["warmup"]]
    for gpu in range(fake.GPUS):
        rail = f"gpu{gpu}_energy"
        assert {s["energy_method"][rail] for s in measured} == {"interpolated"}
        assert report["energy_sources"][rail]["steps_interpolated"] == len(measured)
        assert report["energy_j"][rail] == pytest.approx(exact(gpu, measured), rel=0.01)
