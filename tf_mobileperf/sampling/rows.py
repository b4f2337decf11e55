"""Where one sampling worker's readings go: rows of the shared ring, filled in place and published.

Every failed read counts in the sensor's error counter and leaves its words
as the failed channels' last error text (``ring.SharedRing.set_text``). A
value outside what its kind can be (``base.reading_range``: negative power,
a utilization over 100 %) is a failed read too, its channel NaN: checked
here for sensors read in Python, in C for the others, from one definition.
"""

from __future__ import annotations

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
        self.ranges: list[tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]] = []  # each sensor's reading_range
        col = 1
        for sensor in sensors:
            self.columns.append([(c.name, col + k) for k, c in enumerate(sensor.channels)])
            low, high, why = zip(*(reading_range(sensor, c) for c in sensor.channels)) if sensor.channels else ((),) * 3
            self.ranges.append((np.arange(col, col + len(sensor.channels)), np.array(low), np.array(high), list(why)))
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
