"""One sampling worker's loop: reads the sensors every period and writes rows into the shared ring.

It exists apart from ``sampler.Sampler`` (which starts, watches and drains
it from the trainer) because it is what runs in the forked child, or in
thread mode in a thread of the trainer.

Sensors are read one after the other in the sampling thread, so a fast rail
pays no thread hand-off; a watchdog replaces a sampling thread that stays
inside one sensor's ``read()`` longer than ``inline_budget_s`` by a new one,
and that sensor is read in its own thread (``offload.OffloadedSensor``),
with a deadline: a read that misses it is a failed read, and the sensor's
channels stay NaN until it returns. A value read so reaches the ring one
tick late; after 200 quick reads in a row the sensor is read inline again.
In the forked child SIGALRM, armed anew by each inline read, wakes the
watchdog only when no read started within the budget.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import signal
import threading
import time
from typing import Any, Mapping

import numpy as np

from tf_mobileperf.sampling.offload import INLINE_AGAIN_AFTER, OffloadedSensor, read_sensor
from tf_mobileperf.sampling.ring import COUNT, EPOCH, SharedRing
from tf_mobileperf.sensors.base import Sensor

log = logging.getLogger(__name__)


def inline_budget_s(period_s: float) -> float:
    """How long one sensor's ``read()`` may hold up the others before it is moved to its own thread.

    Long enough that a busy machine's scheduling delays rarely move a
    healthy sensor, short enough that the hole it leaves in the other
    channels stays well inside the join's allowed gap (0.1 s at 5 ms)."""
    return max(4 * period_s, 0.020)


