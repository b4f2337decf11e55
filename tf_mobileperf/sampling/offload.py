"""A sensor read in its own thread after its ``read()`` once held up the sampling thread.

It exists so that one slow or hung sensor costs only its own channels: the
sampling loop (``loop.SamplingLoop``) asks for a read when it is due and takes
the result when it is there, without waiting for it.

Every reading of such a thread is a row of its own (``ring.SharedRing.side``)
at the instant of the read (the middle of the call), which a counter needs to
place its changes in time; a read that took longer than the sensor's
``stamp_within_s`` is dropped, its instant unknown. The sensor is read when
the sampling loop asks at a wake-up; its reading is handed back at a later
one (``poll``) with that instant, not the later row's. A read that takes
longer than its deadline (``deadline_s``: the larger of the inline budget
and the sensor's own period) is a failed read, its values dropped. (A
sensor that declares ``own_thread`` is read by ``paced.PacedReader``.)
"""

from __future__ import annotations

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
    """A sensor read on request by its own thread, after its inline read overran the budget.

    Args:
        sensor: The sensor.
        since: The start of its read that overran the inline budget (already counted as failed).
    """

    def __init__(self, sensor: Sensor, since: float):
        self.sensor = sensor
        self.requested = threading.Event()
        self.since: float | None = since  # start of the read in flight (the hung one at first), None when idle
        self.missed = True  # the read in flight is already counted as failed
        self.result: tuple[Any, float, float | None] | None = None  # (values, s since asked, instant) until taken
        self.quick = 0  # reads in a row that took under half the inline budget
        self.retired = False  # read inline again: this thread ends

    def serve_after_hung_read(self, alive: Callable[[], bool]) -> None:
        """``serve``, run by the thread whose inline read hung, once that read returned (too late to use).

        Args:
            alive: Says whether sampling goes on; the thread ends once it returns False.
        """
        self.since = None
        self.serve(alive)

    def serve(self, alive: Callable[[], bool]) -> None:
        """Reads on request while ``alive()`` and not ``retired``.

        Args:
            alive: Says whether sampling goes on; the thread ends once it returns False.
        """
        while alive() and not self.retired:
            if not self.requested.wait(0.5):
                continue
            self.requested.clear()
            start = self.since
            assert start is not None  # poll() sets it before it requests a read
            began = time.monotonic()
            values = read_sensor(self.sensor)
            done = time.monotonic()
            self.result = (values, done - start, stamped_instant(self.sensor, began, done))
            self.since = None  # after result: the sampler sees idle only with the result in place

    def poll(self, due: bool, now: float, deadline_s: float, budget_s: float) -> tuple[tuple[float, Any] | None, bool]:
        """At a wake-up of the sampling loop: a finished read to store and whether a read failed.

        Asks for the next read when ``due`` and none is in flight. Sets ``retired`` when its last
        ``INLINE_AGAIN_AFTER`` reads took under half ``budget_s``: it is read inline again.

        Args:
            due: Whether the sensor is due at this wake-up.
            now: The wake-up's time, seconds of the monotonic clock.
            deadline_s: The longest a read may take, from when it was asked for, before it counts as failed.
            budget_s: The inline read budget, seconds.

        Returns:
            ((the read's instant, its values), or None: no read finished in time, or its instant is
            unknown; whether a read failed by missing ``deadline_s``, counted once per read).
        """
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
            if self.quick >= INLINE_AGAIN_AFTER:  # this thread is idle: no read in flight to race with
                self.retired = True
                return reading, failed
        if due:
            self.missed = False
            self.since = now
            self.requested.set()
        return reading, failed


def stamped_instant(sensor: Sensor, began: float, done: float) -> float | None:
    """The instant a read of ``sensor`` from ``began`` to ``done`` is stamped with.

    Args:
        sensor: The sensor read.
        began, done: When the read began and returned, seconds of the monotonic clock.

    Returns:
        The read's middle; None where it took longer than the sensor's ``stamp_within_s`` (which instant it
        read is unknown).
    """
    within = sensor.stamp_within_s
    return 0.5 * (began + done) if within is None or done - began <= within else None


def read_sensor(sensor: Sensor) -> Any:
    """``sensor.read()``, or the exception it raised (a failed read of every channel: ``ring.store_reading``).

    Args:
        sensor: The sensor to read.
    """
    try:
        return sensor.read()
    except Exception as exc:  # a failing sensor leaves a NaN gap; sampling goes on
        return exc
