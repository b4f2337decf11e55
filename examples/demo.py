"""The README's `make demo`: a short training run measured by MobilePerfCallback.

Trains the seed's small CNN case on CIFAR-10-shaped random data for a few
dozen steps with the sensors of this machine, prints the report summary and
where it is, and leaves a run for TensorBoard.

    python examples/demo.py --logdir runs/demo [--steps 40] [--batch-size 32] [--sensors auto]
"""

from __future__ import annotations

import keras
import numpy as np

from tf_mobileperf import MobilePerfCallback

from _common import (
    cpu_text,
    measured,
    memory_text,
    parser,
    print_unavailable,
    progress,
    setup_logging,
    show,
    traced_steps,
)


def build_cnn() -> keras.Model:
    """Two convolutions and two dense layers, named "demo_cnn" in the report and the dashboard (not the zoo's "cnn":
    another architecture)."""
    model = keras.Sequential(
        [
            keras.Input((32, 32, 3)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ],
        name="demo_cnn",
    )
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    return model


def main() -> None:
    args = parser(__doc__.splitlines()[0], batch_size=32, steps=40, logdir="runs/demo").parse_args()
    setup_logging()

    rng = np.random.default_rng(0)
    n = args.steps * args.batch_size
    x = rng.random((n, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, n)
    cb = MobilePerfCallback(
        args.logdir, sensors=args.sensors, batch_size=args.batch_size, profile_steps=traced_steps(args.steps)
    )
    tensorboard = keras.callbacks.TensorBoard(log_dir=args.logdir)
    build_cnn().fit(
        x, y, batch_size=args.batch_size, epochs=1, callbacks=[tensorboard, cb, progress(args.steps)], verbose=0
    )
    summarize(cb.report.summary())
    print(f"\nreport: {cb.monitor.logdir}/report.json   steps: {cb.monitor.logdir}/steps.csv")
    print(f"open it:  tensorboard --logdir {args.logdir}")


def summarize(s: dict) -> None:
    """The report's summary: steps, time, energy, utilization, sampling, and what has no value and why."""
    print(f"\nsuccess: {s['success']}   {measured(s)}")
    step = s["step_time_s"]
    if s["steps_measured"]:
        print(
            f"step time: mean {step['mean'] * 1e3:.1f} ms, p99 {step['p99'] * 1e3:.1f} ms; "
            f"{show(s['samples_per_s'], 'samples/s', '.0f')}"
        )
    print(f"energy total: {show(s['energy_total'], 'J')}   power avg: {show(s['power_avg'], 'W')}")
    print(cpu_text(s))
    print("CPU per cluster: " + ", ".join(f"{k} {show(v, '%', '.1f')}" for k, v in s["cpu_util_per_cluster"].items()))
    print(f"GPU util avg: {show(s['gpu_util_avg'], '%', '.1f')}")
    print(memory_text(s))
    sampling = s["sampling"]
    if sampling["achieved_hz"]:
        print(
            f"sampling: {sampling['achieved_hz']:.1f} rows/s of {sampling['row_hz']:.0f} expected on a "
            f"{sampling['requested_hz']:.0f} Hz grid (woken only when a sensor is due), p99 interval error "
            f"{sampling['interval_error_p99_ms']:.3f} ms ({sampling['mode']}, {sampling['tick_loop']} tick loop)"
        )
    print_unavailable(s)


if __name__ == "__main__":
    main()
