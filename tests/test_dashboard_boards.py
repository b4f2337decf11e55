"""The MobilePerf tab's cross-run view of a sweep over several boards, in a real browser (headless Debian
Chromium, a real `tensorboard` process): a line per (board, model) against batch size and, under the chart,
the best batch size per board for samples/s and for J/sample.

The runs are those of test_plot_boards' boards_sweep: three real sweeps on this machine (replayed AGX Orin and TX2
tegrastats logs, replay sensor; this machine's own sensors for the "nano" that runs out of memory), their
board labels (device.board, device.hostname) set by the test as the boards_sweep sweep writes them, their run
directories under runs/<board_type>/. Screenshots under tests/_output/boards-*.png.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.dashboard import CHROMEDRIVER, CHROMIUM, OUTPUT, hover_batch, number, pick, serving, show
from helpers.figures import BOARDS

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="Debian chromium/chromium-driver not installed (make test installs them)"
)

#: Per line of the cross-run chart: its legend label, its value in the legend and how many pixels of the
#: plot area are within reach of its colour.
LINES = """
const box = document.querySelector('.crossrun');
const canvas = box.querySelector('canvas'), over = box.querySelector('.u-over');
const near = (a, b) => Math.abs(a[0] - b[0]) + Math.abs(a[1] - b[1]) + Math.abs(a[2] - b[2]) < 90;
const cr = canvas.getBoundingClientRect(), or = over.getBoundingClientRect(), k = canvas.width / cr.width;
const [x0, y0, w, h] = [or.left - cr.left, or.top - cr.top, or.width, or.height].map((v) => Math.round(v * k));
const px = canvas.getContext('2d').getImageData(x0, y0, w, h).data;
return [...box.querySelectorAll('.u-legend .u-series')].slice(1).map((s) => {
  const colour = getComputedStyle(s.querySelector('.u-marker')).borderLeftColor.match(/\\d+/g).slice(0, 3).map(Number);
  let pixels = 0;
  for (let i = 0; i < px.length; i += 4) if (px[i + 3] > 200 && near(colour, [px[i], px[i + 1], px[i + 2]])) pixels++;
  return [s.querySelector('.u-label').textContent, s.querySelector('.u-value').textContent, pixels];
});
"""


def rows(boards_sweep: Path) -> list[dict]:
    return json.loads((boards_sweep / "results.json").read_text())


def run_name(row: dict, boards_sweep: Path) -> str:
    return f"{Path(row['logdir']).relative_to(boards_sweep / 'runs').as_posix()}/train"


def model(row: dict) -> str:
    """The model's own name, as its run's report has it (the zoo's name: "lstm")."""
    return json.loads((Path(row["logdir"]) / "report.json").read_text())["model"]


#: The log each board's runs replayed (the nano's ran on this machine's own sensors).
REPLAYED = {"agx-orin": "orin_long.log", "tx2": "tx2_long.log"}


def board(row: dict) -> str:
    """The dashboard's board of a row's run: its board's name (the report's device.board), and the log a replay
    played (its power is the log's)."""
    name = BOARDS[row["board_type"]][0]
    return f"{name}, replay of {REPLAYED[row['board_type']]}" if row["board_type"] in REPLAYED else name


def lies_under(line: dict[int, float], other: dict[int, float], within: float) -> bool:
    """Whether ``other`` has a value within ``within`` of each of ``line``'s (batch size -> value)."""
    return all(b in other and abs(v - other[b]) < within for b, v in line.items())


def label(row: dict) -> str:
    """The dashboard's line of a row's run: its model on its board."""
    return f"{model(row)} on {board(row)}"


@pytest.fixture(scope="module")
def tensorboard(boards_sweep):
    with serving(boards_sweep / "runs") as url:
        yield url


@pytest.mark.slow
def test_crossrun_chart_draws_a_line_per_board_and_model_with_the_rows_values(tensorboard, boards_sweep, browser):
    table = rows(boards_sweep)
    show(browser, tensorboard, (run_name(table[0], boards_sweep),))
    grouping = browser.execute_script(
        "return [...document.querySelectorAll('.crossrun select.grouping option')].map((o) => o.textContent)"
    )
    assert grouping == ["board and model", "model", "run folder"]
    pick(browser, ".crossrun select.quantity", "samples per second")
    sizes = sorted({r["batch_size"] for r in table})
    for size in (1, 4):
        hover_batch(browser, size, sizes)
        lines = browser.execute_script(LINES)
        expected = sorted({label(r) for r in table})  # natural order: AGX Orin, Nano, TX2; then lstm
        assert [name for name, *_ in lines] == expected
        for name, value, pixels in lines:
            measured = [r for r in table if label(r) == name and r["success"]]
            if not measured:  # the nano: nothing drawn, its value "–"
                assert pixels == 0 and value == "–", (name, value, pixels)
                continue
            assert pixels > 150, (name, pixels)  # its segment and two points
            (row,) = [r for r in measured if r["batch_size"] == size]
            assert number(value) == pytest.approx(row["samples_per_s"], rel=5e-3), (name, value)
    failed = browser.execute_script(
        "return [...document.querySelectorAll('.crossrun .failed-mark')].map((e) => e.dataset.group)"
    )
    assert failed == [label(r) for r in table if not r["success"]]
    browser.find_element("css selector", ".crossrun").screenshot(str(OUTPUT / "boards-crossrun-samples.png"))
    pick(browser, ".crossrun select.quantity", "energy per sample")
    lines = browser.execute_script(LINES)  # the replayed boards measured energy; the nano trained no step
    assert [p for n, _, p in lines if "Nano" in n] == [0]
    # Near 0 J/sample the lines of boards that all trained on this machine can lie on each other (37 pixels of
    # cnn on AGX Orin showed under cnn on TX2, and none in another run): a line that shows no pixel must lie
    # under one that does, within 3% of the chart's height at every batch size.
    energy: dict[str, dict[int, float]] = {}
    for r in table:
        if r["success"] and r["energy_per_sample_j"] is not None:
            energy.setdefault(label(r), {})[r["batch_size"]] = r["energy_per_sample_j"]
    top = max(v for values in energy.values() for v in values.values())
    drawn = {n for n, _, p in lines if p > 0}
    assert drawn <= set(energy), drawn
    for name in set(energy) - drawn:
        assert any(lies_under(energy[name], energy[other], 0.03 * top) for other in drawn), (name, energy)
    browser.find_element("css selector", ".crossrun").screenshot(str(OUTPUT / "boards-crossrun-energy.png"))
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []


def test_best_batch_table_under_the_chart_names_each_boards_batch_size_and_value(tensorboard, boards_sweep, browser):
    table = rows(boards_sweep)
    show(browser, tensorboard, (run_name(table[0], boards_sweep),))
    cells = browser.execute_script(
        "return [...document.querySelectorAll('.crossrun #best-batch tr')].slice(1)"
        ".map((r) => [...r.cells].map((c) => c.textContent))"
    )
    keys = sorted({(board(r), model(r)) for r in table})
    assert [c[:2] for c in cells] == [list(k) for k in keys]
    for key, (_, _, fastest, thriftiest) in zip(keys, cells):
        ok = [r for r in table if (board(r), model(r)) == key and r["success"]]
        if not ok:
            assert fastest == thriftiest == "no successful configuration on this board"
            continue
        best = max(ok, key=lambda r: r["samples_per_s"])
        assert fastest.startswith(f"batch {best['batch_size']}: ") and fastest.endswith(" samples/s")
        assert number(fastest) == pytest.approx(best["samples_per_s"], rel=5e-3)
        best = min(ok, key=lambda r: r["energy_per_sample_j"])
        assert thriftiest.startswith(f"batch {best['batch_size']}: ") and thriftiest.endswith(" J/sample")
        assert number(thriftiest) == pytest.approx(best["energy_per_sample_j"], rel=5e-3)
    assert ["no successful configuration on this board"] * 2 in [c[2:] for c in cells]
    browser.find_element("css selector", ".crossrun #best-batch").screenshot(str(OUTPUT / "boards-best-batch.png"))


@pytest.mark.slow
def test_runs_of_one_board_keep_a_line_per_model_and_no_best_batch_table(boards_sweep, browser):
    table = [r for r in rows(boards_sweep) if r["board_type"] == "agx-orin"]
    with serving(boards_sweep / "runs" / "agx-orin") as url:
        show(browser, url, (f"{Path(table[0]['logdir']).name}/train",))
        state = browser.execute_script("""
            const box = document.querySelector('.crossrun');
            return {series: [...box.querySelectorAll('.u-legend .u-series .u-label')].map((e) => e.textContent),
                    grouping: [...box.querySelectorAll('select.grouping option')].map((o) => o.textContent),
                    best: box.querySelectorAll('#best-batch').length};
        """)
    assert state == {
        "series": ["batch size", *sorted({model(r) for r in table})],
        "grouping": ["model", "run folder"],
        "best": 0,
    }
    assert state["series"] == ["batch size", "cnn", "lstm"]
