"""Runs as rows: a report summary made one row shape with a sweep's rows, its board and folder, and rows grouped
into the lines of a chart (a line per model, or per configuration of a model, and per board)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import PurePosixPath

Row = dict


Getter = Callable[[Row], "float | None"]


#: A row's fields that name its board, the one that names it best first (per the fleet sweep's rows).
BOARD_KEYS = ("board_type", "board", "host")


#: The board of a row that names none, beside rows that do.
UNKNOWN_BOARD = "(board not recorded)"


#: A row's model where its run named none.
NO_MODEL = "(no model)"


#: How a setting that differs between the lines of a model is named in their labels ("cnn (mode 2)").
SETTING_LABELS = {"power_mode": "mode"}


GIB = 2**30


def natural_key(text: object) -> tuple:
    """Sort key that puts "bs2" before "bs16", case aside (as the tab's Intl.Collator with numeric on).

    Args:
        text: What is sorted; taken as ``str(text)``.

    Returns:
        The key: the text's runs of digits compared as numbers, the rest case-folded.
    """
    parts = re.split(r"(\d+)", str(text))
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.casefold()) for p in parts if p)


def run_folder(run: str) -> str:
    """The run's folder, without the train (or validation) folder the callback writes: a sweep's configuration
    is in the sweep's folder ("tx2/cnn-bs4/train" -> "tx2"), a run directly in the logdir in its own.

    Args:
        run: The run's path relative to the logdir, "/"-separated.

    Returns:
        The folder, "/"-separated.
    """
    parts = run.split("/")
    if len(parts) > 1 and parts[-1] in ("train", "validation"):
        parts.pop()
    return "/".join(parts[:-1]) if len(parts) > 1 else parts[0]


def _device_board(device: dict) -> str | None:
    """The board a report's device names: its host (board model, else hostname) and, for a replay, the log it
    played ("vm, replay of tx2.log": its power is the log's)."""
    host = device.get("board") or device.get("hostname") or None
    replay = (
        f"replay of {PurePosixPath(str(device['replay_of']).replace(chr(92), '/')).name}"
        if device.get("replay_of")
        else None
    )
    return f"{host}, {replay}" if host and replay else host or replay


def process_peak_gb(summary: dict) -> float | None:
    """The process's own peak memory: the highest peak of its memory channels (VmHWM, VmRSS).

    Args:
        summary: A run's report summary (its ``sensors`` and ``channels``).

    Returns:
        The peak in GiB; None where no process memory channel has a numeric peak.
    """
    names = [
        c["name"]
        for sensor in summary.get("sensors") or []
        for c in sensor.get("channels") or []
        if c.get("kind") == "memory" and c.get("device") == "process"
    ]
    channels = summary.get("channels")
    channels = channels if isinstance(channels, dict) else {}
    peaks = [_number((channels.get(n) or {}).get("peak")) for n in names if isinstance(channels.get(n), dict)]
    known = [p for p in peaks if p is not None]  # a peak of "lots" is no peak: one bad run never takes the chart
    return max(known) / GIB if known else None


def _number(value) -> float | None:
    """``value`` as a finite float, or None where it is not a number (text, a bool, null, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def row_of_summary(run: str, summary: dict) -> Row:
    """A run's report summary as a sweep's row: its model, batch size, success, board and quantities.

    Args:
        run: The run's path relative to the logdir; the row's ``run``, and its ``folder`` by ``run_folder``.
        summary: The run's report summary (not changed).

    Returns:
        A new row: the summary's fields, with those a sweep's row has (``model``, ``success``, ``board_type``,
        ``board``, ``cause``, ``energy_per_step_j``, ``step_time_s_mean``, ``proc_peak_gb``) filled from it.
    """
    row = dict(summary)
    device = summary.get("device") or {}
    steps = summary.get("steps_measured")
    energy = summary.get("energy_total")
    error = summary.get("error")
    row.update(
        run=run,
        folder=run_folder(run),
        model=summary.get("model") or NO_MODEL,
        success=summary.get("success") is not False,
        board_type=device.get("board_type"),
        board=_device_board(device),
        host=None,
        cause=str(error).split("\n")[0] if error else None,
        energy_per_step_j=energy / steps if energy is not None and steps else None,
        step_time_s_mean=(summary.get("step_time_s") or {}).get("mean"),
    )
    if row.get("proc_peak_gb") is None:
        row["proc_peak_gb"] = process_peak_gb(summary)
    return row


def board_of(row: Row) -> str | None:
    """The board a row ran on: its board type (a fleet sweep's), else its board's name, else its host.

    Args:
        row: A sweep's row, or a summary made one by ``row_of_summary``.

    Returns:
        The board's name; None where the row records none (a sweep that did not record boards).
    """
    return next((str(row[k]) for k in BOARD_KEYS if row.get(k)), None)


def boards(rows: list[Row]) -> list[str]:
    """The distinct boards of the rows, sorted: one (or none) for a sweep on one board.

    Args:
        rows: The rows.

    Returns:
        The boards' names; rows that record no board beside rows that do are on a board of their own
        (``UNKNOWN_BOARD``), never on another's line; empty where no row records a board.
    """
    named = {board_of(r) or UNKNOWN_BOARD for r in rows}
    return sorted(named) if named != {UNKNOWN_BOARD} else []


def line_groups(rows: list[Row]) -> dict[tuple[str | None, str], list[Row]]:
    """Rows by (board, line), sorted by batch size: a line per model, or per configuration of a model with
    several on that board.

    Args:
        rows: The rows, of one board or several.

    Returns:
        (board, line label) -> its rows; the label is the model's, with the settings that differ between its
        configurations ("cnn (mode 2)"); the board is None where the rows are of one board.
    """
    several = len(boards(rows)) > 1

    def board(row: Row) -> str | None:
        return (board_of(row) or UNKNOWN_BOARD) if several else None

    def setting(row: Row, key: str):
        return (row.get("config") or {}).get(key)

    keys = sorted({k for r in rows for k in (r.get("config") or {}) if k not in BOARD_KEYS})
    varying = {}
    for where, model in {(board(r), r["model"]) for r in rows}:
        same = [r for r in rows if board(r) == where and r["model"] == model]
        varying[where, model] = [k for k in keys if len({json.dumps(setting(r, k)) for r in same}) > 1]
    out: dict[tuple[str | None, str], list[Row]] = {}
    for row in sorted(rows, key=lambda r: (board(r) or "", r["model"], r["batch_size"])):
        where = board(row)
        differs = ", ".join(
            f"{SETTING_LABELS.get(k, k)} {_value(setting(row, k))}" for k in varying[where, row["model"]]
        )
        out.setdefault((where, f"{row['model']} ({differs})" if differs else row["model"]), []).append(row)
    return out


def _value(setting) -> str:
    """A setting as a line's label shows it: None (the model's own default) as "default"."""
    return "default" if setting is None else str(setting)


def lines(rows: list[Row]) -> dict[str, list[Row]]:
    """Rows by line label: "cnn" (or "cnn (mode 2)") on one board, "cnn on orin-nano" where several boards ran.

    Args:
        rows: The rows, of one board or several.

    Returns:
        Line label -> its rows, sorted by batch size (``line_groups``'s).
    """
    groups = line_groups(rows).items()
    return {line if where is None else f"{line} on {where}": group for (where, line), group in groups}


def why_missing(rows: list[Row], *keys: str) -> str:
    """The first reason the rows give (``unavailable``) for any of ``keys``, else a generic one.

    Args:
        rows: The rows.
        *keys: Keys of the rows' ``unavailable``, tried in order.

    Returns:
        The reason; where no row gives one, that no configuration trained or that the sweep lacks it.
    """
    for key in keys:
        for row in rows:
            reason = (row.get("unavailable") or {}).get(key)
            if reason:
                return reason
    if not any(r.get("success") for r in rows):
        return "no configuration trained successfully"
    return "not in this sweep's results"
