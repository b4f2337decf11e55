"""The MobilePerf tab's views across runs and of a run's tables, in a real browser
(headless Debian Chromium, a real `tensorboard` process), on a two-model sweep
trained by the real callback: models "mlp" and "wide" at batch sizes 1, 4 and
16 (synthetic power sensor: VDD_IN 5 W for mlp, 8 W for wide, VDD_SYS_GPU 2 W;
procfs memory sensor: the board's RAM and the process's own),
"wide" failing at batch size 16 with a MemoryError in its fourth step; mlp at
batch size 4 traced with profile_steps; and a traced run with the procfs
memory sensor only (no power rail). Screenshots under tests/_output/crossrun-*.png.

Apart from it, replays of two boards run on this machine: "mlp" at batch sizes 1 and 4 on a replayed TX2
tegrastats log in the sweep folder "tx2" (and "wide" at batch size 4 beside it), and directly in the logdir
on a replayed AGX Orin log: the same model and batch sizes on two boards, which the chart keeps apart."""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path

import keras
import pytest

from tf_mobileperf import MobilePerfCallback
from tf_mobileperf.sensors import MemorySensor, ReplaySensor

from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT, hover_batch, number, pick, serving, show
from helpers.figures import replay_log
from helpers.training import constant_sensor, data

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed (make test installs them)"
)

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


def train(
    logdir: Path,
    name: str,
    sensors: list,
    batch_size: int | None,
    fail_at: int | None = None,
    profile_steps: tuple[int, int] | None = None,
) -> None:
    width = {"mlp": 32, "wide": 128}[name]
    model = keras.Sequential(
        [
            keras.Input((16,)),
            keras.layers.Dense(width, activation="relu", name="hidden"),
            keras.layers.Dense(1, name="out"),
        ],
        name=name,
    )
    model.compile("sgd", "mse")
    x, y = data(max(1, batch_size or 8) * 10)
    callbacks = [
        MobilePerfCallback(logdir, idle_s=0, sensors=sensors, batch_size=batch_size, profile_steps=profile_steps)
    ]
    with contextlib.suppress(MemoryError):
        model.fit(
            x,
            y,
            batch_size=batch_size or 8,
            epochs=1,
            verbose=0,
            callbacks=callbacks + ([FailsAtBatch(fail_at)] if fail_at is not None else []),
        )


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


#: The cross-run chart's left margin, left of its tick marks (uPlot's 10 px): the columns with ink, as runs of
#: adjacent columns; the rotated y title and the tick labels are two runs where they do not touch.
Y_MARGIN_INK = """
const box = document.querySelector('.crossrun');
const canvas = box.querySelector('canvas'), over = box.querySelector('.u-over');
const cr = canvas.getBoundingClientRect(), or = over.getBoundingClientRect(), k = canvas.width / cr.width;
const [left, top, height] = [or.left - cr.left - 10, or.top - cr.top, or.height].map((v) => Math.round(v * k));
const px = canvas.getContext('2d').getImageData(0, top, left, height).data;
const runs = [];
for (let x = 0; x < left; x++) {
  let ink = false;
  for (let y = 0; y < height && !ink; y++) ink = px[(y * left + x) * 4 + 3] > 128;
  if (!ink) continue;
  if (runs.length && runs[runs.length - 1][1] === x - 1) runs[runs.length - 1][1] = x;
  else runs.push([x, x]);
}
return runs;
"""


def test_the_y_title_never_touches_the_tick_labels_whatever_the_quantity(tensorboard, browser):
    show(browser, tensorboard, ("mlp-bs1/train",))
    options = browser.execute_script(
        "return [...document.querySelectorAll('.crossrun select.quantity option')].map((o) => o.textContent)"
    )
    for option in [o for o in options if not o.endswith("not measured")]:
        pick(browser, ".crossrun select.quantity", option)
        runs = browser.execute_script(Y_MARGIN_INK)
        assert len(runs) >= 2, (option, runs)  # the title, then a blank column, then the labels
    pick(browser, ".crossrun select.quantity", "samples per second")
    screenshot(browser, ".crossrun", "crossrun-samples-axis.png")
    pick(browser, ".crossrun select.quantity", options[0])  # the tab keeps the choice: back to the default


