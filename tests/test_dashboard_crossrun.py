"""The MobilePerf tab's views across runs and of a run's tables, in a real browser
(headless Debian Chromium, a real `tensorboard` process), on a two-model sweep
trained by the real callback: models "mlp" and "wide" at batch sizes 1, 4 and
16 (synthetic power sensor: VDD_IN 5 W for mlp, 8 W for wide, VDD_SYS_GPU 2 W;
procfs memory sensor: the board's RAM and the process's own),
"wide" failing at batch size 16 with a MemoryError in its fourth step; mlp at
batch size 4 traced with profile_steps; and a traced run with the procfs
memory sensor only (no power rail). Screenshots under tests/_output/crossrun-*.png."""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

import keras
import pytest

from helpers.training import constant_sensor, data
from test_dashboard_browser import CHROMEDRIVER, CHROMIUM, OUTPUT, browser  # noqa: F401 (fixture)
from test_dashboard_timeview import serving, show
from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.sensors import MemorySensor

pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed (make test installs them)")

SIZES = (1, 4, 16)
NO_POWER = "mlp-memory-only/train"


class FailsAtBatch(keras.callbacks.Callback):
    """Raises MemoryError as the batch ``batch`` begins, as an out-of-memory step would."""

    def __init__(self, batch: int):
        super().__init__()
        self.batch = batch

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.batch:
            raise MemoryError(f"out of memory in batch {batch} (simulated)")


def train(logdir: Path, name: str, sensors: list, batch_size: int | None, fail_at: int | None = None,
          profile_steps: tuple[int, int] | None = None) -> None:
    width = {"mlp": 32, "wide": 128}[name]
    model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(width, activation="relu", name="hidden"),
                              keras.layers.Dense(1, name="out")], name=name)
    model.compile("sgd", "mse")
    x, y = data(max(1, batch_size or 8) * 10)
    callbacks = [MobilePerfCallback(logdir, idle_s=0, sensors=sensors, batch_size=batch_size, profile_steps=profile_steps)]
    with contextlib.suppress(MemoryError):
        model.fit(x, y, batch_size=batch_size or 8, epochs=1, verbose=0,
                  callbacks=callbacks + ([FailsAtBatch(fail_at)] if fail_at is not None else []))


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("sweep")
    for name, watts in (("mlp", 5.0), ("wide", 8.0)):
        for size in SIZES:
            fail_at = 4 if (name, size) == ("wide", 16) else None
            profile = (4, 5) if (name, size) == ("mlp", 4) else None
            train(logdir / f"{name}-bs{size}", name, [constant_sensor(watts), MemorySensor()], size, fail_at, profile)
    train(logdir / NO_POWER.split("/")[0], "mlp", [MemorySensor()], None, profile_steps=(4, 5))
    with serving(logdir) as url:
        yield url


def crossrun_state(browser) -> dict:
    """What the cross-run chart shows: its series' labels, x ticks, failure marks, and the chosen y."""
    return browser.execute_script("""
        const box = document.querySelector('.crossrun');
        return {series: [...box.querySelectorAll('.u-legend .u-series .u-label')].map((e) => e.textContent),
                ticks: box.querySelector('[data-x-ticks]').dataset.xTicks,
                failed: [...box.querySelectorAll('.failed-mark')].map((e) => e.title),
                y: box.querySelector('select.quantity').selectedOptions[0].textContent,
                canvases: box.querySelectorAll('canvas').length};
    """)


def screenshot(browser, css: str, name: str) -> None:
    OUTPUT.mkdir(exist_ok=True)
    browser.find_element("css selector", css).screenshot(str(OUTPUT / name))


