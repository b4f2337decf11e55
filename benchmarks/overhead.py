"""Training-step overhead of monitors, side by side in one process.

The same model and data are trained with: no callback; MobilePerfCallback;
keras.callbacks.TensorBoard(update_freq="batch"); and CodeCarbon's
OfflineEmissionsTracker around fit where codecarbon is installed. Variants
are interleaved (A B C D A B C D ...) so drifts of a noisy machine hit all
alike. Step time is the median interval between consecutive batch ends
after 5 steps (a last callback records them), so the per-fit costs of
starting and stopping a monitor (fork, final report) are not counted as
per-step overhead; they are printed separately as fit wall time. For a
~10 ms and a ~100 ms step, each variant's step time is compared with no
callback as a ratio with a bootstrap 95% interval. ``mobileperf_no_sampler``
(``sensors="none"``: step hooks, collector and writers, no sampler process)
separates what the sampler costs from what the rest costs.
Target: MobilePerf <= 1.01 and below the Keras TensorBoard callback.

    python benchmarks/overhead.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

import keras
import numpy as np

from tf_mobileperf import MobilePerfCallback
from _results import save  # noqa: E402


def model_for(width: int) -> keras.Model:
    model = keras.Sequential([keras.Input((256,)), keras.layers.Dense(width, activation="relu"),
                              keras.layers.Dense(width, activation="relu"), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    return model


def variants(tmp: Path):
    out = {"none": lambda: ([], contextlib.nullcontext()),
           "mobileperf": lambda: ([MobilePerfCallback(tempfile.mkdtemp(dir=tmp))], contextlib.nullcontext()),
           "mobileperf_no_sampler": lambda: ([MobilePerfCallback(tempfile.mkdtemp(dir=tmp), sensors="none")],
                                             contextlib.nullcontext()),
           "keras_tensorboard_batch": lambda: ([keras.callbacks.TensorBoard(tempfile.mkdtemp(dir=tmp), update_freq="batch")],
                                               contextlib.nullcontext())}
    try:
        from codecarbon import OfflineEmissionsTracker

        out["codecarbon"] = lambda: ([], OfflineEmissionsTracker(country_iso_code="USA", output_dir=tempfile.mkdtemp(dir=tmp),
                                                                 log_level="error", save_to_file=False))
    except ImportError:
        pass
    return out


class StepClock(keras.callbacks.Callback):
    """Records when each batch ends."""

    def __init__(self):
        super().__init__()
        self.ends: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())

    def median_step(self, skip: int = 5) -> float:
        return float(np.median(np.diff(self.ends[skip:])))


def bootstrap_ratio(a: np.ndarray, b: np.ndarray, rng) -> tuple[float, float, float]:
    ratios = [rng.choice(a, len(a)).mean() / rng.choice(b, len(b)).mean() for _ in range(2000)]
    return a.mean() / b.mean(), float(np.percentile(ratios, 2.5)), float(np.percentile(ratios, 97.5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    rng = np.random.default_rng(0)
    results = []
    for label, width, batch, steps in (("~10 ms step", 512, 256, 80), ("~100 ms step", 1024, 1536, 20)):
        x = rng.random((batch * steps, 256), dtype=np.float32)
        y = rng.random((batch * steps, 1), dtype=np.float32)
        model = model_for(width)
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0)  # compile and warm up once
        kinds = variants(tmp)
        per_step = {k: [] for k in kinds}
        wall = {k: [] for k in kinds}
        for _ in range(args.repeats):
            for name, make in kinds.items():
                callbacks, around = make()
                clock = StepClock()
                with around:
                    t0 = time.perf_counter()
                    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, callbacks=callbacks + [clock])
                    wall[name].append(time.perf_counter() - t0)
                per_step[name].append(clock.median_step())
        base = np.array(per_step["none"])
        print(f"\n{label}: no callback {1e3 * base.mean():.1f} ms per step ({args.repeats} interleaved repeats)")
        for name, times in per_step.items():
            ratio, lo, hi = bootstrap_ratio(np.array(times), base, rng)
            results.append({"case": label, "variant": name, "step_ms": 1e3 * float(np.mean(times)),
                            "ratio": ratio, "ci95": [lo, hi], "fit_wall_s": float(np.median(wall[name]))})
            print(f"  {name:<26} {1e3 * np.mean(times):7.2f} ms   ratio {ratio:.3f}  [{lo:.3f}, {hi:.3f}]"
                  f"   fit wall {np.median(wall[name]):.2f} s")
    save("overhead", results)


if __name__ == "__main__":
    main()
