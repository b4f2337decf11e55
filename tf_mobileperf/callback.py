"""``MobilePerfCallback``: the paper's per-step measurement inside ``model.fit``.

The hooks stay thin: they mark step windows on a ``PerfMonitor``, which does
the sampling, joining and writing. Whatever way ``fit`` ends, the
measurement ends with it and its report is written:

* an out-of-memory error in a step (any Keras backend's, see
  ``tf_mobileperf.session.backend``) is recorded as the failed step, and training
  stops cleanly (``on_oom="stop"``) or the error is re-raised after the
  report is written (``on_oom="raise"``);
* any other error in a step, in validation or in another callback: the
  report says ``success: false`` with the error, then the error goes on;
* Ctrl-C (SIGINT) or SIGTERM: the partial report is written, then the
  previous handler runs (by default: KeyboardInterrupt). Python raises that
  KeyboardInterrupt wherever the main thread is, and swallows it there if
  that is a ``__del__`` or a weakref callback; ``fit`` would then train on,
  unmeasured. So where Python's own handler is the one left, the next
  batch raises it again;
* a loss that turns NaN or infinite (what ``TerminateOnNaN`` stops on):
  ``success: false`` with the step and the reason.

To see errors between its hooks, the callback has ``tf_mobileperf.keras_seam``
guard, for the duration of ``fit``, the model's ``train_function`` and
``evaluate`` and the hooks of the callback list that calls it; every guard is
undone when the measurement ends, and none holds the callback. An error the
guards cannot see (fit's own code between two hooks) still ends the
measurement: at the next ``fit``, when the callback is garbage collected, or
when Python exits.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import weakref

import keras

from tf_mobileperf.keras_seam import PROPAGATE, FitSeam
from tf_mobileperf.session import backend
from tf_mobileperf.session.interrupts import STOP_SIGNALS, ChainedHandler, in_main_thread
from tf_mobileperf.session.monitor import PerfMonitor
from tf_mobileperf.session.options import MonitorOptions, check_logdir
from tf_mobileperf.steps.report import Report

log = logging.getLogger(__name__)


class MobilePerfCallback(keras.callbacks.Callback):
    """Measures power, energy, utilization and peak memory of every training step.

    Args:
        logdir: Directory for ``report.json``, ``steps.csv``, and the run
            ``<logdir>/train`` (TensorBoard scalars and the sample series).
        on_oom: "stop" ends ``fit`` normally with ``success: False``;
            "raise" re-raises the error after writing the report.
        **options: Every option of the measurement, as in ``PerfMonitor``:
            the fields of ``tf_mobileperf.session.options.MonitorOptions``
            (``warmup_steps``, ``sample_period_ms``, ``sensors``,
            ``batch_size``, ``profile_steps``, ``keep_steps``, ...). They are
            checked here, once: a wrong value raises TypeError or ValueError
            naming it, an unknown option a TypeError naming it.

    A step is one call of the train function: with ``steps_per_execution=N``
    it covers up to N batches (fewer at the end of an epoch), and the report
    gives each step's ``batches``. Each ``fit`` is a new measurement.

    Example:
        >>> cb = MobilePerfCallback("runs/cnn", batch_size=32, keep_steps=1000)  # doctest: +SKIP
        >>> model.fit(x, y, batch_size=32, epochs=1, callbacks=[cb])            # doctest: +SKIP
        >>> cb.report.summary()["energy_total"]                                 # doctest: +SKIP
    """

    def __init__(self, logdir: str | os.PathLike, on_oom: str = "stop", **options):
        super().__init__()
        if on_oom not in ("stop", "raise"):
            raise ValueError(f"on_oom must be 'stop' or 'raise', got {on_oom!r}")
        self.on_oom = on_oom
        self.options = MonitorOptions(**options)
        self._logdir = check_logdir(logdir)
        self.monitor = PerfMonitor(self._logdir, options=self.options)
        self.report: Report | None = None
        self._running = False
        self._pid = os.getpid()
        self._begin_batch = 0
        self._last_logs: dict = {}
        self._seam: FitSeam | None = None  # the wraps of Keras's objects for this fit
        self._interrupted: str | None = None  # the signal that ended the measurement while fit went on

    def on_train_begin(self, logs=None):
        """Begins a new measurement and guards ``fit`` (``keras_seam``) and SIGINT/SIGTERM until it ends.

        A measurement still running (the last ``fit`` ended by an error no guard saw) is ended first, failed.

        Args:
            logs: As Keras passes it (currently no data); unused.
        """
        if self._running:  # the last fit ended by an error that no wrapper saw
            self._finish(RuntimeError("fit ended without on_train_end (an error outside the training step)"))
        if self.monitor.report is not None or self.monitor.started:
            self.monitor = PerfMonitor(self._logdir, options=self.options)
        self.report = None
        self.monitor.model_name = self.model.name
        self._interrupted = None
        self.monitor.begin()
        self._running, self._pid = True, os.getpid()
        self._seam = FitSeam(self._on_keras_error)
        self._seam.install(self.model, self)
        self._install_interrupt_handlers()

    def on_train_batch_begin(self, batch, logs=None):
        """Marks the beginning of a step (one call of the train function).

        Args:
            batch: Index of the step's first batch within the epoch, as Keras passes it.
            logs: As Keras passes it (currently no data); unused.

        Raises:
            KeyboardInterrupt: A SIGINT ended the measurement, its KeyboardInterrupt was swallowed where it landed,
                and Python's default SIGINT handler is the one installed.
        """
        if self._interrupted is not None:  # the KeyboardInterrupt was swallowed where it landed
            name, self._interrupted = self._interrupted, None
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                raise KeyboardInterrupt(name)
        self._begin_batch = batch
        self.monitor.step_begin()

    def on_train_batch_end(self, batch, logs=None):
        """Marks the end of the step, with the batches it ran; a non-finite loss fails the run at this step.

        Args:
            batch: Index of the step's last batch within the epoch, as Keras passes it (with
                ``steps_per_execution=N``, N - 1 past ``on_train_batch_begin``'s even where the epoch ran fewer).
            logs: The metric results Keras passes; a non-finite ``loss`` in them is recorded as the step's failure.
        """
        self._last_logs = logs or {}
        self.monitor.step_end(batches=self._batches_run(self._begin_batch, batch))
        loss = self._last_logs.get("loss")
        if isinstance(loss, (int, float)) and not math.isfinite(loss):
            self.monitor.note_failure(self.monitor.next_step - 1, f"the loss is {loss} (training diverged)")

    def on_train_end(self, logs=None):
        """Ends the measurement, writes its report (``self.report``) and undoes the guards.

        Args:
            logs: As Keras passes it (the last ``on_epoch_end``'s logs); unused.
        """
        self._finish()

    def _batches_run(self, begin: int, end: int) -> int:
        """Batches in the step from ``begin`` to ``end``: Keras's ``end`` assumes a full
        ``steps_per_execution``, the last execution of an epoch may hold fewer."""
        steps = (self.params or {}).get("steps")
        if steps:
            end = min(end, steps - 1)
        return max(1, end - begin + 1)

    def _finish(self, error: BaseException | None = None) -> None:
        """Ends the measurement once, whatever called it; with ``error`` it failed.

        Only in the process that began it: a forked child unwinding ``fit``
        (``sys.exit`` in a child of ``os.fork``) leaves it alone."""
        if not self._running or os.getpid() != self._pid:
            return
        self._running = False
        try:
            if error is not None and self.monitor.started:
                self.monitor.fail(error)
            seam, self._seam = self._seam, None
            if seam is not None:
                seam.undo()
            self.monitor.end()  # a signal held during end() is delivered as it returns
        finally:
            self.report = self.monitor.report
            self._restore_interrupt_handlers()

    def _on_keras_error(self, where: str, exc: BaseException, args: tuple):
        """An error raised during ``fit`` in ``where`` (the train function, ``evaluate``, a hook
        of the callback list, or ``keras_seam.LEAVES_FIT``: an error this callback answered leaves ``fit``
        all the same); returns what the train function returns instead, or PROPAGATE."""
        if where == "train_function" and self._running:
            # Keras's iterator ran out of data: no batch ran, so there is no step to record.
            end_of_data = (StopIteration,) + (
                (sys.modules["tensorflow"].errors.OutOfRangeError,) if "tensorflow" in sys.modules else ()
            )
            if isinstance(exc, end_of_data):
                self.monitor.discard_step()
                return PROPAGATE
            if backend.is_oom(exc) and self.on_oom == "stop":
                self.monitor.fail(exc)
                self.model.stop_training = True
                return (self._last_logs, args[0]) if len(args) == 2 else self._last_logs  # JAX: (state, data)
        self._finish(exc)
        return PROPAGATE

    def _install_interrupt_handlers(self) -> None:
        """On Ctrl-C (SIGINT) or SIGTERM: write the partial report, then go on as before."""
        if not in_main_thread():
            return

        this = weakref.ref(self)  # a handler left installed (fit ended unseen) keeps no callback alive

        def on_signal(signum: int) -> None:
            callback = this()
            if callback is not None:
                name = signal.Signals(signum).name
                callback._finish(KeyboardInterrupt(name))
                callback._interrupted = name if signum == signal.SIGINT else None

        self._handlers = [ChainedHandler.install(signum, on_signal) for signum in STOP_SIGNALS]
        self._handlers_dropped = weakref.finalize(self, _uninstall, self._handlers)  # the callback dropped mid-fit
        self._handlers_dropped.atexit = False

    def _restore_interrupt_handlers(self) -> None:
        if getattr(self, "_handlers_dropped", None) is not None:
            self._handlers_dropped.detach()
        _uninstall(getattr(self, "_handlers", []))
        self._handlers = []


def _uninstall(handlers: list) -> None:
    for handler in handlers:
        handler.uninstall()
