"""Draws a ``panels.FigureSpec`` into a PNG with matplotlib (Agg, no display needed).

It exists apart from the specs so that the look of every figure is decided in
one place: batch size on a log2 axis labelled 1, 2, 4, ... (never 2^k), a
title and units on each panel, each model in its own colour (``colours``:
the dashboard's too; lines of one model that differ in a setting or a board
in shades of it, with their own marker), a line drawn beside another (active
energy beside total, a peak of the limited quantity beside the RSS) dashed
in its colour, the legend below the axes (never over a line), each distinct
limit line once, dash-dotted in the limit colour (no model's), failed
configurations as crosses (out of memory) or triangles (another failure) in
their line's colour on its limit (the top of the axis where no limit is
known), and an empty panel's one-clause reason inside it.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

from tf_mobileperf.analysis.colours import limit_colour, model_colour, shade
from tf_mobileperf.figures.panels import Failures, FigureSpec, Panel, Series

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

PANEL_SIZE = (5.5, 4.0)
MAX_COLUMNS = 3
#: Height of a legend row below a panel, in inches; legend text wraps at this many characters.
LEGEND_ROW_IN, LEGEND_WRAP = 0.2, 60
#: Markers of the lines of one model, in order (a second configuration or board of it gets the second).
MARKERS = ("o", "s", "^", "D", "v", "P")


def batch_ticks(sizes: list[int]) -> list[int]:
    """Powers of two from below the smallest batch size to above the largest: 1, 2, 4, ..., 64.

    Args:
        sizes: The batch sizes, at least one, all positive.

    Returns:
        The powers of two from the one at or below the smallest size to the one at or above the largest.
    """
    low, high = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    return [2**k for k in range(low, high + 1)]


def _batch_axis(ax, sizes: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ticks = batch_ticks(sizes or [1])
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlim(ticks[0] / 1.3, ticks[-1] * 1.3)
    ax.set_xlabel("batch size")


def line_style(series: Series | Failures) -> tuple[str, str]:
    """(colour, marker) of a line.

    Args:
        series: The line, or a line's failure marks.

    Returns:
        Its model's colour (its label's, where it names no model) in the shade of its variant (the model's k-th
        line: another setting or board), and the variant's marker.
    """
    colour = model_colour(series.model or series.label)
    return shade(colour, series.variant), MARKERS[series.variant % len(MARKERS)]


def _failures(ax, panel: Panel) -> None:
    """Failed batch sizes on their line's limit, else at the top of the axis, in their line's colour."""
    top = ax.get_ylim()[1]
    for failed in panel.failures:
        y = top if failed.at is None else failed.at
        colour = line_style(failed)[0]
        if failed.oom:
            ax.scatter(
                failed.oom,
                [y] * len(failed.oom),
                marker="x",
                s=90,
                linewidths=2.5,
                color=colour,
                zorder=5,
                label=f"{failed.label}: out of memory",
                clip_on=False,
            )
        if failed.other:
            ax.scatter(
                failed.other,
                [y] * len(failed.other),
                marker="v",
                s=60,
                color=colour,
                zorder=5,
                edgecolors="black",
                label=f"{failed.label}: failed, not out of memory",
                clip_on=False,
            )


def same_as(series: Series, drawn: list[Series]) -> Series | None:
    """The first of ``drawn`` with the same points as ``series``.

    Args:
        series: The line about to be drawn.
        drawn: The lines drawn before it.

    Returns:
        The first with the same batch sizes and values within 1e-9 (relative); None where there is none.
    """
    for other in drawn:
        if [b for b, _ in other.points] == [b for b, _ in series.points] and all(
            math.isclose(y, z, rel_tol=1e-9, abs_tol=1e-12) for (_, y), (_, z) in zip(other.points, series.points)
        ):
            return other
    return None


def legend_entries(panel: Panel) -> int:
    """How many entries the panel's legend has.

    Args:
        panel: The panel.

    Returns:
        Its lines, its limits and, per line with failures, one or two kinds of failure mark.
    """
    marks = sum(bool(f.oom) + bool(f.other) for f in panel.failures)
    return len(panel.series) + len(panel.limits) + marks


def _wrap(label: str) -> str:
    return "\n".join(textwrap.wrap(label, LEGEND_WRAP, subsequent_indent="  "))


def draw_panel(ax, panel: Panel, sizes: list[int]) -> None:
    """One panel: its lines, limits and failure marks with their legend below the axes, or why it is empty.

    Args:
        ax: The matplotlib axes to draw on.
        panel: The panel.
        sizes: The sweep's batch sizes (the x axis's ticks span them).
    """
    drawn: list[Series] = []
    for series in panel.series:
        colour, marker = line_style(series)
        same = same_as(series, drawn)
        # A line equal to one drawn before it is drawn thinner on top of it, and says so: both stay visible.
        ax.plot(
            *zip(*series.points),
            marker=marker,
            linestyle="--" if series.dashed else "-",
            label=_wrap(series.label + (f" (same values as {same.label})" if same else "")),
            color=colour,
            markerfacecolor="white" if series.dashed else colour,
            markersize=3.5 if same else 6,
            linewidth=1.0 if same else 1.5,
        )
        drawn.append(series)
    for limit in panel.limits:
        ax.plot(*zip(*limit.points), color=limit_colour(), linestyle="-.", linewidth=1.2, label=_wrap(limit.label))
    values = [y for series in panel.series + panel.limits for _, y in series.points if math.isfinite(y)]
    if values:
        # From 0 (or below, where a value is: active energy under the idle baseline) to a little above the top.
        low, high = min([0.0] + values), max(values)
        # (A rail at 0 W everywhere sits a little above the bottom edge, not on it.)
        ax.set_ylim(low * 1.1 if low < 0 else (0.0 if high > 0 else -0.05), high * 1.08 if high > 0 else 1.0)
    _failures(ax, panel)
    _batch_axis(ax, sizes)
    ax.set_title("\n".join(textwrap.wrap(panel.title, 48)), fontsize=10)
    ax.set_ylabel(panel.ylabel)
    ax.grid(True, alpha=0.3)
    if legend_entries(panel):
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.15), frameon=False, ncol=1, borderaxespad=0.0)
    if panel.why_empty:
        ax.set_yticks([])
        ax.text(
            0.5,
            0.5,
            "not measured:\n" + "\n".join(textwrap.wrap(panel.why_empty, 40)),
            ha="center",
            va="center",
            transform=ax.transAxes,
            color="dimgray",
            fontsize=9,
        )


def draw(spec: FigureSpec, path: Path) -> Path:
    """Writes ``spec`` as a PNG at ``path``, up to ``MAX_COLUMNS`` panels a row.

    Args:
        spec: The figure.
        path: Where the PNG goes.

    Returns:
        ``path``.
    """
    n = len(spec.panels)
    cols = min(n, MAX_COLUMNS)
    rows = math.ceil(n / cols)
    legend = [max((legend_entries(p) for p in spec.panels[r * cols : (r + 1) * cols]), default=0) for r in range(rows)]
    height = PANEL_SIZE[1] * rows + LEGEND_ROW_IN * sum(legend) + 0.4
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL_SIZE[0] * cols, height), squeeze=False, layout="constrained")
    for ax, panel in zip(axes.flat, spec.panels):
        draw_panel(ax, panel, spec.batch_sizes)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(spec.title, fontsize=12, fontweight="bold")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
