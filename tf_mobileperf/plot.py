"""Figures of a sweep like the seed paper's, from DIR/results.json (matplotlib).

* energy per step, GPU utilization and mean power against batch size, a line per model;
* peak memory against batch size with the memory-limit line and OOM points marked;
* per-cluster CPU utilization against batch size.
A quantity no sensor measured is left out of its figure and said so in it.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _by_model(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in sorted(rows, key=lambda r: r["batch_size"]):
        out.setdefault(row["model"], []).append(row)
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


def plot(directory: str | Path) -> list[Path]:
    """Writes the PNG figures into ``directory``; returns their paths."""
    directory = Path(directory)
    results = directory / "results.json"
    if not results.exists():
        raise FileNotFoundError(f"no sweep results at {results}")
    rows = json.loads(results.read_text())
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
    # OOM points sit on the limit line (or the top of the axis when no limit was set).
    oom_y = limits[0] / 2**30 if limits else ax.get_ylim()[1]
    markers = "xv^sD"
    for i, (model, model_rows) in enumerate(groups.items()):
        failed = [r["batch_size"] for r in model_rows if not r.get("success")]
        if failed:
            ax.scatter(failed, [oom_y] * len(failed), marker=markers[i % len(markers)], color="red", zorder=5,
                       label=f"{model}: out of memory")
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
