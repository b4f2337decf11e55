"""Prediction error against the truth: zoo models measured at the batch sizes ``mobileperf predict`` chooses,
predicted at every other size of the grid, each of which is run for real too.

Every run is a sweep configuration (a fresh child each) that trains until the 95% interval of its mean step time
is within --precision of the mean (at least 10 measured steps, at most --max-steps), with power replayed from a
recorded tegrastats log (this machine has no power sensor), so that energy is measured too. Sizes are chosen by
``step_model.choose_sizes`` (1, 4, 16, doubling until the device saturates, the gaps where the fit is least
certain; at most --budget); the truth is every size of the grid, including those not chosen. For each target:
the errors of step time, energy per step and peak RSS, and whether the stated 95% interval of step time holds
the measured mean. Then the CNN at 224x224 under a 1 GiB memory limit: the out-of-memory verdicts (fixed steps).
Prints a table and writes benchmarks/results/predict.json.

    python benchmarks/predict.py [--models cnn,lstm,dqn] [--precision 0.03] [--max-steps 150] [--repeat 4]

With --interleaved, the truth is every size 1..64 measured in one process, the sizes taking turns
(``tf_mobileperf.sweep.interleaved``): on a machine whose speed drifts between minutes this separates the law's
error from the drift; step time only (no energy, no memory: one process holds every size).

On a machine others share, their load moves a run's step time: ``--repeat`` measures how much (the same
configuration run several times), and running the benchmark under ``nice -n -5`` keeps most of it out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from tf_mobileperf.analysis.predict import describe, largest_fitting_batch, predict
from tf_mobileperf.analysis.size_choice import choose_sizes
from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.interleaved import predict_times
from tf_mobileperf.sweep.runner import sweep
from tf_mobileperf.sweep.search import search_largest

from _results import save  # noqa: E402

#: The truth: every one of these is run (all of 1..64 would take 64 fresh processes per model, about 15 minutes
#: each on this 2-core machine; these 14 cover it, every gap at most 8 above 16).
GRID = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 48, 56, 64]
#: Input sizes of the models that take one (this benchmark runs cnn; benchmarks/predict_users.py the others too).
INPUT_SIZE = {"cnn": 64, "dcgan": 32, "resnet50": 32, "bert": 32}
#: The truth when measured interleaved in one process (``tf_mobileperf.sweep.interleaved``): every size 1..64.
ALL = list(range(1, 65))
#: Power replayed from a recorded TX2 log (5 records), slowed 20x to cover a run of up to 100 s.
REPLAY = "replay:tests/data/tx2_tegrastats.log@0.05"


def error(predicted: float | None, true: float | None) -> float | None:
    return None if predicted is None or not true else 100.0 * (predicted - true) / true


def _stats(values: list[float | None]) -> dict:
    got = [abs(v) for v in values if v is not None]
    return {
        "median_abs_pct": statistics.median(got) if got else None,
        "max_abs_pct": max(got) if got else None,
        "n": len(got),
    }


def sweep_config(model: str, args: argparse.Namespace, purpose: str) -> SweepConfig:
    """A fresh folder and the benchmark's settings: 3 warm-up steps, then until the mean is precise."""
    return SweepConfig(
        out=Path(tempfile.mkdtemp(prefix=f"{purpose}-{model}-")),
        warmup_steps=3,
        steps=13,
        input_size=INPUT_SIZE.get(model),
        sensors=args.sensors,
        precision=args.precision,
        max_steps=args.max_steps,
    )


def interleaved(model: str, args: argparse.Namespace) -> list[dict]:
    """Every grid size's step time measured in one process, the sizes taking turns
    (``tf_mobileperf.sweep.interleaved``)."""
    return predict_times(model, ALL, sweep_config(model, args, "interleaved"), args.interleaved_s)["rows"]


