"""A measurement session: sampler, step windows, join, storage, report.

``PerfMonitor`` is the one place measurement happens; the Keras callback and
custom training loops both drive it::

    with PerfMonitor("runs/dqn") as perf:
        for batch in data:
            with perf.step():
                train_step(batch)
    perf.report.summary()["energy_total"]

Step windows are taken on ``time.monotonic()``, the sampler's clock. GPU
work runs asynchronously, so on a machine with a GPU the end of a step waits
for the Keras backend's device (``tf_mobileperf.session.backend.device_sync``); on
CPU, ops run synchronously and the step's outputs are ready when the call
returns.

A background collector drains the sampler every ``flush_s`` seconds, appends
the rows to disk, joins the steps whose windows are covered, writes them to
``steps.csv`` and TensorBoard, and forgets samples no pending step needs, so
memory stays bounded in long runs. It also watches the sampler: a sampler
that died or stopped writing is reported (``sampling.sampler_outages``),
warned about once, and restarted once. Monitoring never breaks training:
errors of sensors and writers are logged and the run goes on.

A measurement belongs to the process that began it. It always ends with a
report: by ``end()``, or, if nobody calls it, when the monitor is garbage
collected or Python exits. A forked child never ends or stops its parent's
measurement.
"""

from __future__ import annotations

import atexit
import bisect
import contextlib
import logging
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np

from tf_mobileperf.session import backend
from tf_mobileperf.steps import join as join_mod
from tf_mobileperf.session.cluster import combine, from_tf_config
from tf_mobileperf.session.interrupts import deferred
from tf_mobileperf.steps.op_energy import ClockPair, chrome_trace, op_energy, read_ops
from tf_mobileperf.steps.report import Report, StepRecord, StepTotals, energy_rails, fill_steps
from tf_mobileperf.sampling.sampler import Sampler, Samples, check_period
from tf_mobileperf.sampling.stats import SamplingStats
from tf_mobileperf.sensors import Probe, ReplaySensor, Sensor, probe
from tf_mobileperf.output.files import (OP_ENERGY_FILE, PLUGIN_DIR, PROGRESS_FILE, TRACE_FILE, SeriesWriter, StepProgress, StepsCsv,
                      claim_logdir, local_dir, read_series, write_json)
from tf_mobileperf.output.events import ScalarWriter

log = logging.getLogger(__name__)

#: Measurements begun and not yet ended in this process, ended at exit.
_UNFINISHED: "weakref.WeakSet[PerfMonitor]" = weakref.WeakSet()


@atexit.register
def _end_unfinished() -> None:
    for monitor in list(_UNFINISHED):
        monitor._end_abandoned("Python exited before the measurement ended")


def resolve_sensors(sensors: str | Sequence[Sensor]) -> Probe:
    """"auto", "none", "replay:PATH[@SPEED]" or a list of sensor objects."""
    if isinstance(sensors, str):
        if sensors == "auto":
            return probe(pid=os.getpid())
        if sensors == "none":
            return Probe([], {"all": "sensors='none' was requested"})
        if sensors.startswith("replay:"):
            path, _, speed = sensors[len("replay:"):].partition("@")
            return Probe([ReplaySensor(path, speed=float(speed) if speed else 1.0)], {})
        raise ValueError(f"unknown sensors {sensors!r}: use 'auto', 'none', 'replay:PATH[@SPEED]' or a list of Sensor objects")
    sensors = list(sensors)
    bad = [type(s).__name__ for s in sensors if not isinstance(s, Sensor)]
    if bad:
        raise TypeError(f"sensors must be Sensor objects, got {bad}")
    return Probe(sensors, {})


