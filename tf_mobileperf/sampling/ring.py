"""The memory a forked sampler child shares with its parent: a header of counters and the ring of rows.

It exists so that both sides of the sampler agree on one layout: the worker
(``loop.SamplingLoop``, in the forked child or in thread mode a thread)
writes rows (time, channel values...) and counts rows and failed reads in
the header; the owner (``sampler.Sampler``) reads them while sampling goes on.
"""

from __future__ import annotations

import mmap

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

