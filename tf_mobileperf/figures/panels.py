"""What a figure is made of, as plain data tests read as values: its panels, each with a line per group of rows
through their successful batch sizes, the batch sizes that failed, and the reason a panel is empty."""

from __future__ import annotations

import dataclasses

from tf_mobileperf.analysis.colours import short_reason
from tf_mobileperf.analysis.rows import Getter, Row, why_missing
from tf_mobileperf.sweep.causes import is_oom


@dataclasses.dataclass
class Series:
    """One line: (batch size, value) of the successful configurations of a model; ``beside``: the label of
    the line it goes with (drawn in that line's colour); ``model``: the model it is of (its colour);
    ``variant``: which line of that model it is (0 the first; a shade and a marker of their own after)."""

    label: str
    points: list[tuple[int, float]]
    dashed: bool = False
    beside: str | None = None
    model: str | None = None
    variant: int = 0


@dataclasses.dataclass
class Failures:
    """The batch sizes of a line that failed: out of memory, or otherwise (a timeout, a signal); ``at``: the
    height to mark them at (the line's limit), None where no limit is known."""

    label: str
    oom: list[int]
    other: list[int]
    at: float | None = None
    model: str | None = None
    variant: int = 0


@dataclasses.dataclass
class Panel:
    """One axes: its lines, or the short reason it has none (``why_empty``, one clause; ``why_detail``: the
    rows' full reason, for the report); its limit lines (a value per batch size, one per distinct limit) and
    failure marks."""

    title: str
    ylabel: str
    series: list[Series]
    why_empty: str | None = None
    limits: list[Series] = dataclasses.field(default_factory=list)
    failures: list[Failures] = dataclasses.field(default_factory=list)
    why_detail: str | None = None


@dataclasses.dataclass
class FigureSpec:
    """One PNG: its file stem, its title, its panels and the sweep's batch sizes (every panel's x axis)."""

    name: str
    title: str
    panels: list[Panel]
    batch_sizes: list[int] = dataclasses.field(default_factory=list)


def panel(groups: dict[str, list[Row]], title: str, ylabel: str, get: Getter, *reason_keys: str) -> Panel:
    """A panel of ``get`` against batch size, a line per group, through the group's successful rows.

    Args:
        groups: Line label -> its rows.
        title: The panel's title.
        ylabel: The y axis label.
        get: The row's value to plot; None: the row has none.
        *reason_keys: Keys of the rows' ``unavailable`` that say why a value is missing, tried in order.

    Returns:
        The panel; empty if no row has a value, with the first clause of the rows' reason in ``why_empty``
        ("no power sensor on this device") and the whole reason in ``why_detail``.
    """
    series = []
    k = variants(groups)
    for label, rows in groups.items():
        points = [(r["batch_size"], float(v)) for r in rows if r.get("success") and (v := get(r)) is not None]
        if points:
            series.append(Series(label, points, model=str(rows[0]["model"]), variant=k[label]))
    return empty_if(Panel(title, ylabel, series), [r for rows in groups.values() for r in rows], *reason_keys)


def variants(groups: dict[str, list[Row]]) -> dict[str, int]:
    """Line label -> which line of its model it is, in the order of the lines.

    Args:
        groups: Line label -> its rows (all of them, so the numbering is the same in every panel, whether or not
            the line has a value there).

    Returns:
        Label -> 0 for a model's first line, 1 for its second, ...: "cnn on agx-orin" 0, "lstm on agx-orin" 0,
        "cnn on tx2" 1.
    """
    seen: dict[str, int] = {}
    out = {}
    for label, rows in groups.items():
        model = str(rows[0]["model"])
        out[label] = seen.get(model, 0)
        seen[model] = out[label] + 1
    return out


def empty_if(out: Panel, rows: list[Row], *reason_keys: str) -> Panel:
    """``out`` with its reasons for being empty where it has no line, else without.

    Args:
        out: The panel; changed in place.
        rows: The rows its lines are of, whose reasons are read.
        *reason_keys: Keys of the rows' ``unavailable``, tried in order (``why_missing``).

    Returns:
        ``out``, its ``why_detail`` the rows' reason and ``why_empty`` its first clause, or both None.
    """
    if out.series:
        out.why_empty = out.why_detail = None
    else:
        out.why_detail = why_missing(rows, *reason_keys)
        out.why_empty = short_reason(out.why_detail)
    return out


def failures(groups: dict[str, list[Row]]) -> list[Failures]:
    """Per line with failed configurations, the batch sizes that ran out of memory and those that failed otherwise.

    Args:
        groups: Line label -> its rows.

    Returns:
        One ``Failures`` per line with a failed row, ``at`` unset (None).
    """
    out = []
    k = variants(groups)
    for label, rows in groups.items():
        failed = [r for r in rows if not r.get("success")]
        if failed:
            out.append(
                Failures(
                    label,
                    [r["batch_size"] for r in failed if is_oom(r)],
                    [r["batch_size"] for r in failed if not is_oom(r)],
                    model=str(rows[0]["model"]),
                    variant=k[label],
                )
            )
    return out
