"""The one reader of a run's files: series, steps, report and other JSON.

Used by the dashboard and by the core (op energy, the cluster combine, the sweep), so every reader of the stored
format goes through the checks of ``channels`` and ``schema``. Reading is safe on a logdir someone else wrote: a file
is opened without blocking and without following a link swapped in, read only if it is a regular file under a size
cap, and, given ``logdir``, only if it resolves inside it. Problems are exceptions whose message names the file:
``FileNotFoundError`` (a file that must be there is not), ``OutsideLogdir`` and ``ValueError`` (anything else wrong
with a file; ``schema.ReportError`` for a report that does not hold what the schema says). JSON is read with NaN and
infinity as null (``finite_json``). No TensorFlow.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
import math
import os
import stat
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from . import finite_json, names, schema
from .channels import parse_channels
from .layout import RunLayout

log = logging.getLogger(__name__)

MAX_JSON_BYTES = 64 * 2**20  # report.json holds at most ~11,000 steps: a few MB
MAX_TRACE_BYTES = 256 * 2**20


class OutsideLogdir(PermissionError):
    """A run's file that resolves outside the logdir it was asked for (a link out of it)."""


def _label(path: Path, logdir: Path | None) -> str:
    """How messages name ``path``: relative to the logdir when there is one (no server paths to a client)."""
    return os.path.relpath(path, logdir) if logdir is not None else str(path)


def open_file(path: Path, limit: int | None, logdir: Path | None = None) -> BinaryIO | None:
    """``path`` opened for reading; None if there is none.

    Opened non-blocking and without following a link swapped in after the path was resolved, then checked with
    ``fstat``: a FIFO, a device or a folder is refused before anything reads it.

    Args:
        path: The file.
        limit: The most bytes it may hold (None: any size).
        logdir: The folder it must resolve inside, and that messages name it from (None: anywhere).

    Returns:
        The open binary file (the caller closes it), or None where ``path`` does not exist.

    Raises:
        OutsideLogdir: ``logdir`` is given and ``path`` resolves outside it.
        ValueError: a symlink loop, not a regular file, or over ``limit`` bytes.
    """
    label = _label(path, logdir)
    try:
        resolved = Path(path).resolve()
    except RuntimeError:  # Python before 3.13 raises this on a symlink loop
        raise ValueError(f"{label} is a symlink loop") from None
    if logdir is not None and not resolved.is_relative_to(logdir):
        raise OutsideLogdir(f"{label} points outside the logdir")
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file"
    elif limit is not None and info.st_size > limit:
        problem = f"is {info.st_size} bytes, over the {limit}-byte limit"
    if problem:
        os.close(fd)  # checked before fdopen, which refuses a folder with the descriptor's number and leaks it
        raise ValueError(f"{label} {problem}")
    return os.fdopen(fd, "rb")


def read_bytes(path: Path, limit: int, logdir: Path | None = None) -> bytes | None:
    """The bytes of ``path``; None if there is none.

    Args:
        path: The file.
        limit: The most bytes read, even if the file grows while it is read.
        logdir: As ``open_file``'s.

    Raises:
        ValueError: as ``open_file``, or the file grew over ``limit`` (naming it).
    """
    file = open_file(path, limit, logdir)
    if file is None:
        return None
    with file:
        body = file.read(limit + 1)
    if len(body) > limit:
        raise ValueError(f"{_label(path, logdir)} grew over the {limit}-byte limit")
    return body


def read_json(path: Path, limit: int = MAX_JSON_BYTES, logdir: Path | None = None) -> dict | None:
    """The JSON object in ``path``, NaN and infinity read as None; None if there is none.

    Args:
        path: The file.
        limit: The most bytes it may hold.
        logdir: As ``open_file``'s.

    Raises:
        ValueError: it is not JSON, nests too deeply, is not an object, or cannot be read (naming the file).
    """
    body = read_bytes(path, limit, logdir)
    if body is None:
        return None
    label = _label(path, logdir)
    try:
        data = finite_json.loads(body)
    except RecursionError:
        raise ValueError(f"{label} nests too deeply to read") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ValueError(f"{label} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{label} is a JSON {type(data).__name__}, not an object")
    return data


