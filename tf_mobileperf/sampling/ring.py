"""The memory the sampler's worker shares with its owner: a header of counters, the ring of rows, error texts.

It exists so that both sides of the sampler agree on one layout: the worker
(``loop.SamplingLoop``, in the sampler process or in thread mode a thread)
writes rows (time, channel values...), counts rows and failed reads in the
header and keeps each channel's last error text; a sensor read in its
own thread (``Sensor.own_thread``) writes its readings as rows of their own
into a second, smaller ring (``side``), each stamped with the instant of
its read rather than the grid's next row; the owner
(``sampler.Sampler``) reads them while sampling goes on.

The memory is a ``memfd`` (``os.memfd_create``) mapped shared: a forked child
inherits the mapping, and a freshly started sampler process maps the same
file from the descriptor it is handed (``SharedRing.attach``). Where memfd
does not exist it is anonymous shared memory, which only a fork can share
(``fd`` is None).
"""

from __future__ import annotations

import array
import math
import mmap
import numbers
import os
import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from tf_mobileperf.sampling.abi import CONSTANTS

#: Slots of the shared header, before the ring (``_tick_abi.h``'s MP_HEADER_*, which the C loop writes too): rows
#: written, the epoch of the worker allowed to write (a new one per start, stop or restart), whether
#: SCHED_FIFO was granted, then failed reads per sensor.
COUNT, EPOCH, REALTIME, ERRORS = (CONSTANTS[f"MP_HEADER_{slot}"] for slot in ("COUNT", "EPOCH", "REALTIME", "ERRORS"))

#: Bytes of one channel's last error text (UTF-8, cut to fit, NUL-padded), after the ring (MP_TEXT_BYTES).
TEXT_BYTES = CONSTANTS["MP_TEXT_BYTES"]

#: Rows of the side ring, where sensors read in their own thread write (40 s of a 10 ms counter between drains).
SIDE_CAPACITY = 4096


def error_text(exc: BaseException) -> str:
    """How a failed read's exception is written: ``"NVMLError: Uninitialized"`` (the type alone when it says nothing).

    Args:
        exc: The exception the read raised or returned.
    """
    said = str(exc)
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__


