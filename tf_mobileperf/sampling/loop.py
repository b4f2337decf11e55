"""One sampling worker's loop: reads the sensors when due and writes rows into the shared ring.

It exists apart from ``sampler.Sampler`` (which starts, watches and drains
it from the trainer) because it is what runs in the sampler process (started
fresh, or forked), or in thread mode in a thread of the trainer.

Sensors are read one after the other in the sampling thread (in C for those
declared as kernel files, ``native``), so a fast rail pays no thread
hand-off. The rows and failed reads are ``rows.SampleRows``'; a read that
hangs is handed to a thread of its own by ``watchdog.HungReadWatchdog``.
"""

from __future__ import annotations

import logging
import os
import signal
import time

import numpy as np

from tf_mobileperf.sampling import native
from tf_mobileperf.sampling.native import NativeTables
from tf_mobileperf.sampling.offload import OffloadedSensor, read_sensor
from tf_mobileperf.sampling.ring import SharedRing
from tf_mobileperf.sampling.schedule import grid_periods, next_due, next_wake, plan
from tf_mobileperf.sampling.watchdog import HungReadWatchdog
from tf_mobileperf.sensors.base import Sensor

log = logging.getLogger(__name__)


class SamplingLoop(HungReadWatchdog):
    """One worker's sampling: a sampling thread, and the watchdog that replaces it when a read hangs.

    The loop wakes only on ticks of the grid where a sensor is due: every
    ``stride`` ticks, the fastest sensor's rate; a slower sensor is read at
    the first wake-up on or after its own due tick, so it keeps its rate.
    In the sampler process the ticks run in C (``native``) where it was built;
    sensors without ``file_reads`` are read here when C says they are due.
    Rows are written in place in the ring and published only by the current
    sampling thread (``leader``), and only while the shared epoch is this
    worker's.
    """

    def __init__(self, sensors: list[Sensor], period_s: float, shared: SharedRing, epoch: int, parent: int | None):
        super().__init__(sensors, period_s, shared, epoch, parent)
        self.deadline_s = [max(self.budget_s, s.min_period_s) for s in sensors]
        self.every, self.stride = plan(grid_periods(sensors), period_s)
        self.due = [0] * len(sensors)  # the tick each sensor is due (Python ticks)
        self.tick = 0  # the tick of the row being filled; a new leader goes on from it
        self.origin = time.monotonic()  # the grid's tick 0: set again when the first row is read

    @property
    def native(self) -> bool:
        """Whether the ticks run in C."""
        return self.tables is not None

    def run(self, alarm: bool, death_fd: int | None = None) -> int:
        """Samples until stopped or the parent dies; this thread is the watchdog.

        The sensors' ``prepare`` runs first (``PREPARE_TIMEOUT_S`` at most).
        With ``alarm`` each row arms SIGALRM for the read budget, so the
        watchdog wakes only when a read overran it, when sampling ends, when
        the parent dies (``death_fd`` reads EOF) and, in case a process the
        trainer forked holds that end too, once a second to compare
        ``os.getppid()``. Without, it looks every half budget.

        Args:
            alarm: True in the sampler process, whose main thread this is (it also runs the ticks in C where the
                library loads); False in a thread of the trainer, whose signals are the trainer's.
            death_fd: The read end of a pipe whose write end only the parent holds; None: no such pipe.

        Returns:
            1 if sampling failed, else 0.
        """
        self.alarm = alarm
        if alarm:
            self._wake = os.pipe()
            signal.signal(signal.SIGALRM, self._on_alarm)
            library = native.load()
            if library is not None:
                self.tables = native.NativeTables(library, self.sensors, self.every, [dict(c) for c in self.columns])
        self._prepare()
        for i, sensor in enumerate(self.sensors):
            if sensor.own_thread:
                self._pace(i)
        self._lead(0)
        if alarm:
            self._watch_child(death_fd)
        else:
            while not self.done.wait(self.budget_s / 2) and self.alive():
                self._replace_if_hung()
        self.done.set()
        return int(self.failed)

    def _sample(self, generation: int) -> None:
        try:
            if self.alarm:  # SIGALRM goes to the watchdog, never interrupts a sensor's system call
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            if generation > 0:  # a new leader: the row its hung predecessor was filling is a hole
                if self.current is not None:
                    self.tick = self.current.loop.tick
                self._sleep_to_next()
            else:  # the grid starts at the first row, not when the loop was built (files opened, tables made since)
                self.origin = time.monotonic()
            if self.tables is not None:  # self.native
                self._sample_native(self.tables, generation)
            else:
                self._sample_rows(generation)
        except BaseException:
            log.exception("mobileperf: the sampling loop failed")
            self.failed = True
            self._finish()

    def _sample_rows(self, generation: int) -> None:
        """The Python loop: fills a row at each wake-up, publishes it, sleeps to the next."""
        while self.alive():
            row = self._slot()
            row[1:] = np.nan
            row[0] = now = time.monotonic()
            if self.alarm:
                signal.setitimer(signal.ITIMER_REAL, self.budget_s)
            for i in range(len(self.sensors)):
                due = self.tick >= self.due[i]
                if due:
                    self.due[i] = next_due(self.tick, self.due[i], self.every[i])
                if not self._visit(i, due, now, row, generation):
                    return
            if self.alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if not self._publish():
                return
            self._sleep_to_next()
        self._finish()

    def _sleep_to_next(self) -> None:
        """Sleeps to the next wake-up's tick on the grid; ticks already past are skipped."""
        self.tick = next_wake(self.tick, self.stride, self.period_s, self.origin, time.monotonic())
        time.sleep(max(0.0, self.origin + self.tick * self.period_s - time.monotonic()))

    def _sample_native(self, tables: NativeTables, generation: int) -> None:
        """The C loop runs the ticks; it returns here when a Python sensor is due, or to end."""
        loop = native.NativeLoop(
            tables,
            self.shared,
            self.period_s,
            self.stride,
            self.epoch,
            generation,
            self.budget_s,
            self.alarm,
            int(self.origin * 1e9),
            self.tick,
        )
        self.current = loop
        python_side = [i for i, s in enumerate(self.sensors) if s.file_reads is None]
        try:
            while True:
                code = loop.run()
                if code == native.REPLACED:
                    loop.free()
                    self._serve_after_hang(loop.taken)
                    return
                if code == native.STOPPED:
                    break
                self.tick = loop.loop.tick
                row = self._slot()
                now = row[0]
                polled = any(o is not None for o in self.offloaded)  # taken over after a hang
                for i in range(len(self.sensors)) if polled else python_side:
                    if not self._visit(i, bool(tables.sensors[i].due_now), now, row, generation):
                        return  # replaced in a Python read: C is not reading
        finally:
            loop.free()
        self._finish()

    def _visit(self, i: int, due: bool, now: float, row: np.ndarray, generation: int) -> bool:
        """Reads sensor i into ``row`` if due (or looks at its read in its own thread); False if this
        thread was replaced meanwhile, and then serves the sensor's reads."""
        offloaded = self.offloaded[i]
        if offloaded is not None:
            self._poll(i, offloaded, due, now)
        elif due and not self._read_inline(i, generation, row):
            self._serve_after_hang(i)
            return False
        return True

    def _read_inline(self, i: int, generation: int, row: np.ndarray) -> bool:
        """Reads sensor i in this thread; False if the watchdog replaced this thread meanwhile."""
        self.reading = (i, time.monotonic())
        if self.alarm:  # the read's own budget: the alarm fires only if it overruns
            signal.setitimer(signal.ITIMER_REAL, self.budget_s)
        values = read_sensor(self.sensors[i])
        with self.lock:
            if self.leader != generation:
                return False
            self.reading = None
        self._store(i, values, row)
        return True

    def _poll(self, i: int, offloaded: OffloadedSensor, due: bool, now: float) -> None:
        """Takes an offloaded sensor's finished read (a side row at its own instant, not in this later row)
        and asks for the next one when due."""
        reading, failed = offloaded.poll(due, now, self.deadline_s[i], self.budget_s)
        if failed:
            self._fail(i, f"read took over its deadline of {self.deadline_s[i] * 1e3:.0f} ms")
        if reading is not None:
            self._publish_side(i, *reading)
        if offloaded.retired:  # read inline again
            self.offloaded[i] = None
            if self.tables is not None:
                self.tables.sensors[i].offloaded = 0
