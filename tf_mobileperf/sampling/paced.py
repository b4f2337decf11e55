"""Sensors that declare ``own_thread``, read by a thread of their own on a grid of its own.

Such a sensor's read is a slow device call (NVML's total-energy counter,
about 4 ms), so it never sits in the sampling loop: its thread reads it
every ``min_period_s`` on the monotonic clock and hands each reading, with
the instant of the read (its middle), to ``publish`` (the side rows,
``ring.SharedRing.side``). The sampling loop never wakes for it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from tf_mobileperf.sampling.offload import read_sensor, stamped_instant
from tf_mobileperf.sensors.base import Sensor


class PacedReader:
    """One sensor read by its own thread on its own grid.

    Args:
        index: The sensor's index among the sampler's sensors (what ``publish`` is given).
        sensor: The sensor (``own_thread``).
        publish: Called with (index, instant, values) for each reading whose instant is known.
        period_s: The grid's period: the sensor's ``min_period_s``, at least the sample period.

    Example:
        ``threading.Thread(target=PacedReader(0, sensor, publish, 0.033).serve, args=(alive,)).start()``
    """

    def __init__(self, index: int, sensor: Sensor, publish: Callable[[int, float, Any], None], period_s: float):
        self.index = index
        self.sensor = sensor
        self.publish = publish
        self.period_s = period_s

    def serve(self, alive: Callable[[], bool]) -> None:
        """Reads every ``period_s`` on the monotonic grid from the first read and publishes each reading; a
        read that overran skips the grid's ticks already past. Returns once ``alive()`` is False.

        Args:
            alive: Says whether sampling goes on.
        """
        origin, tick = time.monotonic(), 0
        while alive():
            began = time.monotonic()
            values = read_sensor(self.sensor)
            done = time.monotonic()
            if (instant := stamped_instant(self.sensor, began, done)) is not None:  # else unknown: dropped
                self.publish(self.index, instant, values)
            tick = max(tick + 1, math.floor((done - origin) / self.period_s) + 1)
            while alive() and (wait := origin + tick * self.period_s - time.monotonic()) > 0:
                time.sleep(min(wait, 0.5))
