"""Join time against samples and steps: 10^4..10^6 samples x 10^3..10^4 steps x 6 rails.

Target: 10^6 samples x 10^4 steps in < 0.5 s. Prints a table; writes
benchmarks/results/join.json.
"""

from __future__ import annotations

import time

import numpy as np

from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.steps.join import join

from _results import save  # noqa: E402

CHANNELS = [Channel(f"rail{i}", "power", "benchmark") for i in range(6)]


def case(samples: int, steps: int, repeats: int = 3) -> float:
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.uniform(0.0045, 0.0055, samples))
    values = rng.uniform(1, 10, (samples, len(CHANNELS)))
    edges = np.sort(rng.uniform(t[0], t[-1], 2 * steps))
    starts, ends = edges[0::2], edges[1::2]
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        join(t, values, CHANNELS, starts, ends, period_s=0.005)
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    rows = []
    print(f"{'samples':>9} {'steps':>7} {'seconds':>9}")
    for samples in (10**4, 10**5, 10**6):
        for steps in (10**3, 10**4):
            seconds = case(samples, steps)
            rows.append({"samples": samples, "steps": steps, "channels": len(CHANNELS), "seconds": seconds})
            print(f"{samples:>9} {steps:>7} {seconds:>9.4f}", flush=True)
    save("join", rows)


if __name__ == "__main__":
    main()