class SamplingLoop:
    """One worker's sampling: a sampling thread, and the watchdog that replaces it when a read hangs.

    Rows are written only by the current sampling thread (``leader``), and
    only while the shared epoch is this worker's.
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
        col = 1
        for sensor in sensors:
            self.columns.append([(c.name, col + k) for k, c in enumerate(sensor.channels)])
            col += len(sensor.channels)
        self.due = [0.0] * len(sensors)
        self.offloaded: list[OffloadedSensor | None] = [None] * len(sensors)
        self.reading: tuple[int, float] | None = None  # (sensor, start) of the leader's read in flight
        self.leader = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.failed = False
        self.alarm = False

    def alive(self) -> bool:
        """Whether this worker should go on: not stopped or replaced, and its parent is there."""
        return self.shared.header[EPOCH] == self.epoch and (self.parent is None or os.getppid() == self.parent)

    def run(self, alarm: bool) -> int:
        """Samples until stopped or the parent dies; this thread is the watchdog. 1 if sampling failed.

        With ``alarm`` (the forked child, whose main thread this is) each
        inline read arms SIGALRM for its budget, so the watchdog wakes only
        when no read started within the budget; without (a thread in the
        trainer's process, whose signals are the trainer's) it looks every
        half budget."""
        self.alarm = alarm
        if alarm:
            signal.signal(signal.SIGALRM, self._on_alarm)
        self._lead(0)
        while not self.done.wait(0.25 if alarm else self.budget_s / 2) and self.alive():
            if not alarm:
                self._replace_if_hung()
        self.done.set()
        return int(self.failed)

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
        if self.reading is None:
            return None
        i, since = self.reading
        left = since + self.budget_s - time.monotonic()
        if left >= 0:
            if self.alarm:
                signal.setitimer(signal.ITIMER_REAL, left + 0.001)
            return None
        self.offloaded[i] = OffloadedSensor(self.sensors[i], since)
        self.shared.fail(i)  # this read missed its deadline
        self.reading = None
        self.leader += 1
        log.debug("sensor %s held up sampling for > %.3f s; it is read in its own thread now",
                  self.sensors[i].name, self.budget_s)
        return self.leader

    def _sample(self, generation: int) -> None:
        try:
            if self.alarm:  # SIGALRM goes to the watchdog, never interrupts a sensor's system call
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            self._sample_rows(generation)
        except BaseException:
            log.exception("mobileperf: the sampling loop failed")
            self.failed = True
            self.done.set()

    def _sample_rows(self, generation: int) -> None:
        period_s = self.period_s
        row = np.full(self.shared.ring.shape[1], np.nan)
        next_t = time.monotonic()
        while self.alive():
            now = time.monotonic()
            row[:] = np.nan
            row[0] = now
            for i, sensor in enumerate(self.sensors):
                offloaded = self.offloaded[i]
                if offloaded is not None:
                    self._poll(i, offloaded, now, row)
                elif now >= self.due[i]:
                    self.due[i] = now + sensor.min_period_s * 0.95
                    if not self._read_inline(i, generation, row):  # replaced while the read hung
                        self.offloaded[i].serve(self.alive)
                        return
            if not self._write(row):
                return
            next_t += period_s
            now = time.monotonic()
            if next_t <= now:  # overran: skip the ticks we missed, stay on the grid
                next_t += math.ceil((now - next_t) / period_s) * period_s
            time.sleep(max(0.0, next_t - time.monotonic()))
        self.done.set()

    def _read_inline(self, i: int, generation: int, row: np.ndarray) -> bool:
        """Reads sensor i in this thread; False if the watchdog replaced this thread meanwhile."""
        self.reading = (i, time.monotonic())
        if self.alarm:  # replaces the previous read's timer: it fires only if no read starts within the budget
            signal.setitimer(signal.ITIMER_REAL, self.budget_s)
        values = read_sensor(self.sensors[i])
        with self.lock:
            if self.leader != generation:
                return False
            self.reading = None
        self._store(i, values, row)
        return True

    def _write(self, row: np.ndarray) -> bool:
        """Appends ``row`` to the ring unless this worker was stopped or replaced."""
        shared = self.shared
        with self.lock:
            if shared.header[EPOCH] != self.epoch:
                return False
            count = shared.count()
            shared.ring[count % len(shared.ring)] = row
            shared.header[COUNT] = count + 1
        return True

    def _poll(self, i: int, offloaded: OffloadedSensor, now: float, row: np.ndarray) -> None:
        """Takes an offloaded sensor's finished read and asks for the next one when due."""
        if offloaded.since is not None:  # a read in flight
            if not offloaded.missed and now - offloaded.since > self.deadline_s[i]:
                offloaded.missed = True
                self.shared.fail(i)
            return
        if offloaded.result is not None:
            values, took = offloaded.result
            offloaded.result = None
            if took <= self.deadline_s[i]:
                self._store(i, values, row)
            elif not offloaded.missed:
                self.shared.fail(i)
            offloaded.quick = offloaded.quick + 1 if took < self.budget_s / 2 else 0
            if offloaded.quick >= INLINE_AGAIN_AFTER:  # its thread is idle: no read in flight to race with
                offloaded.retired = True
                self.offloaded[i] = None
                return
        if now >= self.due[i]:
            self.due[i] = now + self.sensors[i].min_period_s * 0.95
            offloaded.missed = False
            offloaded.since = now
            offloaded.requested.set()

    def _store(self, i: int, values: Any, row: np.ndarray) -> None:
        """Puts sensor i's reading into ``row``; anything but real numbers is a failed read.

        A channel missing from the mapping is NaN (not a failure); a value
        that is not a real number (str, None, complex...) is NaN and the read
        counts as failed. A read that is no mapping at all fails whole."""
        if type(values) is not dict and not isinstance(values, Mapping):
            self.shared.fail(i)
            return
        bad = False
        try:
            for name, c in self.columns[i]:
                value = values.get(name, math.nan)
                if isinstance(value, float):  # also numpy's float64
                    row[c] = value
                elif isinstance(value, numbers.Real) and not isinstance(value, bool):
                    row[c] = float(value)
                else:
                    bad = True
        except Exception:  # a mapping whose get() or float() raises
            row[[c for _, c in self.columns[i]]] = np.nan
            bad = True
        if bad:
            self.shared.fail(i)