def read_report(directory: str | Path, logdir: Path | None = None) -> dict | None:
    """The ``report.json`` in ``directory``, upgraded to the format written now and checked against the schema.

    Args:
        directory: A logdir, or a run's ``PLUGIN_DIR``.
        logdir: As ``open_file``'s.

    Returns:
        The report (one without a version is upgraded); None if there is none.

    Raises:
        schema.ReportError: it does not hold what the schema says, or is of a newer version (naming the file
            and the field).
        ValueError: it is not a JSON object, or cannot be read (naming the file).
    """
    return _read_report(Path(directory) / names.REPORT_FILE, logdir, (schema.REPORT,))


def read_combined(logdir: str | Path) -> dict | None:
    """The ``combined.json`` of a multi-worker ``logdir`` (``session.cluster``), upgraded and checked as
    ``read_report``; None if there is none."""
    return _read_report(RunLayout(Path(logdir)).combined, None, (schema.COMBINED,))


def read_sweep_summary(logdir: str | Path) -> dict | None:
    """The ``summary.json`` a sweep child wrote into the logdir it measured into, upgraded and checked as
    ``read_report``; None if there is none."""
    return _read_report(RunLayout(Path(logdir)).sweep_summary, None, (schema.SWEEP_SUMMARY,))


def _read_report(path: Path, logdir: Path | None, kinds: tuple[str, ...]) -> dict | None:
    report = read_json(path, MAX_JSON_BYTES, logdir)
    return None if report is None else schema.check_report(report, _label(path, logdir), kinds)


def read_progress(path: str | Path) -> int | None:
    """The step a run's ``progress.bin`` holds (the one running, or next to run).

    Args:
        path: The ``progress.bin`` file.

    Returns:
        The step; None if there is no whole value (no file, one that cannot be read, or not 8 bytes).
    """
    try:
        file = open_file(Path(path), 8)
    except (OSError, ValueError):
        return None
    if file is None:
        return None
    with file:
        raw = file.read(9)
    return struct.unpack("<q", raw)[0] if len(raw) == 8 else None


def read_series(run_dir: str | Path, logdir: Path | None = None) -> tuple[dict, np.ndarray]:
    """Reads (header, rows) of a run's series.

    The header is ``channels.json`` checked and upgraded by ``channels.parse_channels``. The rows are memory-mapped:
    slicing a window reads only that window; a torn last row is left out.

    Args:
        run_dir: The run's folder (``RunLayout.of_run`` finds its files).
        logdir: As ``open_file``'s.

    Returns:
        (the header, the rows as an (n, columns) float64 array whose column 0 is the time in seconds).

    Raises:
        FileNotFoundError: the run has no ``channels.json`` or ``samples.bin``.
        ValueError: the header is corrupt or of a version this package does not read.
    """
    layout = RunLayout.of_run(run_dir)
    path = layout.channels
    raw = read_json(path, MAX_JSON_BYTES, logdir)
    if raw is None:
        raise FileNotFoundError(f"this run has no {names.PLUGIN_DIR}/{names.CHANNELS_FILE}")
    header = parse_channels(raw, _label(path, logdir))
    width = len(header["columns"])
    file = open_file(layout.samples, None, logdir)
    if file is None:
        raise FileNotFoundError(f"this run has no {names.PLUGIN_DIR}/{names.SAMPLES_FILE}")
    with file:  # the map outlives the file object
        count = os.fstat(file.fileno()).st_size // (8 * width)
        if count == 0:
            return header, np.empty((0, width))
        return header, np.memmap(file, dtype="<f8", mode="r", shape=(count, width))


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
