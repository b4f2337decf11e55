"""The collector: from raw samples to joined, written steps, in bounded memory.

A background thread drains the sampler every ``flush_s`` seconds, counts the
sampling quality, appends the rows to the series on disk, joins the steps
whose windows are covered, adds them to the totals, writes them to
``steps.csv`` and TensorBoard, and forgets the samples and steps nobody needs
any more. It also watches the sampler: one that died or stopped writing is
recorded as an outage, warned about once and restarted once.

An energy counter's value at a step's end is known only once the counter has
updated after it (``steps.join``: NVML's counter updates every ~100 ms), so
a step is joined when every counter has changed since its end (or
``SETTLE_MAX_S`` later), samples are kept for ``COUNTER_HISTORY`` update
periods before the oldest step not yet joined (the join places a counter's
changes on its update grid, fitted over the changes on either side), and the idle window and the run's last step
wait for that update (again at most ``SETTLE_MAX_S``).

Channels that never gave a valid value are named once, at the first
measured step (``warn_unread``), with the library's own words for the
failure where the sampler has them (``unread_reasons``); a channel that
stops answering later is warned about as a gap. A channel its source itself
leaves without a value at times (``Sensor.absent_in_source``: a core a
tegrastats log says is "off") is neither: it is named once at info level,
and its reason is the report's. A source that ends (a replayed log,
``Sensor.covers_s``) is no gap either once it has: a run that outlasted it is
said once, at its end (``Sensor.ran_out``).

Before the first step it samples ``idle_s`` seconds with nothing training:
the idle power of each rail (``idle_power_w``), subtracted from each step's
energy as its ``energy_active_j``. Only rails have a baseline, so a run
without a power sensor does not wait.

The monitor hands steps over as their windows open and close
(``begin_step``, ``close_step``); everything the collector keeps is read by
the report at the end. Monitoring never breaks training: every write goes
through a ``Guard``, which logs a failure and goes on.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time

import numpy as np

from tf_mobileperf.output.writers import RunWriters
from tf_mobileperf.sampling.sampler import FIRST_ROW_TIMEOUT_S, Sampler, Samples
from tf_mobileperf.sampling.stats import SamplingStats
from tf_mobileperf.sensors.base import RAIL_KINDS
from tf_mobileperf.session.guard import Guard
from tf_mobileperf.session.idle import IdleBaseline
from tf_mobileperf.session.options import MonitorOptions
from tf_mobileperf.session.unread import absent_in_source, ending_sources, never_valued, unread_reasons
from tf_mobileperf.steps import join as join_mod
from tf_mobileperf.steps.counter import frozen_for_s, settled_until
from tf_mobileperf.steps.records import Roles, StepRecord, fill_steps
from tf_mobileperf.steps.totals import StepTotals

log = logging.getLogger(__name__)

#: The longest a step waits for the energy counters to update after its end.
SETTLE_MAX_S = 1.0

#: Update periods of the slowest counter kept before the oldest step not yet joined (at most
#: ``COUNTER_HISTORY_MAX_S``): the join fits the counter's update grid through the changes on either side of
#: a step, and over 8 changes its rate was off by 1.6% (an edge placed 7 ms off), over 32 by well under 0.1%.
COUNTER_HISTORY, COUNTER_HISTORY_MAX_S = 32, 5.0


class Collector:
    """The steps from their window to their report, and the thread that joins them to the samples.

    ``lock`` guards the open, pending and kept steps (an RLock: a signal
    handler in the main thread may re-enter it)."""

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
        self.lock = threading.RLock()
        self._options = options
        self._slowest_s = slowest_s
        self._guard = guard
        self._pending: list[StepRecord] = []
        self._buffer: list[Samples] = []
        self._restarted = False  # the sampler is restarted once at most
        self._writers: RunWriters | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._counters = any(c.kind == "energy" for c in self.channels)
        # Samples kept before the oldest step not yet joined: a few updates of the slowest counter once known.
        self._counter_margin_s = COUNTER_HISTORY_MAX_S if self._counters else 0.0
        self._unread_warned: set[str] = set()
        self._frozen_warned: set[str] = set()  # energy counters said to have stopped changing
        self._measured_seen = False  # the first measured step has closed: unread channels are named now
        self._absent = absent_in_source(sampler)  # no value there is the source's word, not a gap
        self._absent_noted: set[str] = set()
        self._ran_out_said = False

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

    @property
    def buffered_rows(self) -> int:
        """Samples held in memory for the steps not yet joined."""
        return sum(len(b) for b in self._buffer)

    # -- steps ---------------------------------------------------------------
    def next_step(self, start_s: float, traced: bool = False, after_gap: bool = True) -> StepRecord:
        """The record of the next step, from ``start_s``; ``after_gap``: with the time since the last one."""
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
        with self.lock:
            self.open = step

    def close_step(self, step: StepRecord) -> int:
        """Moves ``step`` (open or not) to the pending ones, in one move under the lock; returns the count."""
        with self.lock:
            self.open = None
            self.count += 1
            self.last_end = step.end_s
            self.steps.append(step)
            self._pending.append(step)
            return self.count

    def discard_open(self) -> None:
        with self.lock:
            self.open = None

    # -- thread --------------------------------------------------------------
    def start(self, sampler: Sampler | None, writers: RunWriters) -> None:
        """Starts ``sampler``, waits for its first sample, then starts the thread."""
        self.sampler, self._writers = sampler, writers
        if self.sampler:
            self.sampler.start()
            # A first sample before the first step starts, so its left edge is covered.
            if not self.sampler.wait_for_first_row():
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
        """Samples ``idle_s`` seconds with nothing training; each rail's mean power over them is its idle power.

        The window opens once every rail has a reading (at most ``SETTLE_MAX_S`` after the first row): a
        sensor read in its own thread, or a slower one, gives its first later than the sampler's first row."""
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
        t, values = self._buffered()
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
        while self._counters and self._settled_until() < until_s and time.monotonic() < deadline:
            time.sleep(self._slowest_s)
            self._take(self._running.drain(), final)

    def _settled_until(self) -> float:
        """Up to when every energy counter's interpolation is final in the samples held (inf without one)."""
        t, values = self._buffered()
        return settled_until(t, values, self.channels, SETTLE_MAX_S) if len(t) else -np.inf

    def _buffered(self) -> tuple[np.ndarray, np.ndarray]:
        """Every sample held, as one time array and one (samples, channels) array."""
        return (
            np.concatenate([b.t for b in self._buffer]) if self._buffer else np.empty(0),
            np.concatenate([b.values for b in self._buffer]) if self._buffer else np.empty((0, len(self.channels))),
        )

    def stop(self) -> None:
        """Stops the thread, then the sampler after a sample past the last step's end (and an update of every
        energy counter after it, ``_settle``).

        Not from the thread itself: a monitor garbage collected in it ends from there."""
        self._stop.set()
        if self._thread and self._thread is not threading.current_thread():
            self._thread.join()
        if self.sampler:
            if self.last_end is not None:
                self._guard("wait for the energy counters", self._settle, self.last_end, True)
            self.sampler.stop()
            self._guard("say which sources ran out", self._warn_ran_out)

    def _loop(self) -> None:
        while not self._stop.wait(self._options.flush_s):
            self._guard("collect samples", self.collect)

    # -- collection ----------------------------------------------------------
    def collect(self, final: bool = False) -> None:
        """Drains the sampler, joins the steps its samples cover, writes them and forgets what is done."""
        if self.sampler:
            self._take(self.sampler.drain(), final)
        with self.lock:
            last_t = self._buffer[-1].t[-1] if self._buffer and len(self._buffer[-1]) else -np.inf
            margin = 0.0 if final else 2 * self._slowest_s
            # Steps close in time order, so the steps ready to join are a prefix of the pending ones;
            # without channels, every closed step is ready.
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
        self._trim(min(starts) if starts else None)

    def _joinable_until(self, limit: float) -> float:
        """Steps ending by then can be joined: ``limit``, or earlier while an energy counter has not
        updated since (but not more than ``SETTLE_MAX_S`` earlier)."""
        if not self._counters:
            return limit
        return min(limit, max(self._settled_until(), limit - SETTLE_MAX_S))

    def _take(self, rows: Samples, final: bool) -> None:
        if not final:
            self._watch_sampler(rows)
        if not len(rows):
            return
        gapped = self.stats.add(rows)
        self._note_absent([name for name in gapped if name in self._absent])
        gapped = [name for name in gapped if name not in self._absent and name not in self._ended(rows.t[-1])]
        unread = set(never_valued(self.stats))
        stopped = [name for name in gapped if name not in unread]
        if stopped:
            log.warning(
                "mobileperf: no valid reading of %s for longer than the allowed gap (a sensor "
                "stopped answering?); energy over the gap is marked incomplete, the sampling "
                "section of the report counts the gaps",
                ", ".join(stopped),
            )
        if self._measured_seen and any(name in unread for name in gapped):
            self._warn_unread([name for name in gapped if name in unread])
        self._buffer.append(rows)
        writers = self._started_writers
        if writers.series:
            self._guard("write samples", writers.series.append, rows.t, rows.values)

    def _ended(self, t: float) -> set[str]:
        """The channels of the sources that have ended by ``t`` (a replayed log: ``covers_s`` after the first
        sample): no value after that is the source's end, not a gap."""
        if self.stats.first is None:
            return set()
        return {
            c.name
            for sensor, covers in ending_sources(self.sampler)
            if t > self.stats.first + covers
            for c in sensor.channels
        }

    def _note_absent(self, names: list[str]) -> None:
        """Once per channel, at info level: its source leaves it without a value (``absent_in_source``)."""
        names = [name for name in names if name not in self._absent_noted]
        self._absent_noted.update(names)
        if names:
            log.info(
                "mobileperf: no value of %s in some stretches, as its source says (not a sensor gap)",
                ", ".join(f"{name} ({self._absent[name]})" for name in names),
            )

    def _warn_ran_out(self) -> None:
        """Once, at the end: each source (a replayed log) that ended before the run did, and from when on the
        samples are missing."""
        first, last = self.stats.first, self.stats.last
        if first is None or last is None or self._ran_out_said:
            return
        self._ran_out_said = True
        run_s = (self.last_end if self.last_end is not None else last) - first
        for sensor, covers in ending_sources(self.sampler):
            if run_s > covers:
                log.warning("mobileperf: %s", sensor.ran_out(run_s))

    def _watch_sampler(self, rows: Samples) -> None:
        """A sampler that died or stopped writing: warn once, record the outage, restart it once."""
        outage = self.stats.open_outage
        if outage is not None and len(rows) and rows.t[-1] > outage.start_s:  # rows again: it ended
            self.stats.add_outage(outage.start_s, float(rows.t[0]), outage.reason)
            outage = None
        reason = self._running.health()
        if reason is None or outage is not None:
            return
        start = (
            float(rows.t[-1])
            if len(rows)
            else (self.stats.last if self.stats.last is not None else self._options.clock())
        )
        self.stats.add_outage(start, None, reason)
        restart = not self._restarted
        log.warning(
            "mobileperf: %s; %s",
            reason,
            "restarting it once: the steps in the hole have no energy"
            if restart
            else "it was restarted once already: the steps from now on have no energy",
        )
        if restart:
            self._restarted = True
            self._guard("restart the sampler", self._running.restart)

    def warn_unread(self) -> None:
        """At the first measured step: one warning naming the channels with no valid value yet, each with its
        error where the sampler has one. A channel still within its first allowed gap, without an error,
        is not named now: if it stays without a value, it is once its gap shows."""
        self._measured_seen = True
        unread = never_valued(self.stats)
        self._note_absent([name for name in unread if name in self._absent])
        unread = [name for name in unread if name not in self._absent]
        reasons = unread_reasons(unread, self.sampler, "")
        first, last = self.stats.first, self.stats.last
        waited = last - first if self.stats.rows and first is not None and last is not None else 0.0
        past_gap = {c.name for c, gap in zip(self.stats.channels, self.stats.allowed_gap) if waited > gap}
        self._warn_unread([name for name in unread if reasons[name] or name in past_gap])

    def _warn_unread(self, names: list[str]) -> None:
        """One warning line for those of ``names`` not named yet (the main thread and the collector's may ask)."""
        with self.lock:
            names = [
                c.name
                for c in self.channels
                if c.name in names and c.name not in self._unread_warned and c.name not in self._absent
            ]
            self._unread_warned.update(names)
        if names:
            reasons = unread_reasons(names, self.sampler, "no reading yet")
            log.warning(
                "mobileperf: no valid value yet from %s; their quantities are null in the report, "
                "which lists them under 'unavailable'",
                ", ".join(f"{name} ({reasons[name]})" for name in names),
            )

    def _join(self, steps: list[StepRecord]) -> None:
        if self.channels and self._buffer:
            t, values = self._buffered()
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
            self._note_counter_margin(joined)
            self._warn_frozen_counters(t, values)
        for step in steps:
            if not step.warmup and not step.failed:
                self.totals.add(step)
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

    def _warn_frozen_counters(self, t: np.ndarray, values: np.ndarray) -> None:
        """Warns once per energy counter that stopped changing while it was still read (``counter.frozen_for_s``)."""
        for i, channel in enumerate(self.channels):
            if channel.kind != "energy" or channel.name in self._frozen_warned:
                continue
            unchanged_s = frozen_for_s(t, values[:, i])
            if unchanged_s is not None:
                self._frozen_warned.add(channel.name)
                log.warning(
                    "mobileperf: the energy counter %s stopped changing %.1f s before its last reading, while it "
                    "was still read: a stuck counter or driver; the steps since have no energy from it (null), "
                    "not 0",
                    channel.name,
                    unchanged_s,
                )

    def _note_counter_margin(self, joined: dict[str, join_mod.StepValues]) -> None:
        """Keeps ``COUNTER_HISTORY`` update periods of the slowest counter before the oldest step not yet joined."""
        periods = [v.update_period_s for v in joined.values() if v.channel.kind == "energy" and v.update_period_s]
        if periods:
            self._counter_margin_s = min(COUNTER_HISTORY_MAX_S, COUNTER_HISTORY * max(periods))

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

    def _trim(self, oldest_needed: float | None) -> None:
        """Forgets samples older than any pending step needs (keeps a margin for edges)."""
        if not self._buffer:
            return
        margin = max(4 * self._slowest_s, self._counter_margin_s)
        keep_from = (oldest_needed if oldest_needed is not None else self._buffer[-1].t[-1]) - margin
        self._buffer = [b for b in self._buffer if len(b) and b.t[-1] >= keep_from]
