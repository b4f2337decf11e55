"""Per-step TensorBoard scalars under ``mobileperf/``, at the global step.

Written to the run directory ``<logdir>/train`` so that, next to
``keras.callbacks.TensorBoard(log_dir=logdir)``, our scalars land in the
same run as Keras' own. A quantity that was not measured is not written:
a missing point, never a 0.
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from tf_mobileperf_tensorboard.summary import run_summary

from .report import StepRecord


def step_scalars(step: StepRecord) -> dict[str, float]:
    """Tag -> value for one step; unmeasured quantities are left out."""
    values: dict[str, float | None] = {
        "mobileperf/step_time_s": step.duration_s,
        "mobileperf/energy_j": step.energy_j.get("total"),
        "mobileperf/cpu_util": step.cpu_util,
        "mobileperf/gpu_util": step.gpu_util,
        "mobileperf/mem_peak_gb": step.mem_peak_gb,
    }
    values |= {f"mobileperf/power_w/{rail}": w for rail, w in step.power_w.items()}
    values |= {f"mobileperf/energy_j/{rail}": e for rail, e in step.energy_j.items() if rail != "total"}
    return {tag: float(v) for tag, v in values.items() if v is not None}


class ScalarWriter:
    """Writes joined steps as scalars, flushing after each batch of steps."""

    def __init__(self, run_dir: str | Path):
        self._writer = tf.summary.create_file_writer(str(run_dir))

    def write_steps(self, steps: list[StepRecord]) -> None:
        with self._writer.as_default():
            for step in steps:
                if step.failed:
                    continue
                for tag, value in step_scalars(step).items():
                    tf.summary.scalar(tag, value, step=step.step)
        self._writer.flush()

    def write_run_summary(self, summary: dict, step: int) -> None:
        """The dashboard's entry for this run (see tf_mobileperf_tensorboard.summary)."""
        with self._writer.as_default():
            run_summary(summary, step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
