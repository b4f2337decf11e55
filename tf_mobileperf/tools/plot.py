"""Figures of a sweep like the seed paper's, from DIR/results.json (matplotlib).

* energy per step, GPU utilization and mean power against batch size, a line per model;
* peak memory against batch size with the memory-limit line, the configurations that
  ran out of memory marked as such, and those that failed otherwise marked apart;
* per-cluster CPU utilization against batch size.
A quantity no sensor measured is left out of its figure and said so in it. A
directory that holds several configurations of a model (other steps, input
size, ...) has a line per configuration, labelled with what differs.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

from tf_mobileperf.tools.sweep import is_oom
from tf_mobileperf.tools.sweep_results import load_results

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _by_model(rows: list[dict]) -> dict[str, list[dict]]:
    """Rows by line, sorted by batch size: a line per model, or per configuration of a model with several,
    labelled with the settings that differ."""
    def setting(row: dict, key: str):
        return (row.get("config") or {}).get(key)

    keys = sorted({k for r in rows for k in (r.get("config") or {})})
    varying = {model: [k for k in keys if len({json.dumps(setting(r, k)) for r in rows if r["model"] == model}) > 1]
               for model in {r["model"] for r in rows}}
    out: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: r["batch_size"]):
        differs = ", ".join(f"{k} {setting(row, k)}" for k in varying[row["model"]])
        out.setdefault(f"{row['model']} ({differs})" if differs else row["model"], []).append(row)
    return out


def _panel(ax, groups, key, ylabel, get=None):
    get = get or (lambda r: r.get(key))
    plotted = False
    for model, rows in groups.items():
        points = [(r["batch_size"], get(r)) for r in rows if r.get("success") and get(r) is not None]
        if points:
            ax.plot(*zip(*points), marker="o", label=model)
            plotted = True
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size")
    ax.set_ylabel(ylabel)
    if plotted:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "not measured on this device", ha="center", va="center", transform=ax.transAxes, color="gray")


def failures(groups: dict[str, list[dict]]) -> dict[str, tuple[list[int], list[int]]]:
    """Per line, the batch sizes that ran out of memory and those that failed otherwise (a timeout, a signal)."""
    out = {}
    for label, rows in groups.items():
        failed = [r for r in rows if not r.get("success")]
        if failed:
            out[label] = ([r["batch_size"] for r in failed if is_oom(r)],
                          [r["batch_size"] for r in failed if not is_oom(r)])
    return out


def plot(directory: str | Path) -> list[Path]:
    """Writes the PNG figures into ``directory``; returns their paths."""
    directory = Path(directory)
    rows = load_results(directory / "results.json")
    groups = _by_model(rows)
    written = []

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    _panel(axes[0], groups, "energy_per_step_j", "energy per step (J)")
    _panel(axes[1], groups, "gpu_util_avg", "GPU utilization (%)")
    _panel(axes[2], groups, "power_avg", "mean power (W)")
    fig.tight_layout()
    written.append(directory / "energy_gpu_power.png")
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    _panel(ax, groups, "mem_peak_gb", "peak memory (GiB)")
    limits = sorted({r["memory_limit_bytes"] for r in rows if r.get("memory_limit_bytes")})
    for limit in limits:
        ax.axhline(limit / 2**30, color="red", linestyle="--", label=f"memory limit {limit / 2**30:g} GiB")
    # Failed points sit on the limit line (or the top of the axis when no limit was set): red if out of memory.
    oom_y = limits[0] / 2**30 if limits else ax.get_ylim()[1]
    markers = "xv^sD"
    for i, (label, (oom, other)) in enumerate(failures(groups).items()):
        for sizes, color, what in ((oom, "red", "out of memory"), (other, "gray", "failed, not out of memory")):
            if sizes:
                ax.scatter(sizes, [oom_y] * len(sizes), marker=markers[i % len(markers)], color=color, zorder=5,
                           label=f"{label}: {what}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(directory / "peak_memory.png")
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)

    clusters = sorted({c for r in rows for c in (r.get("cpu_util_per_cluster") or {})})
    fig, axes = plt.subplots(1, max(1, len(clusters)), figsize=(5 * max(1, len(clusters)), 4), squeeze=False)
    for ax, cluster in zip(axes[0], clusters or [None]):
        _panel(ax, groups, None, f"CPU utilization, {cluster or 'per cluster'} (%)",
               get=lambda r, c=cluster: (r.get("cpu_util_per_cluster") or {}).get(c))
    fig.tight_layout()
    written.append(directory / "cpu_clusters.png")
    fig.savefig(written[-1], dpi=100)
    plt.close(fig)
    return written
