"""The MobilePerf tab's time view in a real browser (headless Debian Chromium,
a real `tensorboard` process): runs trained by the real callback, one with
the procfs CPU and memory sensors only (real readings, memory every 20 ms
and CPU every 60 ms, its 50 ms rounded up to the 20 ms wake-ups), one with procfs CPU utilization and
a sysfs tree of core clocks, two with the synthetic power sensor at 5 ms. What a chart draws is measured
on its canvas: the columns of the plot area where a pixel of a line's colour is. Screenshots under
tests/_output/timeview-*.png."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import keras
import pytest

from tf_mobileperf import MobilePerfCallback, PerfMonitor
from tf_mobileperf.sensors import CpuSensor, MemorySensor, ReplaySensor, SyntheticSensor

from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT, serving, show
from helpers.training import data, small_model

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed (make test installs them)"
)

CPU_RUN, POWER_RUNS, CLOCK_RUN = "cpu-only/train", ("power-bs8/train", "power-bs16/train"), "clocks/train"
#: Steps of about 1-2 ms each (the small model at batch size 1, unpaced): denser than the chart's pixels.
FAST_RUN = "fast-steps/train"
#: A monitor opened and closed before any step.
NO_STEP_RUN = "no-steps/train"
#: Three runs on three devices: the zoo's cnn on a replayed TX2 and on a replayed AGX Orin (tegrastats logs), the
#: small model on this machine's procfs CPU and memory.
DEVICE_RUNS = ("tx2-replay/train", "orin-replay/train", CPU_RUN)
DATA = Path(__file__).parent / "data"


def train(
    logdir: Path, sensors: list, batch_size: int, samples: int = 640, step_s: float = 0.0, model: str | None = None
) -> None:
    """Trains the small model (or the zoo's ``model`` on its synthetic data) measured into ``logdir``; each step
    takes at least ``step_s``, spent busy after it (a sleep would leave the CPU idle, its line along the bottom
    edge of the chart)."""
    if model is None:
        x, y = data(samples)
        net = small_model()
    else:
        from tf_mobileperf.zoo import get

        x, y = get(model).synthetic(batch_size, samples // batch_size)
        net = get(model).build()
    cb = MobilePerfCallback(logdir, idle_s=0, sensors=sensors, batch_size=batch_size)

    def busy(*_, **__) -> None:
        end = time.perf_counter() + step_s
        while time.perf_counter() < end:
            pass

    pace = keras.callbacks.LambdaCallback(on_train_batch_end=busy)
    net.fit(x, y, batch_size=batch_size, epochs=1, callbacks=[cb, pace], verbose=0)


def power_sensor() -> SyntheticSensor:
    """Synthetic at the sampler's 5 ms: two rails and the board's RAM."""
    return SyntheticSensor(
        power_w={"VDD_IN": lambda t: 5.0 + (t * 7) % 1.0, "VDD_SYS_GPU": lambda t: 2.0},
        memory_b={"ram_used": lambda t: 2e9 + 1e8 * ((t * 3) % 1.0)},
        groups={"VDD_IN": "total", "VDD_SYS_GPU": "gpu"},
        roles={"ram_used": {"device": "board"}, "VDD_SYS_GPU": {"device": "gpu"}},
    )


def cpu_with_clocks(root: Path) -> CpuSensor:
    """procfs CPU utilization of this machine (its real /proc) and a sysfs tree of core clocks at 1.42 GHz."""
    root.mkdir()
    (root / "proc").symlink_to("/proc")
    cpus = root / "sys/devices/system/cpu"
    cpus.mkdir(parents=True)
    count = os.cpu_count()
    (cpus / "present").write_text(f"0-{count - 1}\n")
    for core in range(count):
        (cpus / f"cpu{core}/cpufreq").mkdir(parents=True)
        (cpus / f"cpu{core}/cpufreq/scaling_cur_freq").write_text("1420000\n")  # kHz
    return CpuSensor(root)


@pytest.fixture(scope="module")
def tensorboard(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("tb")
    # At least 2.4 s (240 steps of at least 10 ms, however fast this machine trains: a quiet one trained the
    # unpaced run in 0.2 s), so CPU utilization, read every 60 ms and first known at its second reading,
    # covers the run's time axis to within a reading at either end.
    train(logdir / "cpu-only", [CpuSensor(), MemorySensor()], batch_size=8, samples=1920, step_s=0.01)
    train(logdir / "clocks", [cpu_with_clocks(tmp_path_factory.mktemp("sysfs") / "root")], batch_size=8)
    for run in POWER_RUNS:
        batch = int(run.split("-bs")[1].split("/")[0])
        train(logdir / run.split("/")[0], [power_sensor()], batch_size=batch)
    train(logdir / FAST_RUN.split("/")[0], [power_sensor()], batch_size=1, samples=400)
    with PerfMonitor(logdir / NO_STEP_RUN.split("/")[0], sensors=[MemorySensor()]):
        pass
    for board in ("tx2", "orin"):
        log = tmp_path_factory.mktemp(board) / f"{board}_long.log"
        log.write_text((DATA / f"{board}_tegrastats.log").read_text() * 150)
        train(
            logdir / f"{board}-replay",
            [ReplaySensor(log, interval_ms=1000, speed=20)],
            batch_size=8,
            samples=480,
            step_s=0.01,
            model="cnn",
        )
    with serving(logdir) as url:
        yield url


#: Per time chart of the runs' details (energy bars are per step, not over time): its title, its
#: legend, the share of the plot area's columns where a pixel is within reach of a shown line's colour,
#: and how far down the plot area the highest such pixel is (0 top, 1 bottom).
COVERAGE = """
const near = (a, b) => Math.abs(a[0] - b[0]) + Math.abs(a[1] - b[1]) + Math.abs(a[2] - b[2]) < 90;
return [...document.querySelectorAll('#run-details .chart')].filter((c) => c.querySelector('canvas')
    && !c.querySelector('h4').textContent.startsWith('Energy per step')).map((chart) => {
  const canvas = chart.querySelector('canvas'), over = chart.querySelector('.u-over');
  const cr = canvas.getBoundingClientRect(), or = over.getBoundingClientRect(), k = canvas.width / cr.width;
  const [x0, y0, w, h] = [or.left - cr.left, or.top - cr.top, or.width, or.height].map((v) => Math.round(v * k));
  const colours = [...chart.querySelectorAll('.u-series:not(.u-off) .u-marker')]
      .map((m) => getComputedStyle(m).borderLeftColor.match(/\\d+/g).slice(0, 3).map(Number));
  const px = canvas.getContext('2d').getImageData(x0, y0, w, h).data;
  let covered = 0, top = h;
  for (let x = 0; x < w; x++) {
    for (let y = 0; y < h; y++) {
      const i = (y * w + x) * 4;
      if (px[i + 3] > 200 && colours.some((c) => near(c, [px[i], px[i + 1], px[i + 2]]))) {
        covered++;
        top = Math.min(top, y);
        break;
      }
    }
  }
  return [chart.querySelector('h4').textContent, chart.querySelector('.u-legend').textContent, covered / w, top / h];
});
"""


def rate(legend: str, line: str, unit: str) -> int:
    """The rate a legend gives ``line``: "ram_used, system RAM (GiB, 50 Hz)" -> 50."""
    return int(re.search(re.escape(line) + r".*?\(" + re.escape(unit) + r", (\d+) Hz\)", legend).group(1))


def screenshot(browser, name: str) -> None:
    browser.switch_to.default_content()
    OUTPUT.mkdir(exist_ok=True)
    browser.save_screenshot(str(OUTPUT / f"timeview-{name}.png"))


@pytest.mark.slow
def test_every_time_chart_of_a_cpu_only_run_draws_lines_over_its_x_range(tensorboard, browser):
    show(browser, tensorboard, (CPU_RUN,))
    charts = browser.execute_script(COVERAGE)
    titles = [title for title, *_ in charts]
    assert any("Memory" in t for t in titles) and any("CPU" in t for t in titles), titles
    for title, legend, covered, _ in charts:
        assert covered >= 0.9, (title, legend, covered)
    per_cluster = [t for t in titles if t.startswith("Utilization, CPU ") and t != "Utilization, CPU (%)"]
    assert "Utilization, CPU (%)" in titles and per_cluster, titles  # all cores, then one chart per cluster
    memory = next(legend for title, legend, *_ in charts if title.startswith("Memory"))
    for line in ("ram_used, system RAM", "proc_rss, process", "proc_peak, process"):  # read every 20 ms
        assert 40 <= rate(memory, line, "GiB") <= 55, memory
    cpu = " ".join(legend for title, legend, *_ in charts if title.startswith("Utilization, CPU"))
    assert 15 <= rate(cpu, "cpu0_util (", "%") <= 18, cpu  # read every 60 ms: 50 ms on the 20 ms wake-ups
    # the training process's own CPU, a line of its own beside the machine's (every process's)
    all_cores = next(legend for title, legend, *_ in charts if title == "Utilization, CPU (%)")
    assert "this process's CPU (%, per step)" in all_cores, all_cores
    screenshot(browser, "cpu-only")


def test_every_time_chart_of_a_5ms_synthetic_power_run_draws_lines_over_its_x_range(tensorboard, browser):
    show(browser, tensorboard, (POWER_RUNS[0],))
    charts = browser.execute_script(COVERAGE)
    assert [t for t, *_ in charts][:2] == ["Power per rail (W)", "Memory (GiB)"]
    for title, legend, covered, _ in charts:
        assert covered >= 0.9, (title, legend, covered)
    power = charts[0][1]
    assert 180 <= rate(power, "VDD_IN", "W") <= 220 and 180 <= rate(power, "VDD_SYS_GPU", "W") <= 220, power  # 5 ms
    screenshot(browser, "synthetic-power")


def test_memory_chart_offers_the_device_ram_limit_hidden_so_the_scale_fits_the_lines(tensorboard, browser):
    from selenium.webdriver.common.by import By

    show(browser, tensorboard, (CPU_RUN,))
    memory = browser.find_element(By.CSS_SELECTOR, "#time-view .time-chart[data-chart='memory']")
    limit = next(s for s in memory.find_elements(By.CSS_SELECTOR, ".u-series") if "device RAM" in s.text)
    assert "u-off" in limit.get_attribute("class")  # not drawn, so not in the y range
    assert "device RAM:" in memory.find_element(By.CSS_SELECTOR, "p.note").text
    top = next(top for title, _, _, top in browser.execute_script(COVERAGE) if title.startswith("Memory"))
    assert top < 0.5, top  # the lines set the y scale: a 23.5 GiB limit would press them into the bottom tenth
    screenshot(browser, "memory")


#: Per line of the memory chart (not its pale bands): its legend label, and the share of the plot area's
#: columns with a pixel of exactly its legend's colour (a line drawn under a pale band is blended with it).
EXACT_COLOUR = """
const chart = document.querySelector("#time-view .time-chart[data-chart='memory']");
const canvas = chart.querySelector('canvas'), over = chart.querySelector('.u-over');
const cr = canvas.getBoundingClientRect(), or = over.getBoundingClientRect(), k = canvas.width / cr.width;
const [x0, y0, w, h] = [or.left - cr.left, or.top - cr.top, or.width, or.height].map((v) => Math.round(v * k));
const px = canvas.getContext('2d').getImageData(x0, y0, w, h).data;
return [...chart.querySelectorAll('.u-series:not(.u-off)')].filter((s) => s.querySelector('.u-marker')
    && !s.textContent.includes('pale band') && !s.textContent.startsWith('time')).map((s) => {
  const c = getComputedStyle(s.querySelector('.u-marker')).borderLeftColor.match(/\\d+/g).slice(0, 3).map(Number);
  let columns = 0;
  for (let x = 0; x < w; x++) {
    for (let y = 0; y < h; y++) {
      const i = (y * w + x) * 4;
      if (px[i + 3] > 250 && Math.abs(px[i] - c[0]) + Math.abs(px[i + 1] - c[1]) + Math.abs(px[i + 2] - c[2]) < 20) {
        columns++;
        break;
      }
    }
  }
  return [s.textContent, columns / w];
});
"""


def test_the_process_memory_line_is_drawn_over_its_peak_band_in_its_own_colour(tensorboard, browser):
    show(browser, tensorboard, (CPU_RUN,))
    lines = dict(browser.execute_script(EXACT_COLOUR))
    rss = next(share for label, share in lines.items() if "proc_rss" in label)
    # The process only grew, so its peak band lies along the RSS line: under it, the line keeps its colour.
    assert rss > 0.5, lines
    screenshot(browser, "memory-rss-over-peak")


#: The columns of the first time chart's plot area where a step-start line (or the warm-up shading) is drawn,
#: read off a row just under the plot's top, as runs of adjacent columns of grey: a data line that reaches that row
#: (a loaded CI run drew one there) is coloured.
STEP_MARKS = """
const chart = document.querySelector('#time-view .time-chart');
const canvas = chart.querySelector('canvas'), over = chart.querySelector('.u-over');
const cr = canvas.getBoundingClientRect(), or = over.getBoundingClientRect(), k = canvas.width / cr.width;
const [x0, y0, w] = [or.left - cr.left, or.top - cr.top, or.width].map((v) => Math.round(v * k));
const px = canvas.getContext('2d').getImageData(x0, y0 + 2, w, 1).data;
const marks = [];
const grey = (i) => Math.abs(px[i] - px[i + 1]) < 10 && Math.abs(px[i + 1] - px[i + 2]) < 10;
for (let x = 0; x < w; x++) {
  // Not the grid's faint lines (alpha 0.07), nor a data line that reaches the top (coloured).
  if (px[x * 4 + 3] > 50 && grey(x * 4)) {
    if (marks.length && marks[marks.length - 1][1] === x - 1) marks[marks.length - 1][1] = x;
    else marks.push([x, x]);
  }
}
return [marks, w, k];
"""


def test_step_lines_of_steps_denser_than_pixels_are_thinned_out(tensorboard, browser):
    show(browser, tensorboard, (FAST_RUN,))
    found, width, ratio = browser.execute_script(STEP_MARKS)
    marks: list[list[int]] = []
    for a, b in found:  # a column or two after the warm-up shading is its blended edge, not a line
        if marks and marks[-1][1] - marks[-1][0] > 3 and a - marks[-1][1] <= 2:
            marks[-1][1] = b
        else:
            marks.append([a, b])
    starts = [a for a, _ in marks]
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    # 400 steps across the chart: a line at each would be a few pixels apart, a grey block.
    assert len(marks) >= 10 and min(gaps) >= 8 * ratio - 1, (len(marks), gaps[:20], width)
    screenshot(browser, "fast-steps")


def test_a_run_without_a_measured_step_says_so_in_its_header(tensorboard, browser):
    show(browser, tensorboard, (NO_STEP_RUN,))
    header = browser.execute_script(
        "return [...document.querySelectorAll('#run-details .header span')].map((s) => [s.textContent, s.title]);"
    )
    status, hover = next((text, title) for text, title in header if text.startswith("status:"))
    assert status == "status: no step measured: no step ran"
    assert hover == "it ended before its first measured step: no value below was measured"
    values = dict(text.split(": ", 1) for text, _ in header)
    # Its memory sensor was there: its peak says why it is missing; it had no power sensor, and says that.
    assert values["peak memory (system)"] == values["peak memory (process)"] == "no step measured"
    assert values["machine"] == values["between steps (input, callbacks)"] == "no step measured"
    # The sampler ran: its rate, or, with too few rows for one (a run this short may have one), its rows.
    assert re.fullmatch(r"\d+ rows?: too few for a rate|[\d.]+ Hz of [\d.]+ Hz.*", values["sampling"])
    # Its rows (one, or a few: it lasted well under a second) are drawn over their own span, a single row in a
    # second around it, not on uPlot's 0 to 100 s for a single x.
    ranges = browser.execute_script(
        "return [...document.querySelectorAll('#time-view .time-chart')].map((c) => c.dataset.xRange)"
    )
    assert ranges and all(float(hi) - float(lo) <= 10 for lo, hi in (r.split(",") for r in ranges)), ranges
    hovers = {text.split(": ", 1)[0]: title for text, title in header}
    assert hovers["peak memory (process)"] == "not measured: no step ran"
    assert values["energy total"] == values["GPU util"] == "not measured on this device"
    row = browser.execute_script(
        "return [...document.querySelectorAll('#runs-table tr')].map((r) => [...r.cells].map((c) => c.textContent))"
        ".find((cells) => cells[0] === arguments[0]);",
        NO_STEP_RUN,
    )
    assert row[2:4] == ["not given", "no step measured: no step ran"]  # batch size was not passed: no measurement
    assert row[4] == row[7] == "not measured on this device"  # energy/step, mean power: no power sensor
    assert row[8] == "no step measured"  # peak memory: its sensor was there
    screenshot(browser, "no-steps")


def test_overlaid_runs_share_one_axis_and_stack_on_request(tensorboard, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    show(browser, tensorboard, POWER_RUNS)
    view = browser.find_element(By.ID, "time-view")
    assert view.get_attribute("data-layout") == "overlaid"
    power = view.find_elements(By.CSS_SELECTOR, ".time-chart[data-chart='power']")
    assert len(power) == 1  # one chart, the lines of both runs on its one x axis
    legend = power[0].find_element(By.CSS_SELECTOR, ".u-legend").text
    for run in POWER_RUNS:
        assert 180 <= rate(legend, f"{run}: VDD_IN", "W") <= 220 and f"{run}: VDD_SYS_GPU (W, " in legend
    for title, legend, covered, _ in browser.execute_script(COVERAGE):
        assert covered >= 0.9, (title, legend, covered)
    screenshot(browser, "overlaid")
    browser.switch_to.frame(browser.find_element(By.CSS_SELECTOR, "iframe"))
    browser.find_element(By.ID, "stack-runs").click()
    WebDriverWait(browser, 60).until(
        lambda d: (
            d.find_element(By.ID, "time-view").get_attribute("data-layout") == "stacked"
            and d.find_element(By.ID, "time-view").get_attribute("data-drawn") == "true"
        )
    )
    stacked = browser.find_elements(By.CSS_SELECTOR, "#time-view .stacked-run")
    assert sorted(s.get_attribute("data-run") for s in stacked) == sorted(POWER_RUNS)
    for group in stacked:
        assert len(group.find_elements(By.CSS_SELECTOR, ".time-chart[data-chart='power']")) == 1
    screenshot(browser, "stacked")
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []


def test_clocks_get_a_chart_of_their_own_per_device_in_mhz(tensorboard, browser):
    show(browser, tensorboard, (CLOCK_RUN,))
    charts = browser.execute_script(COVERAGE)
    clocks = [(title, legend, covered) for title, legend, covered, _ in charts if title.startswith("Clocks")]
    assert [title for title, _, _ in clocks] == ["Clocks, CPU (MHz)"], [title for title, *_ in charts]
    title, legend, covered = clocks[0]
    assert 16 <= rate(legend, "cpu0_freq", "MHz") <= 22 and covered >= 0.9, (legend, covered)
    assert not any("freq" in legend for title, legend, *_ in charts if not title.startswith("Clocks"))
    screenshot(browser, "clocks")


def test_three_runs_of_three_devices_overlaid_each_in_its_models_colour_with_each_devices_ram(tensorboard, browser):
    """The README's screenshot: cnn on a replayed TX2 and on a replayed Orin, the small model on this machine."""
    from selenium.webdriver.common.by import By

    from tf_mobileperf.analysis.colours import model_colour, shade

    show(browser, tensorboard, DEVICE_RUNS)
    view = browser.find_element(By.ID, "time-view")
    assert view.get_attribute("data-layout") == "overlaid"
    # Each legend entry's marker is its line's stroke: the run's model's colour as `mobileperf plot` draws it,
    # read from the same model_colours.json (the TX2's cnn, cnn's second run in the runs' order, in its second
    # shade; the small model's "mlp" in the colour its name's hash picks).
    expected = {
        "orin-replay/train": model_colour("cnn"),
        "tx2-replay/train": shade(model_colour("cnn"), 1),
        CPU_RUN: model_colour("mlp"),
    }
    strokes = browser.execute_script("""
        return [...document.querySelectorAll('#time-view .time-chart .u-series')].map((s) => [
            s.querySelector('.u-label').textContent, getComputedStyle(s.querySelector('.u-marker')).borderLeftColor]);
    """)
    hex_of = lambda rgb: "#" + "".join(f"{int(v):02x}" for v in re.findall(r"\d+", rgb)[:3])  # noqa: E731
    seen = set()
    for label, rgb in strokes:
        run = next((r for r in DEVICE_RUNS if label.startswith(f"{r}: ")), None)
        if run is not None and not label.endswith("pale band"):
            assert hex_of(rgb) == expected[run].lower(), (label, rgb)
            seen.add(run)
    assert seen == set(DEVICE_RUNS), strokes
    # One device RAM line per device, named with it, in the limit colour, none red.
    memory = view.find_element(By.CSS_SELECTOR, ".time-chart[data-chart='memory']")
    limits = [s.text for s in memory.find_elements(By.CSS_SELECTOR, ".u-series") if "device RAM" in s.text]
    assert len(limits) == 3, limits
    assert any("replay of tx2_long.log" in t for t in limits) and any("replay of orin_long.log" in t for t in limits)
    assert "device RAM: " in memory.find_element(By.CSS_SELECTOR, "p.note").text
    # The process's peak (VmHWM) is a pale band under its RSS: equal at times, both seen.
    legend = memory.find_element(By.CSS_SELECTOR, ".u-legend").text
    assert f"{CPU_RUN}: proc_peak, process" in legend and "pale band" in legend
    assert not [label for label, rgb in strokes if hex_of(rgb) in ("#c62828", "#ff0000")]
    # An empty chart says one short clause, the whole reason on hover.
    for empty in browser.find_elements(By.CSS_SELECTOR, "#time-view .chart.empty p"):
        assert len(empty.text) < 80 and empty.get_attribute("title"), empty.text
    screenshot(browser, "three-devices")
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


BOUNDS = """
const chart = [...document.querySelectorAll('#run-details .chart')]
    .find((c) => c.querySelector('h4').textContent.startsWith('Energy per step'));
return {title: chart.querySelector('h4').textContent, whiskers: [...chart.querySelectorAll('.u-over .bound')].map((e) =>
    ({step: Number(e.dataset.step), energy: Number(e.dataset.energy), bound: Number(e.dataset.bound),
      height: e.getBoundingClientRect().height, title: e.title}))};
"""


@pytest.mark.slow
def test_energy_per_step_draws_each_measured_steps_stated_bound_as_a_whisker(tensorboard, browser):
    # The replayed TX2's power is a held field that changes every 50 ms (1 s lines at speed 20): each step's
    # energy has a bound, from the change around its edges over the whole update interval.
    run = "tx2-replay/train"
    steps = json.loads(urllib.request.urlopen(f"{tensorboard}/data/plugin/mobileperf/steps?run={quote(run)}").read())
    bounded = {
        s["step"]: (s["energy_j"]["total"], s["energy_bound_j"]["total"])
        for s in steps["steps"]
        if not s["warmup"] and not s["failed"] and (s["energy_bound_j"].get("total") or 0) > 0
    }
    assert len(bounded) >= 10
    show(browser, tensorboard, (run,))
    drawn = browser.execute_script(BOUNDS)
    assert "whiskers: each step's stated bound" in drawn["title"]
    whiskers = {w["step"]: w for w in drawn["whiskers"]}
    assert sorted(whiskers) == sorted(bounded)
    for step, (energy, bound) in bounded.items():
        w = whiskers[step]
        assert (w["energy"], w["bound"]) == (pytest.approx(energy), pytest.approx(bound))
        assert w["title"].startswith(f"step {step}: ") and w["title"].endswith(" J (its stated bound)")
    # One scale: each whisker's height in pixels is its width in joules (2 bounds, cut at 0) times the same factor.
    tall = [w for w in whiskers.values() if w["height"] >= 10]  # a pixel of rounding is under 10% of these
    per_joule = [w["height"] / (w["energy"] + w["bound"] - max(w["energy"] - w["bound"], 0)) for w in tall]
    assert tall and max(per_joule) <= 1.1 * min(per_joule), per_joule
    chart = browser.execute_script(
        "return [...document.querySelectorAll('#run-details .chart')]"
        ".find((c) => c.querySelector('h4').textContent.startsWith('Energy per step'))"
    )
    browser.execute_script("arguments[0].scrollIntoView()", chart)
    OUTPUT.mkdir(exist_ok=True)
    chart.screenshot(str(OUTPUT / "timeview-energy-bounds.png"))
