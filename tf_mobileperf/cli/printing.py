"""How the commands print a number, a table cell, and where a sweep's results are."""

from __future__ import annotations

from pathlib import Path

from tf_mobileperf.cli.shell import tool_command


def num(value: float | None, fmt: str) -> str:
    """A number as text, or "n/a" where nobody measured it.

    Args:
        value: The number; None where it was not measured.
        fmt: A ``format`` spec, e.g. ".1f".

    Returns:
        ``value`` in ``fmt``, or "n/a".
    """
    return "n/a" if value is None else format(value, fmt)


def print_where(out: Path) -> None:
    """Prints where a sweep's results are, and the command that shows its runs.

    Args:
        out: The sweep directory.
    """
    print(f"results: {out / 'results.csv'}   dashboard: {tool_command('tensorboard')} --logdir {out / 'runs'}")


def cell(value, width: int = 10) -> str:
    """A right-aligned table cell.

    Args:
        value: The number; None: "n/a".
        width: The cell's width, in characters.

    Returns:
        ``value`` to 4 significant digits, or "n/a", right-aligned in ``width``.
    """
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.4g}"
