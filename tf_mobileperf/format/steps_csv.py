"""The reader of a run's ``steps.csv``: every step, typed, its torn rows (a writer killed mid-row) counted.

Unlike report.json, steps.csv has every step, and it is there for a run that died before writing its report. It is
read through ``reader.read_bytes``, with its checks and size cap.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
import math
from pathlib import Path

from .layout import RunLayout
from .reader import MAX_TRACE_BYTES, read_bytes

log = logging.getLogger(__name__)


@dataclasses.dataclass
class StepRows:
    """The whole rows of a ``steps.csv`` and how many torn ones were skipped."""

    rows: list[dict]
    torn: int


def _step(row: dict) -> dict:
    """One typed row; ValueError if it is not a whole row of numbers."""

    def number(text: str | None) -> float | None:  # not measured, or not finite: None
        value = float(text) if text not in (None, "") else None
        return value if value is not None and math.isfinite(value) else None

    if None in row or None in row.values():  # more fields than the header, or fewer
        raise ValueError("row has the wrong number of fields")
    if row["warmup"] not in ("0", "1") or row["failed"] not in ("0", "1"):
        raise ValueError("warmup/failed is not 0 or 1")
    duration = number(row["duration_s"])
    if duration is None:
        raise ValueError("duration_s is not a finite number")
    return {
        "step": int(row["step"]),
        "duration_s": duration,
        "warmup": row["warmup"] == "1",
        "failed": row["failed"] == "1",
        "energy_total": number(row.get("energy_j/total")),
        "mem_peak_gb": number(row.get("mem_peak_gb")),
    }


def read_steps_counted(logdir: str | Path) -> StepRows:
    """The steps in ``logdir/steps.csv`` (see ``read_steps``) and the count of torn rows skipped.

    A row is torn if it has the wrong number of fields, a field that does not parse, or (the last one) no newline:
    a writer killed inside the row.

    Args:
        logdir: The logdir the run measured into.

    Returns:
        The rows and the torn count: none if unreadable; all rows torn if step, duration_s, warmup or failed is missing.
    """
    try:
        body = read_bytes(RunLayout(Path(logdir)).steps_csv, MAX_TRACE_BYTES)  # never waits on a FIFO
        text = (body or b"").decode()
    except (OSError, ValueError):  # UnicodeDecodeError is a ValueError
        return StepRows([], 0)
    whole, _, tail = text.rpartition("\n")
    torn = 1 if tail else 0
    reader = csv.DictReader(io.StringIO(whole + "\n" if whole else ""))
    if not {"step", "duration_s", "warmup", "failed"} <= set(reader.fieldnames or ()):
        return StepRows([], torn + sum(1 for _ in reader))
    rows = []
    for row in reader:
        try:
            rows.append(_step(row))
        except ValueError:
            torn += 1
    return StepRows(rows, torn)


def read_steps(logdir: str | Path) -> list[dict]:
    """The typed steps in ``logdir/steps.csv``; torn rows skipped with a warning (``read_steps_counted`` counts them).

    Unlike report.json, steps.csv has every step, and it is there for a run that died before writing its report.

    Args:
        logdir: The logdir the run measured into.

    Returns:
        Per step: step, duration_s, warmup, failed, energy_total (J or None), mem_peak_gb (or None); [] if unreadable.
    """
    result = read_steps_counted(logdir)
    if result.torn:
        log.warning("mobileperf: skipped %d torn row(s) of %s", result.torn, RunLayout(Path(logdir)).steps_csv)
    return result.rows
