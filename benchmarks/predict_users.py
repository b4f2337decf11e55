"""`mobileperf predict` checked the way a user checks it: predict the large sizes from the small ones, then
run the large sizes for real just before and just after, in fresh `sweep` children, and average the two.

Per model: the truth at the targets from `sweep` (fresh children, each until its mean step time is known to
--precision or --max-steps), then `mobileperf predict --measure 1,2,4,8,16 --target 32,64` exactly as a user
runs it (its fresh children for memory and power, its step times in turns in one child), then the truth
again. The truth is the mean of the two; their difference is the machine's drift over the prediction, shown
beside the errors. Power is replayed from a recorded tegrastats log (this machine has no power sensor), so
energy is predicted and checked the same way.

Models: cnn (64x64) and the char-LSTM, which the step-time law was designed on; and validation models the law
was not shaped on, checked without changing it (--models): resnet50 (32x32) and the small BERT (sequences of 32),
since the law's shapes came to be averaged (dcgan and nmt validated the law of one shape before it:
benchmarks/results/predict_users_one_shape.json).

    python benchmarks/predict_users.py [--models cnn,lstm,resnet50,bert] [--precision 0.03] [--max-steps 400]

Prints a table and writes benchmarks/results/predict_users.json (with the commit, command and date).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
from pathlib import Path

from predict import INPUT_SIZE, REPLAY, sweep_config

from tf_mobileperf.cli.parser import main as mobileperf
from tf_mobileperf.sweep.runner import sweep

from _results import save

MEASURE, TARGETS = [1, 2, 4, 8, 16], [32, 64]
#: The models the step-time law was designed on (docs/sweeps.md); the others validate it.
DESIGN = {"cnn", "lstm", "dqn"}


def truth(model: str, args: argparse.Namespace, when: str) -> dict[int, dict]:
    """The targets run for real in fresh sweep children, with benchmarks/predict.py's settings."""
    return {r["batch_size"]: r for r in sweep([model], TARGETS, sweep_config(model, args, f"truth-{when}"))}


def predicted(model: str, args: argparse.Namespace) -> tuple[dict, str]:
    """`mobileperf predict` as a user runs it: its prediction.json and what it printed."""
    out = Path(tempfile.mkdtemp(prefix=f"predict-{model}-"))
    argv = ["predict", "--model", model, "--measure", ",".join(map(str, MEASURE))]
    argv += ["--target", ",".join(map(str, TARGETS)), "--precision", str(args.precision)]
    argv += ["--max-steps", str(args.max_steps), "--sensors", args.sensors, "--out", str(out)]
    if model in INPUT_SIZE:
        argv += ["--input-size", str(INPUT_SIZE[model])]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        if mobileperf(argv) != 0:
            raise RuntimeError(f"mobileperf predict failed for {model}: {printed.getvalue()[-500:]}")
    return json.loads((out / "prediction.json").read_text()), printed.getvalue()


def _mean(a: dict, b: dict, key: str) -> float | None:
    values = [r.get(key) for r in (a, b) if r.get("success") and r.get(key) is not None]
    return statistics.mean(values) if len(values) == 2 else None


def one_model(model: str, args: argparse.Namespace) -> dict:
    started = time.monotonic()
    before = truth(model, args, "before")
    report, printed = predicted(model, args)
    after = truth(model, args, "after")
    targets = []
    for p in report["predictions"]:
        b = p["batch_size"]
        true_t = _mean(before[b], after[b], "step_time_s_mean")
        true_e = _mean(before[b], after[b], "energy_per_step_j")
        row = {"batch_size": b, "trained": true_t is not None}
        if true_t is not None:
            t0, t1 = before[b]["step_time_s_mean"], after[b]["step_time_s_mean"]
            ci, eci = p["step_time_s_ci95"], p["energy_per_step_j_ci95"]
            row |= {
                "truth_step_time_s": [t0, t1],
                "truth_drift_pct": 100 * (t1 / t0 - 1),
                "predicted_step_time_s": p["step_time_s"],
                "step_time_s_ci95": ci,
                "step_time_error_pct": 100 * (p["step_time_s"] / true_t - 1),
                "step_time_in_interval": bool(ci and ci[0] <= true_t <= ci[1]),
                "energy_error_pct": None
                if true_e is None or p["energy_per_step_j"] is None
                else 100 * (p["energy_per_step_j"] / true_e - 1),
                "energy_in_interval": bool(eci and true_e is not None and eci[0] <= true_e <= eci[1]),
                "peak_rss_error_pct": 100 * (p["proc_peak_gb"] / after[b]["proc_peak_gb"] - 1)
                if p["proc_peak_gb"] and after[b].get("proc_peak_gb")
                else None,
            }
        targets.append(row)
    errors = [abs(t["step_time_error_pct"]) for t in targets if t["trained"]]
    return {
        "model": model,
        "role": "design" if model in DESIGN else "validation",
        "input_size": INPUT_SIZE.get(model),
        "targets": targets,
        "step_time_error_pct": {
            "median": statistics.median(errors),
            "max": max(errors),
            "mean": statistics.mean(errors),
        }
        if errors
        else None,
        "step_time_in_interval": sum(t.get("step_time_in_interval", False) for t in targets),
        "prediction_drift_pct": None if report["step_times"]["drift"] is None else 100 * report["step_times"]["drift"],
        "printed": printed.splitlines(),
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="cnn,lstm,resnet50,bert")
    parser.add_argument("--precision", type=float, default=0.03)
    parser.add_argument("--max-steps", type=int, default=400)
    parser.add_argument("--sensors", default=REPLAY)
    parser.add_argument("--name", default="predict_users", help="results file: benchmarks/results/NAME.json")
    args = parser.parse_args()
    models: list[dict] = []
    for model in args.models.split(","):  # saved after each model: a long run keeps what it finished
        models.append(one_model(model, args))
        settings = {"measure": MEASURE, "targets": TARGETS, "precision": args.precision, "max_steps": args.max_steps}
        path = save(args.name, settings | {"sensors": args.sensors, "models": models})
    print(f"{'model':<8} {'role':<10} {'batch':>5} {'truth ms (before/after)':>24} {'predicted':>10} {'error':>7}")
    for m in models:
        for t in m["targets"]:
            if t["trained"]:
                t0, t1 = (1e3 * x for x in t["truth_step_time_s"])
                print(
                    f"{m['model']:<8} {m['role']:<10} {t['batch_size']:>5} {f'{t0:.1f} / {t1:.1f}':>24} "
                    f"{1e3 * t['predicted_step_time_s']:>10.1f} {t['step_time_error_pct']:>+6.1f}%"
                )
    print(f"-> {path}")


if __name__ == "__main__":
    main()