def one_model(model: str, args: argparse.Namespace, stored: list[dict] | None = None) -> dict:
    """``stored``: the rows of an earlier run of this benchmark (--refit): sizes found there are not run again.
    With --interleaved, every size is measured first, in one process (the truth with the drift shared)."""
    config = sweep_config(model, args, "predict")
    started = time.monotonic()
    if args.interleaved and not stored:
        stored = interleaved(model, args)
    rows: dict[int, dict] = {r["batch_size"]: r for r in stored or []}

    def run(b: int) -> dict:
        if b not in rows:
            rows[b] = sweep([model], [b], config)[0]
        return rows[b]

    def measure(b: int):
        row = run(b)
        ci = row.get("step_time_s_ci95")
        return (row["step_time_s_mean"], tuple(ci) if ci else None) if row.get("success") else None

    grid = ALL if args.interleaved else GRID
    chosen, why, _ = choose_sizes(measure, max(grid), args.budget)
    choose_s = time.monotonic() - started
    for b in grid:
        run(b)
    measured = [rows[b] for b in chosen]
    targets = [b for b in grid if b not in chosen]
    out = {
        "model": model,
        "input_size": config.input_size,
        "chosen": chosen,
        "why_chosen": why,
        "measuring_s": round(choose_s, 1),
        "fitted": describe(measured),
        "targets": [],
        "rows": [
            {
                k: r.get(k)
                for k in (
                    "batch_size",
                    "success",
                    "cause",
                    "step_time_s_mean",
                    "step_time_s_ci95",
                    "steps_measured",
                    "step_time_precision_reached",
                    "rounds",
                    "energy_per_step_j",
                    "proc_peak_gb",
                    "rss_at_start_gb",
                )
            }
            for r in rows.values()
        ],
    }
    for p in predict(measured, targets):
        true = rows[p.batch_size]
        if not true.get("success"):
            out["targets"].append({"batch_size": p.batch_size, "trained": False, "cause": true.get("cause")})
            continue
        ci = p.step_time_s_ci95
        out["targets"].append(
            {
                "batch_size": p.batch_size,
                "trained": True,
                "step_time_error_pct": error(p.step_time_s, true.get("step_time_s_mean")),
                "step_time_in_interval": ci is not None and ci[0] <= true["step_time_s_mean"] <= ci[1],
                "step_time_interval_pct": None if ci is None else 100 * (ci[1] - ci[0]) / 2 / p.step_time_s,
                "energy_error_pct": error(p.energy_per_step_j, true.get("energy_per_step_j")),
                "energy_in_interval": (
                    p.energy_per_step_j_ci95 is not None
                    and true.get("energy_per_step_j") is not None
                    and p.energy_per_step_j_ci95[0] <= true["energy_per_step_j"] <= p.energy_per_step_j_ci95[1]
                ),
                "energy_unavailable": p.energy_unavailable,
                "peak_rss_error_pct": error(p.proc_peak_gb, true.get("proc_peak_gb")),
                "truth_precision_reached": true.get("step_time_precision_reached"),
            }
        )
    trained = [t for t in out["targets"] if t["trained"]]
    out["step_time"] = _stats([t["step_time_error_pct"] for t in trained]) | {
        "in_interval": sum(t["step_time_in_interval"] for t in trained)
    }
    out["energy"] = _stats([t["energy_error_pct"] for t in trained]) | {
        "in_interval": sum(t["energy_in_interval"] for t in trained)
    }
    out["peak_rss"] = _stats([t["peak_rss_error_pct"] for t in trained])
    out["total_s"] = round(time.monotonic() - started, 1)
    return out


def oom_case(args: argparse.Namespace) -> dict:
    """The CNN at 224x224 under 1 GiB: memory from 1, 4, 16 (fixed 6 steps), verdicts at 8..64, as before."""
    limit, targets = 2**30, [8, 16, 32, 64]
    config = SweepConfig(
        out=Path(tempfile.mkdtemp(prefix="predict-oom-")), steps=6, warmup_steps=2, input_size=224, memory_limit=limit
    )
    rows = {r["batch_size"]: r for r in sweep(["cnn"], [1, 4, 16] + targets, config)}
    measured = [rows[b] for b in (1, 4, 16)]
    verdicts = []
    for p in predict(measured, targets, limit):
        true = rows[p.batch_size]
        verdicts.append(
            {
                "batch_size": p.batch_size,
                "trained": true["success"],
                "oom_predicted": p.oom,
                "oom_possible": p.oom_possible,
                "right": p.oom == (not true["success"]),
                "peak_rss_error_pct": error(p.proc_peak_gb, true.get("proc_peak_gb")) if true["success"] else None,
            }
        )
    truth = max((b for b, r in rows.items() if r["success"]), default=None)
    start = largest_fitting_batch(measured, limit) or 1
    fits = lambda b: truth is not None and b <= truth  # noqa: E731  (the measured outcome)
    return {
        "model": "cnn",
        "input_size": 224,
        "memory_limit_bytes": limit,
        "verdicts": verdicts,
        "find_max_batch": {
            "largest_trained_on_grid": truth,
            "predicted_start": start,
            "runs_from_1": search_largest(fits, 1)[1],
            "runs_from_prediction": search_largest(fits, start)[1] + 3,
        },
    }


