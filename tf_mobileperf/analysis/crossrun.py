"""The analysis across runs: one quantity against batch size, a line per group, and each board's best batch size.

It exists once, for every view of several runs: ``mobileperf plot`` and
``report.html`` (over a sweep's rows) and the MobilePerf tab's chart (over the
runs' report summaries, served by the plugin's ``/crossrun`` route) group
runs, average the runs that share a point, mark failures, colour lines and
pick the best batch sizes here, so that they cannot disagree. Either input
is first made one row shape (``row_of_summary``: a summary becomes a row as a
sweep writes them). Imports neither TensorFlow nor matplotlib: the plugin
imports it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from pathlib import PurePosixPath

from tf_mobileperf.analysis.colours import model_colour, shade

Row = dict
Getter = Callable[[Row], "float | None"]
#: A row's fields that name its board, the one that names it best first (per the fleet sweep's rows).
BOARD_KEYS = ("board_type", "board", "host")
#: The board of a row that names none, beside rows that do.
UNKNOWN_BOARD = "(board not recorded)"
#: A line's best batch size where none of its configurations trained.
NO_SUCCESS = "no successful configuration on this board"
#: A row's model where its run named none.
NO_MODEL = "(no model)"
#: Rail groups in the order their panels appear; any other group follows, "" is "other".
GROUP_ORDER = ("total", "cpu", "gpu", "mem", "soc")
#: How a setting that differs between the lines of a model is named in their labels ("cnn (mode 2)").
SETTING_LABELS = {"power_mode": "mode"}
GIB = 2**30


class UnknownKey(ValueError):
    """A quantity or grouping the rows do not have."""


# -- rows ------------------------------------------------------------------------------------------------------
def natural_key(text: object) -> tuple:
    """Sorts "bs2" before "bs16", case aside (as the tab's Intl.Collator with numeric on)."""
    parts = re.split(r"(\d+)", str(text))
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p.casefold()) for p in parts if p)


def run_folder(run: str) -> str:
    """The run's folder, without the train (or validation) folder the callback writes: a sweep's configuration
    is in the sweep's folder ("tx2/cnn-bs4/train" -> "tx2"), a run directly in the logdir in its own."""
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
    """The process's own peak memory: the highest peak of its memory channels (VmHWM, VmRSS)."""
    names = [
        c["name"]
        for sensor in summary.get("sensors") or []
        for c in sensor.get("channels") or []
        if c.get("kind") == "memory" and c.get("device") == "process"
    ]
    peaks = [p for n in names if (p := ((summary.get("channels") or {}).get(n) or {}).get("peak")) is not None]
    return max(peaks) / GIB if peaks else None


def row_of_summary(run: str, summary: dict) -> Row:
    """A run's report summary as a sweep's row: its model, batch size, success, board and quantities; ``run``
    and ``folder`` name it."""
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
    """The board a row ran on: its board type (a fleet sweep's), else its board's name, else its host; None
    where the row records none (a sweep from before boards were recorded)."""
    return next((str(row[k]) for k in BOARD_KEYS if row.get(k)), None)


def boards(rows: list[Row]) -> list[str]:
    """The distinct boards of the rows, sorted: one (or none) for a sweep on one board. Rows that record no
    board beside rows that do are on a board of their own (UNKNOWN_BOARD), never on another's line."""
    named = {board_of(r) or UNKNOWN_BOARD for r in rows}
    return sorted(named) if named != {UNKNOWN_BOARD} else []


def line_groups(rows: list[Row]) -> dict[tuple[str | None, str], list[Row]]:
    """Rows by (board, line), sorted by batch size: a line per model, or per configuration of a model with
    several on that board, named with the settings that differ; the board is None for rows of one board."""
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
    """Rows by line label: "cnn" (or "cnn (mode 2)") on one board, "cnn on orin-nano" where several boards ran."""
    groups = line_groups(rows).items()
    return {line if where is None else f"{line} on {where}": group for (where, line), group in groups}


def why_missing(rows: list[Row], *keys: str) -> str:
    """The first reason the rows give (``unavailable``) for any of ``keys``, else a generic one."""
    for key in keys:
        for row in rows:
            reason = (row.get("unavailable") or {}).get(key)
            if reason:
                return reason
    if not any(r.get("success") for r in rows):
        return "no configuration trained successfully"
    return "not in this sweep's results"


