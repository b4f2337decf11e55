"""Step time of one zoo model at several batch sizes, measured interleaved in one process: the sizes share the
machine's drift.

A fresh process per size (what a sweep does) measures each size at another minute, and on a machine others
share the speed moves between minutes (on the 2-core VM these benchmarks run on, one configuration's mean
moved by 36-55% between runs a minute apart; within the minute, by a few percent). Here every size has its
own model instance (its own traced step at a fixed batch shape, as in a sweep child), and the sizes take turns
in rounds, in a shuffled order each round: a few steps of each size per round (at least ``CHUNK_S`` of
training), so a slow minute slows every size alike. A size's step time is the mean over rounds of its
round's mean step time, and its 95% interval is that of the round means (steps within a round are not
independent: they share the round's speed). Rounds go on until every size's interval is within --precision
or --max-s has passed.

    python -m tf_mobileperf.sweep.interleaved MODEL --grid 1,2,4 [--precision 0.02] [--max-s 240]

Prints one JSON object: {"rows": [{batch_size, step_time_s_mean, step_time_s_ci95, rounds, steps}]}.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: Training per size per round, at least (s): a chunk much shorter than this is mostly the switch between sizes.
CHUNK_S = 0.06
WARMUP_STEPS = 3
INPUT_SIZE = {"cnn": 64}


class Sizes:
    """One model instance per batch size, each with four batches of synthetic data, warmed up.

    Args:
        model: A zoo name.
        grid: The batch sizes.
        input_size: The model's input size (None: the zoo's default).
    """

    def __init__(self, model: str, grid: list[int], input_size: int | None):
        from tf_mobileperf import zoo

        spec = zoo.get(model)
        self.models, self.batches, self.per_round = {}, {}, {}
        for b in grid:
            self.models[b] = spec.build(input_size)
            x, y = spec.synthetic(b, 4, input_size)
            self.batches[b] = [(x[i * b : (i + 1) * b], y[i * b : (i + 1) * b]) for i in range(4)]
            started = time.perf_counter()
            for i in range(WARMUP_STEPS):
                self.models[b].train_on_batch(*self.batches[b][i % 4])
            step_s = (time.perf_counter() - started) / WARMUP_STEPS  # the first includes tracing: an upper bound
            self.per_round[b] = max(2, math.ceil(CHUNK_S / max(step_s, 1e-4)))

    def chunk(self, b: int) -> float:
        """One round's steps of size ``b``: their mean step time (s)."""
        took = []
        for i in range(self.per_round[b]):
            t0 = time.perf_counter()
            self.models[b].train_on_batch(*self.batches[b][i % 4])
            took.append(time.perf_counter() - t0)
        return sum(took) / len(took)


def measure(model: str, grid: list[int], input_size: int | None, precision: float, min_rounds: int, max_s: float):
    """The rows of ``grid`` measured in rounds (see the module docstring), and the seconds the rounds took."""
    from tf_mobileperf.analysis.step_model import ci95

    sizes = Sizes(model, grid, input_size)
    means: dict[int, list[float]] = {b: [] for b in grid}
    order = list(grid)
    rng = random.Random(0)
    started = time.monotonic()

    def precise(b: int) -> bool:
        interval = ci95(means[b])
        return interval is not None and (interval[2] - interval[1]) / 2 / interval[0] <= precision

    rounds = 0
    while rounds < min_rounds or (time.monotonic() - started < max_s and not all(precise(b) for b in grid)):
        rng.shuffle(order)
        for b in order:
            means[b].append(sizes.chunk(b))
        rounds += 1
        if rounds == 2:  # the first rounds were partly warm-up of their own: re-size the chunks on real steps
            sizes.per_round = {b: max(2, math.ceil(CHUNK_S / means[b][-1])) for b in grid}
    rows = []
    for b in grid:
        interval = ci95(means[b][1:])  # round 1 dropped: caches and allocators still settling
        if interval is None:
            raise ValueError(f"min_rounds must be at least 3 (two rounds after the first), got {min_rounds}")
        mean, low, high = interval
        rows.append(
            {
                "batch_size": b,
                "success": True,
                "step_time_s_mean": mean,
                "step_time_s_ci95": [low, high],
                "step_time_precision_reached": (high - low) / 2 / mean <= precision,
                "rounds": len(means[b]) - 1,
                "steps_per_round": sizes.per_round[b],
            }
        )
    return rows, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--grid", required=True)
    parser.add_argument("--precision", type=float, default=0.02)
    parser.add_argument("--min-rounds", type=int, default=10)
    parser.add_argument("--max-s", type=float, default=240.0)
    args = parser.parse_args()
    grid = [int(b) for b in args.grid.split(",")]
    rows, seconds = measure(args.model, grid, INPUT_SIZE.get(args.model), args.precision, args.min_rounds, args.max_s)
    print(json.dumps({"rows": rows, "seconds": round(seconds, 1)}))


if __name__ == "__main__":
    main()