def test_crossrun_chart_has_one_series_per_model_on_a_log2_batch_axis_and_marks_the_failure(tensorboard, browser):
    show(browser, tensorboard, ("mlp-bs1/train",))
    state = crossrun_state(browser)
    assert state["series"] == ["batch size", "mlp", "wide"] and state["canvases"] == 1
    assert state["ticks"] == "1,2,4,8,16"
    assert state["y"] == "energy per step (J)"
    assert len(state["failed"]) == 1
    assert "wide-bs16/train" in state["failed"][0] and "MemoryError: out of memory in batch 4" in state["failed"][0]
    screenshot(browser, ".crossrun", "crossrun-energy.png")
    choices = browser.execute_script("return [...document.querySelectorAll('.crossrun select.quantity option')].map((o) => o.textContent)")
    for wanted in ("samples per second (samples/s)", "step time (mean) (ms)", "mean power: total rail group (W)",
                   "mean power: gpu rail group (W)", "peak memory: process (peak RSS) (GiB)", "peak memory: system RAM in use (GiB)"):
        assert wanted in choices
    assert "GPU utilization (%): not measured" in choices  # the synthetic sensor has no GPU load
    # The y select redraws the chart; the 8 W model draws more power than the 5 W one.
    values = browser.execute_script("""
        const select = document.querySelector('.crossrun select.quantity');
        select.value = [...select.options].find((o) => o.textContent === 'mean power: total rail group (W)').value;
        select.dispatchEvent(new Event('change'));
        return [...document.querySelectorAll('.crossrun .u-legend .u-series')].map((s) => s.textContent);
    """)
    assert len(values) == 3
    state = crossrun_state(browser)
    assert state["y"] == "mean power: total rail group (W)" and state["series"] == ["batch size", "mlp", "wide"]
    screenshot(browser, ".crossrun", "crossrun-power.png")
    # One series per run folder instead: every run is in the logdir itself.
    browser.execute_script("""
        const select = document.querySelector('.crossrun select.grouping');
        select.value = [...select.options].find((o) => o.textContent === 'run folder').value;
        select.dispatchEvent(new Event('change'));
    """)
    assert crossrun_state(browser)["series"] == ["batch size", "(logdir)"]
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_runs_table_sorts_run_names_naturally(tensorboard, browser):
    show(browser, tensorboard, ("mlp-bs1/train",))
    runs = browser.execute_script("return [...document.querySelectorAll('#runs-table tr td:first-child')].map((e) => e.textContent)")
    assert runs == [f"mlp-bs{s}/train" for s in SIZES] + [NO_POWER] + [f"wide-bs{s}/train" for s in SIZES]
    screenshot(browser, "#runs-table", "crossrun-runs-table.png")


def test_step_table_sorts_by_any_column_and_downloads_the_steps_shown_as_csv(tensorboard, browser, tmp_path):
    from selenium.webdriver.common.by import By

    show(browser, tensorboard, ("mlp-bs16/train",))
    section = browser.find_element(By.CSS_SELECTOR, "section[data-run='mlp-bs16/train']")
    browser.execute_script("arguments[0].querySelector('details.steps').open = true", section)
    table = section.find_element(By.CSS_SELECTOR, "table.step-table")
    column = lambda i: [r.find_elements(By.TAG_NAME, "td")[i].text for r in table.find_elements(By.CSS_SELECTOR, "tr")[1:]]  # noqa: E731
    steps = column(0)
    assert steps == [str(i) for i in range(len(steps))] and len(steps) == 10  # 160 samples, batch 16
    header = lambda: table.find_elements(By.TAG_NAME, "th")  # noqa: E731 (redrawn on each click)
    energy = next(i for i, th in enumerate(header()) if th.text.startswith("VDD_IN energy"))
    header()[energy].click()
    header()[energy].click()  # descending
    cells = column(energy)
    shown = [float(v) for v in cells if v != "–"]  # "–": a step with a hole in its samples, sorted last
    assert "–" not in cells[:len(shown)]
    assert len(shown) >= 5 and shown == sorted(shown, reverse=True) and column(0) != steps
    assert "▼" in header()[energy].text
    # The link downloads for real: Chromium saves the Blob into tmp_path.
    browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)})
    link = section.find_element(By.CSS_SELECTOR, "a.csv")
    name = link.get_attribute("download")
    link.click()
    deadline = time.monotonic() + 30
    while not (tmp_path / name).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    text = (tmp_path / name).read_text()
    lines = text.strip().split("\n")
    assert name.endswith("steps.csv") and len(lines) == 11
    assert lines[0].startswith("step,kind,time (ms),") and "VDD_IN energy (J)" in lines[0].split(",")
    rows = [dict(zip(lines[0].split(","), line.split(","))) for line in lines[1:]]
    assert [r["step"] for r in rows] == [str(i) for i in range(10)]
    assert [r["kind"] for r in rows] == ["warm-up"] * 3 + ["measured"] * 7
    energies = [float(r["VDD_IN energy (J)"]) for r in rows if r["VDD_IN energy (J)"]]
    assert len(energies) >= 5 and min(energies) > 0  # 5 W over each step's window
    screenshot(browser, "section[data-run='mlp-bs16/train'] details.steps", "crossrun-step-table.png")


