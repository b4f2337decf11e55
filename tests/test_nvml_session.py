"""A real session (sampler process, join, report) over fake NVMLs: one GPU under training whose power follows
the steps (helpers/fake_nvml_training.py), and the fake modelled on a measured H200 (helpers/fake_nvml_h200.py);
no GPU is read.

The fake is as hard as the device: a handle is valid only in the process that
initialised NVML (a forked sampler of the old sensor got "Uninitialized" on
every call and the report said ``energy_total: null``), the energy counter
and the power field change every 100 ms, the counter call takes ~4 ms. Its
power is a known function of time, so each step's exact energy is an
integral the test computes (``fake.exact_energy_j``).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.sensors.nvml import nvml_sensors

from helpers import fake_nvml_h200 as fake
from helpers import fake_nvml_training as training
from helpers.fake_nvml_training import Schedule

LIBRARY = "helpers.fake_nvml_h200"
TRAINING = "helpers.fake_nvml_training"
WARMUP = 2


def measure(logdir: Path, steps: int, step_s: float, gap_s: float = 0.0) -> dict:
    """``steps`` steps of ``step_s`` on the fake H200, each after an idle gap of 0 to ``gap_s``."""
    rng = np.random.default_rng(0)
    with PerfMonitor(
        logdir, sensors=nvml_sensors(library=LIBRARY), warmup_steps=WARMUP, idle_s=1.0, batch_size=8
    ) as perf:
        for _ in range(steps):
            time.sleep(rng.uniform(0.0, gap_s))
            with perf.step():
                end = time.monotonic() + step_s
                while time.monotonic() < end:  # a step that keeps a core busy, as training does
                    pass
    return json.loads((logdir / "report.json").read_text())


def exact(gpu: int, steps: list[dict]) -> float:
    return sum(fake.exact_energy_j(gpu, s["start_s"], s["end_s"]) for s in steps)


def train_on_the_training_gpu(logdir: Path, monkeypatch, steps: int = 40, seed: int = 0) -> tuple[dict, Schedule]:
    """``steps`` steps of 40-260 ms with 0-60 ms idle gaps on the fake GPU under training
    (helpers/fake_nvml_training.py): busy inside each step, idle between; the report and what the GPU did."""
    marks = logdir.parent / f"{logdir.name}-busy.bin"
    monkeypatch.setenv(training.STEPS_ENV, str(marks))
    rng = np.random.default_rng(seed)
    with PerfMonitor(logdir, sensors=nvml_sensors(library=TRAINING), warmup_steps=3, idle_s=1.0, batch_size=8) as perf:
        for _ in range(steps + 3):
            time.sleep(rng.uniform(0.0, 0.06))  # input, Python, callbacks: the GPU idles
            with perf.step():
                training.mark(True)
                end = time.monotonic() + rng.uniform(0.04, 0.26)
                while time.monotonic() < end:  # a step that keeps a core busy, as training does
                    pass
                training.mark(False)
    return json.loads((logdir / "report.json").read_text()), training.schedule()


@pytest.mark.slow
def test_gpu_energy_per_step_under_training_is_within_its_bound_and_the_total_within_2_percent(tmp_path, monkeypatch):
    # Linear interpolation of the counter gave this run's total 6.5% under the exact integral and its worst
    # step 21% off: the update intervals that hold a step's edge are where the power changes.
    report, schedule = train_on_the_training_gpu(tmp_path / "run", monkeypatch, steps=80)  # 95% of 80: 4 may miss
    measured = [s for s in report["steps"] if not s["warmup"]]
    energy = np.array([s["energy_j"]["gpu0_energy"] for s in measured], dtype=float)
    bound = np.array([s["energy_bound_j"]["gpu0_energy"] for s in measured], dtype=float)
    exact = schedule.energy_j(np.array([s["start_s"] for s in measured]), np.array([s["end_s"] for s in measured]))
    known = np.isfinite(energy)  # a step over a dropped counter read is incomplete (seen: 2 of 40)
    assert known.mean() >= 0.9 and np.isfinite(bound[known]).all()
    energy, bound, exact = energy[known], bound[known], exact[known]
    # Seen in whole sessions here: the total 0.06-0.24% off, 97.5-100% of the steps inside their bounds of 2
    # residuals (94.9% once in CI under load, hence 3: 98.7-100% in 21 loaded runs; docs/sampling.md) (before
    # the series stopped claiming a held value as the energy up to one update before its last read, 0.01-2.7%
    # and 92.5-100%: the steps joined at the end of the samples took a point placed up to 30 ms off).
    assert abs(energy.sum() / exact.sum() - 1) < 0.02
    assert np.mean(np.abs(energy - exact) <= bound) >= 0.95
    assert np.median(bound / exact) <= 0.20
    total_bound = report["energy_bound_j"]["gpu0_energy"]
    assert total_bound == pytest.approx(bound.sum()) and abs(energy.sum() - exact.sum()) <= total_bound
    # Utilization: the busy share of 200 ms windows that straddle steps and gaps, and the report says so.
    assert report["gpu_util_window_s"] == pytest.approx(training.UTIL_S, rel=0.1)
    assert "not the step's own busy share" in report["gpu_util_rule"]


@pytest.mark.slow
def test_steps_shorter_than_an_update_with_gaps_are_interpolated_and_the_run_total_within_its_bound(tmp_path):
    # Gaps of 0-10 ms between the steps, so the counter's difference over the run is not the steps' total by
    # construction (contiguous steps were within 1% for that reason alone). Seen here: 4.8% off, inside a
    # stated bound of ~55% (docs/sampling.md: the last changes of the samples joined so far placed ~4 ms late).
    report = measure(tmp_path, steps=WARMUP + 200, step_s=0.01, gap_s=0.01)
    measured = [s for s in report["steps"] if not s["warmup"]]
    for gpu in range(fake.GPUS):
        rail = f"gpu{gpu}_energy"
        assert {s["energy_method"][rail] for s in measured} == {"interpolated"}
        assert report["energy_sources"][rail]["steps_interpolated"] == len(measured)
        truth = exact(gpu, measured)
        assert abs(report["energy_j"][rail] - truth) <= report["energy_bound_j"][rail] <= 1.5 * truth  # three residuals


@pytest.mark.slow
def test_a_counter_that_freezes_mid_run_leaves_the_later_steps_null_and_says_so_once(tmp_path, monkeypatch, caplog):
    # Seen: a frozen counter gave the later steps "interpolated" 0 J while the GPU drew 200 W, and no word.
    monkeypatch.setenv("FAKE_NVML_FREEZE_AFTER_STEPS", "20")  # 3 warm-up steps, then 17 measured
    with caplog.at_level(logging.WARNING, logger="tf_mobileperf"):
        report, schedule = train_on_the_training_gpu(tmp_path / "run", monkeypatch, steps=40)
    freeze = float(schedule.edges[2 * 20 - 2])
    measured = [s for s in report["steps"] if not s["warmup"]]
    before = [s["energy_j"]["gpu0_energy"] for s in measured if s["end_s"] < freeze - 0.2]
    after = [s["energy_j"]["gpu0_energy"] for s in measured if s["start_s"] > freeze + 0.2]
    # As under training above, a step over a delayed counter read may be null (seen in CI under load: 1 of 15).
    known = [e for e in before if e is not None]
    assert len(known) >= max(3, 0.8 * len(before)) and all(e > 0 for e in known), (before, len(measured))
    assert len(after) >= 3 and all(e is None for e in after), after  # null, never 0
    said = [r.getMessage() for r in caplog.records if "stopped changing" in r.getMessage()]
    assert len(said) == 1 and "gpu0_energy" in said[0] and "(null), not 0" in said[0]
    # The report counts it: when it froze (its last change, about the fake's freeze), and the reason of the
    # rail's null steps. The other GPU's counter went on.
    since = report["sampling"]["frozen_counters"]
    assert list(since) == ["gpu0_energy"] and abs(since["gpu0_energy"] - freeze) < 0.3, (since, freeze)
    why = report["incomplete_rails"]["gpu0_energy"]
    assert "stopped changing at" in why and "stuck counter" in why, why


@pytest.mark.slow
def test_after_a_driver_reload_the_counter_restarts_cleanly_and_the_steps_after_are_within_their_bounds(
    tmp_path, monkeypatch
):
    # Seen: after a reload (the counter starts again from 0 on a clock of its own) the steps at the fault were
    # null, but for 1-3 s after it "interpolated" steps were up to 20% off: one update grid was fitted across
    # both clocks. Here, with that grid: the step the reload fell in had a value (20% off) in one run of three,
    # and the steps after it were up to 17% off with bounds of 30-70%; with a grid per clock, 1-3%, at most 14%
    # inside its bound.
    monkeypatch.setenv("FAKE_NVML_RELOAD_AFTER_STEPS", "20")
    report, schedule = train_on_the_training_gpu(tmp_path / "run", monkeypatch, steps=50)
    reload = float(schedule.edges[2 * 20 - 2])
    measured = [s for s in report["steps"] if not s["warmup"]]
    energy = np.array([s["energy_j"]["gpu0_energy"] for s in measured], dtype=float)
    bound = np.array([s["energy_bound_j"]["gpu0_energy"] for s in measured], dtype=float)
    starts, ends = (np.array([s[k] for s in measured]) for k in ("start_s", "end_s"))
    exact = schedule.energy_j(starts, ends)
    at_fault = (starts < reload + 2 * training.UPDATE_S) & (ends > reload - training.UPDATE_S)
    assert np.isnan(energy[(starts < reload) & (ends > reload)]).all()  # over the reload: null, never a guess
    known = np.isfinite(energy) & ~at_fault
    # A step over a dropped read may be null: 42 of 47 known in a whole-suite run on a slowed machine.
    assert known.sum() >= 0.8 * (~at_fault).sum()
    after = known & (starts > reload)
    assert after.sum() >= 20
    error = np.abs(energy - exact)
    assert np.mean(error[after] <= bound[after]) >= 0.9, (error[after] / exact[after]).max()
    assert abs(energy[after].sum() / exact[after].sum() - 1) < 0.02
