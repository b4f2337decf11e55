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

from tf_mobileperf.analysis.rows import Getter, Row, lines
from tf_mobileperf.analysis.values import cluster_util as _cluster_util
from tf_mobileperf.analysis.values import cpu_util_all_cores, field, rail_groups
from tf_mobileperf.analysis.values import group_power as _group_power
from tf_mobileperf.figures.panels import FigureSpec, Panel, Series, empty_if, failures, panel, variants


def figures(rows: list[Row]) -> list[FigureSpec]:
    """Every figure of ``rows``: step time and samples/s, GPU, CPU per cluster, power per rail group, energy, memory.

    Args:
        rows: The sweep's rows, one per configuration.

    Returns:
        The figures, in that order, each with the rows' batch sizes (sorted) as its x axis.
    """
    groups = lines(rows)
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
        cpu_figure(rows, groups),
        power_figure(rows, groups),
        energy_figure(groups),
        memory_figure(groups),
    ]
    sizes = sorted({r["batch_size"] for r in rows})
    return [dataclasses.replace(spec, batch_sizes=sizes) for spec in specs]


def cpu_figure(rows: list[Row], groups: dict[str, list[Row]]) -> FigureSpec:
    """CPU utilization, a panel per core cluster the rows name (all cores together where none does).

    Args:
        rows: The sweep's rows, whose ``cpu_util_per_cluster`` name the clusters.
        groups: Line label -> its rows (``analysis.rows.lines``).

    Returns:
        The "cpu_util" figure.
    """
    clusters = sorted({c for r in rows for c in (r.get("cpu_util_per_cluster") or {})})
    cpu = [
        panel(groups, f"CPU utilization, {c}", "utilization (%)", _cluster_util(c), "cpu_util") for c in clusters
    ] or [panel(groups, "CPU utilization, all cores", "utilization (%)", cpu_util_all_cores, "cpu_util")]
    return FigureSpec("cpu_util", "CPU utilization per cluster", cpu)


def power_figure(rows: list[Row], groups: dict[str, list[Row]]) -> FigureSpec:
    """Mean power, a panel per rail group (an empty panel saying why where no row has power).

    Args:
        rows: The sweep's rows, whose rails make the groups and whose reasons fill an empty panel.
        groups: Line label -> its rows (``analysis.rows.lines``).

    Returns:
        The "power" figure.
    """
    power = [
        panel(groups, f"mean power, {group} rails ({', '.join(rails)})", "power (W)", _group_power(rails), "power")
        for group, rails in rail_groups(rows).items()
    ]
    return FigureSpec(
        "power", "Mean power per rail group", power or [empty_if(Panel("mean power", "power (W)", []), rows, "power")]
    )


def energy_figure(groups: dict[str, list[Row]]) -> FigureSpec:
    """Energy per step and per sample, each with its active energy beside it.

    Args:
        groups: Line label -> its rows (``analysis.rows.lines``).

    Returns:
        The "energy" figure, its two panels in J.
    """
    per_step = energy_panel(
        groups, "energy per step", field("energy_per_step_j", 1.0), field("energy_active_per_step_j", 1.0), "energy"
    )
    per_sample = energy_panel(
        groups,
        "energy per sample",
        field("energy_per_sample_j", 1.0),
        field("energy_active_per_sample_j", 1.0),
        "energy_per_sample_j",
        "energy",
    )
    return FigureSpec("energy", "Energy", [per_step, per_sample])


def energy_panel(groups: dict[str, list[Row]], title: str, total: Getter, active: Getter, *reason_keys: str) -> Panel:
    """Total energy, a line per group, and beside each the active energy (dashed) where the rows have it.

    Args:
        groups: Line label -> its rows (``analysis.rows.lines``).
        title: The panel's title; what the dashed lines are is added where there are some.
        total: Gets a row's total energy, in J.
        active: Gets a row's active energy, in J (idle power x duration taken out); None without an idle baseline.
        *reason_keys: Keys of the rows' ``unavailable`` saying why total energy is missing, tried in order.

    Returns:
        The panel, empty with the rows' reason where no row has total energy.
    """
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
    """One limit line per distinct limit, from each line's limit.

    Args:
        limits: (line label, "limit of <quantity> (<how>)", (batch size, limit) points) per line.

    Returns:
        A line per distinct limit: lines whose limits have the same text and are equal within ``SAME_LIMIT`` at
        every shared batch size (the address space at start differs by a few MiB from one child to the next)
        share one, at their mean; where there are several, each label names the lines it is of.
    """
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
    """The process's peak memory with the limit in the same quantity and the failed batch sizes marked.

    Args:
        groups: Line label -> its rows (``analysis.rows.lines``).

    Returns:
        The "memory" figure: that panel, the system's RAM in use (every process on the machine, no limit line),
        and the GPU memory panel where it has a line.
    """
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
    device memory in use by NVML (every process's, the allocator's cache included).

    Args:
        groups: Line label -> its rows (``analysis.rows.lines``).

    Returns:
        The panel, in GiB; empty, with the rows' reason, on a CPU sweep.
    """
    out = panel(groups, "GPU memory: allocator peak", "GPU memory (GiB)", field("gpu_mem_peak_gb"), "gpu_mem_peak_gb")
    if _add_beside(out, groups, field("gpu_device_mem_peak_gb"), "GPU device memory in use (NVML)"):
        out.title += " (solid: allocator peak; dashed: device memory in use, NVML)"
    return empty_if(out, [r for rows in groups.values() for r in rows], "gpu_mem_peak_gb")
