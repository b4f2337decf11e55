"""One sampling worker's loop: reads the sensors when due and writes rows into the shared ring.

It exists apart from ``sampler.Sampler`` (which starts, watches and drains
it from the trainer) because it is what runs in the sampler process (started
fresh, or forked), or in thread mode in a thread of the trainer.

Sensors are read one after the other in the sampling thread (in C for those
declared as kernel files, ``native``), so a fast rail pays no thread
hand-off. A watchdog replaces a sampling thread that stays inside one
sensor's read longer than ``inline_budget_s`` by a new one, and that sensor
is read in its own thread (``offload.OffloadedSensor``) with a deadline: a
read that misses it is a failed read, its channels NaN. A sensor that
declares ``own_thread`` is read in its own thread from the start. In the
sampler process SIGALRM, armed while a row is filled, wakes the watchdog only
when a read overran the budget.

Every failed read counts in the sensor's error counter and leaves its words
as the failed channels' last error text (``ring.SharedRing.set_text``). A
value outside what its kind can be (``base.reading_range``: negative power,
a utilization over 100 %) is a failed read too, its channel NaN: checked
here for sensors read in Python, in C for the others, from one definition.
"""

from __future__ import annotations

import functools
import logging
import os
import select
import signal
import threading
import time
from typing import Any

import numpy as np

from tf_mobileperf.sampling import native
from tf_mobileperf.sampling.native import NativeTables
from tf_mobileperf.sampling.offload import OffloadedSensor, read_sensor
from tf_mobileperf.sampling.ring import COUNT, EPOCH, SharedRing, store_reading
from tf_mobileperf.sampling.schedule import NEVER, grid_periods, inline_budget_s, next_due, next_wake, plan
from tf_mobileperf.sensors.base import Sensor, reading_range

log = logging.getLogger(__name__)


