"""The README's `make demo`: a short training run measured by MobilePerfCallback.

Trains the seed's small CNN case on CIFAR-10-shaped random data for a few
dozen steps with the sensors of this machine, prints the report summary and
where it is, and leaves a run for TensorBoard.

    python examples/demo.py --logdir runs/demo [--steps 40] [--batch-size 32] [--sensors auto]
"""

from __future__ import annotations

import argparse
import logging

import keras
import numpy as np

from _common import progress
from tf_mobileperf import MobilePerfCallback


def build_cnn() -> keras.Model:
    model = keras.Sequential([
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(32, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, activation="relu"), keras.layers.MaxPooling2D(),
        keras.layers.Flatten(), keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10),
    ])
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def show(value, unit: str, fmt: str = ".3f") -> str:
    return "not measured on this device" if value is None else f"{value:{fmt}} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", default="runs/demo")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sensors", default="auto")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    rng = np.random.default_rng(0)
    n = args.steps * args.batch_size
    x = rng.random((n, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, n)
    cb = MobilePerfCallback(args.logdir, sensors=args.sensors, batch_size=args.batch_size, profile_steps=(5, 6))
    tensorboard = keras.callbacks.TensorBoard(log_dir=args.logdir)
    build_cnn().fit(x, y, batch_size=args.batch_size, epochs=1, callbacks=[tensorboard, cb, progress(args.steps)],
                      verbose=0)

    s = cb.report.summary()
    sampling = s["sampling"]
    print(f"\nsuccess: {s['success']}   steps measured: {s['steps_measured']} (after {s['warmup_steps']} warm-up)")
    print(f"step time: mean {s['step_time_s']['mean'] * 1e3:.1f} ms, p99 {s['step_time_s']['p99'] * 1e3:.1f} ms; "
          f"{show(s['samples_per_s'], 'samples/s', '.0f')}")
    print(f"energy total: {show(s['energy_total'], 'J')}   power avg: {show(s['power_avg'], 'W')}")
    print(f"CPU util avg: {show(s['cpu_util_avg'], '%', '.1f')}  per cluster: "
          + ", ".join(f"{k} {show(v, '%', '.1f')}" for k, v in s["cpu_util_per_cluster"].items()))
    print(f"GPU util avg: {show(s['gpu_util_avg'], '%', '.1f')}   peak memory: {show(s['mem_peak_gb'], 'GiB')}")
    if sampling["achieved_hz"]:
        print(f"sampling: {sampling['achieved_hz']:.1f} rows/s of {sampling['row_hz']:.0f} expected on a "
              f"{sampling['requested_hz']:.0f} Hz grid (woken only when a sensor is due), p99 interval error "
              f"{sampling['interval_error_p99_ms']:.3f} ms ({sampling['mode']}, {sampling['tick_loop']} tick loop)")
    for what, why in s["unavailable"].items():
        print(f"  {what}: null — {why}")
    print(f"\nreport: {cb.monitor.logdir}/report.json   steps: {cb.monitor.logdir}/steps.csv")
    print(f"open it:  tensorboard --logdir {args.logdir}")


if __name__ == "__main__":
    main()
