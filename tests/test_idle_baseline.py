"""The idle baseline, throttled steps and which rails the total sums, measured by a real session (a forked
sampler reading synthetic sensors: power rails at 2 W and 1 W before the first step, 6 W and 3 W while
training; a synthetic throttle state raised during two steps), and shown in the dashboard's header
(real `tensorboard` + headless Chromium; screenshot tests/_output/idle-baseline-header.png)."""

from __future__ import annotations

import csv
import json
import multiprocessing
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tf_mobileperf import PerfMonitor
from tf_mobileperf.sensors import SyntheticSensor
from tf_mobileperf.sensors.base import Channel, Sensor

from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT, serving, show
from helpers.stall_rerun import made_unstalled

IDLE_S, STEP_S, STEPS, WARMUP, BATCH = 0.5, 0.08, 6, 1, 4
THROTTLED = (2, 4)  # the steps during which the synthetic throttle state is 1
#: The synthetic board's power mode, as a power-mode sensor gives it in the device metadata.
POWER_MODE = {"mode_id": 2, "mode_name": "15W", "jetson_clocks": True}


class SyntheticThrottle(Sensor):
    """Synthetic: a throttle state (kind "state", group "throttle") read from a flag shared with the sampler."""

    name = "synthetic-throttle"

    def __init__(self, flag) -> None:
        self._flag = flag
        self.channels = [
            Channel("throttle_thermal", "state", "synthetic (shared flag)", group="throttle", device="board")
        ]

    def read(self) -> Mapping[str, float]:
        return {"throttle_thermal": float(self._flag.value)}

    def metadata(self) -> dict:
        return {"power_mode": POWER_MODE}


def training_board(training, throttle) -> list[Sensor]:
    """Synthetic rails that step up when ``training`` is set: VDD_IN (the input rail) 2 -> 6 W, VDD_SYS_GPU 1 -> 3 W."""
    rails = SyntheticSensor(
        power_w={
            "VDD_IN": lambda t: 6.0 if training.value else 2.0,
            "VDD_SYS_GPU": lambda t: 3.0 if training.value else 1.0,
        },
        groups={"VDD_IN": "total", "VDD_SYS_GPU": "gpu"},
        roles={"VDD_SYS_GPU": {"device": "gpu"}},
    )
    return [rails, SyntheticThrottle(throttle)]


def measure(logdir: Path, **options) -> dict:
    """A session over the synthetic board: idle before the first step, then STEPS steps of STEP_S; the
    throttle state is raised (with a margin of quiet samples on each side) around the THROTTLED steps."""
    training = multiprocessing.Value("d", 0.0, lock=False)  # shared with the forked sampler
    throttle = multiprocessing.Value("d", 0.0, lock=False)
    perf = PerfMonitor(
        logdir, sensors=training_board(training, throttle), warmup_steps=WARMUP, batch_size=BATCH, **options
    )
    with perf:
        training.value = 1.0
        time.sleep(0.1)  # samples at the training level before the first step's start
        for step in range(STEPS):
            throttle.value = float(step in THROTTLED)
            time.sleep(0.1)
            with perf.step():
                time.sleep(STEP_S)
            throttle.value = 0.0
            time.sleep(0.1)
    return json.loads((logdir / "report.json").read_text())


@pytest.fixture(scope="module")
def board_run(tmp_path_factory) -> tuple[Path, dict]:
    logdir = tmp_path_factory.mktemp("idle") / "board"

    def make() -> dict:
        return measure(logdir, idle_s=IDLE_S)

    return logdir, made_unstalled(logdir, make, lambda report: report["sampling"]["gaps"] > 0)


def test_idle_power_is_each_rails_mean_before_the_first_step(board_run):
    _, report = board_run
    assert report["idle_power_w"] == pytest.approx({"VDD_IN": 2.0, "VDD_SYS_GPU": 1.0, "total": 2.0})
    assert "idle_power_w" not in report["unavailable"]