@pytest.mark.slow
def test_crossrun_chart_has_one_series_per_model_on_a_log2_batch_axis_and_marks_the_failure(tensorboard, browser):
    show(browser, tensorboard, ("mlp-bs1/train",))
    state = crossrun_state(browser)
    assert state["series"] == ["batch size", "mlp", "wide"] and state["canvases"] == 1
    # Each model's line in its colour, the one `mobileperf plot` gives it (model_colours.json).
    from tf_mobileperf.analysis.colours import model_colour

    markers = browser.execute_script("""
        return [...document.querySelectorAll('.crossrun .u-legend .u-series')].slice(1).map(
            (s) => getComputedStyle(s.querySelector('.u-marker')).borderLeftColor);""")
    hex_of = lambda rgb: "#" + "".join(f"{int(v):02x}" for v in re.findall(r"\d+", rgb)[:3])  # noqa: E731
    assert [hex_of(m) for m in markers] == [model_colour("mlp").lower(), model_colour("wide").lower()]
    assert state["ticks"] == "1,2,4,8,16"
    assert state["y"] == "energy per step (J)"
    assert len(state["failed"]) == 1
    assert "wide-bs16/train" in state["failed"][0] and "MemoryError: out of memory in batch 4" in state["failed"][0]
    screenshot(browser, ".crossrun", "crossrun-energy.png")
    choices = browser.execute_script(
        "return [...document.querySelectorAll('.crossrun select.quantity option')].map((o) => o.textContent)"
    )
    for wanted in (
        "samples per second (samples/s)",
        "step time (mean) (ms)",
        "mean power: total rail group (W)",
        "mean power: gpu rail group (W)",
        "peak memory: process (peak RSS) (GiB)",
        "peak memory: system RAM in use (GiB)",
    ):
        assert wanted in choices
    assert "GPU utilization (%): not measured" in choices  # the synthetic sensor has no GPU load
    # The y select redraws the chart; the 8 W model draws more power than the 5 W one.
    pick(browser, ".crossrun select.quantity", "mean power: total rail group (W)")
    values = browser.execute_script(
        "return [...document.querySelectorAll('.crossrun .u-legend .u-series')].map((s) => s.textContent);"
    )
    assert len(values) == 3
    state = crossrun_state(browser)
    assert state["y"] == "mean power: total rail group (W)" and state["series"] == ["batch size", "mlp", "wide"]
    screenshot(browser, ".crossrun", "crossrun-power.png")
    # One series per run folder instead: every run is directly in the logdir, each in a folder of its own.
    pick(browser, ".crossrun select.grouping", "run folder")
    assert crossrun_state(browser)["series"] == ["batch size", *(f"{m}-bs{s}" for m in ("mlp", "wide") for s in SIZES)]
    assert browser.find_elements("css selector", ".crossrun .spread") == []  # no point of several runs
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_runs_table_sorts_run_names_naturally(tensorboard, browser):
    show(browser, tensorboard, ("mlp-bs1/train",))
    runs = browser.execute_script(
        "return [...document.querySelectorAll('#runs-table tr td:first-child')].map((e) => e.textContent)"
    )
    assert runs == [f"mlp-bs{s}/train" for s in SIZES] + [NO_POWER] + [f"wide-bs{s}/train" for s in SIZES]
    screenshot(browser, "#runs-table", "crossrun-runs-table.png")


def test_step_table_sorts_by_any_column_and_downloads_the_steps_shown_as_csv(tensorboard, browser, tmp_path):
    from selenium.webdriver.common.by import By

    show(browser, tensorboard, ("mlp-bs16/train",))
    section = browser.find_element(By.CSS_SELECTOR, "section[data-run='mlp-bs16/train']")
    browser.execute_script("arguments[0].querySelector('details.steps').open = true", section)
    table = section.find_element(By.CSS_SELECTOR, "table.step-table")

    def column(i):
        return [r.find_elements(By.TAG_NAME, "td")[i].text for r in table.find_elements(By.CSS_SELECTOR, "tr")[1:]]

    steps = column(0)
    assert steps == [str(i) for i in range(len(steps))] and len(steps) == 10  # 160 samples, batch 16
    header = lambda: table.find_elements(By.TAG_NAME, "th")  # noqa: E731 (redrawn on each click)
    energy = next(i for i, th in enumerate(header()) if th.text.startswith("VDD_IN energy"))
    header()[energy].click()
    header()[energy].click()  # descending
    cells = column(energy)
    shown = [float(v) for v in cells if v != "–"]  # "–": a step with a hole in its samples, sorted last
    assert "–" not in cells[: len(shown)]
    # A loaded machine's stalls may leave most steps with a hole (4 of 10 had energy in one CI run).
    assert len(shown) >= 3 and shown == sorted(shown, reverse=True) and column(0) != steps
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
    assert re.match(
        r"mean power: total rail VDD_IN over the \d measured steps with complete energy", titles["mean power"]
    )
    assert "VDD_IN (synthetic" in titles["mean power"]
    assert titles["GPU util"].startswith("not measured: no GPU utilization sensor")
    assert "over the 7 measured steps (the 3 warm-up steps left out)" in titles["step time"]
    assert titles["peak memory (process)"].startswith("highest resident memory of the training process")
    assert "proc_peak (memory (/proc/meminfo): /proc/" in titles["peak memory (process)"]
    # GPU memory apart from system RAM: the allocator's peak, and NVML's device memory, each saying why it is absent.
    assert titles["GPU peak (allocator)"].startswith("not measured: no GPU device visible to")
    assert titles["GPU memory in use (device)"].startswith("not measured: no GPU memory sensor (NVML)")
    # Whose CPU: the training process's own beside every process's, and whether others used the machine.
    assert titles["CPU util (process)"].startswith("mean CPU of the training process itself")
    assert re.match(r"over the measured steps \(.* s\): other processes used \d+% of the CPUs", titles["machine"])
    machine = next(s for s in spans if s.find_element(By.TAG_NAME, "b").text.startswith("machine"))
    assert re.search(r"(busy|quiet): others \d", machine.text)


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
    assert (
        timed.find_element(By.TAG_NAME, "h4").text == "Time per operation in the traced steps (no power rail: by time)"
    )
    times = [
        float(td.text) for td in timed.find_elements(By.CSS_SELECTOR, "table[data-by='op_type'] tr td:nth-child(3)")
    ]
    assert times == sorted(times, reverse=True)
    screenshot(browser, f"section[data-run='{NO_POWER}'] .op-energy", "crossrun-ops-time.png")


