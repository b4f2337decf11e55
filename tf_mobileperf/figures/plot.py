"""``mobileperf plot DIR``: the paper's figures of a sweep, one PNG each, and ``DIR/report.html``.

Per model, against batch size: step time, samples/s, GPU utilization, CPU
utilization per cluster, mean power per rail group, energy per step and per
sample, and peak memory of the training process with the memory limit in the
same quantity and the failed batch sizes marked (``figure_specs`` says what
each figure holds, ``figures`` draws it, ``report_html`` writes the page).
A quantity no sensor measured leaves its panel empty with the reason inside.
Where the rows come from several boards (a fleet sweep), every figure has a
line per board and model, and the page a table of each board's best batch
size for samples/s and for J/sample (``boards``). Imports no TensorFlow.
"""

from __future__ import annotations

from pathlib import Path

from tf_mobileperf.figures.draw import draw
from tf_mobileperf.figures.panels import FigureSpec
from tf_mobileperf.figures.report_html import write_report
from tf_mobileperf.figures.specs import figures
from tf_mobileperf.sweep.results import load_results


def plot(directory: str | Path) -> list[Path]:
    """Writes every figure (``DIR/<name>.png``) and ``DIR/report.html`` from ``DIR/results.json``.

    Args:
        directory: The sweep's folder (``DIR``).

    Returns:
        The paths written, the page last.
    """
    directory = Path(directory)
    rows = load_results(directory / "results.json")
    specs: list[FigureSpec] = figures(rows)
    written = [draw(spec, directory / f"{spec.name}.png") for spec in specs]
    page = write_report(directory, rows, [(path, spec.title) for path, spec in zip(written, specs)])
    return written + [page]