def test_active_energy_is_the_energy_above_idle_power_per_step_and_in_total(board_run):
    logdir, report = board_run
    measured = [s for s in report["steps"] if not s["warmup"]]
    assert len(measured) == STEPS - WARMUP
    for step in measured:
        d = step["duration_s"]
        assert step["energy_j"]["total"] == pytest.approx(6.0 * d, rel=1e-6)
        assert step["energy_active_j"] == pytest.approx(
            {"VDD_IN": 4.0 * d, "VDD_SYS_GPU": 2.0 * d, "total": 4.0 * d}, rel=1e-6
        )
    time_s = sum(s["duration_s"] for s in measured)
    assert report["energy_active_total"] == pytest.approx(4.0 * time_s, rel=1e-6)
    assert report["energy_active_j"]["VDD_SYS_GPU"] == pytest.approx(2.0 * time_s, rel=1e-6)
    assert report["energy_active_per_sample_j"] == pytest.approx(4.0 * time_s / (BATCH * len(measured)), rel=1e-6)
    with open(logdir / "steps.csv") as f:
        rows = list(csv.DictReader(f))
    assert float(rows[-1]["energy_active_j/total"]) == pytest.approx(4.0 * float(rows[-1]["duration_s"]), rel=1e-6)


def test_throttled_steps_are_those_in_which_the_throttle_state_rose(board_run):
    logdir, report = board_run
    # A step over a stall of the sampler (a loaded machine) has no complete throttle state: None, counted as a gap.
    stalled = [s["step"] for s in report["steps"] if s["throttled"] is None]
    assert not stalled or report["sampling"]["gaps"] >= 1
    expected = [None if step in stalled else step in THROTTLED for step in range(STEPS)]
    assert [s["throttled"] for s in report["steps"]] == expected
    assert report["throttled_steps"] == len(set(THROTTLED) - set(stalled))  # both are measured steps
    with open(logdir / "steps.csv") as f:
        assert [row["throttled"] for row in csv.DictReader(f)] == ["" if e is None else str(int(e)) for e in expected]


def test_the_summary_names_the_input_rail_that_the_total_is(board_run):
    _, report = board_run
    assert report["input_rail"] == "VDD_IN" and report["total_rails"] == ["VDD_IN"]
    assert report["device"]["power_mode"] == POWER_MODE


def test_idle_s_zero_measures_no_baseline_and_says_so(tmp_path):
    report = measure(tmp_path / "no-idle", idle_s=0)
    assert report["idle_power_w"] is None and report["energy_active_total"] is None
    assert report["unavailable"]["idle_power_w"] == "idle_s=0: no idle baseline was measured"
    assert all(v is None for s in report["steps"] for v in s["energy_active_j"].values())
    assert report["energy_total"] is not None  # the energy itself is still measured


def test_without_power_or_throttle_sensors_each_is_null_with_its_reason(tmp_path):
    with PerfMonitor(tmp_path, sensors="none") as perf:
        with perf.step():
            pass
    report = perf.report.summary()
    assert report["idle_power_w"] is None and report["input_rail"] is None and report["throttled_steps"] is None
    assert report["total_rails"] == []
    for key in ("idle_power_w", "energy_active", "input_rail", "throttled_steps"):
        assert "sensors='none' was requested" in report["unavailable"][key], key


@pytest.mark.slow
@pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed (make test installs them)"
)
def test_the_header_shows_idle_power_active_energy_throttling_power_mode_and_the_total(board_run, browser):  # noqa: F811
    from selenium.webdriver.common.by import By

    logdir, report = board_run
    with serving(logdir.parent) as url:
        show(browser, url, ("board/train",))
        spans = browser.find_elements(By.CSS_SELECTOR, "#run-details .header span")
        header = {
            s.find_element(By.TAG_NAME, "b").text.rstrip(": "): (s.text.split(": ", 1)[1], s.get_attribute("title"))
            for s in spans
        }
        bars = browser.find_element(By.XPATH, "//div[@class='chart'][h4[starts-with(., 'Energy per step')]]")
        legend = bars.find_element(By.CSS_SELECTOR, ".u-legend").text
        browser.switch_to.default_content()
        OUTPUT.mkdir(exist_ok=True)
        browser.save_screenshot(str(OUTPUT / "idle-baseline-header.png"))
    value, title = header["idle power"]
    assert value == "2.00 W" and "VDD_IN 2.00 W, VDD_SYS_GPU 1.00 W" in title and "before the first step" in title
    value, title = header["active energy"]
    assert value.endswith(" J") and float(value[:-2]) == pytest.approx(report["energy_active_total"], rel=5e-3)
    assert "above the idle baseline" in title
    value, title = header["throttled steps"]
    assert value == f"2 of {STEPS - WARMUP}" and "throttle_thermal" in title
    value, title = header["power mode"]
    assert value == "15W (mode 2), jetson_clocks on" and "nvpmodel power mode 2" in title
    value, title = header["total"]
    assert value == "VDD_IN" and "input rail VDD_IN" in title
    assert "above idle" in legend and "measured step" in legend
