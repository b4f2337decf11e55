"""Sensors that declare ``own_thread``, read by a thread of their own on a grid of its own.

Such a sensor's read is a slow device call (NVML's total-energy counter,
about 4 ms), so it never sits in the sampling loop: a thread reads it every
``min_period_s`` on the monotonic clock and hands each reading, with the
instant of the read (its middle), to ``publish`` (the side rows,
``ring.SharedRing.side``). The sampling loop never wakes for it. Sensors of
one ``thread_group`` (the NVML sensors of one probe) share one thread: it
wakes on the fastest one's grid and reads each of the others at every
wake-up its period has come (``schedule.every_ticks``), so a slower one
costs no wake-ups of its own.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from tf_mobileperf.sampling.offload import read_sensor, stamped_instant
from tf_mobileperf.sampling.schedule import every_ticks, next_due
from tf_mobileperf.sensors.base import Sensor


class PacedReader:
    """Sensors read by one thread of their own on one grid.

    Args:
        members: (index among the sampler's sensors, sensor) of each sensor it reads (each ``own_thread``).
        publish: Called with (index, instant, values) for each reading whose instant is known.
        period_s: The sample period: no sensor is read more often.

    Example:
        ``threading.Thread(target=PacedReader([(0, sensor)], publish, 0.005).serve, args=(alive,)).start()``
    """

    def __init__(self, members: list[tuple[int, Sensor]], publish: Callable[[int, float, Any], None], period_s: float):
        self.members = members
        self.publish = publish
        periods = [max(sensor.min_period_s, period_s) for _, sensor in members]
        self.grid_s = min(periods)
        self.every = [every_ticks(p, self.grid_s) for p in periods]  # in ticks of the grid

    def serve(self, alive: Callable[[], bool]) -> None:
        """Reads each sensor when its ticks have come on the monotonic grid from the first read, and publishes
        each reading; a read that overran skips the grid's ticks already past. Returns once ``alive()`` is
        False.

        Args:
            alive: Says whether sampling goes on.
        """
        origin, tick = time.monotonic(), 0
        due = [0] * len(self.members)
        while alive():
            for k, (index, sensor) in enumerate(self.members):
                if tick < due[k]:
                    continue
                due[k] = next_due(tick, due[k], self.every[k])
                began = time.monotonic()
                values = read_sensor(sensor)
                done = time.monotonic()
                if values != {} and (instant := stamped_instant(sensor, began, done)) is not None:
                    self.publish(index, instant, values)  # else nothing read, or its instant unknown: dropped
            tick = max(tick + 1, math.floor((time.monotonic() - origin) / self.grid_s) + 1)
            while alive() and (wait := origin + tick * self.grid_s - time.monotonic()) > 0:
                time.sleep(min(wait, 0.5))


def thread_groups(sensors: list[Sensor]) -> list[list[tuple[int, Sensor]]]:
    """The sensors that declare ``own_thread``, grouped by the thread that reads them.

    Args:
        sensors: The sampler's sensors, in order.

    Returns:
        One list of (index, sensor) per thread: the sensors of one ``thread_group`` together, each other one
        alone; in the order of each group's first sensor.
    """
    groups: dict[object, list[tuple[int, Sensor]]] = {}
    for i, sensor in enumerate(sensors):
        if sensor.own_thread:
            key = sensor.thread_group if sensor.thread_group is not None else i
            groups.setdefault(key, []).append((i, sensor))
    return list(groups.values())
