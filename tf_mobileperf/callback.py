"""``MobilePerfCallback``: the seed's per-step measurement inside ``model.fit``.

The hooks stay thin: they mark step windows on a ``PerfMonitor``, which does
the sampling, joining and writing. To survive an out-of-memory error, the
callback wraps ``model.train_function`` for the duration of ``fit``: a
``ResourceExhaustedError`` or ``MemoryError`` in a step is recorded as the
failed step, and training stops cleanly (``on_oom="stop"``) or the error is
re-raised after the report is written (``on_oom="raise"``). Ctrl-C (SIGINT)
or SIGTERM during ``fit`` writes the partial report, then the previous
handler runs (by default: KeyboardInterrupt).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Sequence

import keras

from .monitor import OOM_ERRORS, PerfMonitor
from .report import Report
from .sensors import Sensor

log = logging.getLogger(__name__)


class MobilePerfCallback(keras.callbacks.Callback):
    """Measures power, energy, utilization and peak memory of every training step.

    Args:
        logdir: Directory for ``report.json``, ``steps.csv``, and the run
            ``<logdir>/train`` (TensorBoard scalars and the sample series).
        warmup_steps: First steps recorded but excluded from averages (seed: 3).
        sample_period_ms: Sampling period of the power rails (seed: 5 ms).
        sensors: "auto", "none", "replay:PATH[@SPEED]", or a list of sensors.
        on_oom: "stop" ends ``fit`` normally with ``success: False``;
            "raise" re-raises the error after writing the report.
        profile_steps: ``(first, last)`` steps to trace with the TF profiler.
        batch_size: Samples per batch, for J/sample and samples/s.

    A step is one call of the train function: with ``steps_per_execution=N``
    it covers N batches, and the report gives each step's ``batches``.

    Example:
        >>> cb = MobilePerfCallback("runs/cnn", batch_size=32)      # doctest: +SKIP
        >>> model.fit(x, y, batch_size=32, epochs=1, callbacks=[cb])  # doctest: +SKIP
        >>> cb.report.summary()["energy_total"]                       # doctest: +SKIP
    """

    def __init__(
        self,
        logdir: str | os.PathLike,
        warmup_steps: int = 3,
        sample_period_ms: float = 5.0,
        sensors: str | Sequence[Sensor] = "auto",
        on_oom: str = "stop",
        profile_steps: tuple[int, int] | None = None,
        batch_size: int | None = None,
    ):
        super().__init__()
        if on_oom not in ("stop", "raise"):
            raise ValueError(f"on_oom must be 'stop' or 'raise', got {on_oom!r}")
        self.on_oom = on_oom
        self._monitor_args = dict(logdir=logdir, warmup_steps=warmup_steps, sample_period_ms=sample_period_ms,
                                  sensors=sensors, profile_steps=profile_steps, batch_size=batch_size)
        self.monitor = PerfMonitor(**self._monitor_args)
        self.report: Report | None = None
        self._begin_batch = 0
        self._original_train_function = None
        self._last_logs: dict = {}

    def on_train_begin(self, logs=None):
        if self.monitor.report is not None:  # fit called again: a fresh measurement
            self.monitor = PerfMonitor(**self._monitor_args)
        self.monitor.model_name = self.model.name
        self.monitor.begin()
        self._wrap_train_function()
        self._install_interrupt_handler()

    def on_train_batch_begin(self, batch, logs=None):
        self._begin_batch = batch
        self.monitor.step_begin()

    def on_train_batch_end(self, batch, logs=None):
        self._last_logs = logs or {}
        self.monitor.step_end(batches=batch - self._begin_batch + 1)

    def on_train_end(self, logs=None):
        self._finish()

    def _finish(self) -> None:
        self._restore_interrupt_handlers()
        if self._original_train_function is not None:
            self.model.train_function = self._original_train_function
            self._original_train_function = None
        self.report = self.monitor.end()

    def _wrap_train_function(self) -> None:
        original = self.model.train_function
        if original is None:
            return
        self._original_train_function = original

        def guarded_train_function(iterator):
            try:
                return original(iterator)
            except OOM_ERRORS as exc:
                self.monitor.fail(exc)
                if self.on_oom == "raise":
                    self._finish()
                    raise
                self.model.stop_training = True
                return self._last_logs
            except Exception as exc:  # any other error ends fit: keep what was measured, then let it go on
                self.monitor.fail(exc)
                self._finish()
                raise

        self.model.train_function = guarded_train_function

    def _install_interrupt_handler(self) -> None:
        """On Ctrl-C (SIGINT) or SIGTERM: write the partial report, then go on as before."""
        if threading.current_thread() is not threading.main_thread():
            return

        def on_signal(signum: int) -> None:
            self.monitor.fail(KeyboardInterrupt(signal.Signals(signum).name))
            self._finish()

        self._handlers = [_ChainedHandler.install(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)]

    def _restore_interrupt_handlers(self) -> None:
        for handler in getattr(self, "_handlers", []):
            handler.uninstall()
        self._handlers = []


class _ChainedHandler:
    """A signal handler that runs ``on_signal`` once, then hands the signal on.

    Handlers chain when several callbacks are in one ``fit``; they may end in
    any order, so an ended handler that another still points to only passes
    the signal on, and uninstalling skips ended handlers.
    """

    def __init__(self, signum: int, on_signal, previous):
        self.signum, self.on_signal, self.previous, self.active = signum, on_signal, previous, True

    @classmethod
    def install(cls, signum: int, on_signal) -> "_ChainedHandler":
        handler = cls(signum, on_signal, signal.getsignal(signum))
        signal.signal(signum, handler)
        return handler

    def uninstall(self) -> None:
        self.active = False
        if signal.getsignal(self.signum) is self:
            previous = self.previous
            while isinstance(previous, _ChainedHandler) and not previous.active:
                previous = previous.previous
            signal.signal(self.signum, previous if previous is not None else signal.SIG_DFL)

    def __call__(self, signum, frame):
        if self.active:
            self.on_signal(signum)  # uninstalls this handler
        previous = self.previous
        if callable(previous):
            return previous(signum, frame)
        if previous != signal.SIG_IGN:  # the default action
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
