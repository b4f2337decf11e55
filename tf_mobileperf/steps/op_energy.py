"""Energy per operation: the power samples joined with the TF profiler's trace.

For the steps traced with ``profile_steps``, the ops come from the
profiler's XSpace (``<run>/plugins/profile/<session>/<host>.xplane.pb``),
read with xprof's ``ProfileData`` (the parser the Profile tab itself uses).

The ops and their clocks: ``steps.trace_ops``.

Attribution: between any two consecutive boundaries (a sample, an op's start
or end, a step's edge), the rail's energy (the integral of its
piecewise-linear power, as in the join) is split equally among the ops
running then on the rail's device: GPU ops for GPU rails, CPU ops for CPU
rails, all ops for the others (the board's input, memory, SoC). Energy while
no op runs is the step's *no-op* share (idle, stalls, Python, input).
Energy counters (NVML, RAPL) are not split; their rails are left out. Where a
rail's power is unknown (no reading over the traced steps, a replayed log that
ran out) its energies are None (JSON null), never NaN.
tf.data's wait for the next batch (``IteratorGetNextOp::DoCompute``) counts
as an op, ``IteratorGetNext``, and each step's ``input_wait_s`` sums it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.integrate import integral_at
from tf_mobileperf.steps.trace_ops import INPUT_OP, ClockPair, Ops


def split_energy(
    t: np.ndarray, power: np.ndarray, windows: np.ndarray, op_start: np.ndarray, op_end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Splits a rail's energy in ``windows`` among the ops running at each moment.

    Args:
        t: The samples' times (s), increasing.
        power: The rail's power at ``t`` (W; NaN: no reading).
        windows: Shape (k, 2): each window's start and end (s), in time order, not overlapping.
        op_start, op_end: Each op's start and end (s).

    Returns:
        (energy per op, no-op energy per window, energy per window), J; all NaN with fewer than two readings.
    """
    ok = np.isfinite(power)
    t, power = t[ok], power[ok]
    if len(t) < 2:
        nan = np.full(len(windows), np.nan)
        return np.full(len(op_start), np.nan), nan, nan
    lo, hi = windows[:, 0].min(), windows[:, 1].max()
    edges = np.unique(
        np.concatenate([windows.ravel(), np.clip(op_start, lo, hi), np.clip(op_end, lo, hi), t[(t > lo) & (t < hi)]])
    )
    segment = np.diff(integral_at(t, power, edges))
    middle = (edges[:-1] + edges[1:]) / 2
    running = np.searchsorted(np.sort(op_start), middle, "right") - np.searchsorted(np.sort(op_end), middle, "right")
    window = np.searchsorted(windows[:, 0], middle, "right") - 1
    inside = (window >= 0) & (middle < windows[np.maximum(window, 0), 1])
    share = np.where(inside & (running > 0), segment / np.maximum(running, 1), 0.0)
    cumulative = np.concatenate([[0.0], np.cumsum(share)])
    per_op = (
        cumulative[np.searchsorted(edges, np.clip(op_end, lo, hi))]
        - cumulative[np.searchsorted(edges, np.clip(op_start, lo, hi))]
    )
    idle = np.bincount(window[inside & (running == 0)], segment[inside & (running == 0)], minlength=len(windows))
    total = np.bincount(window[inside], segment[inside], minlength=len(windows))
    return per_op, idle, total


def _rail_ops(channel: Channel, ops: Ops) -> np.ndarray:
    """Which ops a rail powers: GPU ops for GPU rails, CPU ops for CPU rails, all for the rest."""
    if channel.group in ("cpu", "gpu"):
        return ops.device == channel.group
    return np.ones(len(ops), dtype=bool)


def _ranking(energy: dict[str, np.ndarray], duration: np.ndarray, rank_rail: str) -> np.ndarray:
    """What ops are ranked by: their energy on ``rank_rail`` where one is measured, else their time."""
    return np.nan_to_num(energy[rank_rail]) if rank_rail else duration


def _table(
    keys: np.ndarray, energy: dict[str, np.ndarray], duration: np.ndarray, rank: np.ndarray, label: str
) -> list[dict]:
    """One row per distinct key, the largest total of ``rank`` first."""
    names, index = np.unique(keys.astype(str), return_inverse=True)
    order = np.argsort(-np.bincount(index, rank, minlength=len(names)), kind="stable")
    rows = []
    for i in order:
        mine = index == i
        rows.append(
            {
                label: str(names[i]),
                "count": int(mine.sum()),
                "time_s": float(duration[mine].sum()),
                "energy_j": {rail: _finite(e[mine].sum()) for rail, e in energy.items()},
            }
        )
    return rows