# -- quantities ------------------------------------------------------------------------------------------------
def rail_groups(rows: list[Row]) -> dict[str, list[str]]:
    """Rail group -> the rails (channel names of ``power_avg_w``) in it, from the sensors' declared roles."""
    out: dict[str, list[str]] = {}
    for row in rows:
        rails = set(row.get("power_avg_w") or {})
        for sensor in row.get("sensors") or []:
            for channel in sensor.get("channels") or []:
                if channel["name"] in rails and channel["name"] not in out.get(channel.get("group") or "other", []):
                    out.setdefault(channel.get("group") or "other", []).append(channel["name"])
    order = {g: i for i, g in enumerate(GROUP_ORDER)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def group_power(rails: list[str]) -> Getter:
    """The mean power of a rail group: the sum of its rails' means, where every one is known."""

    def get(row: Row) -> float | None:
        values = [(row.get("power_avg_w") or {}).get(r) for r in rails]
        known = [v for v in values if v is not None]
        return sum(known) if len(known) == len(values) else None

    return get


def power_groups(rows: list[Row]) -> dict[str, list[str]]:
    """The rail groups of ``rail_groups``, with "total" first wherever a row has a total power (``power_avg``:
    its input rail's, or the sum of its rails where the board has no input rail, as on an AGX Orin)."""
    groups = rail_groups(rows)
    if "total" in groups or not any(r.get("power_avg") is not None for r in rows):
        return groups
    return {"total": [], **groups}


def power_of(group: str, rails: list[str]) -> Getter:
    """The mean power of a rail group; of the "total" group, the row's own total (``power_avg``) where it has
    one, else the sum of the group's rails."""
    rails_sum = group_power(rails)
    if group != "total":
        return rails_sum
    return lambda row: row["power_avg"] if row.get("power_avg") is not None else (rails_sum(row) if rails else None)


def cpu_util_all_cores(row: Row) -> float | None:
    """The CPU's utilization where its cores have no cluster: the overall channel's, else the cores' mean."""
    if row.get("cpu_util_avg") is not None:
        return row["cpu_util_avg"]
    cores = [v for v in (row.get("cpu_util_per_core") or {}).values() if v is not None]
    return sum(cores) / len(cores) if cores else None


def cluster_util(cluster: str) -> Getter:
    return lambda row: (row.get("cpu_util_per_cluster") or {}).get(cluster)


def field(key: str, factor: float = 1.0) -> Getter:
    """The row's ``key`` (times ``factor``), None where it has none."""
    return lambda row: None if row.get(key) is None else row[key] * factor


@dataclasses.dataclass
class Quantity:
    """One per-run quantity: its key (in requests), label, unit, value of a row, and the keys of ``unavailable``
    that say why it is missing."""

    key: str
    label: str
    unit: str
    get: Getter
    reasons: tuple[str, ...] = ()

    def value(self, row: Row) -> float | None:
        v = self.get(row)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def quantities(rows: list[Row]) -> list[Quantity]:
    """Every quantity of the rows: energy, throughput, step time, power per rail group, utilization (per CPU
    cluster too), peak memories."""
    clusters = sorted({c for r in rows for c in (r.get("cpu_util_per_cluster") or {})}, key=natural_key)
    return [
        Quantity("energy_per_step", "energy per step", "J", field("energy_per_step_j"), ("energy",)),
        Quantity(
            "energy_per_sample",
            "energy per sample",
            "J",
            field("energy_per_sample_j"),
            ("energy_per_sample_j", "energy"),
        ),
        Quantity("samples_per_s", "samples per second", "samples/s", field("samples_per_s"), ("samples_per_s",)),
        Quantity("step_time", "step time (mean)", "ms", field("step_time_s_mean", 1e3), ("step_time_s",)),
        *(
            Quantity(f"power:{g}", f"mean power: {g} rail group", "W", power_of(g, rails), ("power",))
            for g, rails in power_groups(rows).items()
        ),
        Quantity("gpu_util", "GPU utilization", "%", field("gpu_util_avg"), ("gpu_util",)),
        Quantity("cpu_util", "CPU utilization (all cores)", "%", cpu_util_all_cores, ("cpu_util",)),
        *(
            Quantity(f"cpu_util:{c}", f"CPU utilization: {c} cluster", "%", cluster_util(c), ("cpu_util",))
            for c in clusters
        ),
        Quantity("proc_peak", "peak memory: process (peak RSS)", "GiB", field("proc_peak_gb"), ("proc_peak_gb",)),
        Quantity("mem_peak", "peak memory: system RAM in use", "GiB", field("mem_peak_gb"), ("mem_peak_gb",)),
        Quantity("gpu_mem_peak", "peak memory: GPU allocator", "GiB", field("gpu_mem_peak_gb"), ("gpu_mem_peak_gb",)),
    ]


# -- groupings -------------------------------------------------------------------------------------------------
def groupings(rows: list[Row]) -> list[tuple[str, str, Callable[[Row], str]]]:
    """(key, label, group of a row): a line per board and model first where the rows come from several boards,
    then per model, then (for runs) per run folder."""
    out: list[tuple[str, str, Callable[[Row], str]]] = []
    if len(boards(rows)) > 1:
        label = {id(r): name for name, group in lines(rows).items() for r in group}
        out.append(("board_model", "board and model", lambda r: label[id(r)]))
    out.append(("model", "model", lambda r: str(r["model"])))
    if all(r.get("folder") for r in rows):
        out.append(("folder", "run folder", lambda r: str(r["folder"])))
    return out


@dataclasses.dataclass
class Point:
    """The successful rows of one line at one batch size that have the quantity: their mean, count and range."""

    batch_size: int
    mean: float
    n: int
    min: float
    max: float
    runs: list[str]


def point(rows: list[Row], quantity: Quantity, batch_size: int) -> Point | None:
    """Of ``quantity`` over the rows (of one line at ``batch_size``) that succeeded and have it; None where none
    has."""
    counted = [(r, v) for r in rows if r.get("success") and (v := quantity.value(r)) is not None]
    if not counted:
        return None
    values = [v for _, v in counted]
    return Point(
        batch_size,
        sum(values) / len(values),
        len(values),
        min(values),
        max(values),
        [str(r.get("run") or r.get("logdir") or "") for r, _ in counted],
    )


def line_colours(groups: dict[str, list[Row]]) -> dict[str, str]:
    """Each line's colour: its model's (plot and tab alike), a shade of it for the model's further lines
    (another board or setting); a line of several models (a run folder) takes the colour its name picks."""
    used: dict[str, int] = {}
    out = {}
    for label, rows in groups.items():
        models = {str(r["model"]) for r in rows}
        base = model_colour(next(iter(models)) if len(models) == 1 else label)
        used[base] = used.get(base, -1) + 1
        out[label] = shade(base, used[base])
    return out


def failure_text(row: Row) -> str:
    """ "<run>: batch size 16 failed at step 3: MemoryError: ..." (its cause's first line)."""
    cause = (row.get("error") or row.get("cause") or "no error recorded").split("\n")[0]
    name = row.get("run") or row.get("logdir") or row["model"]
    step = "?" if row.get("failed_step") is None else row["failed_step"]
    return f"{name}: batch size {row['batch_size']} failed at step {step}: {cause}"


# -- best batch size -------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Best:
    """One cell: the batch size with the best value and that value, or why there is none."""

    batch_size: int | None
    value: float | None
    unit: str
    why: str | None = None

    def text(self) -> str:
        """ "batch 4: 123.4 samples/s", or the reason."""
        return str(self.why) if self.batch_size is None else f"batch {self.batch_size}: {self.value:.4g} {self.unit}"


@dataclasses.dataclass
class BestRow:
    """The best batch sizes of one line on one board."""

    board: str
    line: str
    samples_per_s: Best
    j_per_sample: Best


def best(rows: list[Row], get: Getter, unit: str, highest: bool, *reason_keys: str) -> Best:
    """The batch size whose successful rows' mean of ``get`` is highest (or lowest); a tie goes to the smaller
    batch size."""
    ok = [r for r in rows if r.get("success")]
    if not ok:
        return Best(None, None, unit, NO_SUCCESS)
    quantity = Quantity("", "", unit, get)
    by_size: dict[int, list[Row]] = {}
    for r in ok:
        by_size.setdefault(r["batch_size"], []).append(r)
    measured = [(size, p.mean) for size in sorted(by_size) if (p := point(by_size[size], quantity, size))]
    if not measured:
        return Best(None, None, unit, "not measured: " + why_missing(ok, *reason_keys))
    size, value = (max if highest else min)(measured, key=lambda pair: pair[1])
    return Best(size, value, unit)


BEST_COLUMNS = ["board", "model", "most samples/s", "fewest J/sample"]


def best_batch(rows: list[Row]) -> list[BestRow]:
    """Per board and line: the batch size with the most samples/s and the one with the least J/sample."""
    return [
        BestRow(
            board or "",
            line,
            best(group, field("samples_per_s"), "samples/s", True, "samples_per_s"),
            best(group, field("energy_per_sample_j"), "J/sample", False, "energy_per_sample_j", "energy"),
        )
        for (board, line), group in line_groups(rows).items()
    ]


# -- the chart -------------------------------------------------------------------------------------------------
NO_BATCH_SIZE = "no run reports its batch size (pass batch_size= to the callback)"


def chart(rows: list[Row], quantity: str | None = None, grouping: str | None = None) -> dict:
    """The cross-run chart of ``rows`` (those with a batch size) as JSON: the quantities and groupings to choose
    from, the chosen ones (the first measured quantity and the first grouping by default), x (batch sizes),
    a line per group (label, colour, a point per batch size or None), the failed rows, the best batch size
    per board (where several boards ran), and why the chart is empty. UnknownKey for a key the rows lack."""
    rows = [r for r in rows if isinstance(r.get("batch_size"), int) and r["batch_size"] > 0 and not r.get("combined")]
    qs = quantities(rows)
    measured = [any(q.value(r) is not None for r in rows) for q in qs]
    ways = groupings(rows) if rows else []
    out: dict = {
        "quantities": [{"key": q.key, "label": q.label, "unit": q.unit, "measured": m} for q, m in zip(qs, measured)]
        if rows
        else [],
        "groupings": [{"key": k, "label": label} for k, label, _ in ways],
        "quantity": None,
        "grouping": None,
        "x": [],
        "lines": [],
        "failed": [],
        "best": None,
        "empty_reason": None if rows else NO_BATCH_SIZE,
    }
    if not rows:
        return out
    keys = [q.key for q in qs]
    if quantity is None:
        quantity = keys[measured.index(True) if True in measured else 0]
    if quantity not in keys:
        raise UnknownKey(f"unknown quantity {quantity[:60]!r}; one of {', '.join(keys)}")
    q = qs[keys.index(quantity)]
    if grouping is None:
        grouping = ways[0][0]
    by_key = {k: group for k, _, group in ways}
    if grouping not in by_key:
        raise UnknownKey(f"unknown grouping {grouping[:60]!r}; one of {', '.join(by_key)}")
    group_of = by_key[grouping]
    sizes = sorted({r["batch_size"] for r in rows})
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(group_of(r), []).append(r)
    groups = dict(sorted(groups.items(), key=lambda kv: natural_key(kv[0])))
    colours = line_colours(groups)
    out_lines = []
    for label, members in groups.items():
        points = []
        for size in sizes:
            p = point([r for r in members if r["batch_size"] == size], q, size)
            points.append(dataclasses.asdict(p) if p else None)
        out_lines.append({"label": label, "colour": colours[label], "points": points})
    failed = [
        {"batch_size": r["batch_size"], "y": q.value(r), "group": group_of(r), "text": failure_text(r)}
        for r in rows
        if not r.get("success")
    ]
    several = len(boards(rows)) > 1
    out.update(
        quantity=quantity,
        grouping=grouping,
        x=sizes,
        lines=out_lines,
        failed=failed,
        best={
            "columns": BEST_COLUMNS,
            "rows": [[b.board, b.line, b.samples_per_s.text(), b.j_per_sample.text()] for b in best_batch(rows)],
        }
        if several
        else None,
    )
    has_value = any(p for line in out_lines for p in line["points"]) or any(f["y"] is not None for f in failed)
    if not has_value:
        reasons = [u[k] for k in q.reasons for r in rows if (u := r.get("unavailable") or {}).get(k)]
        out["empty_reason"] = f"no run measured {q.label} ({reasons[0] if reasons else 'not measured on this device'})"
    return out