class SharedRing:
    """The header, the ring and the channels' error texts, in memory a sampler process can share.

    Args:
        capacity: Rows the ring holds.
        width: Columns of a row: the time, then one per channel.
        n_sensors: Sensors whose failed reads are counted.
        fd: A memfd holding this layout (the sampler process's side); None creates one.
    """

    def __init__(self, capacity: int, width: int, n_sensors: int, fd: int | None = None):
        self.capacity, self.width, self.n_sensors = capacity, width, n_sensors
        slots = ERRORS + max(1, n_sensors) + 2  # the last two: whether side rows may come, rows written there
        self._side_open_slot, self._side_slot = slots - 2, slots - 1
        ring_bytes = 8 * capacity * width
        text_bytes = TEXT_BYTES * max(1, width - 1)
        size = 8 * slots + ring_bytes + text_bytes + 8 * SIDE_CAPACITY * width
        if fd is None and hasattr(os, "memfd_create"):
            fd = os.memfd_create("mobileperf-ring")  # close-on-exec: only a process it is passed to gets it
            os.ftruncate(fd, size)
            weakref.finalize(self, os.close, fd)
        self.fd = fd
        self._memory = mmap.mmap(-1 if fd is None else fd, size)  # MAP_SHARED
        self.header = memoryview(self._memory)[: 8 * slots].cast("q")  # Python ints: faster than numpy scalars
        self.ring = np.frombuffer(self._memory, np.float64, capacity * width, offset=8 * slots).reshape(capacity, width)
        self._texts = memoryview(self._memory)[8 * slots + ring_bytes : 8 * slots + ring_bytes + text_bytes]
        self.side = np.frombuffer(
            self._memory, np.float64, SIDE_CAPACITY * width, offset=8 * slots + ring_bytes + text_bytes
        ).reshape(SIDE_CAPACITY, width)
        self._side_floats = memoryview(self._memory)[8 * slots + ring_bytes + text_bytes :].cast("d")

    @classmethod
    def attach(cls, fd: int, capacity: int, width: int, n_sensors: int) -> SharedRing:
        """The ring another process created, from its memfd ``fd`` (the sampler process's side).

        Args:
            fd: The memfd the creating process handed over.
            capacity: Rows the ring holds, as the creator made it.
            width: Columns of a row (the time, then one per channel), as the creator made it.
            n_sensors: Sensors whose failed reads are counted, as the creator made it.
        """
        return cls(capacity, width, n_sensors, fd=fd)

    def count(self) -> int:
        """Rows written into the ring since it was created (over restarts)."""
        return self.header[COUNT]

    def side_count(self) -> int:
        """Rows written into the side ring."""
        return self.header[self._side_slot]

    def open_side(self) -> None:
        """Says that side rows may come from now on: a sensor is read in its own thread (set before its first
        read is asked for, so that the reader holds back rows its readings may come before)."""
        self.header[self._side_open_slot] = 1

    def side_open(self) -> bool:
        """Whether side rows may come (``open_side``)."""
        return bool(self.header[self._side_open_slot])

    def write_side(self, row: list[float]) -> None:
        """Writes ``row`` (``width`` floats) as the side ring's next row and publishes it.

        Args:
            row: The time, then one value per channel (NaN: no reading).
        """
        start = (self.side_count() % SIDE_CAPACITY) * self.width
        self._side_floats[start : start + self.width] = array.array("d", row)
        self.header[self._side_slot] += 1

    def fail(self, sensor: int) -> None:
        """Counts one failed read of a sensor.

        Args:
            sensor: The sensor's index, 0-based.
        """
        self.header[ERRORS + sensor] += 1

    def set_text(self, column: int, text: str) -> None:
        """Keeps ``text`` as the last error of a channel.

        Args:
            column: The channel's column in a row (1 for the first channel; column 0 is the time).
            text: The error; encoded as UTF-8 and cut to ``TEXT_BYTES``.
        """
        data = text.encode("utf-8", "replace")[:TEXT_BYTES]
        at = (column - 1) * TEXT_BYTES
        self._texts[at : at + TEXT_BYTES] = data.ljust(TEXT_BYTES, b"\0")

    @property
    def texts(self) -> memoryview:
        """The channels' error texts, ``TEXT_BYTES`` each from column 1: where the C tick loop writes them."""
        return self._texts

    def text(self, column: int) -> str:
        """The last error text of a channel ("" if none yet).

        Read until two copies agree, so a text being written meanwhile is never half old, half new.

        Args:
            column: The channel's column in a row (1 for the first channel).
        """
        at = (column - 1) * TEXT_BYTES
        data, previous = bytes(self._texts[at : at + TEXT_BYTES]), None
        while data != previous:
            previous, data = data, bytes(self._texts[at : at + TEXT_BYTES])
        return data.rstrip(b"\0").decode("utf-8", "ignore")  # "ignore": a character cut at the end


def store_reading(values: Any, columns: list[tuple[str, int]], row: np.ndarray | list[float]) -> dict[int, str] | None:
    """Puts a sensor's reading (channel name -> value) into ``row`` at ``columns``.

    A channel missing from the mapping or NaN is no reading (NaN in ``row``), not a failure; an ``Exception``
    as a channel's value, or a value that is not a real number (bool, str, None, complex...) fails that channel.

    Args:
        values: What the sensor's ``read()`` returned, or the exception it raised (which fails every channel,
            as does anything that is not a mapping).
        columns: (channel name, column in ``row``) for each of the sensor's channels.
        row: The row being filled; written in place.

    Returns:
        None when the read did not fail, else column -> why for each channel that failed (the read then counts
        as one failed read of the sensor).
    """
    if isinstance(values, BaseException):
        return dict.fromkeys((c for _, c in columns), error_text(values))
    if type(values) is not dict and not isinstance(values, Mapping):
        return dict.fromkeys((c for _, c in columns), f"read() returned {_shown(values)}, not a mapping")
    failed: dict[int, str] | None = None
    try:
        for name, c in columns:
            value = values.get(name, math.nan)
            if isinstance(value, float):  # also numpy's float64
                row[c] = value
            elif isinstance(value, numbers.Real) and not isinstance(value, bool):
                row[c] = float(value)
            else:
                failed = failed or {}
                failed[c] = (
                    error_text(value)
                    if isinstance(value, BaseException)
                    else f"value {_shown(value)} is not a real number"
                )
    except Exception as exc:  # a mapping whose get() or float() raises
        for _, c in columns:
            row[c] = math.nan
        return dict.fromkeys((c for _, c in columns), error_text(exc))
    return failed


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{text if len(text) <= 40 else text[:37] + '...'} ({type(value).__name__})"