def repeatability(args: argparse.Namespace, runs: int = 4, batch_size: int = 16) -> list[dict]:
    """The same configuration run ``runs`` times (a fresh child each, as every measurement): how far its measured
    mean step time moves from run to run, which bounds how well any prediction can match a single run."""
    out = []
    for model in args.models.split(","):
        means = []
        for _ in range(runs):
            config = sweep_config(model, args, "repeat")
            means.append(sweep([model], [batch_size], config)[0]["step_time_s_mean"])
        mid = statistics.median(means)
        out.append(
            {
                "model": model,
                "batch_size": batch_size,
                "means_s": means,
                "spread_pct": 100 * (max(means) - min(means)) / mid,
                "largest_off_median_pct": 100 * max(abs(m / mid - 1) for m in means),
            }
        )
        print(
            f"{model} batch {batch_size}, {runs} runs: means {[round(m * 1e3, 2) for m in means]} ms, "
            f"spread {out[-1]['spread_pct']:.1f}% of the median",
            flush=True,
        )
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="cnn,lstm,dqn")
    parser.add_argument("--precision", type=float, default=0.03)
    parser.add_argument("--max-steps", type=int, default=150)
    parser.add_argument("--budget", type=int, default=7)
    parser.add_argument("--sensors", default=REPLAY)
    parser.add_argument("--no-oom", action="store_true", help="skip the memory-limit case")
    parser.add_argument(
        "--repeat", type=int, default=0, help="first run batch 16 of each model this many times: the run-to-run noise"
    )
    parser.add_argument(
        "--interleaved",
        action="store_true",
        help="measure every size in one process, taking turns (the machine's drift shared by all sizes), "
        "instead of a fresh sweep child each; step time only",
    )
    parser.add_argument("--interleaved-s", type=float, default=240.0, help="at most this long per model, interleaved")
    parser.add_argument("--name", default="predict", help="results file: benchmarks/results/NAME.json")
    parser.add_argument(
        "--refit",
        type=Path,
        default=None,
        help="a results file of an earlier run: fit and choose again on its measurements, running "
        "only the sizes it lacks",
    )
    args = parser.parse_args()
    stored = {}
    if args.refit:
        earlier = json.loads(args.refit.read_text())
        stored = {m["model"]: m["rows"] for m in earlier["models"]}
        args.models = ",".join(stored)
    results = {
        "grid": GRID,
        "precision": args.precision,
        "max_steps": args.max_steps,
        "budget": args.budget,
        "sensors": args.sensors,
        "nice": os.nice(0),
        "interleaved": args.interleaved,
        "models": [],
    }
    if args.refit:  # every re-fit says of what: its rows are that file's, the fits are new
        results["refit_of"] = str(args.refit)
    if args.repeat and not args.refit:
        results["repeatability"] = repeatability(args, args.repeat)
        save(args.name, results)
    for model in args.models.split(","):
        results["models"].append(one_model(model, args, stored.get(model)))
        save(args.name, results)
        m = results["models"][-1]
        print(f"{model}: measured {m['chosen']} ({m['measuring_s']} s); targets {len(m['targets'])}", flush=True)
        for line in m["why_chosen"]:
            print(f"    {line}", flush=True)
    if args.refit and "oom" in earlier:
        results["oom"] = earlier["oom"]
        results["repeatability"] = earlier.get("repeatability")
    elif not args.no_oom:
        results["oom"] = oom_case(args)
        save(args.name, results)
    print(
        f"\n{'model':<6} {'measured':<22} {'time med':>9} {'time max':>9} {'in 95%':>7} {'energy med':>11} "
        f"{'energy max':>11} {'RSS max':>8}"
    )
    for m in results["models"]:
        n = m["step_time"]["n"]
        print(
            f"{m['model']:<6} {','.join(map(str, m['chosen'])):<22} {_pct(m['step_time']['median_abs_pct']):>9} "
            f"{_pct(m['step_time']['max_abs_pct']):>9} {m['step_time']['in_interval']:>3}/{n:<3} "
            f"{_pct(m['energy']['median_abs_pct']):>11} {_pct(m['energy']['max_abs_pct']):>11} "
            f"{_pct(m['peak_rss']['max_abs_pct']):>8}"
        )
    if "oom" in results:
        print(
            "cnn 224 under 1 GiB:",
            [(v["batch_size"], v["trained"], v["oom_predicted"], v["right"]) for v in results["oom"]["verdicts"]],
            results["oom"]["find_max_batch"],
        )
    print(f"-> {save(args.name, results)}")


if __name__ == "__main__":
    main()
