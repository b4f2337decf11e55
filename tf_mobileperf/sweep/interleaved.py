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
(or each size short of it has run --max-steps steps) or --max-s has passed.

Drift. The sizes share the machine's speed, so their ratios hold while the speed moves; their level does not.
Each round's speed is the mean over sizes of the round's step time against that size's mean, and the run's
``drift`` is the second half of the rounds against the first (``steps.precision.drift``). ``mobileperf
predict`` widens its intervals by it: a run made later meets a machine that has moved at least as much.

    python -m tf_mobileperf.sweep.interleaved MODEL --grid 1,2,4 --out times.json [--input-size N]
        [--precision 0.02] [--min-rounds 10] [--max-s 240]

Writes one JSON object: {"rows": [{batch_size, step_time_s_mean, step_time_s_ci95, rounds, ...}], "drift",
"seconds"}. ``predict_times`` runs it as a child of ``mobileperf predict`` and ``with_times`` puts its step
times into a sweep's rows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: Training per size per round, at least (s): a chunk much shorter than this is mostly the switch between sizes.
CHUNK_S = 0.06
WARMUP_STEPS = 3


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
            self.batches[b] = [(_rows(x, i * b, (i + 1) * b), _rows(y, i * b, (i + 1) * b)) for i in range(4)]
            started = time.perf_counter()
            for i in range(WARMUP_STEPS):
                self.models[b].train_on_batch(*self.batches[b][i % 4])
            step_s = (time.perf_counter() - started) / WARMUP_STEPS  # the first includes tracing: an upper bound
            self.per_round[b] = max(2, math.ceil(CHUNK_S / max(step_s, 1e-4)))

    def chunk(self, b: int) -> float:
        """Trains one round's steps of a batch size.

        Args:
            b: The batch size.

        Returns:
            Their mean step time, in seconds.
        """
        took = []
        for i in range(self.per_round[b]):
            t0 = time.perf_counter()
            self.models[b].train_on_batch(*self.batches[b][i % 4])
            took.append(time.perf_counter() - t0)
        return sum(took) / len(took)


def _rows(data, start: int, stop: int):
    """Samples ``start:stop`` of an array, or of each array of a model with several inputs (nmt's: a tuple)."""
    if isinstance(data, dict):
        return {name: array[start:stop] for name, array in data.items()}
    if isinstance(data, (tuple, list)):
        return type(data)(array[start:stop] for array in data)
    return data[start:stop]


def measure(
    model: str,
    grid: list[int],
    input_size: int | None,
    precision: float,
    min_rounds: int,
    max_s: float,
    max_steps: int | None = None,
) -> dict:
    """Measures the sizes of ``grid`` in rounds (see the module docstring) until each is precise or out of steps.

    Args:
        model, input_size: The zoo's model and its input size (None: the model's default).
        grid: The batch sizes.
        precision: The 95% interval's relative half-width at which a size's mean is known.
        min_rounds: Rounds run whatever the precision (the first is left out of the means: at least 3).
        max_s, max_steps: Rounds stop after ``max_s`` seconds, or once each size short of ``precision`` has run
            ``max_steps`` steps (None: no cap).

    Returns:
        {"rows": one row per size (``_row``), "drift": ``round_drift`` of the rounds, "seconds": their time}.

    Raises:
        ValueError: ``min_rounds`` under 3.
    """
    from tf_mobileperf.steps.precision import ci95, relative_half_width

    if min_rounds < 3:  # round 1 is dropped, and a mean's interval needs two more
        raise ValueError(f"min_rounds must be at least 3 (two rounds after the first), got {min_rounds}")
    sizes = Sizes(model, grid, input_size)
    means: dict[int, list[float]] = {b: [] for b in grid}
    steps = dict.fromkeys(grid, 0)
    order = list(grid)
    rng = random.Random(0)
    started = time.monotonic()

    def short(b: int) -> bool:  # short of the precision, with steps left to run
        interval = ci95(means[b][1:])
        precise = interval is not None and relative_half_width(*interval) <= precision
        return not precise and (max_steps is None or steps[b] < max_steps)

    rounds = 0
    while rounds < min_rounds or (time.monotonic() - started < max_s and any(short(b) for b in grid)):
        rng.shuffle(order)
        for b in order:
            means[b].append(sizes.chunk(b))
            steps[b] += sizes.per_round[b] if rounds else 0  # the first round is left out of the mean
        rounds += 1
        if rounds == 2:  # the first rounds were partly warm-up of their own: re-size the chunks on real steps
            sizes.per_round = {b: max(2, math.ceil(CHUNK_S / means[b][-1])) for b in grid}
    rows = [_row(b, means[b], steps[b], sizes.per_round[b], precision) for b in grid]
    return {"rows": rows, "drift": round_drift(means), "seconds": round(time.monotonic() - started, 1)}


