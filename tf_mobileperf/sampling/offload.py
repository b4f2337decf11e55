"""A sensor read in its own thread: one whose ``read()`` once held up the sampling thread, or one that
declares ``own_thread`` (a slow device call, such as NVML's total-energy counter at about 4 ms a call).

It exists so that one slow or hung sensor costs only its own channels: the
sampling loop (``loop.SamplingLoop``) asks for a read when it is due and takes
the result when it is there, without waiting for it.

Every reading of such a thread is a row of its own (``ring.SharedRing.side``)
at the instant of the read (the middle of the call), which a counter needs to
place its changes in time; a read that took longer than the sensor's
``stamp_within_s`` is dropped, its instant unknown. A sensor taken over after
a hung read is read when the sampling loop asks at a wake-up; its reading is
handed back at a later one (``poll``) with that instant, not the later row's.
A sensor that declares ``own_thread`` reads on a grid of its own (``paced_s``,
never waking the sampling loop) and ``publish``es each reading itself. A read
that takes longer than its deadline (``deadline_s``: the larger of the inline
budget and the sensor's own period) is a failed read, its values dropped.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Any

from tf_mobileperf.sensors.base import Sensor

#: An offloaded sensor whose reads took under half the inline budget this many
#: times in a row is read inline again: a thread hand-off per read costs more
#: CPU than most reads (measured about 90 us a read in a 2-core VM, where a
#: 5 ms rail then costs the sampler 1.8% of a core more).
INLINE_AGAIN_AFTER = 200


class OffloadedSensor:
    """A sensor read on request by its own thread.

    Args:
        sensor: The sensor.
        since: The start of its read that overran the inline budget (already
            counted as failed); None for a sensor read in its own thread from
            the start (``Sensor.own_thread``), which is never read inline again.
        publish: For such a sensor, what each reading is handed to with its
            instant (the sampling loop's side rows).
        paced_s: For such a sensor, the period of its own reading grid.
    """

    def __init__(
        self,
        sensor: Sensor,
        since: float | None,
        publish: Callable[[float, Any], None] | None = None,
        paced_s: float | None = None,
    ):
        self.sensor = sensor
        self.publish = publish  # (instant, values) of each read, for a sensor read in its own thread from the start
        self.paced_s = paced_s  # such a sensor reads every paced_s on its own grid, never waking the loop
        self.requested = threading.Event()
        self.since: float | None = since  # start of the read in flight (the hung one at first), None when idle
        self.missed = since is not None  # the read in flight is already counted as failed
        self.result: tuple[Any, float, float | None] | None = None  # (values, s since asked, instant) until taken
        self.quick = 0  # reads in a row that took under half the inline budget
        self.permanent = since is None  # never read inline again
        self.retired = False  # read inline again: this thread ends

    def serve_after_hung_read(self, alive: Callable[[], bool]) -> None:
        """``serve``, run by the thread whose inline read hung, once that read returned (too late to use).

        Args:
            alive: Says whether sampling goes on; the thread ends once it returns False.
        """
        self.since = None
        self.serve(alive)

    def serve(self, alive: Callable[[], bool]) -> None:
        """Reads on request while ``alive()`` and not ``retired`` (every ``paced_s`` on its own grid, where it
        publishes).

        Args:
            alive: Says whether sampling goes on; the thread ends once it returns False.
        """
        if self.publish is not None:
            assert self.paced_s is not None, "a sensor that publishes its readings reads on its own grid"
            self._serve_paced(alive, self.publish, self.paced_s)
            return
        while alive() and not self.retired:
            if not self.requested.wait(0.5):
                continue
            self.requested.clear()
            start = self.since
            assert start is not None  # poll() sets it before it requests a read
            began = time.monotonic()
            values = read_sensor(self.sensor)
            done = time.monotonic()
            self.result = (values, done - start, self._instant(began, done))
            self.since = None  # after result: the sampler sees idle only with the result in place

    def _instant(self, began: float, done: float) -> float | None:
        """The instant a read from ``began`` to ``done`` is stamped with: its middle, None where it took longer
        than the sensor's ``stamp_within_s`` (which instant it read is unknown)."""
        within = self.sensor.stamp_within_s
        return 0.5 * (began + done) if within is None or done - began <= within else None

    def _serve_paced(self, alive: Callable[[], bool], publish: Callable[[float, Any], None], paced_s: float) -> None:
        """Reads every ``paced_s`` on the monotonic grid from the first read and publishes each reading; a
        read that overran skips the grid's ticks already past."""
        origin, tick = time.monotonic(), 0
        while alive():
            began = time.monotonic()
            values = read_sensor(self.sensor)
            done = time.monotonic()
            if (instant := self._instant(began, done)) is not None:  # else its instant is unknown: dropped
                publish(instant, values)
            tick = max(tick + 1, math.floor((done - origin) / paced_s) + 1)
            while alive() and (wait := origin + tick * paced_s - time.monotonic()) > 0:
                time.sleep(min(wait, 0.5))

    def poll(self, due: bool, now: float, deadline_s: float, budget_s: float) -> tuple[tuple[float, Any] | None, bool]:
        """At a wake-up of the sampling loop: a finished read to store and whether a read failed.

        Asks for the next read when ``due`` and none is in flight. Sets ``retired`` when its last
        ``INLINE_AGAIN_AFTER`` reads took under half ``budget_s``: it is read inline again. Does nothing for a
        sensor that publishes its own readings.

        Args:
            due: Whether the sensor is due at this wake-up.
            now: The wake-up's time, seconds of the monotonic clock.
            deadline_s: The longest a read may take, from when it was asked for, before it counts as failed.
            budget_s: The inline read budget, seconds.

        Returns:
            ((the read's instant, its values), or None: no read finished in time, or its instant is
            unknown; whether a read failed by missing ``deadline_s``, counted once per read).
        """
        if self.publish is not None:  # it reads and publishes by itself
            return None, False
        if self.since is not None:  # a read in flight
            missed_now = not self.missed and now - self.since > deadline_s
            self.missed = self.missed or missed_now
            return None, missed_now
        reading, failed = None, False
        if self.result is not None:
            got, took, instant = self.result
            self.result = None
            if took > deadline_s:
                failed = not self.missed
            elif instant is not None:
                reading = (instant, got)
            self.quick = self.quick + 1 if took < budget_s / 2 else 0
            if (
                self.quick >= INLINE_AGAIN_AFTER and not self.permanent
            ):  # this thread is idle: no read in flight to race with
                self.retired = True
                return reading, failed
        if due:
            self.missed = False
            self.since = now
            self.requested.set()
        return reading, failed


def read_sensor(sensor: Sensor) -> Any:
    """``sensor.read()``, or the exception it raised (a failed read of every channel: ``ring.store_reading``).

    Args:
        sensor: The sensor to read.
    """
    try:
        return sensor.read()
    except Exception as exc:  # a failing sensor leaves a NaN gap; sampling goes on
        return exc
