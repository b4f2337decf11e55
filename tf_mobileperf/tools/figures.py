"""Draws a ``figure_specs.FigureSpec`` into a PNG with matplotlib (Agg, no display needed).

It exists apart from the specs so that the look of every figure is decided in
one place: batch size on a log2 axis labelled 1, 2, 4, ... (never 2^k), a
title and units on each panel, an empty panel's reason written inside it,
a line drawn beside another (active energy beside total) dashed in its colour,
limit lines dashed red, out-of-memory configurations as red crosses on their
line's limit (the top of the axis where no limit is known), other failures
as grey triangles.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

from tf_mobileperf.tools.figure_specs import FigureSpec, Panel

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

PANEL_SIZE = (5.5, 4.0)
MAX_COLUMNS = 3


def batch_ticks(sizes: list[int]) -> list[int]:
    """Powers of two from below the smallest batch size to above the largest: 1, 2, 4, ..., 64."""
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


def _failures(ax, panel: Panel) -> None:
    """Failed batch sizes on their line's limit, else at the top of the axis."""
    top = ax.get_ylim()[1]
    for failed in panel.failures:
        y = top if failed.at is None else failed.at
        if failed.oom:
            ax.scatter(failed.oom, [y] * len(failed.oom), marker="x", s=80, color="red", zorder=5,
                       label=f"{failed.label}: out of memory")
        if failed.other:
            ax.scatter(failed.other, [y] * len(failed.other), marker="v", s=60, color="gray", zorder=5,
                       label=f"{failed.label}: failed, not out of memory")


def draw_panel(ax, panel: Panel, sizes: list[int]) -> None:
    """One panel: its lines, limits and failure marks, or its reason for being empty."""
    colours = {}
    for series in panel.series:
        (line,) = ax.plot(*zip(*series.points), marker="o", linestyle="--" if series.dashed else "-",
                          label=series.label, color=colours.get(series.beside))
        colours[series.label] = line.get_color()
    for limit in panel.limits:
        ax.plot(*zip(*limit.points), color="red", linestyle=":", marker="_", markersize=14, label=limit.label)
    if panel.series:
        # From 0 (or below, where a value is: active energy under the idle baseline), room for the legend above.
        low = min([0.0] + [y for series in panel.series for _, y in series.points if math.isfinite(y)])
        ax.set_ylim(low * 1.1, ax.get_ylim()[1] * 1.25)
    _failures(ax, panel)
    _batch_axis(ax, sizes)
    ax.set_title("\n".join(textwrap.wrap(panel.title, 48)), fontsize=10)
    ax.set_ylabel(panel.ylabel)
    ax.grid(True, alpha=0.3)
    if panel.series or panel.limits or panel.failures:
        ax.legend(fontsize=7)
    if panel.why_empty:
        ax.set_yticks([])
        why = textwrap.wrap(panel.why_empty, 60)
        text = "\n".join(why[:12]) + (" ..." if len(why) > 12 else "")
        ax.text(0.5, 0.5, "not measured:\n" + text, ha="center", va="center", transform=ax.transAxes,
                color="dimgray", fontsize=7)


def draw(spec: FigureSpec, path: Path) -> Path:
    """Writes ``spec`` as a PNG at ``path``; returns ``path``."""
    n = len(spec.panels)
    cols = min(n, MAX_COLUMNS)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(PANEL_SIZE[0] * cols, PANEL_SIZE[1] * rows + 0.4), squeeze=False)
    for ax, panel in zip(axes.flat, spec.panels):
        draw_panel(ax, panel, spec.batch_sizes)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(spec.title, fontsize=12, fontweight="bold")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
