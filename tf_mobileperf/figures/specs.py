"""What each of ``mobileperf plot``'s figures shows, computed from a sweep's rows (no drawing here).

It exists apart from the drawing (``figures``) so that what a figure holds
(its lines per model, the batch sizes that failed, the limit line, the
reason a panel is empty) is plain data that tests read as values. A line is
drawn per model (or per configuration of a model, labelled with what
differs) through its successful batch sizes, and per board where the rows
come from several (a fleet sweep); a quantity that no row has gets no line
and the reason from the rows' ``unavailable``.
"""

from __future__ import annotations

import dataclasses

from tf_mobileperf.analysis.colours import short_reason
from tf_mobileperf.analysis.crossrun import (  # noqa: F401 (grouping is the analysis module's; re-exported)
    BOARD_KEYS,
    GROUP_ORDER,
    SETTING_LABELS,
    UNKNOWN_BOARD,
    Getter,
    Row,
    board_of,
    boards,
    cpu_util_all_cores,
    field,
    line_groups,
    lines,
    rail_groups,
    why_missing,
)
from tf_mobileperf.analysis.crossrun import cluster_util as _cluster_util
from tf_mobileperf.analysis.crossrun import group_power as _group_power
from tf_mobileperf.sweep.runner import is_oom


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
    """A panel of ``get`` against batch size, a line per group; empty if no row has it, with the first clause
    of the rows' reason ("no power sensor on this device") and the whole reason apart."""
    series = []
    k = variants(groups)
    for label, rows in groups.items():
        points = [(r["batch_size"], float(v)) for r in rows if r.get("success") and (v := get(r)) is not None]
        if points:
            series.append(Series(label, points, model=str(rows[0]["model"]), variant=k[label]))
    return empty_if(Panel(title, ylabel, series), [r for rows in groups.values() for r in rows], *reason_keys)


def variants(groups: dict[str, list[Row]]) -> dict[str, int]:
    """Line label -> which line of its model it is, in the order of the lines (the same in every panel, whether
    or not the line has a value there): "cnn on agx-orin" 0, "lstm on agx-orin" 0, "cnn on tx2" 1."""
    seen: dict[str, int] = {}
    out = {}
    for label, rows in groups.items():
        model = str(rows[0]["model"])
        out[label] = seen.get(model, 0)
        seen[model] = out[label] + 1
    return out


def empty_if(out: Panel, rows: list[Row], *reason_keys: str) -> Panel:
    """``out`` with its reasons for being empty where it has no line, else without."""
    if out.series:
        out.why_empty = out.why_detail = None
    else:
        out.why_detail = why_missing(rows, *reason_keys)
        out.why_empty = short_reason(out.why_detail)
    return out


def failures(groups: dict[str, list[Row]]) -> list[Failures]:
    """Per line with failed configurations, the batch sizes that ran out of memory and those that failed otherwise."""
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


def figures(rows: list[Row]) -> list[FigureSpec]:
    """Every figure of ``rows``: step time and samples/s, GPU, CPU per cluster, power per rail group, energy,
    memory."""
    groups = lines(rows)
    clusters = sorted({c for r in rows for c in (r.get("cpu_util_per_cluster") or {})})
    cpu = [
        panel(groups, f"CPU utilization, {c}", "utilization (%)", _cluster_util(c), "cpu_util") for c in clusters
    ] or [panel(groups, "CPU utilization, all cores", "utilization (%)", cpu_util_all_cores, "cpu_util")]
    power = [
        panel(groups, f"mean power, {group} rails ({', '.join(rails)})", "power (W)", _group_power(rails), "power")
        for group, rails in rail_groups(rows).items()
    ]
    specs = [
        FigureSpec(
            "step_time",
            "Step time",
            [
                panel(
                    groups,
                    "mean step time (measured steps)",
                    "step time (ms)",
                    field("step_time_s_mean", 1e3),
                    "step_time_s",
                )
            ],
        ),
        FigureSpec(
            "throughput",
            "Throughput",
            [
                panel(
                    groups,
                    "samples per second (measured steps)",
                    "samples/s",
                    field("samples_per_s"),
                    "samples_per_s",
                )
            ],
        ),
        FigureSpec(
            "gpu_util",
            "GPU utilization",
            [panel(groups, "mean GPU utilization", "utilization (%)", field("gpu_util_avg"), "gpu_util")],
        ),
        FigureSpec("cpu_util", "CPU utilization per cluster", cpu),
        FigureSpec(
            "power",
            "Mean power per rail group",
            power or [empty_if(Panel("mean power", "power (W)", []), rows, "power")],
        ),
        FigureSpec(
            "energy",
            "Energy",
            [
                energy_panel(
                    groups,
                    "energy per step",
                    field("energy_per_step_j", 1.0),
                    field("energy_active_per_step_j", 1.0),
                    "energy",
                ),
                energy_panel(
                    groups,
                    "energy per sample",
                    field("energy_per_sample_j", 1.0),
                    field("energy_active_per_sample_j", 1.0),
                    "energy_per_sample_j",
                    "energy",
                ),
            ],
        ),
        memory_figure(groups),
    ]
    sizes = sorted({r["batch_size"] for r in rows})
    return [dataclasses.replace(spec, batch_sizes=sizes) for spec in specs]


