"""`mobileperf plot` of a sweep over several boards: a line per (board, model) against batch size, and the best
batch size per board in report.html.

The rows and run directories come from three real sweeps on this machine (real child processes): "agx-orin"
is cnn and lstm at batch 1 and 4 on a replayed AGX Orin tegrastats log (replay sensor), "tx2" is cnn at batch
1 and 4 on a replayed TX2 log (replay sensor), "nano" is cnn at batch 64 on 224 px inputs under a 1 GiB memory
limit (this machine's own sensors), which runs out of memory: a board with no successful row. The board
labels (``board_type``, ``board``, ``host``, ``jetpack`` in each row, ``board_type`` in its configuration;
``device.board`` and ``device.hostname`` in each run's report) are set by the test, the way the boards_sweep sweep
writes them, and the run directories moved to DIR/runs/<board_type>/<run name>. Copies of the figures and of
the page go to tests/_output/.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib.colors
import matplotlib.image
import numpy as np
import pytest

from tf_mobileperf.analysis.boards import NO_SUCCESS, best_batch
from tf_mobileperf.analysis.colours import model_colour, shade
from tf_mobileperf.analysis.rows import lines
from tf_mobileperf.figures.plot import plot

from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT
from helpers.figures import line_pixels, spec

DATA = Path(__file__).parent / "data"


def rows_of(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())


@pytest.mark.slow
def test_figures_draw_a_line_per_board_and_model_through_its_rows(boards_sweep):
    rows = rows_of(boards_sweep)
    assert [r["success"] for r in rows] == [True] * 6 + [False]  # the nano ran out of memory
    throughput = spec(rows, "throughput").panels[0]
    assert [s.label for s in throughput.series] == ["cnn on agx-orin", "lstm on agx-orin", "cnn on tx2"]
    by_key = {(r["board_type"], r["model"], r["batch_size"]): r for r in rows}
    for series in throughput.series:
        model, board = series.label.split(" on ")
        assert series.points == [(b, by_key[board, model, b]["samples_per_s"]) for b in (1, 4)]
    per_sample = spec(rows, "energy").panels[1]
    total = [s for s in per_sample.series if not s.dashed]  # the active energy, dashed, beside each
    assert [s.label for s in total] == ["cnn on agx-orin", "lstm on agx-orin", "cnn on tx2"]
    assert [s.beside for s in per_sample.series if s.dashed] == [s.label for s in total]
    for series in total:
        model, board = series.label.split(" on ")
        assert series.points == [(b, by_key[board, model, b]["energy_per_sample_j"]) for b in (1, 4)]
        assert all(j > 0 for _, j in series.points)  # the replayed boards' power
    process = spec(rows, "memory").panels[0]
    assert [(f.label, f.oom) for f in process.failures] == [("cnn on nano", [64])]
    assert "cnn on nano" in lines(rows)


def colour_pixels(png: Path, colour: str) -> int:
    """How many pixels of ``png`` are ``colour`` (a line's, its markers' and its legend entry's)."""
    image = matplotlib.image.imread(png)[..., :3]
    return int((np.abs(image - np.array(matplotlib.colors.to_rgb(colour))).sum(axis=-1) < 0.15).sum())


@pytest.mark.slow
def test_plot_of_several_boards_writes_every_figure_with_its_lines(boards_sweep):
    written = plot(boards_sweep)
    for name in ("throughput", "energy", "step_time"):
        png = boards_sweep / f"{name}.png"
        assert png in written and line_pixels(png) > 500, name
        # The three lines' colours: each model's own (the dashboard's), a second board's cnn line in a shade of
        # it (cnn on nano is cnn's second line, cnn on tx2 its third). These "boards" all trained on this one
        # machine, so two lines can lie on each other: each colour is there (its legend entry's at least), and
        # the lines' values are checked in the spec above.
        for colour in (model_colour("cnn"), model_colour("lstm"), shade(model_colour("cnn"), 2)):
            assert colour_pixels(png, colour) > 0, (name, colour)
        assert colour_pixels(png, shade(model_colour("cnn"), 1)) == 0, name  # no line for the nano: it trained nothing
        shutil.copy(png, OUTPUT / f"plot-boards-{name}.png")


def test_best_batch_per_board_is_the_most_samples_per_s_and_the_fewest_joules_per_sample(boards_sweep):
    rows = rows_of(boards_sweep)
    table = {(b.board, b.line): b for b in best_batch(rows)}
    assert list(table) == [("agx-orin", "cnn"), ("agx-orin", "lstm"), ("nano", "cnn"), ("tx2", "cnn")]
    for (board, model), best in table.items():
        ok = [r for r in rows if r["board_type"] == board and r["model"] == model and r["success"]]
        if not ok:
            assert best.samples_per_s.why == best.j_per_sample.why == NO_SUCCESS
            assert best.samples_per_s.text() == NO_SUCCESS
            continue
        fastest = max(ok, key=lambda r: r["samples_per_s"])
        thriftiest = min(ok, key=lambda r: r["energy_per_sample_j"])
        assert (best.samples_per_s.batch_size, best.samples_per_s.value) == (
            fastest["batch_size"],
            fastest["samples_per_s"],
        )
        assert (best.j_per_sample.batch_size, best.j_per_sample.value) == (
            thriftiest["batch_size"],
            thriftiest["energy_per_sample_j"],
        )
        assert best.samples_per_s.text() == f"batch {fastest['batch_size']}: {fastest['samples_per_s']:.4g} samples/s"
        assert best.j_per_sample.text().endswith(" J/sample")


@pytest.mark.slow
def test_one_board_keeps_a_line_per_model_and_no_best_batch_table(boards_sweep, tmp_path):
    rows = [r for r in rows_of(boards_sweep) if r["board_type"] == "agx-orin"]
    assert [s.label for s in spec(rows, "throughput").panels[0].series] == ["cnn", "lstm"]
    old = [{k: v for k, v in r.items() if k not in ("board_type", "board", "host", "jetpack")} for r in rows]
    assert [s.label for s in spec(old, "throughput").panels[0].series] == ["cnn", "lstm"]  # a sweep from before
    (tmp_path / "results.json").write_text(json.dumps(rows))
    page = plot(tmp_path)[-1].read_text()
    assert "Best batch size per board" not in page and "<th>board</th>" not in page


@pytest.mark.slow
@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed")
def test_report_html_shows_the_best_batch_size_per_board(boards_sweep, browser):
    page = plot(boards_sweep)[-1]
    browser.get(page.as_uri())
    cells = browser.execute_script(
        "return [...document.querySelectorAll('#best-batch tbody tr')].map((r) => [...r.cells].map((c) => c.innerText))"
    )
    expected = [
        [b.board, b.line, b.samples_per_s.text(), b.j_per_sample.text()] for b in best_batch(rows_of(boards_sweep))
    ]
    assert cells == expected
    assert cells[2] == ["nano", "cnn", NO_SUCCESS, NO_SUCCESS]
    boards = browser.execute_script("return [...document.querySelectorAll('table')][0].tBodies[0].rows.length")
    assert boards == 7
    first = browser.execute_script("return [...document.querySelectorAll('table')][0].rows[0].cells[0].innerText")
    assert first == "board"
    browser.find_element("css selector", "#best-batch").screenshot(str(OUTPUT / "plot-boards-best-batch.png"))
    browser.save_screenshot(str(OUTPUT / "plot-boards-report.png"))


def test_rows_that_record_no_board_beside_a_board_are_a_line_of_their_own_and_replays_are_not_merged():
    # Rows of one sweep rerun with another sensor: a TX2 and an AGX Orin replay on this machine (the sensors
    # differ in their configurations); and a row from before boards were recorded beside one of a board.
    row = {"model": "cnn", "batch_size": 4, "success": True, "host": "vm"}
    replays = [
        row | {"energy_per_step_j": j, "config": {"steps": 5, "sensors": f"replay:{log}@20"}}
        for j, log in ((0.182, "tx2.log"), (0.074, "orin.log"))
    ]
    per_step = spec(replays, "energy").panels[0]
    assert [(s.label, s.points) for s in per_step.series] == [
        ("cnn (sensors replay:tx2.log@20)", [(4, 0.182)]),
        ("cnn (sensors replay:orin.log@20)", [(4, 0.074)]),
    ]
    mixed = [
        row | {"energy_per_step_j": 0.182, "config": {}},
        {k: v for k, v in row.items() if k != "host"} | {"energy_per_step_j": 0.074, "config": {}},
    ]
    per_step = spec(mixed, "energy").panels[0]
    assert [(s.label, s.points) for s in per_step.series] == [
        ("cnn on (board not recorded)", [(4, 0.074)]),
        ("cnn on vm", [(4, 0.182)]),
    ]
