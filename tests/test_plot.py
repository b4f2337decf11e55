"""`mobileperf plot` on real sweeps (real child processes): one on this machine's own sensors (CPU and
memory from /proc; no power sensor here) and one on a tegrastats replay of a TX2 (power per rail, GPU,
per-core CPU). The figures are checked as data (their lines equal the results) and as pixels, and
report.html is opened in headless Chromium. Copies of a figure and of the page go to tests/_output/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib.colors
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest

from tf_mobileperf.analysis.colours import limit_colour, model_colour, short_reason, table
from tf_mobileperf.cli.parser import main
from tf_mobileperf.figures.draw import batch_ticks, draw_panel
from tf_mobileperf.figures.plot import plot
from tf_mobileperf.figures.specs import figures

from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT
from helpers.figures import line_pixels, run_cli, spec
from helpers.stall_rerun import made_unstalled, reports_gap

TX2_LOG = Path(__file__).parent / "data" / "tx2_tegrastats.log"
#: The rows of a real sweep on a replayed TX2 (tx2_tegrastats.log repeated, at 20x) under a 1.4 GiB memory limit:
#: cnn and lstm at batch 1, 4, 16, 64, and cnn on 160 px inputs at 4, 16, 64 (64 out of memory); their runs'
#: samples and sensors' details left out.
RECORDED = Path(__file__).parent / "data" / "sweep_tx2_replay.json"
FIGURES = ("step_time", "throughput", "gpu_util", "cpu_util", "power", "energy", "memory")


@pytest.fixture(scope="module")
def cpu_sweep(tmp_path_factory):
    """cnn and lstm at batch 1 and 4 with this machine's sensors ("auto": /proc CPU and memory here)."""
    out = tmp_path_factory.mktemp("cpu") / "sweep"
    code, stdout, stderr = run_cli(
        ["sweep", "--models", "cnn,lstm", "--batch-sizes", "1,4", "--steps", "5", "--out", str(out)]
    )
    assert code == 0, stderr[-3000:]
    return out, stdout, stderr


@pytest.fixture(scope="module")
def replay_sweep(tmp_path_factory):
    """cnn at batch 1 and 2 on a replayed TX2 at 20x. The recorded log holds 4 samples (0.2 s at 20x, over
    before the first step), so it is replayed repeated 150 times (30 s at 20x)."""
    tmp = tmp_path_factory.mktemp("replay")
    log = tmp / "tx2_long.log"
    log.write_text(TX2_LOG.read_text() * 150)
    out = tmp / "sweep"

    def make() -> Path:
        args = ["--models", "cnn", "--batch-sizes", "1,2", "--steps", "5", "--sensors", f"replay:{log}@20"]
        code, _, stderr = run_cli(["sweep", *args, "--out", str(out)])
        assert code == 0, stderr[-3000:]
        return out

    return made_unstalled(out, make, lambda out: reports_gap(out, "VDD_IN"))


