"""Sampler timing while a Keras model trains on every core, designs side by side.

For each design (thread in the training process; forked process; forked
process with SCHED_FIFO) and each requested period, trains the same small
conv net for a fixed time and reports achieved rate, interval error
(p50/p99/max), rows dropped, and the sampler's CPU share of one core
(process designs: from the child's own CPU times). Prints a table and writes
benchmarks/results/sampling.json.

    python benchmarks/sampling.py [--seconds 10] [--periods 5,1]
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import numpy as np
import psutil

from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sensors import detect, SyntheticSensor
from _results import save  # noqa: E402


def train_for(seconds: float) -> None:
    import keras

    model = keras.Sequential([
        keras.Input((32, 32, 3)), keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Conv2D(32, 3, activation="relu"), keras.layers.Flatten(), keras.layers.Dense(10),
    ])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.random.rand(256, 32, 32, 3).astype("float32")
    y = np.random.randint(0, 10, 256)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        model.fit(x, y, batch_size=32, epochs=1, verbose=0)


def run(design: str, period_ms: float, seconds: float) -> dict:
    sensors = detect() + [SyntheticSensor(power_w={"synthetic_rail": lambda t: 1.0})]
    mode = "thread" if design == "thread" else "process"
    sampler = Sampler(sensors, period_ms, mode=mode, realtime=design == "process+fifo")
    wall0 = time.monotonic()
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
        "design": design, "period_ms": period_ms, "realtime_granted": sampler.realtime_granted,
        "samples": int(len(t)), "achieved_hz": (len(t) - 1) / (t[-1] - t[0]),
        "err_p50_ms": float(np.percentile(error, 50)), "err_p99_ms": float(np.percentile(error, 99)),
        "max_interval_ms": float(intervals.max()), "gaps_over_2x": int((intervals > 2 * period_ms).sum()),
        "dropped": sampler.dropped,
        "sampler_cpu_pct_of_core": 100.0 * child_cpu / wall if child else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--periods", default="5,1")
    args = parser.parse_args()
    results = []
    for period in [float(p) for p in args.periods.split(",")]:
        for design in ("thread", "process", "process+fifo"):
            results.append(run(design, period, args.seconds))
            r = results[-1]
            print(f"{r['design']:<13} {period:>4g} ms  {r['achieved_hz']:7.1f} Hz  p50 {r['err_p50_ms']:.3f}  "
                  f"p99 {r['err_p99_ms']:.3f}  max {r['max_interval_ms']:7.2f} ms  gaps {r['gaps_over_2x']:4d}  "
                  f"dropped {r['dropped']}  cpu {r['sampler_cpu_pct_of_core'] or float('nan'):.1f}%", flush=True)
    save("sampling", {"cores": os.cpu_count(), "seconds": args.seconds, "results": results})


if __name__ == "__main__":
    main()
