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
from collections.abc import Callable

from tf_mobileperf.analysis.boards import BEST_COLUMNS, best_batch
from tf_mobileperf.analysis.colours import model_colour, shade
from tf_mobileperf.analysis.rows import (
    Row,
    boards,
    lines,
    natural_key,
)
from tf_mobileperf.analysis.values import (
    Quantity,
    cluster_util,
    cpu_util_all_cores,
    field,
    point,
    power_groups,
    power_of,
)


class UnknownKey(ValueError):
    """A quantity or grouping the rows do not have."""


def quantities(rows: list[Row]) -> list[Quantity]:
    """Every quantity of the rows: energy, throughput, step time, power per rail group, utilization (per CPU
    cluster too), peak memories.

    Args:
        rows: The rows; their rail groups and CPU clusters add quantities.

    Returns:
        The quantities in the order they are offered, measured by the rows or not.
    """
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
    """The ways to group the rows into lines: per board and model first where the rows come from several boards,
    then per model, then (for runs) per run folder.

    Args:
        rows: The rows; per run folder only where every row has a ``folder``.

    Returns:
        (key, label, the line label of a row) of each grouping.
    """
    out: list[tuple[str, str, Callable[[Row], str]]] = []
    if len(boards(rows)) > 1:
        label = {id(r): name for name, group in lines(rows).items() for r in group}
        out.append(("board_model", "board and model", lambda r: label[id(r)]))
    out.append(("model", "model", lambda r: str(r["model"])))
    if all(r.get("folder") for r in rows):
        out.append(("folder", "run folder", lambda r: str(r["folder"])))
    return out


def line_colours(groups: dict[str, list[Row]]) -> dict[str, str]:
    """Each line's colour: its model's (plot and tab alike), a shade of it for the model's further lines
    (another board or setting); a line of several models (a run folder) takes the colour its name picks.

    Args:
        groups: Line label -> its rows, in the order the lines are drawn (it picks which line gets which shade).

    Returns:
        Line label -> colour ("#rrggbb").
    """
    used: dict[str, int] = {}
    out = {}
    for label, rows in groups.items():
        models = {str(r["model"]) for r in rows}
        base = model_colour(next(iter(models)) if len(models) == 1 else label)
        used[base] = used.get(base, -1) + 1
        out[label] = shade(base, used[base])
    return out


def failure_text(row: Row) -> str:
    """ "<run>: batch size 16 failed at step 3: MemoryError: ..." (its cause's first line).

    Args:
        row: A failed row (named by its ``run``, else its ``logdir``, else its model; "?" for an unknown step).

    Returns:
        The text.
    """
    cause = (row.get("error") or row.get("cause") or "no error recorded").split("\n")[0]
    name = row.get("run") or row.get("logdir") or row["model"]
    step = "?" if row.get("failed_step") is None else row["failed_step"]
    return f"{name}: batch size {row['batch_size']} failed at step {step}: {cause}"


# -- the chart -------------------------------------------------------------------------------------------------
NO_BATCH_SIZE = "no run reports its batch size (pass batch_size= to the callback)"


def chart(rows: list[Row], quantity: str | None = None, grouping: str | None = None) -> dict:
    """The cross-run chart of ``rows`` as JSON.

    Args:
        rows: Sweep rows or summaries made rows; those without a positive batch size, and combined ones, are left out.
        quantity, grouping: The keys chosen (None: the first quantity the rows measured; the first grouping).

    Returns:
        ``quantities`` and ``groupings`` to choose from, the chosen ``quantity`` and ``grouping``, ``x`` (batch sizes),
        ``lines`` (label, colour, a point per x or None), ``failed``, ``best`` (several boards only), ``empty_reason``.

    Raises:
        UnknownKey: ``quantity`` or ``grouping`` is not one the rows have.
    """
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
    q, grouping, group_of = _chosen(qs, measured, ways, quantity, grouping)
    sizes = sorted({r["batch_size"] for r in rows})
    out_lines = _lines(rows, q, group_of, sizes)
    failed = [
        {"batch_size": r["batch_size"], "y": q.value(r), "group": group_of(r), "text": failure_text(r)}
        for r in rows
        if not r.get("success")
    ]
    several = len(boards(rows)) > 1
    out.update(
        quantity=q.key,
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


def _chosen(
    qs: list[Quantity], measured: list[bool], ways: list, quantity: str | None, grouping: str | None
) -> tuple[Quantity, str, Callable[[Row], str]]:
    """The quantity, the grouping's key and its function asked for (the first measured quantity and the first
    grouping by default).

    Raises:
        UnknownKey: for a key the rows lack, naming the ones they have.
    """
    keys = [q.key for q in qs]
    if quantity is None:
        quantity = keys[measured.index(True) if True in measured else 0]
    if quantity not in keys:
        raise UnknownKey(f"unknown quantity {quantity[:60]!r}; one of {', '.join(keys)}")
    by_key = {k: group for k, _, group in ways}
    grouping = ways[0][0] if grouping is None else grouping
    if grouping not in by_key:
        raise UnknownKey(f"unknown grouping {grouping[:60]!r}; one of {', '.join(by_key)}")
    return qs[keys.index(quantity)], grouping, by_key[grouping]


def _lines(rows: list[Row], q: Quantity, group_of: Callable[[Row], str], sizes: list[int]) -> list[dict]:
    """A line per group, in natural order: its label, colour and a point per batch size (None where it has none)."""
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(group_of(r), []).append(r)
    groups = dict(sorted(groups.items(), key=lambda kv: natural_key(kv[0])))
    colours = line_colours(groups)
    out = []
    for label, members in groups.items():
        points = [point([r for r in members if r["batch_size"] == size], q, size) for size in sizes]
        out.append(
            {"label": label, "colour": colours[label], "points": [dataclasses.asdict(p) if p else None for p in points]}
        )
    return out
