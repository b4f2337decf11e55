"""What the monitor costs the training process per step, without a training framework: its hooks, and its
collector's thread.

A ``PerfMonitor`` with this machine's sensors around ``--steps`` busy-wait steps of ``--step-ms`` (a step
that keeps a core busy, as training does); after ``--warmup`` steps, the wall time of ``step_begin`` plus
``step_end`` of each step (median, mean, p90, p99), and the CPU of each thread of this process over the
measured steps (schedstat, nanoseconds), as a share of a core: the main thread (the steps and the hooks) and
``mobileperf-collector`` (draining the sampler, joining steps, writing them), and that thread's CPU by part
(thread_time around each: taking the drained samples, the join, filling the step records, the totals,
steps.csv, the scalars). Writes benchmarks/results/hook_cost.json.

    python benchmarks/hook_cost.py [--steps 1500] [--step-ms 5] [--warmup 300]
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from tf_mobileperf import PerfMonitor
from tf_mobileperf.output.events import ScalarWriter
from tf_mobileperf.output.files import StepsCsv
from tf_mobileperf.session import collector
from tf_mobileperf.steps.totals import StepTotals

from _results import save  # noqa: E402


def thread_cpu_ns() -> dict[int, int]:
    """Each thread of this process: its CPU time so far (ns, /proc/self/task/*/schedstat)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[int(tid)] = int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError):  # a thread that ended meanwhile
            pass
    return out


#: The collector thread's CPU (ns) in each part, while timed.
PARTS: collections.Counter[str] = collections.Counter()


def timed(owner, name: str, part: str) -> None:
    """Replaces ``owner.name`` by a wrapper adding its CPU time in the collector thread to ``PARTS[part]``."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        if threading.current_thread().name != "mobileperf-collector":
            return inner(*args, **kwargs)
        start = time.thread_time_ns()
        try:
            return inner(*args, **kwargs)
        finally:
            PARTS[part] += time.thread_time_ns() - start

    setattr(owner, name, wrapper)


def time_the_parts() -> None:
    """Times each part of the collector's work (``PARTS``)."""
    timed(collector.Collector, "_take", "take samples (stats, series file)")
    timed(collector.join_mod, "join", "join")
    timed(collector, "fill_steps", "fill step records")
    timed(StepTotals, "add_steps", "totals")
    timed(StepsCsv, "write", "steps.csv")
    timed(ScalarWriter, "write_steps", "scalars")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--step-ms", type=float, default=5.0)
    parser.add_argument("--warmup", type=int, default=300)
    args = parser.parse_args()
    time_the_parts()
    hooks = []
    with PerfMonitor(Path(tempfile.mkdtemp()), idle_s=0, batch_size=8) as perf:
        for i in range(args.warmup + args.steps):
            if i == args.warmup:
                before, started = thread_cpu_ns(), time.monotonic()
                PARTS.clear()
            t0 = time.perf_counter_ns()
            perf.step_begin()
            t1 = time.perf_counter_ns()
            end = time.perf_counter() + args.step_ms / 1e3
            while time.perf_counter() < end:
                pass
            t2 = time.perf_counter_ns()
            perf.step_end()
            hooks.append((t1 - t0 + time.perf_counter_ns() - t2) / 1e3)
        after, seconds = thread_cpu_ns(), time.monotonic() - started
        parts = {part: 100.0 * ns / 1e9 / seconds for part, ns in PARTS.most_common()}
        names = {t.native_id: t.name for t in threading.enumerate()}
    measured = np.array(hooks[args.warmup :])
    threads = {
        names.get(tid, f"thread {tid}"): 100.0 * (after[tid] - before.get(tid, 0)) / 1e9 / seconds for tid in after
    }
    result = {
        "steps": args.steps,
        "step_ms": args.step_ms,
        "hook_us": {
            "median": float(np.median(measured)),
            "mean": float(measured.mean()),
            "p90": float(np.percentile(measured, 90)),
            "p99": float(np.percentile(measured, 99)),
        },
        "thread_cpu_pct": threads,
        "collector_parts_pct": parts,
    }
    print(f"hooks: median {result['hook_us']['median']:.1f} us a step, mean {result['hook_us']['mean']:.1f}")
    for name, pct in threads.items():
        print(f"  {name:<24} {pct:6.2f}% of a core")
    for part, pct in parts.items():
        print(f"    {part:<34} {pct:6.2f}% of a core")
    print(save("hook_cost", result))


if __name__ == "__main__":
    main()
