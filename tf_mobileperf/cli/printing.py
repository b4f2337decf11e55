"""How the commands print a number, a table cell, and where a sweep's results are."""

from __future__ import annotations

from pathlib import Path

from tf_mobileperf.cli.shell import tool_command


def num(value: float | None, fmt: str) -> str:
    """``value`` in ``fmt``, or "n/a" where nobody measured it."""
    return "n/a" if value is None else format(value, fmt)


def print_where(out: Path) -> None:
    """Where a sweep's results are, and the command that shows its runs."""
    print(f"results: {out / 'results.csv'}   dashboard: {tool_command('tensorboard')} --logdir {out / 'runs'}")


def cell(value, width: int = 10) -> str:
    """A right-aligned table cell of ``width``: 4 significant digits, or "n/a"."""
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.4g}"
