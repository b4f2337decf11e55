"""Step time of one zoo model at every batch size of a grid, measured interleaved in one process: the truth
with the machine's drift shared by every size.

A fresh process per size (what a sweep does) measures each size at another minute, and on a machine others
share the speed moves between minutes (on the 2-core VM these benchmarks run on, one configuration's mean
moved by 36-55% between runs a minute apart; within the minute, by a few percent). Here every size has its
own model instance (its own traced step at a fixed batch shape, as in a sweep child), and the sizes take turns
in rounds, in a shuffled order each round: a few steps of each size per round (at least ``CHUNK_S`` of
training), so a slow minute slows every size alike. A size's step time is the mean over rounds of its
round's mean step time, and its 95% interval is that of the round means (steps within a round are not
independent: they share the round's speed). Rounds go on until every size's interval is within --precision
or --max-s has passed.

    python benchmarks/_interleaved.py MODEL --grid 1,2,4 [--precision 0.02] [--max-s 240]

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--grid", required=True)
    parser.add_argument("--precision", type=float, default=0.02)
    parser.add_argument("--min-rounds", type=int, default=10)
    parser.add_argument("--max-s", type=float, default=240.0)
    args = parser.parse_args()
    grid = [int(b) for b in args.grid.split(",")]

    from tf_mobileperf import zoo
    from tf_mobileperf.analysis.step_model import ci95

    spec = zoo.get(args.model)
    size = INPUT_SIZE.get(args.model)
    models, batches, per_round = {}, {}, {}
    for b in grid:
        models[b] = spec.build(size)
        x, y = spec.synthetic(b, 4, size)
        batches[b] = [(x[i * b : (i + 1) * b], y[i * b : (i + 1) * b]) for i in range(4)]
        started = time.perf_counter()
        for i in range(WARMUP_STEPS):
            models[b].train_on_batch(*batches[b][i % 4])
        step_s = (time.perf_counter() - started) / WARMUP_STEPS  # the first includes tracing: an upper bound
        per_round[b] = max(2, math.ceil(CHUNK_S / max(step_s, 1e-4)))
    means: dict[int, list[float]] = {b: [] for b in grid}
    order = list(grid)
    rng = random.Random(0)
    started = time.monotonic()

    def precise(b: int) -> bool:
        interval = ci95(means[b])
        return interval is not None and (interval[2] - interval[1]) / 2 / interval[0] <= args.precision

    rounds = 0
    while rounds < args.min_rounds or (time.monotonic() - started < args.max_s and not all(precise(b) for b in grid)):
        rng.shuffle(order)
        for b in order:
            took = []
            for i in range(per_round[b]):
                t0 = time.perf_counter()
                models[b].train_on_batch(*batches[b][i % 4])
                took.append(time.perf_counter() - t0)
            means[b].append(sum(took) / len(took))
        rounds += 1
        if rounds == 2:  # the first rounds were partly warm-up of their own: re-size the chunks on real steps
            per_round = {b: max(2, math.ceil(CHUNK_S / means[b][-1])) for b in grid}
    rows = []
    for b in grid:
        mean, low, high = ci95(means[b][1:])  # round 1 dropped: caches and allocators still settling
        rows.append(
            {
                "batch_size": b,
                "success": True,
                "step_time_s_mean": mean,
                "step_time_s_ci95": [low, high],
                "step_time_precision_reached": (high - low) / 2 / mean <= args.precision,
                "rounds": len(means[b]) - 1,
                "steps_per_round": per_round[b],
            }
        )
    print(json.dumps({"rows": rows, "seconds": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
