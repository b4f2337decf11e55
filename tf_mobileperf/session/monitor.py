"""A measurement session: the API and lifecycle of ``PerfMonitor``, which the Keras callback and custom loops drive.

It marks step windows on ``time.monotonic()``, the sampler's clock (with a GPU, a step's end waits for the device:
``session.backend.device_sync``), and owns the session's life: ``begin`` claims the logdir, opens the writers and
starts the collector (``session.collector``); ``end`` joins what is left and writes the report
(``session.reporting``). Options: ``session.options``; TF profiler: ``session.profiling``. Monitoring never breaks
training. A measurement belongs to the process that began it and always ends with a report: by ``end()``, or when the
monitor is garbage collected or Python exits; a forked child never ends it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.output.files import claim_logdir
from tf_mobileperf.output.writers import RunWriters
from tf_mobileperf.sampling.priority import choose
from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sensors.nvml import NvmlSensorBase
from tf_mobileperf.session import backend
from tf_mobileperf.session.cluster import combine, from_tf_config
from tf_mobileperf.session.collector import Collector
from tf_mobileperf.session.contention import RunCpu
from tf_mobileperf.session.gpu_memory import GpuMemory
from tf_mobileperf.session.guard import Guard
from tf_mobileperf.session.interrupts import deferred
from tf_mobileperf.session.options import MonitorOptions, check_logdir, resolve_sensors
from tf_mobileperf.session.profiling import Profiler
from tf_mobileperf.session.reporting import build_report, device_metadata, log_absent_power, say_if_unsteady
from tf_mobileperf.steps.records import StepRecord, csv_fields
from tf_mobileperf.steps.report import Report

log = logging.getLogger(__name__)

#: Measurements begun and not yet ended in this process, ended at exit.
_UNFINISHED: weakref.WeakSet[PerfMonitor] = weakref.WeakSet()


@atexit.register
def _end_unfinished() -> None:
    for monitor in list(_UNFINISHED):
        monitor._end_abandoned("Python exited before the measurement ended")


class PerfMonitor:
    """Measures every step of a training run.

    Args:
        logdir: Where ``report.json``, ``steps.csv`` and the run's series go.
        options: A ``MonitorOptions``, or its fields as keywords (``warmup_steps=3``, ...); ``.options`` holds it.

    In a multi-worker ``tf.distribute`` run (``TF_CONFIG`` names several tasks), each worker writes
    ``<logdir>/<task type>-<index>`` and the chief combines them at its end (``tf_mobileperf.session.cluster``).

    A logdir holds one measurement, so two never mix: another started in it (``fit`` called again, a second callback,
    a second process) writes to the first free ``<logdir>/run-2``, ``run-3``, ... (``logdir`` tells where).

    Example:
        >>> with PerfMonitor("runs/dqn") as perf:               # doctest: +SKIP
        ...     for batch in data:
        ...         with perf.step():
        ...             train_step(batch)
        >>> perf.report.summary()["energy_total"]
    """

    def __init__(self, logdir: str | os.PathLike, *, options: MonitorOptions | None = None, **values):
        if options is not None and values:
            raise TypeError(f"pass either options= or option keywords, not both (got {sorted(values)})")
        self.options = options if options is not None else MonitorOptions(**values)
        self.worker = from_tf_config()
        logdir = check_logdir(logdir)
        self.cluster_logdir = logdir if self.worker else None
        self.layout = RunLayout(logdir / self.worker.name if self.worker else logdir, self.options.run)
        self.model_name: str | None = None  # set by the callback from the Keras model
        self._probe = resolve_sensors(self.options.sensors)
        realtime, why = choose(self.options.sampler_priority)
        sensors = self._probe.sensors
        self.sampler = (
            Sampler(sensors, self.options.period_s, realtime=realtime, priority_reason=why) if sensors else None
        )
        self.channels = self.sampler.channels if self.sampler else []
        self.report: Report | None = None
        self.last_step: StepRecord | None = None  # the step closed last, its window as steps.csv records it
        self._guard = Guard()
        self._failure: tuple[int, str] | None = None
        self._started = False
        self._sync: Callable[[], None] | None = None  # waits for the GPU at a step's end; found at begin()
        self.gpu_memory = GpuMemory()  # the allocator's peak of each step; chosen at begin()
        simulated = None if self.options.clock is time.monotonic else "the steps are marked on a simulated clock"
        self.cpu = RunCpu(simulated, [s.session for s in sensors if isinstance(s, NvmlSensorBase)])
        self._pid = os.getpid()
        self._first_measured = False  # the first measured step closed: sensors without a value are named then
        self._slowest_s = max([s.min_period_s for s in self._probe.sensors] + [self.options.period_s])
        self.profiler = Profiler(self.options.profile_steps, self._guard)
        self.collector = Collector(self.sampler, self.options, self._slowest_s, self._guard)

    @functools.cached_property
    def device(self) -> dict:
        """Static facts of the machine and its sensors, read once per session."""
        return device_metadata(self._probe.sensors, self._guard)

    @property
    def logdir(self) -> Path:
        """Where it writes: the logdir asked for, or from ``begin()`` on the one claimed (``<logdir>/run-N``)."""
        return self.layout.logdir

    @property
    def started(self) -> bool:
        """True between ``begin()`` and ``end()``."""
        return self._started

    def begin(self) -> PerfMonitor:
        """Starts sampling and the writers. Raises OSError if logdir is not writable."""
        if self._started:
            return self
        self._sync = backend.device_sync()
        self.gpu_memory.start()
        if self.profiler.unavailable:
            log.warning("mobileperf: %s; no trace", self.profiler.unavailable)
        self.layout = RunLayout(claim_logdir(self.layout.logdir), self.options.run)
        self.device["started_wall_s"] = time.time()  # for reference; steps use the monotonic clock
        self._writers = RunWriters.open(self.layout, self.channels, self.device, csv_fields(self.channels))
        self._guard(
            "write run summary",
            self._writers.scalars.write_run_summary,
            {"status": "running", "model": self.model_name, "batch_size": self.options.batch_size},
            0,
        )
        log_absent_power(self._probe)
        self._started = True
        _UNFINISHED.add(self)
        try:
            self.collector.start(self.sampler, self._writers)
        except BaseException as exc:  # Ctrl-C in the idle baseline: a report that says so, no rows left over
            self._end_abandoned(f"interrupted before the first step ({type(exc).__name__}: {exc})")
            raise
        return self

    def end(self) -> Report:
        """Stops sampling, joins the remaining steps and writes the report (idempotent); SIGINT and SIGTERM that
        come meanwhile wait until the report is written, then go on."""
        if not self._started or os.getpid() != self._pid:
            if self.report is None:
                self.report = self._build_report()
            return self.report
        self._started = False
        _UNFINISHED.discard(self)
        with deferred():
            return self._end()

    def _end(self) -> Report:
        if self.collector.open is not None:  # interrupted mid-step: keep it, marked failed
            self._close_step(self.collector.open, failed=True)
        self.profiler.stop()
        self._guard("read the CPU time", self.cpu.run_ends, self._sampler_pid)
        self.collector.stop()
        self._collect(final=True)
        self._guard("energy per op", self.profiler.write_op_energy, self.layout, self.channels, 4 * self._slowest_s)
        self.report = self._build_report()
        self._writers.finish(self.report.to_dict(), self.collector.count, self._guard)
        say_if_unsteady(self.collector.totals.durations)
        self.cpu.say_if_busy(self.report)
        if self.worker and self.worker.is_chief:
            self._guard(
                "combine the workers' runs",
                combine,
                self.cluster_logdir,
                self.worker.tasks,
                self.options.combine_wait_s,
            )
        return self.report

    def __enter__(self) -> PerfMonitor:
        return self.begin()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None and self._failure is None:
            self.fail(exc)
        self.end()

    def __del__(self) -> None:
        self._end_abandoned("the measurement was garbage collected before its end()")

    def _end_abandoned(self, reason: str) -> None:
        """Ends a measurement that nobody ended: ``success: false`` with ``reason``."""
        if not getattr(self, "_started", False) or os.getpid() != self._pid:
            return
        log.warning("mobileperf: %s; its report is written to %s", reason, self.logdir)
        self.note_failure(self.next_step, reason)
        self.end()

    @property
    def next_step(self) -> int:
        return self.collector.count + (self.collector.open is not None)

    def step_begin(self) -> None:
        """Opens the next step's window now (its CPU time, allocator peak and trace marker begin with it)."""
        self.profiler.step_begins(self.collector.count, self.layout)
        self.gpu_memory.begin_step()
        step = self.collector.next_step(self.options.clock(), traced=self.profiler.tracing)
        self._guard("read the CPU time", self.cpu.step_begins, not step.warmup, self._sampler_pid)
        self.collector.begin_step(step)
        self._writers.progress.set(step.step)

    def step_end(self, batches: int = 1) -> None:
        """Closes the open step's window now, after waiting for the GPU's queued work; nothing without an open step.

        Args:
            batches: Batches the step ran (more than 1 with ``steps_per_execution``); below 1 counts as 1.
        """
        step = self.collector.open
        if step is None:  # the step already failed, or begin was never called
            return
        if self._sync:
            self._guard("sync devices", self._sync)
        step.end_s = self.options.clock()
        step.batches = max(1, int(batches))
        self._close_step(step)
        self.profiler.step_ended(step.step)

    @contextlib.contextmanager
    def step(self, batches: int = 1) -> Iterator[None]:
        """Measures the block as one step; an error raised in it (an OOM, Ctrl-C) is recorded (``fail``) and re-raised.

        Args:
            batches: Batches the block runs, as ``step_end``'s.
        """
        self.step_begin()
        try:
            yield
        except BaseException as exc:
            self.fail(exc)
            raise
        self.step_end(batches)

    def fail(self, exc: BaseException) -> None:
        """Closes the open (or next) step as failed by ``exc``; the run's ``error`` is its first failure.

        Args:
            exc: The error; "<type>: <message>", its message cut to 2000 characters, is the failure's reason.
        """
        step = self.collector.open
        if step is None:
            step = self.collector.next_step(self.options.clock(), after_gap=False)
        self.note_failure(step.step, f"{type(exc).__name__}: {str(exc).strip()[:2000]}")
        self._close_step(step, failed=True)

    def note_failure(self, step: int, reason: str) -> None:
        """Records that the run failed (``success: false``) without closing a step (a NaN loss, an error outside steps).

        Args:
            step, reason: The step it failed at and why; a later failure is not recorded.
        """
        if self._failure is None:
            self._failure = (step, reason)
            log.warning("mobileperf: training failed at step %d: %s", step, reason.splitlines()[0] if reason else "")

    def discard_step(self) -> None:
        """Forgets the open step: it ran no batch (the input ran out of data)."""
        self.collector.discard_open()

    def _close_step(self, step: StepRecord, failed: bool = False) -> None:
        if failed:
            step.end_s, step.failed = self.options.clock(), True
        if step is self.collector.open:  # begun by step_begin: the allocator's peak since then is the step's
            step.gpu_mem_peak_gb = self.gpu_memory.end_step_gb()
            step.process_cpu_util = self.cpu.step_ends()
        count = self.collector.close_step(step)
        self.last_step = step
        if not (step.failed or step.warmup or self._first_measured):
            self._first_measured = True
            self._guard("name the sensors without a value", self.collector.watch.warn_unread)
        self.profiler.keep(step)
        self._writers.progress.set(step.step if step.failed else count)

    @property
    def _sampler_pid(self) -> int | None:
        return self.sampler.pid if self.sampler else None

    def flush(self) -> None:
        """Drains the sampler, joins the steps it covers and writes them now (the collector thread
        does this every ``flush_s``; a simulation on its own clock calls it itself)."""
        self._guard("collect samples", self._collect)

    def _collect(self, final: bool = False) -> None:
        self.collector.collect(final)

    def _build_report(self) -> Report:
        session = (self.options, self._probe, self.collector, self.sampler, self._failure, self.device)
        report = build_report(*session, self.model_name, self.profiler.unavailable)
        return self.cpu.attach(self.gpu_memory.attach(report, self._probe))
