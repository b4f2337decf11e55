"""The watchdog of one sampling worker: it hands a sensor whose read hangs to a thread of its own.

A watchdog replaces a sampling thread that stays inside one sensor's read
longer than ``inline_budget_s`` by a new one, and that sensor is read in its
own thread (``offload.OffloadedSensor``) with a deadline: a read that misses
it is a failed read, its channels NaN. A sensor that declares ``own_thread``
is read in its own thread from the start. In the sampler process SIGALRM,
armed while a row is filled, wakes the watchdog only when a read overran the
budget; the hung thread, once its read returns, serves that sensor's reads.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time

from tf_mobileperf.sampling import native
from tf_mobileperf.sampling.offload import OffloadedSensor
from tf_mobileperf.sampling.paced import PacedReader
from tf_mobileperf.sampling.ring import SharedRing
from tf_mobileperf.sampling.rows import SampleRows
from tf_mobileperf.sampling.schedule import NEVER, inline_budget_s
from tf_mobileperf.sensors.base import Sensor

log = logging.getLogger(__name__)

#: The longest sampling waits for the sensors' ``prepare`` before its first row; a sensor still inside it
#: then meets its hang in its first read, which this watchdog takes over as any hung read.
PREPARE_TIMEOUT_S = 5.0


class HungReadWatchdog(SampleRows):
    """Which thread leads the sampling (``leader``, a generation), the read it has in flight, and the
    take-over of a read that overran the budget. The sampling thread itself is the subclass's
    (``loop.SamplingLoop._sample``)."""

    due: list[int]  # the tick each sensor is due: the sampling loop's, NEVER for a sensor in its own thread

    def __init__(self, sensors: list[Sensor], period_s: float, shared: SharedRing, epoch: int, parent: int | None):
        super().__init__(sensors, shared, epoch)
        self.period_s = period_s
        self.parent = parent
        self.budget_s = inline_budget_s(period_s)
        self.offloaded: list[OffloadedSensor | None] = [None] * len(sensors)
        self.reading: tuple[int, float] | None = None  # (sensor, start) of the leader's Python read in flight
        self.leader = 0
        self.done = threading.Event()
        self.failed = False
        self.alarm = False
        self.tables: native.NativeTables | None = None  # the C loop's tables, where it runs
        self.current: native.NativeLoop | None = None  # the leader's C loop
        self._wake: tuple[int, int] | None = None  # the sampler process's watchdog's wake-up when sampling ends

    def _sample(self, generation: int) -> None:
        raise NotImplementedError  # the sampling thread: loop.SamplingLoop's

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

    def _prepare(self) -> None:
        """Runs every sensor's ``prepare`` in a thread of its own, waiting at most ``PREPARE_TIMEOUT_S``."""
        thread = threading.Thread(target=prepare_all, args=(self.sensors,), daemon=True, name="mobileperf-prepare")
        thread.start()
        thread.join(PREPARE_TIMEOUT_S)
        if thread.is_alive():
            log.warning(
                "mobileperf: a sensor was still opening its device after %g s; sampling starts without it",
                PREPARE_TIMEOUT_S,
            )

    def _pace(self, i: int) -> None:
        """Starts the thread that reads sensor i (``own_thread``) on its own grid; neither loop reads it."""
        self.shared.open_side()
        self.due[i] = NEVER
        if self.tables is not None:
            self.tables.sensors[i].due = NEVER
        reader = PacedReader(i, self.sensors[i], self._publish_side, max(self.sensors[i].min_period_s, self.period_s))
        threading.Thread(
            target=reader.serve, args=(self.alive,), daemon=True, name=f"mobileperf-{self.sensors[i].name}"
        ).start()

    def _offload(self, i: int, since: float) -> None:
        """Reads sensor i in its own thread from now on: its inline read in flight since ``since`` overran the
        budget (a failed read)."""
        self.shared.open_side()
        self.offloaded[i] = OffloadedSensor(self.sensors[i], since)
        if self.tables is not None:  # the C loop hands every wake-up back to Python to poll it
            self.tables.sensors[i].offloaded = 1
        self._fail(i, f"read held up sampling over {self.budget_s * 1e3:.0f} ms (read in its own thread from then on)")

    def _serve_after_hang(self, i: int | None) -> None:
        """This thread's read of sensor i hung and the watchdog moved the sensor to its own thread
        (``_offload``): this thread serves that sensor's reads from now on."""
        offloaded = None if i is None else self.offloaded[i]
        assert offloaded is not None, "the watchdog offloads the sensor whose read it took over"
        offloaded.serve_after_hung_read(self.alive)


def prepare_all(sensors: list[Sensor]) -> None:
    """Each sensor's ``prepare``, in order; one that raises is logged and left to its reads to report.

    Args:
        sensors: The sensors to prepare.
    """
    for sensor in sensors:
        try:
            sensor.prepare()
        except Exception as exc:  # the reads fail with the words, counted where failed reads are
            log.debug("mobileperf: %s did not open before the first read: %s", sensor.name, exc)
