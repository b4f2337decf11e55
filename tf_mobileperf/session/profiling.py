"""The TF profiler over ``profile_steps``, and the energy of each traced op.

The trace goes to ``<run>/plugins/profile/`` for TensorBoard's Profile tab;
at the end, its ops are joined to the power rails sampled over the traced
steps (``op_energy.json`` and a Chrome trace with the rails). Each traced
step is wrapped in the profiler's step marker, as TF's own TensorBoard
callback does (a ``Trace("train", step_num=i, _r=1)`` event on the host), so
the Profile tab's overview shows the steps' times. TensorFlow is imported
only when a trace starts: other backends get a reason instead.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.reader import read_series
from tf_mobileperf.output.files import write_json
from tf_mobileperf.session import backend
from tf_mobileperf.session.guard import Guard
from tf_mobileperf.steps.op_energy import chrome_trace, op_energy
from tf_mobileperf.steps.records import StepRecord
from tf_mobileperf.steps.trace_ops import ClockPair, read_ops

log = logging.getLogger(__name__)


class Profiler:
    """Traces the steps ``first`` to ``last`` of ``profile_steps`` (None: no trace)."""

    def __init__(self, steps: tuple[int, int] | None, guard: Guard):
        self.steps = steps
        #: Why there is no trace although one was asked for; None when it can be taken.
        self.unavailable = (
            f"profile_steps needs the TensorFlow backend; Keras runs on {backend.active()}"
            if steps and backend.active() != "tensorflow"
            else None
        )
        self.tracing = False
        self._guard = guard
        self._clocks: ClockPair | None = None
        self._traced: list[StepRecord] = []
        self._marker = None  # the open step marker of the traced step running now

    def step_begins(self, index: int, layout: RunLayout) -> None:
        """Starts the trace at the first traced step, and opens each traced step's marker (closing one a
        failed or discarded step left open).

        Args:
            index: The step beginning, a global step index.
            layout: The run's files; the trace goes into its run folder.
        """
        if self.steps and index == self.steps[0]:
            self._start(layout.run_dir)
        self._close_marker()  # a step that failed or was discarded left its marker open
        if self.tracing:
            self._guard("open the profiler's step marker", self._open_marker, index)

    def _open_marker(self, index: int) -> None:
        import tensorflow as tf

        marker = tf.profiler.experimental.Trace("train", step_num=index, _r=1)
        marker.__enter__()
        self._marker = marker

    def _close_marker(self) -> None:
        marker, self._marker = self._marker, None
        if marker is not None:
            self._guard("close the profiler's step marker", marker.__exit__, None, None, None)

    def keep(self, step: StepRecord) -> None:
        """Keeps a closed step for op energy if it was traced and did not fail.

        Args:
            step: The step just closed.
        """
        if step.traced and not step.failed:
            self._traced.append(step)

    def step_ended(self, index: int) -> None:
        """Closes the step's marker; the trace stops after the last traced step.

        Args:
            index: The step that ended, a global step index.
        """
        self._close_marker()
        if self.steps and index == self.steps[1]:
            self.stop()

    def _start(self, run_dir: Path) -> None:
        if self.unavailable:
            return
        try:
            import tensorflow as tf

            self._clocks = ClockPair.now()  # the profiler stamps wall-clock time
            tf.profiler.experimental.start(str(run_dir))
            self.tracing = True
        except Exception as exc:  # another profiler session is active, or no profiler
            log.warning("could not start the TF profiler for steps %s: %s", self.steps, exc)

    def stop(self) -> None:
        """Closes the open step marker and stops the trace, if one runs."""
        self._close_marker()
        if self.tracing:
            self.tracing = False
            import tensorflow as tf

            self._guard("stop the TF profiler", tf.profiler.experimental.stop)

    def write_op_energy(self, layout: RunLayout, channels: list, margin_s: float) -> None:
        """Writes the energy per op of the traced steps: op_energy.json and a Chrome trace with the power rails.

        Nothing is written without a kept traced step, a channel or a trace; the latest trace session is read.

        Args:
            layout: The run's files: its trace and series are read, its op energy and Chrome trace written.
            channels: The series' channels.
            margin_s: Seconds of samples read before the first and after the last traced step, for their edges.
        """
        traced = [(s.step, s.start_s, s.end_s) for s in self._traced]
        sessions = sorted(layout.profile_dir.glob("*/*.xplane.pb")) if traced and channels else []
        clocks = self._clocks  # read when the trace started
        if not sessions or clocks is None:
            return
        ops = read_ops(sessions[-1], clocks)
        ops = ops.select((ops.end_s > traced[0][1]) & (ops.start_s < traced[-1][2]))
        _, rows = read_series(layout.run_dir)
        lo, hi = np.searchsorted(rows[:, 0], [traced[0][1] - margin_s, traced[-1][2] + margin_s])
        t, values = np.asarray(rows[lo:hi, 0]), np.asarray(rows[lo:hi, 1:])
        write_json(layout.op_energy, op_energy(ops, t, values, channels, traced, clocks))
        write_json(layout.trace, chrome_trace(ops, t, values, channels, traced[0][1]))