#: Replayed boards' runs: (run folder, model, batch size, replayed log).
REPLAYS = [
    ("tx2/mlp-bs1", "mlp", 1, "tx2"),
    ("tx2/mlp-bs4", "mlp", 4, "tx2"),
    ("tx2/wide-bs4", "wide", 4, "tx2"),
    ("orin-mlp-bs1", "mlp", 1, "orin"),
    ("orin-mlp-bs4", "mlp", 4, "orin"),
]

#: Per line of the cross-run chart: its label and its legend value; and the bars of its points of several runs.
LEGEND = """
const box = document.querySelector('.crossrun');
return {lines: [...box.querySelectorAll('.u-legend .u-series')].slice(1).map((s) =>
            [s.querySelector('.u-label').textContent, s.querySelector('.u-value').textContent]),
        spreads: [...box.querySelectorAll('.u-over .spread')].map((e) => ({group: e.dataset.group,
            size: Number(e.dataset.batchSize), n: Number(e.dataset.n), min: Number(e.dataset.min),
            max: Number(e.dataset.max), height: e.getBoundingClientRect().height, title: e.title}))};
"""


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """The replayed boards' runs (REPLAYS) served: (url, {run folder: its report})."""
    logdir = tmp_path_factory.mktemp("replays")
    logs = {"tx2": replay_log(logdir.parent, "tx2"), "orin": busy_log(logdir.parent, "orin")}
    for folder, name, size, board in REPLAYS:
        train(logdir / folder, name, [ReplaySensor(logs[board], speed=20)], size)
    reports = {folder: json.loads((logdir / folder / "report.json").read_text()) for folder, *_ in REPLAYS}
    with serving(logdir) as url:
        yield url, reports


def busy_log(tmp: Path, name: str) -> Path:
    """The recorded log's last line (training) alone, repeated as ``replay_log``'s: a replay whose power does not
    depend on which of its lines a run covered (the whole log's idle and busy lines average near the TX2's)."""
    busy = replay_log(tmp, name).read_text().splitlines(keepends=True)[-1]
    path = tmp / f"{name}_busy.log"
    path.write_text(busy * 6000)
    return path


def energy_per_step(report: dict) -> float:
    return report["energy_total"] / report["steps_measured"]


def shared(value: str) -> list[float]:
    """The mean, lowest and highest of a legend value of two runs: "0.128 J (n=2, 0.0740–0.182)"."""
    found = re.fullmatch(r"(\S+) J \(n=2, (\S+)–(\S+)\)", value)
    assert found, value
    return [float(v) for v in found.groups()]