def rows_of(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_sweep_console_shows_step_time_and_samples_per_s_and_one_progress_bar(cpu_sweep):
    out, stdout, stderr = cpu_sweep
    header = stdout.splitlines()[0].split()
    assert header[:5] == ["model", "batch", "ok", "step", "ms"] and "samples/s" in header
    for row, line in zip(rows_of(out), stdout.splitlines()[1:5]):
        cells = line.split()
        assert cells[:3] == [row["model"], str(row["batch_size"]), "yes"]
        assert float(cells[3]) == pytest.approx(row["step_time_s_mean"] * 1e3, rel=1e-3)
        assert float(cells[4]) == pytest.approx(row["samples_per_s"], rel=1e-3)
        assert float(cells[7]) == pytest.approx(row["proc_peak_gb"], rel=1e-3)
    bars = [line for line in stderr.split("\n") if "sweep:" in line]
    assert len(bars) == 1 and "4/4 [" in bars[0]  # one bar, redrawn in place, ended full
    code, _, again = run_cli(
        ["sweep", "--models", "cnn,lstm", "--batch-sizes", "1,4", "--steps", "5", "--out", str(out)]
    )
    assert code == 0 and "sweep:" not in again  # nothing left to run: no bar


def test_plot_of_a_cpu_only_sweep_draws_step_time_throughput_cpu_and_memory(cpu_sweep):
    out = cpu_sweep[0]
    assert main(["plot", str(out)]) == 0
    rows = rows_of(out)
    for name in FIGURES:
        assert (out / f"{name}.png").stat().st_size > 5000, name
    for name in ("step_time", "throughput", "cpu_util", "memory"):
        assert line_pixels(out / f"{name}.png") > 200, name  # lines drawn, not a blank frame (a blank one has 0)
        assert spec(rows, name).panels[0].series, name
    by_key = {(r["model"], r["batch_size"]): r for r in rows}
    step_time = spec(rows, "step_time").panels[0]
    assert {s.label for s in step_time.series} == {"cnn", "lstm"}
    for series in step_time.series:
        assert [b for b, _ in series.points] == [1, 4]
        for batch, ms in series.points:
            assert ms == pytest.approx(by_key[series.label, batch]["step_time_s_mean"] * 1e3)
    process, system = spec(rows, "memory").panels
    for series in process.series:
        assert all(gib == by_key[series.label, b]["proc_peak_gb"] > 0.1 for b, gib in series.points)
    assert "every process" in system.title and not system.limits and not process.limits  # no limit set
    gpu = spec(rows, "gpu_util").panels[0]
    if not gpu.series:  # no GPU here: the panel says why in one short clause; the report's whole reason apart
        assert gpu.why_detail == rows[0]["unavailable"]["gpu_util"]
        assert gpu.why_empty == short_reason(gpu.why_detail) and len(gpu.why_empty) < 60, gpu.why_empty
        assert line_pixels(out / "gpu_util.png") == 0
        shutil.copy(out / "gpu_util.png", OUTPUT / "plot-gpu_util-cpu-only.png")
    shutil.copy(out / "memory.png", OUTPUT / "plot-memory-cpu-sweep.png")


@pytest.mark.slow
def test_plot_of_a_replay_sweep_draws_power_per_rail_group_gpu_and_energy(replay_sweep):
    assert main(["plot", str(replay_sweep)]) == 0
    rows = rows_of(replay_sweep)
    assert all(r["success"] for r in rows)
    power = spec(rows, "power")
    titles = [p.title for p in power.panels]
    assert titles[:5] == [
        "mean power, total rails (VDD_IN)",
        "mean power, cpu rails (VDD_SYS_CPU)",
        "mean power, gpu rails (VDD_SYS_GPU)",
        "mean power, mem rails (VDD_SYS_DDR)",
        "mean power, soc rails (VDD_SYS_SOC)",
    ]
    total = power.panels[0].series[0].points
    assert [b for b, _ in total] == [1, 2]
    assert all(2.3 <= w <= 11.9 for _, w in total)  # between the log's lowest and highest VDD_IN
    assert [w for _, w in total] == [r["power_avg_w"]["VDD_IN"] for r in rows]
    per_step, per_sample = spec(rows, "energy").panels
    assert [j for _, j in per_step.series[0].points] == [r["energy_per_step_j"] for r in rows]
    assert [j for _, j in per_sample.series[0].points] == [r["energy_per_sample_j"] for r in rows]
    gpu = spec(rows, "gpu_util").panels[0].series[0].points
    assert all(0 <= u <= 100 for _, u in gpu)
    cpu = spec(rows, "cpu_util").panels[0]  # the replay's cores have no cluster: their mean
    # The mean of the cores that have a value: the log's TX2 has cores "off" in some lines, and a step that saw
    # only those lines has no value for them (null, not 0).
    known = [[u for u in r["cpu_util_per_core"].values() if u is not None] for r in rows]
    assert [u for _, u in cpu.series[0].points] == pytest.approx([np.mean(k) for k in known])
    for name in ("power", "energy", "gpu_util", "cpu_util", "step_time", "throughput"):
        assert line_pixels(replay_sweep / f"{name}.png") > 200, name  # a line at 100% half hides under the frame
    shutil.copy(replay_sweep / "power.png", OUTPUT / "plot-power-replay-sweep.png")


def test_replay_sweep_rows_carry_active_energy_and_the_energy_figure_draws_it_dashed(replay_sweep):
    rows = rows_of(replay_sweep)
    assert all(r["idle_power_w"]["VDD_IN"] > 0 for r in rows)  # the replayed TX2's idle baseline, per rail
    assert [r["energy_active_per_step_j"] for r in rows] == [
        r["energy_active_total"] / r["steps_measured"] for r in rows
    ]
    per_step, per_sample = spec(rows, "energy").panels
    total, active = per_step.series
    assert active.dashed and active.beside == total.label == "cnn"
    assert active.points == [(r["batch_size"], r["energy_active_per_step_j"]) for r in rows]
    assert per_sample.series[1].points == [(r["batch_size"], r["energy_active_per_sample_j"]) for r in rows]


def test_batch_size_axis_reads_1_2_4_to_64():
    assert batch_ticks([1, 64]) == [1, 2, 4, 8, 16, 32, 64]
    assert batch_ticks([3, 12]) == [2, 4, 8, 16]
    rows = [{"model": "cnn", "batch_size": b, "success": True, "step_time_s_mean": 0.01 * b} for b in (1, 8, 64)]
    fig, ax = plt.subplots()
    draw_panel(ax, spec(rows, "step_time").panels[0], [1, 8, 64])
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8", "16", "32", "64"]
    assert ax.get_title() and ax.get_ylabel() == "step time (ms)"
    plt.close(fig)


def test_a_value_below_zero_is_inside_the_axis():
    """Active energy under the idle baseline (a replay's idle stretch drew more than a step) is a negative
    value: the axis goes down to it instead of cutting it off at 0; otherwise it starts at 0."""
    from tf_mobileperf.figures.panels import Panel, Series

    fig, ax = plt.subplots()
    draw_panel(ax, Panel("energy", "energy (J)", [Series("active", [(1, -0.02), (4, 0.01)], dashed=True)]), [1, 4])
    assert ax.get_ylim()[0] <= -0.02
    draw_panel(
        ax2 := fig.add_subplot(2, 1, 2), Panel("energy", "energy (J)", [Series("total", [(1, 0.3), (4, 0.4)])]), [1, 4]
    )
    assert ax2.get_ylim()[0] == 0
    plt.close(fig)


@pytest.mark.slow
@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed")
def test_report_html_opens_in_chromium_with_every_figure(replay_sweep, browser):  # noqa: F811
    page = plot(replay_sweep)[-1]
    assert page.name == "report.html"
    browser.get_log("browser")  # what earlier pages left
    browser.get(page.as_uri())
    images = browser.execute_script(
        "return [...document.images].map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight])"
    )
    assert [alt for alt, *_ in images] == [s.title for s in figures(rows_of(replay_sweep))]
    assert all(complete and width > 300 and height > 200 for _, complete, width, height in images), images
    cells = browser.execute_script("return [...document.querySelectorAll('tbody tr')].map(r => r.cells[1].innerText)")
    assert cells == ["1", "2"]
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    browser.save_screenshot(str(OUTPUT / "plot-report.png"))


def test_energy_figure_shows_active_energy_beside_total_a_line_per_model_and_power_mode(tmp_path):
    """Rows as a sweep over two power modes writes them, with an idle baseline (synthetic values: 2 W idle,
    0.1 s steps, so active = total - 0.2 J a step)."""
    rows = [
        {
            "model": "cnn",
            "batch_size": b,
            "success": True,
            "config": {"steps": 5, "power_mode": mode},
            "power_mode": mode,
            "power_mode_name": name,
            "jetson_clocks": "off",
            "steps_measured": 4,
            "energy_per_step_j": total,
            "energy_per_sample_j": total / b,
            "energy_active_per_step_j": total - 0.2,
            "energy_active_per_sample_j": (total - 0.2) / b,
        }
        for mode, name, watts in ((0, "MAXN", 9.0), (2, "MODE_15W", 5.0))
        for b in (1, 4)
        for total in [watts * 0.1 * (1 + b / 4)]
    ]
    (tmp_path / "results.json").write_text(json.dumps(rows))
    per_step, per_sample = spec(rows, "energy").panels
    assert [(s.label, s.dashed) for s in per_step.series] == [
        ("cnn (mode 0)", False),
        ("cnn (mode 2)", False),
        ("cnn (mode 0): active (idle power taken out)", True),
        ("cnn (mode 2): active (idle power taken out)", True),
    ]
    assert per_step.series[2].points == [(r["batch_size"], r["energy_active_per_step_j"]) for r in rows[:2]]
    assert per_sample.series[3].points == [(b, (r["energy_per_step_j"] - 0.2) / b) for r, b in zip(rows[2:], (1, 4))]
    assert "dashed: active" in per_step.title
    page = plot(tmp_path)[-1].read_text()
    assert "active energy/step (J)" in page and "2 (MODE_15W), jetson_clocks off" in page
    assert line_pixels(tmp_path / "energy.png") > 1000
    shutil.copy(tmp_path / "energy.png", OUTPUT / "plot-energy-active-by-power-mode.png")


def test_energy_figure_without_an_idle_baseline_has_no_active_line():
    rows = [
        {"model": "cnn", "batch_size": b, "success": True, "energy_per_step_j": 1.0 * b, "energy_per_sample_j": 1.0}
        for b in (1, 2)
    ]
    per_step, _ = spec(rows, "energy").panels
    assert [s.label for s in per_step.series] == ["cnn"] and per_step.title == "energy per step"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("recorded")
    shutil.copy(RECORDED, out / "results.json")
    return out, rows_of(out)


def drawn(panel, sizes):
    """The panel drawn on a figure of its own: (figure, axes), laid out as `plot` lays it out."""
    fig, ax = plt.subplots(layout="constrained", figsize=(5.5, 6))
    draw_panel(ax, panel, sizes)
    fig.canvas.draw()
    return fig, ax


@pytest.mark.slow
def test_every_figure_of_a_recorded_sweep_has_its_models_colours_its_legend_below_and_one_limit(recorded):
    """The figures the README shows (copied under tests/_output/ for docs/images.py)."""
    out, rows = recorded
    written = plot(out)
    assert [p.name for p in written] == [f"{name}.png" for name in FIGURES] + ["report.html"]
    own = table()["models"]
    assert own["cnn"] == model_colour("cnn") and own["lstm"] == model_colour("lstm")
    assert "red" not in own.values() and limit_colour() not in own.values()
    for figure in figures(rows):
        for panel in figure.panels:
            fig, ax = drawn(panel, figure.batch_sizes)
            # The first line of each model in its own colour (cnn at 160 px, cnn's second line, in a shade).
            for line in ax.get_lines():
                label = line.get_label().split(" (")[0].split(":")[0]
                if label in ("cnn", "lstm") and "input_size 160" not in line.get_label():
                    assert matplotlib.colors.to_hex(line.get_color()) == own[label].lower(), line.get_label()
            # The legend below the axes, over no line.
            legend = ax.get_legend()
            if legend is not None:
                assert legend.get_window_extent().y1 <= ax.get_window_extent().y0, (figure.name, panel.title)
            plt.close(fig)
    process = spec(rows, "memory").panels[0]
    # Every line's limit of the address space is the same (RLIMIT_AS = at start + 1.4 GiB, a few MiB apart): one
    # line, labelled once, in the limit colour; cnn at 160 px out of memory at 64, marked on it.
    (limit,) = process.limits
    assert limit.label == f"limit of address space ({rows[0]['limited_how']})"
    caps = [r["limited_cap_gb"] for r in rows if r["batch_size"] == 64]
    assert dict(limit.points)[64] == pytest.approx(sum(caps) / len(caps))
    assert [(f.label, f.oom) for f in process.failures] == [("cnn (input_size 160)", [64])]
    fig, ax = drawn(process, spec(rows, "memory").batch_sizes)
    limits = [line for line in ax.get_lines() if line.get_label().startswith("limit of")]
    assert len(limits) == 1 and matplotlib.colors.to_hex(limits[0].get_color()) == limit_colour().lower()
    address = next(line for line in ax.get_lines() if line.get_label() == "lstm: peak address space")
    assert matplotlib.colors.to_hex(address.get_color()) == model_colour("lstm").lower()  # the model's, dashed
    plt.close(fig)
    # On the board's RAM every line has the replayed log's values: the later ones say so and stay visible.
    system = spec(rows, "memory").panels[1]
    fig, ax = drawn(system, spec(rows, "memory").batch_sizes)
    assert [line.get_label() for line in ax.get_lines()][-1] == "lstm (same values as cnn (input_size default))"
    plt.close(fig)
    for name in FIGURES:
        shutil.copy(out / f"{name}.png", OUTPUT / f"plot-{name}.png")


def test_an_empty_panel_says_one_short_clause_and_the_report_keeps_the_whole_reason(tmp_path):
    reason = (
        "no power sensor: no such sensor among those given: tegrastats (not on PATH), nvml (no NVIDIA "
        "driver), ina3221 (no /sys/bus/i2c/drivers/ina3221), rapl (no /sys/class/powercap)"
    )
    rows = [
        {
            "model": "cnn",
            "batch_size": b,
            "success": True,
            "step_time_s_mean": 0.01 * b,
            "unavailable": {"power": reason},
        }
        for b in (1, 2)
    ]
    (tmp_path / "results.json").write_text(json.dumps(rows))
    (power,) = spec(rows, "power").panels
    assert power.why_empty == "no power sensor on this device" and power.why_detail == reason
    fig, ax = drawn(power, [1, 2])
    assert [t.get_text() for t in ax.texts] == ["not measured:\nno power sensor on this device"]
    plt.close(fig)
    page = plot(tmp_path)[-1].read_text()
    assert "ina3221 (no /sys/bus/i2c/drivers/ina3221)" in page  # the whole reason, once, in the report
