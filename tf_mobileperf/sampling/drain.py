"""The owner's side of the shared ring: the rows written since the last drain, merged with the readings of
sensors read in their own thread (the side ring), as numpy arrays; and the failed reads the ring counts."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from tf_mobileperf.sampling.ring import ERRORS, SharedRing
from tf_mobileperf.sampling.samples import Samples
from tf_mobileperf.sensors.base import Channel, Sensor

#: How long merged rows wait for readings of sensors read in their own thread (``drain``): longer than such
#: a read takes (NVML's energy counter: 4-9 ms for one or two GPUs, measured on an H200).
SIDE_HOLD_S = 0.1


class RingReader:
    """Reads a sampler's shared ring from where it last stopped.

    Args:
        shared: The ring the sampler process (or thread) writes.
        channels: The channels of its columns, after the time column.
    """

    def __init__(self, shared: SharedRing, channels: list[Channel]):
        self._shared = shared
        self.channels = channels
        self._read = 0
        self._side_read = 0
        self.dropped = 0
        self._held = np.empty((0, 1 + len(channels)))  # merged rows of the last SIDE_HOLD_S, not returned yet
        self._held_on_grid = np.empty(0, bool)
        self._returned_until = -math.inf

    def drain(self, running: bool) -> Samples:
        """The rows written since the last drain, oldest first.

        Once a sensor is read in its own thread (``SharedRing.side_open``), its rows (the side ring) are
        merged in by their read's instant. A read is published when it returns, after rows of later instants
        may already be in the main ring, so while the worker runs the rows of the last ``SIDE_HOLD_S`` are
        held back to the next drain; a side row older than what was already returned (a read that took
        longer) is dropped and counted in ``dropped``.

        Args:
            running: Whether the worker still writes (False: return everything, the held rows too).

        Returns:
            The rows as ``Samples``, those on the loop's grid marked.
        """
        rows = self._take(self._shared.ring, self._shared.count, "_read")
        if not self._shared.side_open():  # looked at after the rows: those came before any side reading
            if len(rows):
                self._returned_until = float(rows[-1, 0])
            return Samples(rows[:, 0], rows[:, 1:], self.channels)
        side = self._take(self._shared.side, self._shared.side_count, "_side_read")
        late = side[:, 0] < self._returned_until
        self.dropped += int(late.sum())
        merged = np.concatenate([self._held, rows, side[~late]])
        on_grid = np.concatenate([self._held_on_grid, np.ones(len(rows), bool), np.zeros(int((~late).sum()), bool)])
        order = np.argsort(merged[:, 0], kind="stable")
        merged, on_grid = merged[order], on_grid[order]
        keep = len(merged)
        if running and len(merged):
            keep = int(np.searchsorted(merged[:, 0], merged[-1, 0] - SIDE_HOLD_S, side="right"))
        self._held, self._held_on_grid = merged[keep:], on_grid[keep:]
        merged, on_grid = merged[:keep], on_grid[:keep]
        if keep:
            self._returned_until = float(merged[-1, 0])
        return Samples(merged[:, 0], merged[:, 1:], self.channels, on_grid)

    def _take(self, ring: np.ndarray, count: Callable[[], int], read_attr: str) -> np.ndarray:
        """The rows of ``ring`` (``count()`` written so far) after those already read (``self.<read_attr>``)."""
        capacity, end = ring.shape[0], count()
        read = getattr(self, read_attr)
        start = max(read, end - capacity)
        self.dropped += start - read
        rows = ring[np.arange(start, end) % capacity].copy()
        # Rows the writer may have overwritten while we copied are dropped too; the writer fills the
        # row after the last published one in place, so the oldest row is overwritten one count early.
        overwritten = count() + 1 - capacity - start
        if overwritten > 0:
            rows = rows[overwritten:]
            self.dropped += overwritten
        setattr(self, read_attr, end)
        return rows

    def errors(self, sensors: Sequence[Sensor]) -> dict[str, int]:
        """Failed reads per sensor so far: reads that raised, gave an exception or no number for a channel, or
        missed their deadline (their channels read NaN).

        Args:
            sensors: The ring's sensors, in its order.

        Returns:
            Sensor name -> failed reads (sensors of the same name summed).
        """
        counts: dict[str, int] = {}
        for i, s in enumerate(sensors):
            counts[s.name] = counts.get(s.name, 0) + self._shared.header[ERRORS + i]
        return counts

    def error_texts(self) -> dict[str, str]:
        """Channel name -> the words of its last failed read, for the channels that failed so far.

        An exception reads ``f"{type(exc).__name__}: {exc}"`` (``"NVMLError: Uninitialized"``); a value
        that is no number, or a read past its deadline, says so. Cut to ``ring.TEXT_BYTES`` bytes."""
        texts = {c.name: self._shared.text(column) for column, c in enumerate(self.channels, start=1)}
        return {name: text for name, text in texts.items() if text}