def op_energy(
    ops: Ops,
    t: np.ndarray,
    values: np.ndarray,
    channels: list[Channel],
    steps: list[tuple[int, float, float]],
    clocks: ClockPair,
    limit: int = 20,
) -> dict:
    """The energy-per-op report of the traced steps: every op type and layer a row, and the top ``limit`` ops.

    Args:
        ops: The traced ops (``trace_ops.read_ops``), on the monotonic clock.
        t, values, channels: The samples' times (s), the samples (one column per channel), the columns' channels.
        steps: Each traced step's (index, start, end), on the monotonic clock (s).
        clocks, limit: The clock pair the trace was aligned with (its uncertainty is reported); how many top ops.

    Returns:
        The report; rows ranked by energy on ``rank_rail`` (the total rail, else the first power rail; none: by time).
    """
    rails = [(i, c) for i, c in enumerate(channels) if c.kind == "power"]
    windows = np.array([[s, e] for _, s, e in steps], dtype=float).reshape(-1, 2)
    rank_rail = next((c.name for _, c in rails if c.group == "total"), rails[0][1].name if rails else "")
    energy: dict[str, np.ndarray] = {}
    waiting = ops.op_type == INPUT_OP
    per_step: list[dict[str, Any]] = [
        {
            "step": i,
            "energy_j": {},
            "no_op_energy_j": {},
            "no_op_share": {},
            "input_wait_s": float(
                np.clip(np.minimum(ops.end_s[waiting], e) - np.maximum(ops.start_s[waiting], s), 0, None).sum()
            ),
        }
        for i, s, e in steps
    ]
    for column, channel in rails:
        powered = _rail_ops(channel, ops)
        per_op, idle, total = split_energy(t, values[:, column], windows, ops.start_s[powered], ops.end_s[powered])
        energy[channel.name] = np.zeros(len(ops))
        energy[channel.name][powered] = per_op
        for row, e_idle, e_total in zip(per_step, idle, total):
            row["energy_j"][channel.name] = _finite(e_total)
            row["no_op_energy_j"][channel.name] = _finite(e_idle)
            row["no_op_share"][channel.name] = _finite(e_idle / e_total) if e_total > 0 else None
    duration = ops.end_s - ops.start_s
    rank = _ranking(energy, duration, rank_rail)
    return {
        "clock_alignment": {
            "method": "monotonic/wall pair read when the trace started",
            "alignment_uncertainty_us": clocks.uncertainty_s * 1e6,
        },
        "rank_rail": rank_rail,
        "ops": int(len(ops)),
        "steps": per_step,
        "by_op_type": _table(ops.op_type, energy, duration, rank, "op_type"),
        "by_layer": _table(ops.layer, energy, duration, rank, "layer"),
        "top_ops": _top_ops(ops, energy, duration, np.argsort(-rank, kind="stable")[:limit]),
    }


def _top_ops(ops: Ops, energy: dict[str, np.ndarray], duration: np.ndarray, top: np.ndarray) -> list[dict]:
    """The ops at indices ``top``: name, type, layer, device, time and energy on each rail."""
    return [
        {
            "name": ops.name[k],
            "op_type": ops.op_type[k],
            "layer": ops.layer[k],
            "device": ops.device[k],
            "time_s": float(duration[k]),
            "energy_j": {r: _finite(e[k]) for r, e in energy.items()},
        }
        for k in top
    ]


def chrome_trace(ops: Ops, t: np.ndarray, values: np.ndarray, channels: list[Channel], t0: float) -> dict:
    """Chrome/Perfetto trace JSON: the ops as slices, each power rail as a counter track.

    Args:
        ops: The traced ops, on the monotonic clock.
        t, values, channels: The samples' times (s), the samples (one column per channel), the columns' channels.
        t0: The monotonic time (s) that is the trace's zero.

    Returns:
        The trace: ``traceEvents`` (times in us from ``t0``; power in W) and ``displayTimeUnit``.
    """
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "TensorFlow ops"}},
        {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "power (W)"}},
    ]
    threads = {name: i for i, name in enumerate(sorted(set(ops.thread.astype(str))))}
    events += [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": i, "args": {"name": name}} for name, i in threads.items()
    ]
    for k in range(len(ops)):
        events.append(
            {
                "name": ops.name[k],
                "cat": ops.op_type[k],
                "ph": "X",
                "pid": 1,
                "tid": threads[str(ops.thread[k])],
                "ts": (ops.start_s[k] - t0) * 1e6,
                "dur": (ops.end_s[k] - ops.start_s[k]) * 1e6,
                "args": {"layer": ops.layer[k], "device": ops.device[k]},
            }
        )
    for column, channel in enumerate(channels):
        if channel.kind != "power":
            continue
        for ts, watts in zip(t, values[:, column]):
            if np.isfinite(watts):
                events.append(
                    {"name": channel.name, "ph": "C", "pid": 2, "ts": (ts - t0) * 1e6, "args": {"W": float(watts)}}
                )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _finite(x: float) -> float | None:
    """``x``, or None where it is unknown (NaN power: no reading of the rail): JSON has no NaN."""
    return float(x) if np.isfinite(x) else None
