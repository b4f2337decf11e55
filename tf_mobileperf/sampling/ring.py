"""The memory a forked sampler child shares with its parent: a header of counters and the ring of rows.

It exists so that both sides of the sampler agree on one layout: the worker
(``loop.SamplingLoop``, in the forked child or in thread mode a thread)
writes rows (time, channel values...) and counts rows and failed reads in
the header; the owner (``sampler.Sampler``) reads them while sampling goes on.
"""

from __future__ import annotations

import math
import mmap
import numbers
from typing import Any, Mapping

import numpy as np

#: Slots of the shared header, before the ring: rows written, the epoch of the
#: worker allowed to write (a new one per start, stop or restart), whether
#: SCHED_FIFO was granted, then failed reads per sensor.
COUNT, EPOCH, REALTIME, ERRORS = 0, 1, 2, 3


class SharedRing:
    """The header and the ring, in anonymous shared memory a forked child inherits."""

    def __init__(self, capacity: int, width: int, n_sensors: int):
        slots = ERRORS + max(1, n_sensors)
        self._memory = mmap.mmap(-1, 8 * (slots + capacity * width))  # MAP_SHARED | MAP_ANONYMOUS
        self.header = memoryview(self._memory)[: 8 * slots].cast("q")  # Python ints: faster than numpy scalars
        self.ring = np.frombuffer(self._memory, np.float64, capacity * width, offset=8 * slots).reshape(capacity, width)

    def count(self) -> int:
        return self.header[COUNT]

    def fail(self, sensor: int) -> None:
        self.header[ERRORS + sensor] += 1



def store_reading(values: Any, columns: list[tuple[str, int]], row: np.ndarray) -> bool:
    """Puts a sensor's reading (channel name -> value) into ``row`` at ``columns``; False for a failed read.

    A channel missing from the mapping is NaN (not a failure); a value that
    is not a real number (str, None, complex...) is NaN and the read counts
    as failed. A read that is no mapping at all fails whole."""
    if type(values) is not dict and not isinstance(values, Mapping):
        return False
    good = True
    try:
        for name, c in columns:
            value = values.get(name, math.nan)
            if isinstance(value, float):  # also numpy's float64
                row[c] = value
            elif isinstance(value, numbers.Real) and not isinstance(value, bool):
                row[c] = float(value)
            else:
                good = False
    except Exception:  # a mapping whose get() or float() raises
        row[[c for _, c in columns]] = np.nan
        good = False
    return good
