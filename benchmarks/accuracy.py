"""Energy error against exact integrals: the seed's rectangle rule beside our
boundary-clipped trapezoid, for constant, square-wave and sine power at 1, 5
and 20 ms sampling periods (synthetic signals, sampling times with jitter).

The seed's rule: every sample inside a step adds ``power * period``. Steps
are 23 ms long on average (a short training step), so the edges matter.
Prints a table; writes benchmarks/results/accuracy.json.
"""

from __future__ import annotations

import numpy as np

from tf_mobileperf.steps.integrate import window_energy

from _results import save  # noqa: E402

SECONDS = 60.0
SIGNALS = {
    # name: (power(t), exact integral F(t))
    "constant 5 W": (lambda t: np.full_like(t, 5.0), lambda t: 5.0 * t),
    "square 2/8 W, 7 Hz": (
        lambda t: np.where((t * 7.0) % 1.0 < 0.5, 8.0, 2.0),
        lambda t: 2.0 * t + 6.0 * (np.floor(t * 7.0) / 7.0 * 0.5 + np.minimum((t * 7.0) % 1.0, 0.5) / 7.0),
    ),
    "sine 5±3 W, 3 Hz": (
        lambda t: 5.0 + 3.0 * np.sin(2 * np.pi * 3.0 * t),
        lambda t: 5.0 * t - 3.0 * np.cos(2 * np.pi * 3.0 * t) / (2 * np.pi * 3.0),
    ),
}


def steps(rng):
    durations = rng.uniform(0.013, 0.033, int(SECONDS / 0.025))
    gaps = rng.uniform(0.0005, 0.002, len(durations))
    starts = 1.0 + np.cumsum(durations + gaps) - durations
    keep = starts + durations < SECONDS - 1.0
    return starts[keep], (starts + durations)[keep]


def rectangle_rule(t, p, starts, ends, period):
    lo, hi = np.searchsorted(t, starts, "left"), np.searchsorted(t, ends, "right")
    cum = np.concatenate([[0.0], np.cumsum(p * period)])
    return cum[hi] - cum[lo]


def main() -> None:
    rng = np.random.default_rng(0)
    starts, ends = steps(rng)
    rows = []
    print(
        f"{'signal':<22} {'period':>6} {'seed rule: total err':>21} {'per-step p99':>12} "
        f"{'ours: total err':>16} {'per-step p99':>12}"
    )
    for name, (power, exact_f) in SIGNALS.items():
        exact = exact_f(ends) - exact_f(starts)
        for period_ms in (1, 5, 20):
            period = period_ms / 1000.0
            t = np.arange(0, SECONDS, period) + rng.uniform(0, period * 0.1, int(np.ceil(SECONDS / period)))
            p = power(t)
            seed = rectangle_rule(t, p, starts, ends, period)
            ours, _ = window_energy(t, p, starts, ends, max_gap_s=3 * period)
            row = {
                "signal": name,
                "period_ms": period_ms,
                "seed_total_error_pct": 100 * abs(seed.sum() - exact.sum()) / exact.sum(),
                "seed_step_error_p99_pct": float(np.percentile(100 * np.abs(seed - exact) / exact, 99)),
                "ours_total_error_pct": 100 * abs(ours.sum() - exact.sum()) / exact.sum(),
                "ours_step_error_p99_pct": float(np.percentile(100 * np.abs(ours - exact) / exact, 99)),
            }
            rows.append(row)
            print(
                f"{name:<22} {period_ms:>4} ms {row['seed_total_error_pct']:>20.3f}% "
                f"{row['seed_step_error_p99_pct']:>11.2f}% "
                f"{row['ours_total_error_pct']:>15.4f}% {row['ours_step_error_p99_pct']:>11.2f}%"
            )
    save("accuracy", rows)


if __name__ == "__main__":
    main()
