"""The one reader of a run's files: series, report and other JSON (``steps_csv`` reads steps.csv through it).

Used by the dashboard and by the core (op energy, the cluster combine, the sweep), so every reader of the stored
format goes through the checks of ``channels`` and ``schema``. Reading is safe on a logdir someone else wrote: a file
is opened without blocking and without following a link swapped in, read only if it is a regular file under a size
cap, and, given ``logdir``, only if it resolves inside it. Problems are exceptions whose message names the file:
``FileNotFoundError`` (a file that must be there is not), ``OutsideLogdir`` and ``ValueError`` (anything else wrong
with a file; ``schema.ReportError`` for a report that does not hold what the schema says). JSON is read with NaN and
infinity as null (``finite_json``). No TensorFlow.
"""

from __future__ import annotations

import os
import stat
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from . import finite_json, names, schema
from .channels import parse_channels
from .layout import RunLayout

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
    """The ``combined.json`` of a multi-worker run (``session.cluster``), upgraded and checked as ``read_report``.

    Args:
        logdir: The chief's logdir.

    Returns:
        The combined report; None if there is none.
    """
    return _read_report(RunLayout(Path(logdir)).combined, None, (schema.COMBINED,))


def read_sweep_summary(logdir: str | Path) -> dict | None:
    """The ``summary.json`` a sweep child wrote, upgraded and checked as ``read_report``.

    Args:
        logdir: The logdir the child measured into.

    Returns:
        The summary; None if there is none.
    """
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