def _row(batch_size: int, means: list[float], steps: int, per_round: int, precision: float) -> dict:
    """A size's row: the mean of its rounds' step times (round 1 dropped: caches and allocators still settling)
    with its 95% interval, whether that reached ``precision``, and its rounds and steps."""
    from tf_mobileperf.steps.precision import ci95, relative_half_width

    interval = ci95(means[1:])
    assert interval is not None, "measure runs at least 3 rounds"
    mean, low, high = interval
    return {
        "batch_size": batch_size,
        "success": True,
        "step_time_s_mean": mean,
        "step_time_s_ci95": [low, high],
        "step_time_precision_reached": relative_half_width(mean, low, high) <= precision,
        "rounds": len(means) - 1,
        "steps_per_round": per_round,
        "steps_measured": steps,
    }


def round_drift(means: dict[int, list[float]]) -> float | None:
    """The machine's speed drift over the rounds, the first left out: each round's step times against each
    size's mean, averaged over the sizes, the second half of the rounds against the first.

    Args:
        means: Batch size -> its mean step time of each round, in seconds.

    Returns:
        The second half's mean over the first's, minus 1 (0.05: 5% slower); None with fewer than 4 rounds
        after the first.
    """
    from tf_mobileperf.steps.precision import drift

    rounds = np.array([m[1:] for m in means.values()], dtype=float)
    if rounds.size == 0:
        return None
    return drift((rounds / rounds.mean(axis=1, keepdims=True)).mean(axis=0))


def predict_times(model: str, sizes: list[int], config, max_s: float) -> dict:
    """``measure``'s result, run in a child process.

    Args:
        model: A zoo name.
        sizes: The batch sizes.
        config: The predict's ``SweepConfig``: its input size, precision (None: 0.02), ``max_steps`` and
            ``timeout_s``.
        max_s: The child's ``--max-s``: after it, no round starts once the fewest rounds are done, in seconds.

    Returns:
        ``measure``'s result, as JSON read back.

    Raises:
        RuntimeError: the child failed or ran past the config's timeout; the message says how.
    """
    from tf_mobileperf.sweep import launch

    with tempfile.TemporaryDirectory(prefix="mobileperf-interleaved-") as folder:
        out = Path(folder) / "times.json"
        args = [model, "--grid", ",".join(map(str, sizes)), "--out", str(out), "--max-s", str(max_s)]
        args += ["--precision", str(config.precision or 0.02)]
        if config.max_steps is not None:
            args += ["--max-steps", str(config.max_steps)]
        if config.input_size is not None:
            args += ["--input-size", str(config.input_size)]
        done = launch.run(args, None, config.timeout_s, module=__name__)
        if done.returncode != 0 or not out.exists():
            ended = "ran past its timeout" if done.returncode is None else f"exited with {done.returncode}"
            tail = done.stderr.strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"the interleaved run of {model} {ended}: {tail[0]}")
        return json.loads(out.read_text())


#: What the interleaved run gives a sweep's row.
TIME_KEYS = ("step_time_s_mean", "step_time_s_ci95", "step_time_precision_reached", "steps_measured")


def with_times(rows: list[dict], timed: dict) -> list[dict]:
    """A sweep's rows with the step times of an interleaved run.

    Args:
        rows: The sweep's rows.
        timed: ``predict_times``'s result.

    Returns:
        ``rows`` in order, each successful row of a size ``timed`` holds replaced by a copy with ``TIME_KEYS``
        from ``timed``, its energy per step its own mean power (from its fresh child) times the new step time.
    """
    by_size = {r["batch_size"]: r for r in timed["rows"]}
    out = []
    for row in rows:
        new = by_size.get(row["batch_size"])
        if not (row.get("success") and new):
            out.append(row)
            continue
        merged = dict(row) | {k: new[k] for k in TIME_KEYS}
        if row.get("energy_per_step_j") is not None and row.get("step_time_s_mean"):
            merged["energy_per_step_j"] = row["energy_per_step_j"] / row["step_time_s_mean"] * new["step_time_s_mean"]
        out.append(merged)
    return out


def main() -> None:
    """Runs ``measure`` with the options on the command line and writes its result to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--grid", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--input-size", type=int, default=None)
    parser.add_argument("--precision", type=float, default=0.02)
    parser.add_argument("--min-rounds", type=int, default=10)
    parser.add_argument("--max-s", type=float, default=240.0)
    parser.add_argument("--max-steps", type=int, default=None)
    args = parser.parse_args()
    grid = [int(b) for b in args.grid.split(",")]
    result = measure(args.model, grid, args.input_size, args.precision, args.min_rounds, args.max_s, args.max_steps)
    args.out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
