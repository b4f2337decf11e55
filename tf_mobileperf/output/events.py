"""Per-step TensorBoard scalars under ``mobileperf/``, at the global step.

Written to the run directory ``<logdir>/train`` so that, next to
``keras.callbacks.TensorBoard(log_dir=logdir)``, our scalars land in the
same run as Keras' own. A quantity that was not measured is not written:
a missing point, never a 0. Events are built as protobufs and written as
TFRecords (``tfrecord.RecordFile``, its CRC-32C in C), with no TensorFlow op
per value and no TensorFlow needed: the collector thread writing them must
not compete with training, on any backend. (TensorBoard's own
EventFileWriter computes CRC-32C in pure Python, about 50 us a record, and
hands every event to a thread through a queue.)
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path

from tensorboard.compat.proto import event_pb2, summary_pb2

from tf_mobileperf.format.summary import run_summary
from tf_mobileperf.output.tfrecord import RecordFile
from tf_mobileperf.steps.records import StepRecord


def step_scalars(step: StepRecord) -> dict[str, float]:
    """Tag -> value for one step; unmeasured quantities are left out.

    Args:
        step: One joined step.
    """
    values: dict[str, float | None] = {
        "mobileperf/step_time_s": step.duration_s,
        "mobileperf/energy_j": step.energy_j.get("total"),
        "mobileperf/cpu_util": step.cpu_util,
        "mobileperf/gpu_util": step.gpu_util,
        "mobileperf/mem_peak_gb": step.mem_peak_gb,
        "mobileperf/gpu_mem_peak_gb": step.gpu_mem_peak_gb,
        "mobileperf/gap_before_s": step.gap_before_s,
    }
    values |= {f"mobileperf/power_w/{rail}": w for rail, w in step.power_w.items()}
    values |= {f"mobileperf/energy_j/{rail}": e for rail, e in step.energy_j.items() if rail != "total"}
    return {tag: float(v) for tag, v in values.items() if v is not None}


class ScalarWriter:
    """Writes joined steps as scalars, flushing after each batch of steps."""

    def __init__(self, run_dir: str | Path):
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.mobileperf"
        self._writer = RecordFile(Path(run_dir) / name)
        self._add(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self._writer.flush()

    def _add(self, event: event_pb2.Event) -> None:
        self._writer.write(event.SerializeToString())

    def write_steps(self, steps: list[StepRecord]) -> None:
        """Writes each step's scalars at its step number, skipping failed steps, then flushes.

        Args:
            steps: The steps joined since the last call.
        """
        for step in steps:
            if not step.failed:
                self.write_values(step.step, step_scalars(step))
        self._writer.flush()

    def write_values(self, step: int, values: Mapping[str, float | None]) -> None:
        """Writes one event of scalars at ``step`` (made readable by the next flush or close).

        Args:
            step: The global step the values belong to.
            values: Tag -> value; None values are left out.
        """
        scalars = [summary_pb2.Summary.Value(tag=tag, simple_value=v) for tag, v in values.items() if v is not None]
        self._add(event_pb2.Event(wall_time=time.time(), step=step, summary=summary_pb2.Summary(value=scalars)))

    def write_run_summary(self, summary: dict, step: int) -> None:
        """Writes and flushes the dashboard's entry for this run (see ``tf_mobileperf.format.summary``).

        Args:
            summary: The report without its steps, JSON-ready, with a ``status`` (running, finished).
            step: The global step to write it at (0 while running, the step count at the end).
        """
        self._add(event_pb2.Event(wall_time=time.time(), step=step, summary=run_summary(summary)))
        self._writer.flush()

    def close(self) -> None:
        """Flushes and closes the event file."""
        self._writer.close()
