"""The collector: from raw samples to joined, written steps, in bounded memory.

A background thread drains the sampler every ``flush_s`` seconds, counts the sampling quality, appends the rows to the
series on disk, joins the steps whose windows are covered, adds them to the totals, writes them to ``steps.csv`` and
TensorBoard, and forgets the samples and steps nobody needs any more. ``SamplingWatch`` says, once each, what it sees
of the sampler and channels: an outage (restarted once), gaps, channels never read, frozen counters.

An energy counter's value at a step's end is known once it has updated after it (``steps.join``: NVML's updates every
~100 ms): a step is joined when every counter has changed since its end (at most ``SETTLE_MAX_S`` later), and the idle
window and the run's last step wait for that update too. Meanwhile its samples are ``HeldSamples``.

Before the first step it samples ``idle_s`` seconds with nothing training: each rail's idle power (``idle_power_w``),
subtracted from each step's energy as its ``energy_active_j``; without a power sensor it does not wait.

The monitor hands steps over as their windows open and close (``begin_step``, ``close_step``); the report reads what
the collector keeps. Monitoring never breaks training: a ``Guard`` logs each failed write and goes on.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time

import numpy as np

from tf_mobileperf.output.writers import RunWriters
from tf_mobileperf.sampling.sampler import FIRST_ROW_TIMEOUT_S, Sampler
from tf_mobileperf.sampling.samples import Samples
from tf_mobileperf.sampling.stats import SamplingStats
from tf_mobileperf.sensors.base import RAIL_KINDS
from tf_mobileperf.session.guard import Guard
from tf_mobileperf.session.held_samples import HeldSamples
from tf_mobileperf.session.idle import IdleBaseline
from tf_mobileperf.session.options import MonitorOptions
from tf_mobileperf.session.sampling_watch import SamplingWatch
from tf_mobileperf.steps import join as join_mod
from tf_mobileperf.steps.records import Roles, StepRecord, fill_steps
from tf_mobileperf.steps.totals import StepTotals

log = logging.getLogger(__name__)

#: The longest a step waits for the energy counters to update after its end.
SETTLE_MAX_S = 1.0


class Collector:
    """The steps from their window to their report, and the thread that joins them to the samples."""

    def __init__(self, sampler: Sampler | None, options: MonitorOptions, slowest_s: float, guard: Guard):
        self.channels = sampler.channels if sampler else []
        self.stats = SamplingStats.of(sampler) if sampler else SamplingStats(options.period_s, [])
        self.sampler: Sampler | None = None  # the one it drives, from start()
        self.totals = StepTotals()  # every measured step, kept or not
        self.steps: list[StepRecord] = []  # kept for the report: see keep_steps
        self.not_kept = 0
        self.count = 0  # steps closed so far
        self.last_end: float | None = None  # when the last step closed
        self.open: StepRecord | None = None
        self.idle = IdleBaseline.not_measured(options)  # measured by start()
        self.lock = threading.RLock()  # the open, pending and kept steps' (a signal handler may re-enter it)
        self._options = options
        self._slowest_s = slowest_s
        self._guard = guard
        self._pending: list[StepRecord] = []
        self.held = HeldSamples(self.channels, slowest_s)
        self._writers: RunWriters | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.watch = SamplingWatch(sampler, self.stats, options.clock, guard)

    @property
    def _running(self) -> Sampler:
        """The sampler given to start(): for the work done only when there is one."""
        assert self.sampler is not None, "no sampler: before start(), or a run without sensors"
        return self.sampler

    @property
    def _started_writers(self) -> RunWriters:
        """The writers given to start()."""
        assert self._writers is not None, "the collector is not started"
        return self._writers

    def next_step(self, start_s: float, traced: bool = False, after_gap: bool = True) -> StepRecord:
        """A new record of the next step (index ``count``), its end NaN, not yet begun or counted.

        Args:
            start_s: When it begins, seconds on the steps' clock.
            traced: The profiler traces it.
            after_gap: With the time since the last step's end (``gap_before_s``); False or no step yet: None.
        """
        index, last_end = self.count, self.last_end
        gap = start_s - last_end if after_gap and last_end is not None else None
        return StepRecord(
            step=index,
            start_s=start_s,
            end_s=float("nan"),
            warmup=index < self._options.warmup_steps,
            traced=traced,
            gap_before_s=gap,
        )

    def begin_step(self, step: StepRecord) -> None:
        """Makes ``step`` the open step: its window has begun.

        Args:
            step: ``next_step``'s record, its ``start_s`` set.
        """
        with self.lock:
            self.open = step

    def close_step(self, step: StepRecord) -> int:
        """Closes ``step`` (open or not): counts it, moves it to the pending and kept steps, in one move under the lock.

        Args:
            step: The step whose window has closed, its ``end_s`` set.

        Returns:
            The count of steps closed so far, this one included.
        """
        with self.lock:
            self.open = None
            self.count += 1
            self.last_end = step.end_s
            self.steps.append(step)
            self._pending.append(step)
            return self.count

    def discard_open(self) -> None:
        """Forgets the open step, under the lock."""
        with self.lock:
            self.open = None

    # -- thread --------------------------------------------------------------
    def start(self, sampler: Sampler | None, writers: RunWriters) -> None:
        """Starts ``sampler``, waits for its first sample, measures the idle baseline, then starts the thread.

        Args:
            sampler: The run's sampler; None for a run without sensors (only the thread starts).
            writers: The run's open writers, for the series, ``steps.csv`` and the scalars.
        """
        self.sampler, self._writers = sampler, writers
        if self.sampler:
            self.sampler.start()
            if not self.sampler.wait_for_first_row():  # a sample before the first step covers its left edge
                log.warning("mobileperf: the sampler wrote no sample within %g s of starting", FIRST_ROW_TIMEOUT_S)
            if self._options.idle_s > 0 and Roles.of(self.channels).rails:
                try:
                    self._guard("measure the idle baseline", self._measure_idle)
                except BaseException:  # Ctrl-C while waiting: the session never began; leave no sampler running
                    self.sampler.stop()
                    raise
        self._thread = threading.Thread(target=self._loop, daemon=True, name="mobileperf-collector")
        self._thread.start()

    def _measure_idle(self) -> None:
        """Samples ``idle_s`` seconds with nothing training; each rail's mean power over them is its idle power. The
        window opens once every rail has a reading (at most ``SETTLE_MAX_S`` after the first row): a sensor read in
        its own thread, or a slower one, gives its first later than the sampler's first row."""
        rails = [i for i, c in enumerate(self.channels) if c.kind in RAIL_KINDS]
        deadline = time.monotonic() + SETTLE_MAX_S
        while time.monotonic() < deadline and not all(self.stats.valid[i] for i in rails):
            time.sleep(self._slowest_s)
            self._take(self._running.drain(), False)
        start = self._options.clock()
        time.sleep(self._options.idle_s)
        end = self._options.clock()
        self._settle(end, final=False)
        window = StepRecord(step=-1, start_s=start, end_s=end)
        t, values = self.held.arrays()
        fill_steps(
            [window],
            join_mod.join(t, values, self.channels, np.array([start]), np.array([end]), self._options.period_s),
            self.channels,
        )
        unknown = [rail for rail, w in window.power_w.items() if w is None]
        reason = None
        if unknown:
            reason = (
                f"the {end - start:.3g} s idle window before the first step has no complete "
                f"power of {', '.join(unknown)} (a sensor gap, or a clock that did not advance)"
            )
            log.warning("mobileperf: %s; their active energy is null", reason)
        self.idle = IdleBaseline(window.power_w, reason, end - start)

    def _settle(self, until_s: float, final: bool) -> None:
        """Drains samples past ``until_s``, and until every energy counter has updated after it (at most
        ``SETTLE_MAX_S``): a window ending there is known only then."""
        time.sleep(min(0.2, 3 * self._slowest_s))  # a sample past the window's end
        self._take(self._running.drain(), final)
        deadline = time.monotonic() + SETTLE_MAX_S
        while self.held.counters and self.held.settled_until(SETTLE_MAX_S) < until_s and time.monotonic() < deadline:
            time.sleep(self._slowest_s)
            self._take(self._running.drain(), final)

    def stop(self) -> None:
        """Stops the thread, then the sampler after a sample past the last step's end and an update of every energy
        counter after it (``_settle``); not from the thread itself: a monitor garbage collected in it ends there."""
        self._stop.set()
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join()
        if self.sampler:
            if self.last_end is not None:
                self._guard("wait for the energy counters", self._settle, self.last_end, True)
            self.sampler.stop()
            self._guard("say which sources ran out", self.watch.warn_ran_out, self.last_end)

    def _loop(self) -> None:
        while not self._stop.wait(self._options.flush_s):
            self._guard("collect samples", self.collect)

    # -- collection ----------------------------------------------------------
    def collect(self, final: bool = False) -> None:
        """Drains the sampler, joins the steps its samples cover, writes them and forgets what is done.

        Args:
            final: At the run's end, the sampler stopped: every pending step is joined now.
        """
        if self.sampler:
            self._take(self.sampler.drain(), final)
        with self.lock:
            last_t = self.held.last_t
            margin = 0.0 if final else 2 * self._slowest_s
            # Steps close in time order: those ready to join are a prefix of the pending ones (all, without channels).
            n = (
                len(self._pending)
                if final or not self.channels
                else bisect.bisect_left([s.end_s for s in self._pending], self._joinable_until(last_t - margin))
            )
            ready, self._pending = self._pending[:n], self._pending[n:]
            # Samples are kept from the oldest step not yet joined, the open one included.
            starts = [s.start_s for s in self._pending] + ([self.open.start_s] if self.open else [])
        if ready:
            self._join(ready)
        self.held.trim(min(starts) if starts else None)

    def _joinable_until(self, limit: float) -> float:
        """Steps ending by then can be joined: ``limit``, or earlier while an energy counter has not
        updated since (but not more than ``SETTLE_MAX_S`` earlier)."""
        if not self.held.counters:
            return limit
        return min(limit, max(self.held.settled_until(SETTLE_MAX_S), limit - SETTLE_MAX_S))

    def _take(self, rows: Samples, final: bool) -> None:
        if not final:
            self.watch.check_sampler(self._running, rows)
        if not len(rows):
            return
        self.watch.rows_added(rows, self.stats.add(rows))
        self.held.append(rows)
        writers = self._started_writers
        if writers.series:
            self._guard("write samples", writers.series.append, rows.t, rows.values)

    def _join(self, steps: list[StepRecord]) -> None:
        if self.channels and self.held.rows:
            t, values = self.held.arrays()
            joined = join_mod.join(
                t,
                values,
                self.channels,
                np.array([s.start_s for s in steps]),
                np.array([s.end_s for s in steps]),
                self._options.period_s,
                busy=self._busy_windows(float(t[0])),
            )
            fill_steps(steps, joined, self.channels, self.idle.power_w)
            self.totals.note_update_periods(joined)
            self.held.note_update_periods(joined)
            self.watch.warn_frozen_counters(t, values)
        self.totals.add_steps([s for s in steps if not s.warmup and not s.failed])
        writers = self._started_writers
        self._guard("write steps.csv", writers.csv.write, [s.csv_row() for s in steps])
        self._guard("write scalars", writers.scalars.write_steps, steps)
        self._forget_old_steps()

    def _busy_windows(self, since_s: float) -> tuple[np.ndarray, np.ndarray]:
        """Every step's window that ends after ``since_s``, joined or not, and the open one's (to no end
        yet): where the device worked, among which a counter's update interval is shared (``steps.join``)."""
        with self.lock:
            windows = [(s.start_s, s.end_s) for s in self.steps if s.end_s >= since_s]
            if self.open is not None:
                windows.append((self.open.start_s, np.inf))
        starts, ends = np.array(windows, dtype=np.float64).reshape(-1, 2).T
        return starts, ends

    def _forget_old_steps(self) -> None:
        """Keeps warm-up and failed steps and the latest ``keep_steps`` others."""
        keep = self._options.keep_steps
        with self.lock:
            if len(self.steps) <= keep + keep // 10:  # not on every drain
                return
            special = [s for s in self.steps if s.warmup or s.failed]
            others = [s for s in self.steps if not (s.warmup or s.failed)]
            self.not_kept += len(others) - keep
            self.steps = special + others[-keep:]
