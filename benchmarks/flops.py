"""Does the work per sample help predict step time? FLOPs of each zoo model's traced training step, counted by
TensorFlow's profiler at several batch sizes, and two FLOPs-based predictors against the step-time law, on
the interleaved truth of ``predict.py --interleaved`` (benchmarks/results/predict_interleaved.json).

Predictors, each judged at the same targets as the law:
* time proportional to FLOPs, scaled at batch 16 (one measured size: the roofline-style guess);
* a fixed cost plus a cost per FLOP, fitted by least squares on the sizes the law was fitted on.

    python benchmarks/flops.py [--models cnn,lstm,dqn]

The profiler counts the ops it has FLOPs for; a loop's body (the LSTM's recurrence) is not entered, so the
LSTM's count is its dense layers and the input transform only. Writes benchmarks/results/flops.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

import numpy as np

from _results import RESULTS, save

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

SIZES = [1, 2, 4, 8, 16, 32, 64]
INPUT_SIZE = {"cnn": 64}


def count_flops(name: str) -> dict[int, int]:
    """FLOPs of one training step (forward, gradients, optimizer update) at each of ``SIZES``."""
    import tensorflow as tf
    from tensorflow.python.profiler import model_analyzer, option_builder

    from tf_mobileperf import zoo

    spec = zoo.get(name)
    model = spec.build(INPUT_SIZE.get(name))
    out = {}
    for b in SIZES:
        x, y = spec.synthetic(b, 1, INPUT_SIZE.get(name))

        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True))
            model.optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
            return loss

        graph = step.get_concrete_function(tf.constant(x), tf.constant(y)).graph
        options = option_builder.ProfileOptionBuilder.float_operation()
        options["output"] = "none"
        out[b] = int(model_analyzer.profile(graph, options=options).total_float_ops)
    return out


def _errors(predicted, truth: dict[int, float], targets: list[int]) -> list[float]:
    errors = [100 * abs(predicted(b) / truth[b] - 1) for b in targets]
    return [round(float(statistics.median(errors)), 1), round(float(max(errors)), 1)]


def compare(name: str, flops: dict[int, int], interleaved: dict) -> dict:
    """(median, largest) absolute % error of each predictor at the law's targets."""
    f1, f0 = np.polyfit(SIZES, [flops[b] for b in SIZES], 1)  # FLOPs are affine in B: check the fit's residual
    residual = max(abs(f0 + f1 * b - flops[b]) / flops[b] for b in SIZES)
    fl = lambda b: f0 + f1 * b  # noqa: E731
    truth = {r["batch_size"]: r["step_time_s_mean"] for r in interleaved["rows"]}
    targets = [t["batch_size"] for t in interleaved["targets"]]
    scale = truth[16] / fl(16)
    chosen = interleaved["chosen"]
    a, c = np.linalg.lstsq(
        np.column_stack([np.ones(len(chosen)), [fl(b) for b in chosen]]), [truth[b] for b in chosen], rcond=None
    )[0]
    law = interleaved["step_time"]
    return {
        "model": name,
        "flops": flops,
        "flops_per_sample": float(f1),
        "flops_fixed": float(f0),
        "flops_affine_in_batch_residual": float(residual),
        "time_proportional_to_flops_from_16": _errors(lambda b: scale * fl(b), truth, targets),
        "fixed_cost_plus_cost_per_flop": _errors(lambda b: a + c * fl(b), truth, targets),
        "law": [round(law["median_abs_pct"], 1), round(law["max_abs_pct"], 1)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="cnn,lstm,dqn")
    args = parser.parse_args()
    truth = {m["model"]: m for m in json.loads((RESULTS / "predict_interleaved.json").read_text())["models"]}
    results = [compare(name, count_flops(name), truth[name]) for name in args.models.split(",")]
    print(f"{'model':<6} {'MFLOP/sample':>13} {'affine':>7}  (median, largest % error)")
    for r in results:
        print(
            f"{r['model']:<6} {r['flops_per_sample'] / 1e6:>13.1f} {r['flops_affine_in_batch_residual']:>7.1e}  "
            f"time ~ FLOPs {r['time_proportional_to_flops_from_16']}, fixed + per FLOP "
            f"{r['fixed_cost_plus_cost_per_flop']}, law {r['law']}"
        )
    print(f"-> {save('flops', {'models': results})}")


if __name__ == "__main__":
    main()