def test_every_header_number_explains_itself_on_hover(tensorboard, browser):
    from selenium.webdriver.common.by import By

    show(browser, tensorboard, ("mlp-bs16/train",))
    spans = browser.find_elements(By.CSS_SELECTOR, "section[data-run='mlp-bs16/train'] .header span")
    titles = {s.find_element(By.TAG_NAME, "b").text.rstrip(": "): s.get_attribute("title") for s in spans}
    assert all(titles.values()), titles
    assert re.match(r"mean power: total rail VDD_IN over the \d measured steps with complete energy", titles["mean power"])
    assert "VDD_IN (synthetic" in titles["mean power"]
    assert titles["GPU util"].startswith("not measured: no GPU utilization sensor")
    assert "over the 7 measured steps (the 3 warm-up steps left out)" in titles["step time"]
    assert titles["peak memory (process)"].startswith("highest resident memory of the training process")
    assert "proc_peak (memory (/proc/meminfo): /proc/" in titles["peak memory (process)"]
    # GPU memory apart from system RAM: the allocator's peak, and NVML's device memory, each saying why it is absent.
    assert titles["GPU peak (allocator)"].startswith("not measured: no GPU device visible to")
    assert titles["GPU memory in use (device)"].startswith("not measured: no GPU memory sensor (NVML)")


def test_op_tables_rank_by_energy_or_time_without_suffixes_and_show_the_top_15(tensorboard, browser):
    from selenium.webdriver.common.by import By

    show(browser, tensorboard, ("mlp-bs4/train", NO_POWER))
    traced = browser.find_element(By.CSS_SELECTOR, "section[data-run='mlp-bs4/train'] .op-energy")
    assert traced.find_element(By.TAG_NAME, "h4").text == "Energy per operation in the traced steps (rail VDD_IN, J)"
    layers = [td.text for td in traced.find_elements(By.CSS_SELECTOR, "table[data-by='layer'] tr td:first-child")]
    # TF's scopes are "hidden_1", "out_1" (or more) in the trace: shown as the Keras layers.
    assert "hidden" in layers and "out" in layers and layers.count("(no layer)") == 1
    assert not any(re.search(r"_\d+$", layer) for layer in layers)
    types = traced.find_element(By.CSS_SELECTOR, "table[data-by='op_type']")
    energies = [float(td.text) for td in types.find_elements(By.CSS_SELECTOR, "tr td:nth-child(4)")]
    assert energies == sorted(energies, reverse=True) and len(energies) == 15
    types.find_element(By.CSS_SELECTOR, "tr.more button").click()
    assert len(types.find_elements(By.CSS_SELECTOR, "tr")) > 16
    screenshot(browser, "section[data-run='mlp-bs4/train'] .op-energy", "crossrun-ops-power.png")
    timed = browser.find_element(By.CSS_SELECTOR, f"section[data-run='{NO_POWER}'] .op-energy")
    assert timed.find_element(By.TAG_NAME, "h4").text == "Time per operation in the traced steps (no power rail: by time)"
    times = [float(td.text) for td in timed.find_elements(By.CSS_SELECTOR, "table[data-by='op_type'] tr td:nth-child(3)")]
    assert times == sorted(times, reverse=True)
    screenshot(browser, f"section[data-run='{NO_POWER}'] .op-energy", "crossrun-ops-time.png")