def _check_int(name: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


class PerfMonitor:
    """Measures every step of a training run.

    Args:
        logdir: Where ``report.json``, ``steps.csv`` and the run's series go.
        warmup_steps: Steps recorded but left out of averages (seed: 3).
        sample_period_ms: Sampler period (seed: 5 ms).
        sensors: "auto" (detect), "none", "replay:PATH[@SPEED]", or sensors.
        profile_steps: ``(first, last)`` global steps to trace with the TF
            profiler; both must be measured steps (>= warmup_steps). TF
            backend only: under JAX or torch the report says why there is
            no trace.
        batch_size: Samples per batch, for J/sample and samples/s.
        run: Run name inside logdir; "train" shares the run of
            ``keras.callbacks.TensorBoard(log_dir=logdir)``.
        flush_s: How often samples are drained, joined and written.
        keep_steps: Measured steps kept in memory for ``report.steps`` and
            ``report.json``; older ones are only in ``steps.csv`` (the
            totals cover every step), so a long run's memory stays bounded.
        clock: Seconds on the sampler's clock (``time.monotonic``); step
            windows are taken on it. Simulations pass their own clock.
        combine_wait_s: In a multi-worker run, how long the chief waits at
            its end for the other workers' reports before combining.

    In a multi-worker ``tf.distribute`` run (``TF_CONFIG`` names several
    tasks), each worker writes ``<logdir>/<task type>-<index>`` and the chief
    combines them at its end (see ``tf_mobileperf.session.cluster``).

    A logdir holds one measurement. Starting another in a logdir that
    already holds one (``fit`` called again, a second callback, a second
    process) writes it to the first free ``<logdir>/run-2``, ``run-3``, ...
    (``logdir`` tells where), so two measurements never mix.
    """

    def __init__(
        self,
        logdir: str | os.PathLike,
        warmup_steps: int = 3,
        sample_period_ms: float = 5.0,
        sensors: str | Sequence[Sensor] = "auto",
        profile_steps: tuple[int, int] | None = None,
        batch_size: int | None = None,
        run: str = "train",
        flush_s: float = 0.5,
        keep_steps: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        combine_wait_s: float = 60.0,
    ):
        self.warmup_steps = _check_int("warmup_steps", warmup_steps)
        if batch_size is not None:
            _check_int("batch_size", batch_size, 1)
        if profile_steps is not None:
            if not (isinstance(profile_steps, (tuple, list)) and len(profile_steps) == 2):
                raise TypeError(f"profile_steps must be a (first, last) pair, got {profile_steps!r}")
            first, last = (_check_int("profile_steps", s) for s in profile_steps)
            if first < self.warmup_steps or last < first:
                raise ValueError(f"profile_steps {profile_steps} must be measured steps: "
                                 f"warmup_steps ({self.warmup_steps}) <= first <= last")
            profile_steps = (first, last)
        self.worker = from_tf_config()
        logdir = local_dir(logdir)
        self.cluster_logdir = logdir if self.worker else None
        self.logdir = logdir / self.worker.name if self.worker else logdir
        self.combine_wait_s = combine_wait_s
        self.run = run
        self.keep_steps = _check_int("keep_steps", keep_steps, 1)
        self.clock = clock
        self.profile_steps = profile_steps
        self.batch_size = batch_size
        self.model_name: str | None = None  # set by the callback from the Keras model
        self.flush_s = flush_s
        self.period_ms = check_period(sample_period_ms)
        self._probe = resolve_sensors(sensors)
        self.sampler = Sampler(self._probe.sensors, sample_period_ms) if self._probe.sensors else None
        self.channels = self.sampler.channels if self.sampler else []
        self.report: Report | None = None
        self._lock = threading.RLock()  # re-entered by a signal handler in the main thread
        self._steps: list[StepRecord] = []  # kept for the report: see keep_steps
        self._count = 0  # steps closed so far
        self._last_end: float | None = None  # when the last step closed
        self._not_kept = 0
        self._totals = StepTotals()
        self._warned: set[str] = set()
        self._pending: list[StepRecord] = []
        self._open: StepRecord | None = None
        self._buffer: list[Samples] = []
        self._stats = SamplingStats.of(self.sampler) if self.sampler else SamplingStats(self.period_ms / 1000.0, [])
        self._failure: tuple[int, str] | None = None
        self._stop = threading.Event()
        self._collector: threading.Thread | None = None
        self._started = False
        self._tracing = False
        self._trace_clocks: ClockPair | None = None
        self._traced: list[StepRecord] = []
        self._sync = None  # waits for the GPU at a step's end; found at begin()
        self._device: dict | None = None
        self._pid = os.getpid()
        self._restarted = False  # the sampler is restarted once at most
        self._no_profiler = (f"profile_steps needs the TensorFlow backend; Keras runs on {backend.active()}"
                             if profile_steps and backend.active() != "tensorflow" else None)
        self._slowest_s = max([s.min_period_s for s in self._probe.sensors] + [self.period_ms / 1000.0])

    # -- session -----------------------------------------------------------
    @property
    def started(self) -> bool:
        """True between ``begin()`` and ``end()``."""
        return self._started

    def begin(self) -> "PerfMonitor":
        """Starts sampling and the writers. Raises OSError if logdir is not writable."""
        if self._started:
            return self
        self._sync = backend.device_sync()
        if self._no_profiler:
            log.warning("mobileperf: %s; no trace", self._no_profiler)
        requested = self.logdir
        self.logdir = claim_logdir(requested)
        if self.logdir != requested:
            log.warning("mobileperf: %s already holds a measurement; this one is written to %s", requested, self.logdir)
        self.run_dir = self.logdir / self.run
        (self.run_dir / PLUGIN_DIR).mkdir(parents=True, exist_ok=True)
        self._device_metadata()["started_wall_s"] = time.time()  # for reference; steps use the monotonic clock
        self._series = SeriesWriter(self.run_dir, self.channels, self._device_metadata()) if self.channels else None
        self._csv = StepsCsv(self.logdir / "steps.csv", self._csv_fields())
        self._progress = StepProgress(self.logdir / PROGRESS_FILE)
        self._scalars = ScalarWriter(self.run_dir)
        self._guard("write run summary", self._scalars.write_run_summary,
                    {"status": "running", "model": self.model_name, "batch_size": self.batch_size}, 0)
        if not self._probe.has_kind("power") and not self._probe.has_kind("energy"):
            log.info("no power sensor on this machine; power and energy are reported as null (%s)",
                     "; ".join(f"{k}: {v}" for k, v in self._probe.absent.items()))
        if self.sampler:
            self.sampler.start()
            # A first sample before the first step starts, so its left edge is covered.
            if not self.sampler.wait_for_first_row():
                log.warning("mobileperf: the sampler wrote no sample within 2 s of starting")
        # The collector holds the monitor weakly, so an abandoned monitor can be collected (and ended).
        self._collector = threading.Thread(target=_collect_loop, args=(weakref.ref(self), self._stop, self.flush_s),
                                           daemon=True, name="mobileperf-collector")
        self._collector.start()
        self._started = True
        _UNFINISHED.add(self)
        return self

    def end(self) -> Report:
        """Stops sampling, joins the remaining steps and writes the report. Idempotent.

        SIGINT and SIGTERM wait until the report is written, then go on."""
        if not self._started or os.getpid() != self._pid:
            if self.report is None:
                self.report = self._build_report()
            return self.report
        self._started = False
        _UNFINISHED.discard(self)
        with deferred():
            return self._end()

    def _end(self) -> Report:
        if self._open is not None:  # interrupted mid-step: keep it, marked failed
            self._open.end_s = self.clock()
            self._open.failed = True
            self._close_step(self._open)
        self._stop_trace()
        if self.sampler:
            time.sleep(min(0.2, 3 * self._slowest_s))  # a sample past the last step's end
        self._stop.set()
        if self._collector and self._collector is not threading.current_thread():
            self._collector.join()
        if self.sampler:
            self.sampler.stop()
        self._collect(final=True)
        if self._traced:
            self._guard("energy per op", self._write_op_energy)
        self.report = self._build_report()
        report = self.report.to_dict()
        self._guard("write report", write_json, self.logdir / "report.json", report)
        self._guard("write report", write_json, self.run_dir / PLUGIN_DIR / "report.json", report)
        summary = {k: v for k, v in report.items() if k != "steps"} | {"status": "finished"}
        self._guard("write run summary", self._scalars.write_run_summary, summary, self._count)
        for closer in (self._series.close if self._series else None, self._csv.close, self._scalars.close,
                       self._progress.close):
            if closer:
                self._guard("close", closer)
        if self.worker and self.worker.is_chief:
            self._guard("combine the workers' runs", combine, self.cluster_logdir, self.worker.tasks,
                        self.combine_wait_s)
        return self.report

    def __enter__(self) -> "PerfMonitor":
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

    # -- steps -------------------------------------------------------------
    @property
    def next_step(self) -> int:
        return self._count + (self._open is not None)

    def step_begin(self) -> None:
        index = self._count
        if self.profile_steps and index == self.profile_steps[0]:
            self._start_trace()
        start = self.clock()
        step = StepRecord(step=index, start_s=start, end_s=float("nan"), warmup=index < self.warmup_steps,
                          traced=self._tracing, gap_before_s=None if self._last_end is None else start - self._last_end)
        with self._lock:
            self._open = step
        self._progress.set(index)

    def step_end(self, batches: int = 1) -> None:
        step = self._open
        if step is None:  # the step already failed, or begin was never called
            return
        if self._sync:
            self._guard("sync devices", self._sync)
        step.end_s = self.clock()
        step.batches = max(1, int(batches))
        self._close_step(step)
        if self.profile_steps and step.step == self.profile_steps[1]:
            self._stop_trace()

    @contextlib.contextmanager
    def step(self, batches: int = 1) -> Iterator[None]:
        """Measures the block as one step; an OOM inside it is recorded and re-raised."""
        self.step_begin()
        try:
            yield
        except BaseException as exc:
            self.fail(exc)
            raise
        self.step_end(batches)

    def fail(self, exc: BaseException) -> None:
        """Records that the open step (or the next one) failed with ``exc``.

        The run's ``error`` is its first failure; a later one only closes its step."""
        step = self._open
        if step is None:
            step = StepRecord(step=self._count, start_s=self.clock(), end_s=float("nan"),
                              warmup=self._count < self.warmup_steps)
        step.end_s = self.clock()
        step.failed = True
        self.note_failure(step.step, f"{type(exc).__name__}: {str(exc).strip()[:2000]}")
        self._close_step(step)

    def note_failure(self, step: int, reason: str) -> None:
        """Records that the run failed at ``step`` (``success: false``) without closing a step:
        a loss that turned NaN, a fit that ended by an error outside its steps."""
        if self._failure is None:
            self._failure = (step, reason)
            log.warning("mobileperf: training failed at step %d: %s", step, reason.splitlines()[0] if reason else "")

    def discard_step(self) -> None:
        """Forgets the open step: it ran no batch (the input ran out of data)."""
        with self._lock:
            self._open = None

    def _close_step(self, step: StepRecord) -> None:
        # One move under the lock: the collector always sees the step, open or pending.
        with self._lock:
            self._open = None
            self._count += 1
            self._last_end = step.end_s
            self._steps.append(step)
            self._pending.append(step)
            if step.traced and not step.failed:
                self._traced.append(step)
        self._progress.set(step.step if step.failed else self._count)

    # -- collection ----------------------------------------------------------
    def flush(self) -> None:
        """Drains the sampler, joins the steps it covers and writes them now.

        The collector thread does this every ``flush_s``; a simulation on its
        own clock calls it itself."""
        self._guard("collect samples", self._collect)

    def _collect(self, final: bool = False) -> None:
        if self.sampler:
            rows = self.sampler.drain()
            if not final:
                self._watch_sampler(rows)
            if len(rows):
                gapped = self._stats.add(rows)
                if gapped:
                    log.warning("mobileperf: no valid reading of %s for longer than the allowed gap (a sensor "
                                "stopped answering?); energy over the gap is marked incomplete, the sampling "
                                "section of the report counts the gaps", ", ".join(gapped))
                self._buffer.append(rows)
                if self._series:
                    self._guard("write samples", self._series.append, rows.t, rows.values)
        with self._lock:
            last_t = self._buffer[-1].t[-1] if self._buffer and len(self._buffer[-1]) else -np.inf
            margin = 0.0 if final else 2 * self._slowest_s
            # Steps close in time order, so the steps ready to join are a prefix of the pending ones;
            # without channels, every closed step is ready.
            n = len(self._pending) if final or not self.channels else bisect.bisect_left(
                [s.end_s for s in self._pending], last_t - margin)
            ready, self._pending = self._pending[:n], self._pending[n:]
            # Samples are kept from the oldest step not yet joined, the open one included.
            open_step = self._open
            starts = [s.start_s for s in self._pending] + ([open_step.start_s] if open_step else [])
        if ready:
            self._join(ready)
        self._trim(min(starts) if starts else None)

    def _watch_sampler(self, rows: Samples) -> None:
        """A sampler that died or stopped writing: warn once, record the outage, restart it once."""
        outage = self._stats.open_outage
        if outage is not None and len(rows) and rows.t[-1] > outage.start_s:  # rows again: it ended
            self._stats.add_outage(outage.start_s, float(rows.t[0]), outage.reason)
            outage = None
        reason = self.sampler.health()
        if reason is None or outage is not None:
            return
        start = float(rows.t[-1]) if len(rows) else (self._stats.last if self._stats.last is not None else self.clock())
        self._stats.add_outage(start, None, reason)
        restart = not self._restarted
        log.warning("mobileperf: %s; %s", reason, "restarting it once: the steps in the hole have no energy"
                    if restart else "it was restarted once already: the steps from now on have no energy")
        if restart:
            self._restarted = True
            self._guard("restart the sampler", self.sampler.restart)

    def _join(self, steps: list[StepRecord]) -> None:
        if self.channels and self._buffer:
            t = np.concatenate([b.t for b in self._buffer])
            values = np.concatenate([b.values for b in self._buffer])
            joined = join_mod.join(t, values, self.channels, np.array([s.start_s for s in steps]),
                                   np.array([s.end_s for s in steps]), self.period_ms / 1000.0)
            fill_steps(steps, joined, self.channels)
        for step in steps:
            if not step.warmup and not step.failed:
                self._totals.add(step)
        self._guard("write steps.csv", self._csv.write, [s.csv_row() for s in steps])
        self._guard("write scalars", self._scalars.write_steps, steps)
        self._forget_old_steps()

    def _forget_old_steps(self) -> None:
        """Keeps warm-up and failed steps and the latest ``keep_steps`` others."""
        with self._lock:
            if len(self._steps) <= self.keep_steps + self.keep_steps // 10:  # not on every drain
                return
            special = [s for s in self._steps if s.warmup or s.failed]
            others = [s for s in self._steps if not (s.warmup or s.failed)]
            self._not_kept += len(others) - self.keep_steps
            self._steps = special + others[-self.keep_steps:]

    def _trim(self, oldest_needed: float | None) -> None:
        """Forgets samples older than any pending step needs (keeps a margin for edges)."""
        if not self._buffer:
            return
        keep_from = (oldest_needed if oldest_needed is not None else self._buffer[-1].t[-1]) - 4 * self._slowest_s
        self._buffer = [b for b in self._buffer if len(b) and b.t[-1] >= keep_from]

    # -- profiler ------------------------------------------------------------
    def _start_trace(self) -> None:
        if self._no_profiler:
            return
        try:
            import tensorflow as tf

            self._trace_clocks = ClockPair.now()  # the profiler stamps wall-clock time
            tf.profiler.experimental.start(str(self.run_dir))
            self._tracing = True
        except Exception as exc:  # another profiler session is active, or no profiler
            log.warning("could not start the TF profiler for steps %s: %s", self.profile_steps, exc)

    def _stop_trace(self) -> None:
        if self._tracing:
            self._tracing = False
            import tensorflow as tf

            self._guard("stop the TF profiler", tf.profiler.experimental.stop)

    def _write_op_energy(self) -> None:
        """Energy per op of the traced steps: op_energy.json and a Chrome trace with the power rails."""
        traced = [(s.step, s.start_s, s.end_s) for s in self._traced]
        sessions = sorted((self.run_dir / "plugins" / "profile").glob("*/*.xplane.pb"))
        if not traced or not sessions or not self._series:
            return
        ops = read_ops(sessions[-1], self._trace_clocks)
        ops = ops.select((ops.end_s > traced[0][1]) & (ops.start_s < traced[-1][2]))
        _, rows = read_series(self.run_dir)
        margin = 4 * self._slowest_s
        lo, hi = np.searchsorted(rows[:, 0], [traced[0][1] - margin, traced[-1][2] + margin])
        t, values = np.asarray(rows[lo:hi, 0]), np.asarray(rows[lo:hi, 1:])
        directory = self.run_dir / PLUGIN_DIR
        write_json(directory / OP_ENERGY_FILE, op_energy(ops, t, values, self.channels, traced, self._trace_clocks))
        write_json(directory / TRACE_FILE, chrome_trace(ops, t, values, self.channels, traced[0][1]))

    # -- report --------------------------------------------------------------
    def _device_metadata(self) -> dict:
        """Static facts of the machine and its sensors, read once per session."""
        if self._device is None:
            self._device = {"hostname": os.uname().nodename, "cpu_count": os.cpu_count()}
            for sensor in self._probe.sensors:
                self._guard("sensor metadata", lambda s=sensor: self._device.update(s.metadata()))
        return self._device

    def _csv_fields(self) -> list[str]:
        base = ["step", "start_s", "end_s", "duration_s", "batches", "warmup", "traced", "failed",
                "cpu_util", "gpu_util", "mem_peak_gb", "gap_before_s"]
        rails = [c.name for c in energy_rails(self.channels)]
        rails += ["total"] if rails else []
        return base + [f"energy_j/{r}" for r in rails] + [f"power_w/{r}" for r in rails]

    def _absent(self, *keywords: str) -> str:
        reasons = [f"{k}: {v}" for k, v in self._probe.absent.items() if any(w in k for w in keywords)]
        return "; ".join(reasons) or "no such sensor among those given"

    def _unavailable(self) -> dict[str, str]:
        names = {c.name for c in self.channels}
        out = {}
        if not {c.kind for c in self.channels} & {"power", "energy"}:
            out["power"] = out["energy"] = "no power sensor: " + self._absent("ina3221", "rapl", "nvml", "jtop", "all")
        if not any(c.kind == "util" and "gpu" in c.group for c in self.channels):
            out["gpu_util"] = "no GPU utilization sensor: " + self._absent("gpu", "nvml", "all")
        if "cpu_util" not in names:
            out["cpu_util"] = "no CPU utilization sensor: " + self._absent("cpu", "all")
        if "ram_used" not in names:
            out["mem_peak_gb"] = "no memory sensor: " + self._absent("memory", "all")
        if self.batch_size is None:
            out["energy_per_sample_j"] = out["samples_per_s"] = "batch size unknown: pass batch_size="
        if self._no_profiler:
            out["op_energy"] = self._no_profiler
        if self._totals.count == 0:
            why = self._no_measured_steps()
            for key in ("energy", "power", "cpu_util", "gpu_util", "mem_peak_gb", "step_time_s"):
                out.setdefault(key, why)
        elif self._totals.energy_complete == 0 and "energy" not in out:
            out["energy"] = out["power"] = ("no measured step has complete energy: the sensors had gaps over "
                                            "every step (see sampling.channel_gaps and sampling.sampler_outages)")
        return out

    def _no_measured_steps(self) -> str:
        """Why the run has no measured step."""
        failed_at = self._failure[0] if self._failure else None
        if self._count == 0:
            return "no step ran" + (f": training failed before it ({self._failure[1].splitlines()[0]})"
                                    if self._failure else "")
        if failed_at is not None and failed_at < self.warmup_steps:
            return f"training failed at step {failed_at}, within the {self.warmup_steps} warm-up steps"
        return f"all {self._count} steps were warm-up steps (warmup_steps={self.warmup_steps})"

    def _build_report(self) -> Report:
        failed_step, error = self._failure if self._failure else (None, None)
        return Report(
            success=self._failure is None, failed_step=failed_step, error=error,
            warmup_steps=self.warmup_steps, steps=list(self._steps), totals=self._totals,
            steps_not_kept=self._not_kept, channels=self.channels,
            sampling=self._stats.summary(self.sampler), sensors=[s.describe() for s in self._probe.sensors],
            device=self._device_metadata(), unavailable=self._unavailable(), batch_size=self.batch_size,
            model=self.model_name,
        )

    def _guard(self, what: str, fn, *args):
        """Runs ``fn``; a failure is logged (a warning the first time per ``what``), never raised."""
        try:
            return fn(*args)
        except Exception as exc:  # monitoring must never break training
            first = what not in self._warned
            self._warned.add(what)
            log.log(logging.WARNING if first else logging.DEBUG, "mobileperf: %s failed: %s%s", what, exc,
                    " (further failures of this kind are logged at debug level)" if first else "")
            return None


def _collect_loop(monitor_ref: "weakref.ref[PerfMonitor]", stop: threading.Event, flush_s: float) -> None:
    """The collector thread: flushes every ``flush_s`` while the monitor lives."""
    while not stop.wait(flush_s):
        monitor = monitor_ref()
        if monitor is None:
            return
        monitor.flush()
        del monitor
