"""Prediction error against the truth: zoo models measured at a few batch
sizes, predicted at larger ones, which are then measured too.

For each case, every batch size runs once (a fresh child each, as in the
sweep); predictions are made from the measured subsets 1,2,4 and 1,4,16 and
compared with the targets' measured peak RSS and step time, and, under a
memory limit, with whether they ran out of memory. Also how many runs
find-max-batch saves when it starts at the predicted limit. Prints a table
and writes benchmarks/results/predict.json.

    python benchmarks/predict.py [--steps 6]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tf_mobileperf.tools.predict import largest_fitting_batch, predict
from tf_mobileperf.tools.search import search_largest
from tf_mobileperf.tools.sweep import SweepConfig, sweep
from _results import save  # noqa: E402

CASES = [  # model, input size, memory limit, targets
    ("cnn", 64, None, [8, 16, 32, 64]),
    ("lstm", None, None, [8, 16, 32, 64]),
    ("dqn", None, None, [8, 16, 32, 64]),
    ("cnn", 224, 2**30, [8, 16, 32, 64]),
]
MEASURE = {"1,2,4": [1, 2, 4], "1,4,16": [1, 4, 16]}


def error(predicted: float | None, true: float | None) -> float | None:
    return None if predicted is None or not true else 100.0 * (predicted - true) / true


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    results = []
    for model, size, limit, targets in CASES:
        config = SweepConfig(out=Path(tempfile.mkdtemp()), steps=args.steps, warmup_steps=2, input_size=size,
                             memory_limit=limit)
        sizes = sorted({b for m in MEASURE.values() for b in m} | set(targets))
        rows = {r["batch_size"]: r for r in sweep([model], sizes, config)}
        results.append({"model": model, "input_size": size, "measured_rows": [
            {k: r.get(k) for k in ("batch_size", "success", "proc_peak_gb", "rss_at_start_gb", "step_time_s_mean", "cause")}
            for r in rows.values()]})
        for label, measured in MEASURE.items():
            fitted = [rows[b] for b in measured]
            for p in predict(fitted, targets, limit):
                true = rows[p.batch_size]
                results.append({"model": model, "input_size": size, "memory_limit_bytes": limit, "measured": label,
                                "batch_size": p.batch_size, "trained": true["success"],
                                "peak_rss_error_pct": error(p.proc_peak_gb, true.get("proc_peak_gb")) if true["success"] else None,
                                "step_time_error_pct": error(p.step_time_s, true.get("step_time_s_mean")) if true["success"] else None,
                                "oom_predicted": p.oom, "oom_right": None if p.oom is None else p.oom == (not true["success"])})
                r = results[-1]
                print(f"{model:<5} {str(size):>4} {label:>7} bs {p.batch_size:>3}  trained {str(r['trained']):<5} "
                      f"peak RSS {r['peak_rss_error_pct'] if r['peak_rss_error_pct'] is None else round(r['peak_rss_error_pct'], 1)}%  "
                      f"step time {r['step_time_error_pct'] if r['step_time_error_pct'] is None else round(r['step_time_error_pct'], 1)}%  "
                      f"oom predicted {p.oom} right {r['oom_right']}", flush=True)
        if limit:
            truth = max((b for b, r in rows.items() if r["success"]), default=None)
            start = largest_fitting_batch([rows[b] for b in MEASURE["1,4,16"]], limit) or 1
            fits = lambda b: truth is not None and b <= truth  # noqa: E731  (the measured outcome)
            results.append({"model": model, "input_size": size, "find_max_batch": {
                "largest_trained_on_grid": truth, "predicted_start": start,
                "runs_from_1": search_largest(fits, 1)[1], "runs_from_prediction": search_largest(fits, start)[1] + 3}})
            print("find-max-batch:", results[-1]["find_max_batch"], flush=True)
    save("predict", results)


if __name__ == "__main__":
    main()
