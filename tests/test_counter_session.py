"""A real session (forked sampler) over synthetic sensors: a staircase energy counter that updates every 100 ms
and is read every 10 ms (as NVML's on an H200), and a sensor whose every read raises. The steps wait for the
counter's next update, the report says how each step's energy was obtained, and the silent sensor is named,
in its library's words, once at the first measured step and in the report's ``unavailable``."""

from __future__ import annotations

import csv
import json
import logging
import re
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sensors.base import Channel, Sensor

from helpers.stall_rerun import made_unstalled

WATTS, UPDATE_S = 200.0, 0.1


class SyntheticStaircaseCounter(Sensor):
    """Synthetic: a GPU drawing a constant 200 W whose energy counter (J) updates every 100 ms, with a power
    channel of the same rail that updates as slowly."""

    name = "synthetic-staircase"

    def __init__(self) -> None:
        self.channels = [
            Channel("gpu0_power", "power", "synthetic staircase", device="gpu", rail="gpu0"),
            Channel("gpu0_energy", "energy", "synthetic staircase", device="gpu", rail="gpu0"),
        ]

    def read(self) -> Mapping[str, float]:
        updated = (time.monotonic() // UPDATE_S) * UPDATE_S
        return {"gpu0_power": WATTS, "gpu0_energy": WATTS * updated}


class SyntheticBrokenSensor(Sensor):
    """Synthetic: a temperature whose every read raises, as an NVML handle used after a fork does."""

    name = "synthetic-broken"

    def __init__(self) -> None:
        self.channels = [Channel("board_temp", "temperature", "synthetic (always fails)", device="board")]

    def read(self) -> Mapping[str, float]:
        raise RuntimeError("synthetic: the bus did not answer")


class SyntheticHangingCounter(SyntheticStaircaseCounter):
    """Synthetic: the staircase counter, whose 40th read hangs for 60 ms (over the sampler's inline budget of
    40 ms: it is read in a thread of its own from then on, as a loaded machine moves a counter there)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def read(self) -> Mapping[str, float]:
        self.reads += 1
        if self.reads == 40:
            time.sleep(0.06)
        return super().read()


def measure(
    logdir: Path, steps: int, step_s: float, warmup: int = 2, on_first_measured=None, counter: Sensor | None = None
) -> dict:
    sensors = [counter or SyntheticStaircaseCounter(), SyntheticBrokenSensor()]
    with PerfMonitor(
        logdir, sensors=sensors, warmup_steps=warmup, idle_s=0.3, sample_period_ms=10, batch_size=8
    ) as perf:
        for i in range(steps):
            with perf.step():
                end = time.monotonic() + step_s
                while time.monotonic() < end:
                    pass
            if i == warmup and on_first_measured:
                on_first_measured()
    return json.loads((logdir / "report.json").read_text())


@pytest.fixture(scope="module")
def short_steps(tmp_path_factory) -> tuple[Path, dict]:
    logdir = tmp_path_factory.mktemp("counter") / "short"

    def make() -> dict:
        return measure(logdir, steps=60, step_s=0.01)

    return logdir, made_unstalled(logdir, make, lambda report: "gpu0_energy" in report["sampling"]["channel_gaps"])


def test_steps_shorter_than_the_counters_update_are_bounded_and_add_up_to_its_energy(short_steps):
    logdir, report = short_steps
    measured = [s for s in report["steps"] if not s["warmup"]]
    assert all(s["energy_j"]["gpu0_energy"] is not None for s in measured)  # the last ones waited for an update
    # A constant 200 W: every 10 ms step's energy lies within its stated bound of 200 W x its duration.
    for step in measured:
        error = abs(step["energy_j"]["gpu0_energy"] - WATTS * step["duration_s"])
        assert error <= step["energy_bound_j"]["gpu0_energy"] + 1e-3 * WATTS * step["duration_s"]
    source = report["energy_sources"]["gpu0_energy"]
    assert source["from"] == "counter" and source["power_not_used"] == ["gpu0_power"]
    assert source["update_period_s"] == pytest.approx(UPDATE_S, rel=0.05)
    assert source["steps_measured"] + source["steps_interpolated"] == 58
    assert sum(report["energy_total_methods"].values()) == 58
    # Contiguous enough (the loop's own work between steps is microseconds): the total is 200 W x the time.
    assert report["energy_total"] == pytest.approx(WATTS * report["energy_steps_complete"]["time_s"], rel=0.01)
    with open(logdir / "steps.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["warmup"] == "0"]
    methods = {r["energy_method/gpu0_energy"] for r in rows} | {r["energy_method/total"] for r in rows}
    assert methods <= {"measured", "interpolated"}
    assert all(float(r["energy_bound_j/gpu0_energy"]) >= 0 for r in rows)


def test_a_counter_taken_over_after_a_hung_read_keeps_every_step_within_its_bound(tmp_path):
    """Its readings come back at a later wake-up: each is placed at its own read's instant, not that row's."""
    report = measure(tmp_path / "hung", steps=60, step_s=0.01, counter=SyntheticHangingCounter())
    assert report["sampling"]["sensor_errors"]["synthetic-staircase"] == 1  # the hung read
    for step in [s for s in report["steps"] if not s["warmup"]]:
        error = abs(step["energy_j"]["gpu0_energy"] - WATTS * step["duration_s"])
        assert error <= step["energy_bound_j"]["gpu0_energy"] + 1e-3 * WATTS * step["duration_s"]


def test_a_sensor_that_never_answered_is_named_with_its_failed_reads(short_steps):
    _, report = short_steps
    assert report["sampling"]["sensor_errors"]["synthetic-broken"] > 0
    # The sampler keeps each channel's last error in the words of the exception that failed the read.
    assert re.fullmatch(
        r"RuntimeError: synthetic: the bus did not answer \(\d+ failed reads\)", report["unavailable"]["board_temp"]
    )
    assert "gpu0_energy" not in report["unavailable"]


def test_steps_of_two_updates_or_more_are_measured_within_1_percent(tmp_path):
    report = measure(tmp_path / "long", steps=5, step_s=0.3)
    measured = [s for s in report["steps"] if not s["warmup"]]
    for step in measured:
        assert step["energy_method"]["gpu0_energy"] == "measured"
        assert step["energy_j"]["gpu0_energy"] == pytest.approx(WATTS * (step["end_s"] - step["start_s"]), rel=0.01)
    assert report["energy_sources"]["gpu0_energy"]["steps_measured"] == 3


def test_the_first_measured_step_names_the_silent_sensor_once_in_its_librarys_words(tmp_path, monkeypatch, caplog):
    """A sampler that keeps each channel's last error text (``error_texts``): the warning and the report use it."""
    monkeypatch.setattr(Sampler, "error_texts", lambda self: {"board_temp": "SYNTH: Uninitialized"}, raising=False)
    seen_at_first_step: list[str] = []
    with caplog.at_level(logging.WARNING, logger="tf_mobileperf"):
        report = measure(
            tmp_path / "texts",
            steps=6,
            step_s=0.01,
            on_first_measured=lambda: seen_at_first_step.extend(r.getMessage() for r in caplog.records),
        )
    named = [m for m in seen_at_first_step if "no valid value yet" in m]
    assert len(named) == 1 and re.search(r"board_temp \(SYNTH: Uninitialized \(\d+ failed reads\)\)", named[0])
    messages = [r.getMessage() for r in caplog.records]
    assert sum("no valid value yet" in m for m in messages) == 1
    assert not any("allowed gap" in m for m in messages)  # not again as a gap
    assert re.fullmatch(r"SYNTH: Uninitialized \(\d+ failed reads\)", report["unavailable"]["board_temp"])