@pytest.mark.slow
def test_crossrun_chart_keeps_replays_of_two_boards_on_their_own_lines_with_their_own_values(replays, browser):
    url, reports = replays
    show(browser, url, ("tx2/mlp-bs1/train",))
    device = reports["tx2/mlp-bs1"]["device"]
    assert device["replay_of"].endswith("tx2_long.log") and not device.get("board_type")
    host = device.get("board") or device["hostname"]  # the machine that replayed both logs
    assert all((r["device"].get("board") or r["device"]["hostname"]) == host for r in reports.values())
    grouping = browser.execute_script(
        "return [...document.querySelectorAll('.crossrun select.grouping option')].map((o) => o.textContent)"
    )
    assert grouping == ["board and model", "model", "run folder"]
    label = {"tx2": f"{host}, replay of tx2_long.log", "orin": f"{host}, replay of orin_busy.log"}
    assert crossrun_state(browser)["y"] == "energy per step (J)"
    for size in (1, 4):
        hover_batch(browser, size, [1, 4])
        state = browser.execute_script(LEGEND)
        assert [name for name, _ in state["lines"]] == [
            f"mlp on {label['orin']}",
            f"mlp on {label['tx2']}",
            f"wide on {label['tx2']}",
        ]
        values = dict(state["lines"])
        for folder, name, batch, board in REPLAYS:
            if batch == size:  # each line's value is its own run's, not a mean over the boards
                value = values[f"{name} on {label[board]}"]
                assert "n=" not in value and number(value) == pytest.approx(energy_per_step(reports[folder]), rel=5e-3)
        assert state["spreads"] == []  # a run per point
    screenshot(browser, ".crossrun", "crossrun-replays.png")
    # The replayed logs' own power (energy per step is also this machine's step time), each on its own line: apart by
    # more than twice the tolerance each line is held to, so two swapped lines would fail (the Orin's busy line alone
    # draws 16.1 W; the TX2's log 9.4 to 11.8 W, by the lines a run covered).
    pick(browser, ".crossrun select.quantity", "mean power: total rail group")
    hover_batch(browser, 4, [1, 4])
    values = dict(browser.execute_script(LEGEND)["lines"])
    tx2, orin = reports["tx2/mlp-bs4"]["power_avg"], reports["orin-mlp-bs4"]["power_avg"]
    assert abs(tx2 - orin) > 2 * 5e-3 * max(tx2, orin)
    assert float(values[f"mlp on {label['tx2']}"].split()[0]) == pytest.approx(tx2, rel=5e-3)
    assert float(values[f"mlp on {label['orin']}"].split()[0]) == pytest.approx(orin, rel=5e-3)
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


@pytest.mark.slow
def test_a_point_of_several_runs_shows_their_count_and_range(replays, browser):
    url, reports = replays
    show(browser, url, ("tx2/mlp-bs1/train",))
    # One line per model: mlp's two boards share each of its points.
    pick(browser, ".crossrun select.quantity", "energy per step")
    pick(browser, ".crossrun select.grouping", "model")
    hover_batch(browser, 4, [1, 4])
    state = browser.execute_script(LEGEND)
    mlp = [energy_per_step(reports[f]) for f in ("tx2/mlp-bs4", "orin-mlp-bs4")]
    (name, value), (_, wide) = state["lines"]
    assert name == "mlp" and "n=" not in wide
    assert shared(value) == [pytest.approx(v, rel=5e-3) for v in (sum(mlp) / 2, min(mlp), max(mlp))]
    bars = {(s["group"], s["size"]): s for s in state["spreads"]}
    assert sorted(bars) == [("mlp", 1), ("mlp", 4)]
    bar = bars["mlp", 4]
    assert bar["n"] == 2 and [bar["min"], bar["max"]] == [pytest.approx(min(mlp)), pytest.approx(max(mlp))]
    # Both caps drawn (2 px each); the span between them is the range on the axis's scale, which may be under
    # a pixel where the two boards' energies per step are close (both are this machine's step time).
    assert bar["height"] >= 4 and "tx2/mlp-bs4/train" in bar["title"] and "orin-mlp-bs4/train" in bar["title"]
    assert browser.find_element("css selector", ".crossrun .note.shared").text.startswith("Where several runs share")
    screenshot(browser, ".crossrun", "crossrun-shared-points.png")
    # One line per run folder: the sweep folder "tx2", and each run directly in the logdir in its own.
    pick(browser, ".crossrun select.grouping", "run folder")
    hover_batch(browser, 4, [1, 4])
    state = browser.execute_script(LEGEND)
    assert [name for name, _ in state["lines"]] == ["orin-mlp-bs1", "orin-mlp-bs4", "tx2"]
    tx2 = [energy_per_step(reports[f]) for f in ("tx2/mlp-bs4", "tx2/wide-bs4")]
    assert shared(dict(state["lines"])["tx2"]) == [
        pytest.approx(v, rel=5e-3) for v in (sum(tx2) / 2, min(tx2), max(tx2))
    ]
    assert [(s["group"], s["size"], s["n"]) for s in state["spreads"]] == [("tx2", 4, 2)]
    screenshot(browser, ".crossrun", "crossrun-folders.png")