def energy_panel(groups: dict[str, list[Row]], title: str, total: Getter, active: Getter, *reason_keys: str) -> Panel:
    """Total energy, a line per group, and beside each the active energy (idle power x duration taken out,
    dashed) where the rows have an idle baseline."""
    out = panel(groups, title, "energy (J)", total, *reason_keys)
    if _add_beside(out, groups, active, "active (idle power taken out)"):
        out.title += " (solid: total; dashed: active, above the idle power)"
    return out


def _add_beside(out: Panel, groups: dict[str, list[Row]], get: Getter, what: str) -> bool:
    """Adds to each line of ``out`` a dashed line of ``get`` in its colour, labelled "<line>: <what>"; whether any
    line had a value."""
    beside = panel(groups, out.title, out.ylabel, get).series
    out.series += [
        Series(f"{s.label}: {what}", s.points, dashed=True, beside=s.label, model=s.model, variant=s.variant)
        for s in beside
    ]
    return bool(beside)


#: Limits of several lines within this share of each other at every batch size they share are one line.
SAME_LIMIT = 0.01


def _same_limit(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    theirs = dict(b)
    shared = [(y, theirs[x]) for x, y in a if x in theirs]
    return bool(shared) and all(abs(y - z) <= SAME_LIMIT * max(abs(y), abs(z)) for y, z in shared)


def merge_limits(limits: list[tuple[str, str, list[tuple[int, float]]]]) -> list[Series]:
    """(line, "limit of <quantity> (<how>)", points) per line -> one limit line per distinct limit: the lines
    whose limits are equal (within ``SAME_LIMIT``: the address space at start differs by a few MiB from one
    child to the next) share one, labelled once; a limit of only some lines names them."""
    merged: list[tuple[str, list[str], dict[int, list[float]]]] = []
    for line, text, points in limits:
        for what, lines_of, values in merged:
            if what == text and _same_limit(points, [(x, sum(v) / len(v)) for x, v in values.items()]):
                lines_of.append(line)
                for x, y in points:
                    values.setdefault(x, []).append(y)
                break
        else:
            merged.append((text, [line], {x: [y] for x, y in points}))
    several = len(merged) > 1
    return [
        Series(
            text + (f": {', '.join(lines_of)}" if several else ""),
            sorted((x, sum(v) / len(v)) for x, v in values.items()),
        )
        for text, lines_of, values in merged
    ]


def memory_figure(groups: dict[str, list[Row]]) -> FigureSpec:
    """The process's peak memory with the limit in the same quantity and the failed batch sizes marked; the
    system's RAM in use (every process on the machine) apart, without a limit line."""
    process = panel(
        groups,
        "peak memory of the training process (RSS)",
        "memory (GiB)",
        field("proc_peak_gb"),
        "proc_peak_gb",
    )
    process.failures = failures(groups)
    limits = []
    k = variants(groups)
    for label, rows in groups.items():
        capped = [r for r in rows if r.get("limited_cap_gb") is not None]
        if not capped:
            continue
        quantity = capped[0]["limited_quantity"]
        peaks = [
            (r["batch_size"], r["limited_peak_gb"])
            for r in capped
            if r.get("success") and r.get("limited_peak_gb") is not None
        ]
        if peaks:
            process.series.append(
                Series(
                    f"{label}: peak {quantity}",
                    peaks,
                    dashed=True,
                    beside=label,
                    model=str(rows[0]["model"]),
                    variant=k[label],
                )
            )
        limits.append(
            (
                label,
                f"limit of {quantity} ({capped[0]['limited_how']})",
                [(r["batch_size"], r["limited_cap_gb"]) for r in capped],
            )
        )
        for failed in process.failures:
            if failed.label == label:
                failed.at = max(r["limited_cap_gb"] for r in capped)
    process.limits = merge_limits(limits)
    empty_if(process, [r for rows in groups.values() for r in rows], "proc_peak_gb")
    system = panel(
        groups, "RAM in use on the board (every process)", "memory (GiB)", field("mem_peak_gb"), "mem_peak_gb"
    )
    gpu = gpu_memory_panel(groups)
    return FigureSpec("memory", "Peak memory", [process, system] + ([gpu] if gpu.series else []))


def gpu_memory_panel(groups: dict[str, list[Row]]) -> Panel:
    """GPU memory apart from system RAM: the framework allocator's peak (solid), and beside it (dashed) the
    device memory in use by NVML (every process's, the allocator's cache included). No line on a CPU sweep."""
    out = panel(groups, "GPU memory: allocator peak", "GPU memory (GiB)", field("gpu_mem_peak_gb"), "gpu_mem_peak_gb")
    if _add_beside(out, groups, field("gpu_device_mem_peak_gb"), "GPU device memory in use (NVML)"):
        out.title += " (solid: allocator peak; dashed: device memory in use, NVML)"
    return empty_if(out, [r for rows in groups.values() for r in rows], "gpu_mem_peak_gb")