class SamplingLoop:
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
        self.sensors = sensors
        self.period_s = period_s
        self.shared = shared
        self.epoch = epoch
        self.parent = parent
        self.budget_s = inline_budget_s(period_s)
        self.deadline_s = [max(self.budget_s, s.min_period_s) for s in sensors]
        self.columns: list[list[tuple[str, int]]] = []
        self.ranges: list[tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]] = []  # each sensor's reading_range
        col = 1
        for sensor in sensors:
            self.columns.append([(c.name, col + k) for k, c in enumerate(sensor.channels)])
            low, high, why = zip(*(reading_range(sensor, c) for c in sensor.channels)) if sensor.channels else ((),) * 3
            self.ranges.append((np.arange(col, col + len(sensor.channels)), np.array(low), np.array(high), list(why)))
            col += len(sensor.channels)
        self.every, self.stride = plan(grid_periods(sensors), period_s)
        self.due = [0] * len(sensors)  # the tick each sensor is due (Python ticks)
        self.tick = 0  # the tick of the row being filled; a new leader goes on from it
        self.origin = time.monotonic()  # the grid's tick 0: set again when the first row is read
        self.offloaded: list[OffloadedSensor | None] = [None] * len(sensors)
        self.reading: tuple[int, float] | None = None  # (sensor, start) of the leader's Python read in flight
        self.leader = 0
        self.lock = threading.Lock()
        self.side_lock = threading.Lock()  # the threads of sensors read in their own thread share the side ring
        self.done = threading.Event()
        self.failed = False
        self.alarm = False
        self.tables: native.NativeTables | None = None  # the C loop's tables, where it runs
        self.current: native.NativeLoop | None = None  # the leader's C loop
        self._wake: tuple[int, int] | None = None  # the sampler process's watchdog's wake-up when sampling ends
        self._texts: dict[int, str] = {}  # column -> its last error text written to the shared memory

    @property
    def native(self) -> bool:
        """Whether the ticks run in C."""
        return self.tables is not None

    def alive(self) -> bool:
        """Whether this worker should go on: not stopped or replaced (a shared-memory read, no system call)."""
        return self.shared.header[EPOCH] == self.epoch

    def run(self, alarm: bool, death_fd: int | None = None) -> int:
        """Samples until stopped or the parent dies; this thread is the watchdog. 1 if sampling failed.

        With ``alarm`` (the sampler process, whose main thread this is) each
        row arms SIGALRM for the read budget, so the watchdog wakes only when
        a read overran it, when sampling ends, when the parent dies
        (``death_fd``, the read end of a pipe whose write end only the parent
        holds, reads EOF) and, in case a process the trainer forked holds
        that end too, once a second to compare ``os.getppid()``. Without (a
        thread in the trainer, whose signals are the trainer's) it looks
        every half budget."""
        self.alarm = alarm
        if alarm:
            self._wake = os.pipe()
            signal.signal(signal.SIGALRM, self._on_alarm)
            library = native.load()
            if library is not None:
                self.tables = native.NativeTables(library, self.sensors, self.every, [dict(c) for c in self.columns])
        for i, sensor in enumerate(self.sensors):
            if sensor.own_thread:
                self._offload(i, None)
        self._lead(0)
        if alarm:
            self._watch_child(death_fd)
        else:
            while not self.done.wait(self.budget_s / 2) and self.alive():
                self._replace_if_hung()
        self.done.set()
        return int(self.failed)

    def _watch_child(self, death_fd: int | None) -> None:
        assert self._wake is not None  # run() makes the pipe with the alarm
        fds = [self._wake[0]] + ([death_fd] if death_fd is not None else [])
        while not self.done.is_set() and self.alive() and os.getppid() == self.parent:
            ready, _, _ = select.select(fds, [], [], 1.0)
            if death_fd in ready:
                return  # EOF: the parent is gone

    def _finish(self) -> None:
        self.done.set()
        if self._wake is not None:
            os.write(self._wake[1], b"x")

    def _lead(self, generation: int) -> None:
        threading.Thread(target=self._sample, args=(generation,), daemon=True, name="mobileperf-sampling").start()

    def _on_alarm(self, *_) -> None:
        if self.lock.acquire(blocking=False):  # else the read has just returned (or an alarm is being handled)
            try:
                generation = self._take_over_hung_read()
            finally:
                self.lock.release()
            if generation is not None:
                self._lead(generation)

    def _replace_if_hung(self) -> None:
        with self.lock:
            generation = self._take_over_hung_read()
        if generation is not None:
            self._lead(generation)

    def _take_over_hung_read(self) -> int | None:
        """With the lock held: if the leader's read is over budget, moves that sensor to its
        own thread and returns the generation of a new leader to start."""
        if self.reading is not None:
            i, since = self.reading
            left = since + self.budget_s - time.monotonic()
            if left >= 0:
                self._rearm(left)
                return None
        elif self.current is not None:
            taken, left = self.current.take_over(self.budget_s)
            if taken is None:
                if left > 0:
                    self._rearm(left)
                return None
            i, since = taken, self.current.loop.reading_since
        else:
            return None
        self._offload(i, since)
        self.reading = None
        self.leader += 1
        if self.tables is not None:
            self.tables.leader.value = self.leader
        log.debug(
            "sensor %s held up sampling for > %.3f s; it is read in its own thread now",
            self.sensors[i].name,
            self.budget_s,
        )
        return self.leader

    def _rearm(self, left_s: float) -> None:
        if self.alarm:
            signal.setitimer(signal.ITIMER_REAL, left_s + 0.001)

    def _offload(self, i: int, since: float | None) -> None:
        """Reads sensor i in its own thread from now on: its inline read in flight since ``since`` overran the
        budget (a failed read), or (None) it declares ``own_thread`` and this thread is started for it."""
        publish = functools.partial(self._publish_side, i) if since is None else None
        paced_s = max(self.sensors[i].min_period_s, self.period_s) if since is None else None
        self.offloaded[i] = offloaded = OffloadedSensor(self.sensors[i], since, publish, paced_s)
        if since is not None:  # taken over: the C loop hands every wake-up back to Python to poll it
            if self.tables is not None:
                self.tables.sensors[i].offloaded = 1
        else:  # paced by its own thread: neither loop reads it nor wakes for it
            self.due[i] = NEVER
            if self.tables is not None:
                self.tables.sensors[i].due = NEVER
        if since is None:
            threading.Thread(
                target=offloaded.serve, args=(self.alive,), daemon=True, name=f"mobileperf-{self.sensors[i].name}"
            ).start()
        else:
            self._fail(
                i, f"read held up sampling over {self.budget_s * 1e3:.0f} ms (read in its own thread from then on)"
            )

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

    def _slot(self) -> np.ndarray:
        """The ring's row after the last published one: the row being filled, in place."""
        ring = self.shared.ring
        return ring[self.shared.count() % len(ring)]

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
                polled = any(o is not None and o.publish is None for o in self.offloaded)  # taken over after a hang
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
            self._poll(i, offloaded, due, now, row)
        elif due and not self._read_inline(i, generation, row):
            self._serve_after_hang(i)
            return False
        return True

    def _serve_after_hang(self, i: int | None) -> None:
        """This thread's read of sensor i hung and the watchdog moved the sensor to its own thread
        (``_offload``): this thread serves that sensor's reads from now on."""
        offloaded = None if i is None else self.offloaded[i]
        assert offloaded is not None, "the watchdog offloads the sensor whose read it took over"
        offloaded.serve_after_hung_read(self.alive)

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

    def _publish(self) -> bool:
        """Publishes the row filled in place, unless this worker was stopped or replaced."""
        shared = self.shared
        with self.lock:
            if shared.header[EPOCH] != self.epoch:
                return False
            shared.header[COUNT] = shared.count() + 1
        return True

    def _poll(self, i: int, offloaded: OffloadedSensor, due: bool, now: float, row: np.ndarray) -> None:
        """Takes an offloaded sensor's finished read and asks for the next one when due."""
        values, failed = offloaded.poll(due, now, self.deadline_s[i], self.budget_s)
        if failed:
            self._fail(i, f"read took over its deadline of {self.deadline_s[i] * 1e3:.0f} ms")
        if values is not None:
            self._store(i, values, row)
        if offloaded.retired:  # read inline again
            self.offloaded[i] = None
            if self.tables is not None:
                self.tables.sensors[i].offloaded = 0

    def _publish_side(self, i: int, instant: float, values: Any) -> None:
        """Writes a reading of sensor i, read in its own thread, as a row of its own at ``instant``."""
        with self.side_lock:
            if not self.alive():
                return
            row = self.shared.side[self.shared.side_count() % len(self.shared.side)]
            row[:] = np.nan
            row[0] = instant
            self._store(i, values, row)
            self.shared.publish_side()

    def _store(self, i: int, values: Any, row: np.ndarray) -> None:
        """Puts sensor i's reading into ``row``; a read that raised, is not real numbers or is out of its
        channels' range (``base.reading_range``: NaN in the row) counts as failed."""
        failed = store_reading(values, self.columns[i], row)
        columns, low, high, why = self.ranges[i]
        values = row[columns]
        for k in np.flatnonzero((values < low) | (values > high)):  # what the C loop checks (_tick.c)
            row[columns[k]] = np.nan
            failed = (failed or {}) | {int(columns[k]): why[k] % float(values[k])}
        if failed is not None:
            self.shared.fail(i)
            for column, text in failed.items():
                self._set_text(column, text)

    def _fail(self, i: int, text: str) -> None:
        """Counts a failed read of sensor i, and ``text`` as the last error of each of its channels."""
        self.shared.fail(i)
        for _, column in self.columns[i]:
            self._set_text(column, text)

    def _set_text(self, column: int, text: str) -> None:
        if self._texts.get(column) != text:  # a sensor failing every read writes its words once
            self._texts[column] = text
            self.shared.set_text(column, text)
