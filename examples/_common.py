"""What the example scripts share: their common arguments and closing lines."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path


def parser(description: str, batch_size: int, steps: int, logdir: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--batch-size", type=int, default=batch_size)
    p.add_argument("--steps", type=int, default=steps, help="training steps (the first 3 are warm-up)")
    p.add_argument("--logdir", default=logdir)
    p.add_argument("--sensors", default="auto", help="auto, none, replay:PATH[@SPEED]")
    return p


def every(steps: int) -> int:
    """How often to print progress: about ten lines per run."""
    return max(1, steps // 10)


def progress(steps: int):
    """A Keras callback printing the step and its loss about ten times a run (and at the last step)."""
    import keras

    class Progress(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if (batch + 1) % every(steps) == 0 or batch + 1 == steps:
                print(f"step {batch + 1}/{steps}  loss {(logs or {}).get('loss', float('nan')):.4f}", flush=True)

    return Progress()


def setup_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")


def with_prefetch(data, prefetch: bool):
    """``data.prefetch(AUTOTUNE)``, or no prefetch at all: tf.data would otherwise inject one itself."""
    import tensorflow as tf

    if prefetch:
        return data.prefetch(tf.data.AUTOTUNE)
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    return data.with_options(options)


def traced_steps(steps: int) -> tuple[int, int] | None:
    """Steps 5 and 6 are traced (for the input wait and energy per op) when the run has them."""
    return (5, 6) if steps > 6 else None


def finish(report, logdir) -> None:
    """Prints the summary, the input wait of the traced steps, and where the run was written."""
    s = report.summary()
    energy = "not measured on this device" if s["energy_total"] is None else f"{s['energy_total']:.3f} J"
    print(f"success: {s['success']}  steps measured: {s['steps_measured']}  energy: {energy}  "
          f"step time: {(s['step_time_s']['mean'] or 0) * 1e3:.1f} ms  peak memory: {'not measured' if s['mem_peak_gb'] is None else format(s['mem_peak_gb'], '.3f') + ' GiB'}")
    between = s["between_steps_fraction"]
    print(f"time between steps: {'n/a' if between is None else format(100 * between, '.1f') + '%'} of the run")
    traced = Path(logdir) / "train" / "plugins" / "mobileperf" / "op_energy.json"
    if traced.exists():
        for step in json.loads(traced.read_text())["steps"]:
            duration = next(x.duration_s for x in report.steps if x.step == step["step"])
            print(f"traced step {step['step']}: waited {1e3 * step['input_wait_s']:.1f} ms for input "
                  f"({100 * step['input_wait_s'] / duration:.0f}% of the step)")
    print(f"logdir: {logdir}")
    print(f"open it: tensorboard --logdir {logdir}")
