"""Where one sampling worker's readings go: rows of the shared ring, filled in place and published.

Every failed read counts in the sensor's error counter and leaves its words
as the failed channels' last error text (``ring.SharedRing.set_text``). A
value outside what its kind can be (``base.reading_range``: negative power,
a utilization over 100 %) is a failed read too, its channel NaN: checked
here for sensors read in Python, in C for the others, from one definition.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from tf_mobileperf.sampling.ring import COUNT, EPOCH, SharedRing, store_reading
from tf_mobileperf.sensors.base import Sensor, reading_range


class SampleRows:
    """One worker's rows: each sensor's columns and valid ranges, the row being filled, publishing it
    (only while the shared epoch is this worker's), side rows of sensors read in their own thread, and
    the failed reads' counts and texts.

    ``lock`` is taken to publish a row, and by the watchdog when it replaces the sampling thread."""

    def __init__(self, sensors: list[Sensor], shared: SharedRing, epoch: int):
        self.sensors = sensors
        self.shared = shared
        self.epoch = epoch
        self.columns: list[list[tuple[str, int]]] = []
        self.ranges: list[list[tuple[int, float, float, str]]] = []  # each channel's column and reading_range
        col = 1
        for sensor in sensors:
            self.columns.append([(c.name, col + k) for k, c in enumerate(sensor.channels)])
            self.ranges.append([(col + k, *reading_range(sensor, c)) for k, c in enumerate(sensor.channels)])
            col += len(sensor.channels)
        self.lock = threading.Lock()
        self.side_lock = threading.Lock()  # the threads of sensors read in their own thread share the side ring
        self._texts: dict[int, str] = {}  # column -> its last error text written to the shared memory

    def alive(self) -> bool:
        """Whether this worker should go on: not stopped or replaced (a shared-memory read, no system call)."""
        return self.shared.header[EPOCH] == self.epoch

    def _slot(self) -> np.ndarray:
        """The ring's row after the last published one: the row being filled, in place."""
        ring = self.shared.ring
        return ring[self.shared.count() % len(ring)]

    def _publish(self) -> bool:
        """Publishes the row filled in place, unless this worker was stopped or replaced."""
        shared = self.shared
        with self.lock:
            if shared.header[EPOCH] != self.epoch:
                return False
            shared.header[COUNT] = shared.count() + 1
        return True

    def _publish_side(self, i: int, instant: float, values: Any) -> None:
        """Writes a reading of sensor i, read in its own thread, as a row of its own at ``instant``.

        The row is built as a list and copied in at once: the thread wakes for each reading, and numpy's
        calls on a one-channel row cost ~100 us of CPU each right after a wake-up (~5 us warm)."""
        row = [math.nan] * self.shared.width
        row[0] = instant
        self._store(i, values, row)
        with self.side_lock:
            if self.alive():
                self.shared.write_side(row)

    def _store(self, i: int, values: Any, row: np.ndarray | list[float]) -> None:
        """Puts sensor i's reading into ``row``; a read that raised, is not real numbers or is out of its
        channels' range (``base.reading_range``: NaN in the row) counts as failed."""
        failed = store_reading(values, self.columns[i], row)
        for column, low, high, why in self.ranges[i]:  # what the C loop checks (_tick.c)
            value = row[column]
            if value < low or value > high:  # NaN is neither: no reading
                row[column] = math.nan
                failed = (failed or {}) | {column: why % float(value)}
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
