"""Sampler timing while a Keras model trains on every core, designs side by side.

For each design (thread in the training process; forked process; forked
process with SCHED_FIFO; forked process with SCHED_FIFO and the Python tick
loop) and each requested period, samples six INA3221 rails of a fake sysfs
tree plus CPU and memory (what a TX2 or an Orin reads) while the same small
conv net trains on every core for a fixed time, and reports achieved rate,
interval error (p50/p99/max), rows dropped, and the sampler's CPU share of
one core (process designs: from the child's own CPU times). Prints a table
and writes benchmarks/results/sampling.json.

    python benchmarks/sampling.py [--seconds 10] [--periods 5,1]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sensors.ina3221 import Ina3221HwmonSensor
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor

from _results import save  # noqa: E402
from overhead import environment  # noqa: E402
from sampler_cost import fake_rails  # noqa: E402

DESIGNS = ("thread", "process", "process+fifo", "process+fifo+python")


def train_for(seconds: float) -> None:
    import keras

    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(10),
        ]
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.rand(256, 32, 32, 3).astype("float32")
    y = np.random.randint(0, 10, 256)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        model.fit(x, y, batch_size=32, epochs=1, verbose=0)


def run(design: str, period_ms: float, seconds: float, rails: Path) -> dict:
    sensors = [Ina3221HwmonSensor(rails), CpuSensor(), MemorySensor()]
    mode = "thread" if design == "thread" else "process"
    sampler = Sampler(sensors, period_ms / 1e3, mode=mode, realtime="fifo" in design)
    wall0 = time.monotonic()
    with environment(MOBILEPERF_NATIVE="0" if design.endswith("python") else "1"):
        sampler.start()
    child = psutil.Process(sampler.pid) if mode == "process" else None
    rows = []
    stop = threading.Event()

    def drain_loop():
        while not stop.wait(0.5):
            rows.append(sampler.drain())

    drainer = threading.Thread(target=drain_loop, daemon=True)
    drainer.start()
    train_for(seconds)
    child_cpu = sum(child.cpu_times()[:2]) if child else float("nan")
    stop.set()
    drainer.join()
    sampler.stop()
    rows.append(sampler.drain())
    wall = time.monotonic() - wall0
    t = np.concatenate([r.t for r in rows])
    intervals = np.diff(t) * 1000.0
    error = np.abs(intervals - period_ms)
    return {
        "design": design,
        "period_ms": period_ms,
        "realtime_granted": sampler.realtime_granted,
        "tick_loop": sampler.tick_loop,
        "samples": int(len(t)),
        "achieved_hz": (len(t) - 1) / (t[-1] - t[0]),
        "err_p50_ms": float(np.percentile(error, 50)),
        "err_p99_ms": float(np.percentile(error, 99)),
        "max_interval_ms": float(intervals.max()),
        "gaps_over_2x": int((intervals > 2 * period_ms).sum()),
        "dropped": sampler.dropped,
        "sampler_cpu_pct_of_core": 100.0 * child_cpu / wall if child else None,
    }


KEYS = ("achieved_hz", "err_p50_ms", "err_p99_ms", "max_interval_ms", "gaps_over_2x", "sampler_cpu_pct_of_core")


def summarize(results: list[dict]) -> list[dict]:
    """Per (design, period): the median of each figure over the rounds, and the worst p99 and longest interval."""
    out = []
    for key in dict.fromkeys((r["design"], r["period_ms"]) for r in results):
        runs = [r for r in results if (r["design"], r["period_ms"]) == key]
        row = {
            "design": key[0],
            "period_ms": key[1],
            "rounds": len(runs),
            "tick_loop": runs[0]["tick_loop"],
            "realtime_granted": runs[0]["realtime_granted"],
        }
        row |= {k: float(np.median([r[k] for r in runs])) if runs[0][k] is not None else None for k in KEYS}
        row["err_p99_ms_worst"] = max(r["err_p99_ms"] for r in runs)
        row["max_interval_ms_worst"] = max(r["max_interval_ms"] for r in runs)
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--periods", default="5,1")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the designs' order rotating each round")
    args = parser.parse_args()
    results = []
    rails = fake_rails(Path(tempfile.mkdtemp()))
    for round_ in range(args.rounds):
        order = DESIGNS[round_ % len(DESIGNS) :] + DESIGNS[: round_ % len(DESIGNS)]
        for period in [float(p) for p in args.periods.split(",")]:
            for design in order:
                results.append(run(design, period, args.seconds, rails))
    print(
        f"{'design':<19} {'period':>6} {'Hz':>7} {'p50 ms':>7} {'p99 ms':>7} {'worst p99':>9} {'max ms':>7} "
        f"{'gaps':>5} {'cpu %':>6}   (median of {args.rounds} rounds; worst = over rounds)"
    )
    summary = summarize(results)
    for r in summary:
        cpu = r["sampler_cpu_pct_of_core"]
        print(
            f"{r['design']:<19} {r['period_ms']:>4g}ms {r['achieved_hz']:7.1f} {r['err_p50_ms']:7.3f} "
            f"{r['err_p99_ms']:7.3f} {r['err_p99_ms_worst']:9.3f} {r['max_interval_ms_worst']:7.2f} "
            f"{r['gaps_over_2x']:5.0f} {cpu if cpu is not None else float('nan'):6.1f}"
        )
    save(
        "sampling",
        {
            "command": f"python sampling.py --seconds {args.seconds:g} --periods {args.periods} --rounds {args.rounds}",
            "cores": os.cpu_count(),
            "seconds": args.seconds,
            "summary": summary,
            "results": results,
        },
    )


if __name__ == "__main__":
    main()
