"""The C tick loop (``_tick.c``) as Python sees it: loading the library, and the tables it runs on.

It exists so that ``loop.SamplingLoop`` can hand the sampler process's ticks to
C where the library was built (``setup.py`` builds it as an optional
extension with the system C compiler; ctypes loads it, so no Python headers
are needed), and run its own Python loop where not. ``load()`` says which;
``MOBILEPERF_NATIVE=0`` in the environment asks for the Python loop.

The tables are ``mp_loop`` and its arrays, as ``_tick_abi.h`` declares them
(``abi.py`` reads it): one ``NativeLoop`` per
sampling thread (a leader), all sharing one ``NativeTables`` of sensors,
files, numbers and channels built once from the sensors' ``file_reads``.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
from pathlib import Path

import numpy as np

from tf_mobileperf.sampling import abi
from tf_mobileperf.sampling.ring import SharedRing, error_text
from tf_mobileperf.sensors.base import Sensor, reading_range
from tf_mobileperf.sensors.kernel_file import file_error

log = logging.getLogger(__name__)

_C = abi.CONSTANTS
STOPPED, PYTHON, REPLACED = _C["MP_STOPPED"], _C["MP_PYTHON"], _C["MP_REPLACED"]
ABI = _C["MP_ABI"]  # the meaning of the tables this module builds; the library reports the one it was built with

_i64, _f64 = ctypes.c_int64, ctypes.c_double

# The structures as _tick_abi.h declares them.
File, Number, Channel = abi.STRUCTS["mp_file"], abi.STRUCTS["mp_number"], abi.STRUCTS["mp_channel"]
SensorEntry, Loop = abi.STRUCTS["mp_sensor"], abi.STRUCTS["mp_loop"]

#: files.OPS -> mp_channel.op.
_OPS = {
    "": _C["MP_OP_FIRST"],
    "*": _C["MP_OP_TIMES"],
    "-": _C["MP_OP_MINUS"],
    "busy%": _C["MP_OP_BUSY"],
    "/": _C["MP_OP_DIVIDE"],
}
_library: ctypes.CDLL | None = None
_why_not = ""


def load() -> ctypes.CDLL | None:
    """The built library, or None (the reason is in ``why_not()``)."""
    global _library, _why_not
    if os.environ.get("MOBILEPERF_NATIVE", "1") == "0":
        return None
    if _library is not None or _why_not:
        return _library
    found = sorted(Path(__file__).parent.glob("_tick*.so"))
    if not found:
        _why_not = (
            "the C tick loop was not built when the package was installed "
            "(no C compiler, or it failed: pip install -v says why)"
        )
        return None
    try:
        library = ctypes.CDLL(str(found[0]))
    except OSError as exc:
        _why_not = f"cannot load {found[0].name}: {exc}"
        return None
    for name, (restype, argtypes) in abi.SIGNATURES.items():
        function = getattr(library, name, None)
        if function is None:
            _why_not = f"{found[0].name} has no {name} (reinstall the package to rebuild it)"
            return None
        function.restype, function.argtypes = restype, argtypes
    built = (_i64 * 6)()
    library.mp_abi(built)
    if list(built) != [ABI] + [ctypes.sizeof(s) for s in (Loop, SensorEntry, File, Number, Channel)]:
        _why_not = f"{found[0].name} does not match this version of the package (reinstall it to rebuild it)"
        return None
    _library = library
    return library


def why_not() -> str:
    """Why ``load()`` gives None ("" when it gives the library)."""
    if load() is None and os.environ.get("MOBILEPERF_NATIVE", "1") == "0":
        return "MOBILEPERF_NATIVE=0 asks for the Python loop"
    return _why_not


def loop_name() -> str:
    """The tick loop a sampler process started now runs: "C", or "Python (why)"."""
    return "C" if load() is not None else f"Python ({why_not()})"


class NativeTables:
    """The sensors, files, numbers and channels of one sampler, as the C loop reads them.

    Args:
        library: The loaded library (``load()``).
        sensors: The sampler's sensors; those with ``file_reads`` are read in C.
        every: Ticks between reads of each sensor.
        columns: Each sensor's channel name -> row column.
    """

    def __init__(self, library: ctypes.CDLL, sensors: list[Sensor], every: list[int], columns: list[dict[str, int]]):
        self.library = library
        files: list[ctypes.Structure] = []  # File, Number, Channel and SensorEntry are made from the ABI
        numbers: list[ctypes.Structure] = []
        channels: list[ctypes.Structure] = []
        entries: list[ctypes.Structure] = []
        self._keep: list[bytes] = []  # the C strings the tables point to
        for i, sensor in enumerate(sensors):
            reads = sensor.file_reads
            entry = SensorEntry(
                every=every[i], due=0, native=int(reads is not None), first_file=len(files), first_channel=len(channels)
            )
            if reads is not None:
                where, last = {}, reads.last or [math.nan] * len(reads.numbers)  # busy% goes on from the last read
                for f, file in enumerate(reads.files):
                    mine = [k for k, n in enumerate(reads.numbers) if n.file == f]
                    why = error_text(file_error(str(file.path).replace("%", "%%"), "%s"))
                    files.append(
                        File(
                            self._bytes(os.fsencode(file.path)),
                            self._bytes(why),
                            -1,
                            file.size,
                            len(numbers),
                            len(mine),
                        )
                    )
                    for k in mine:
                        where[k] = len(numbers)
                        number = reads.numbers[k]
                        numbers.append(
                            Number(
                                self._bytes(number.key) if number.key else None,
                                len(number.key),
                                number.fields,
                                number.scale,
                                number.floor,
                                last[k],
                                last[k],
                                len(files) - 1,
                            )
                        )
                declared = {c.name: c for c in sensor.channels}
                for c in reads.channels:
                    low, high, why = reading_range(sensor, declared[c.name])
                    channels.append(
                        Channel(
                            self._bytes(why), low, high, columns[i][c.name], where[c.a], where.get(c.b, -1), _OPS[c.op]
                        )
                    )
            entry.n_files, entry.n_channels = len(files) - entry.first_file, len(channels) - entry.first_channel
            entries.append(entry)
        self.sensors = (SensorEntry * len(entries))(*entries)
        self.files = (File * max(1, len(files)))(*files)
        self.numbers = (Number * max(1, len(numbers)))(*numbers)
        self.channels = (Channel * max(1, len(channels)))(*channels)
        self.leader = _i64(0)

    def _bytes(self, text: str | bytes) -> bytes:
        data = text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)  # as ring.set_text
        self._keep.append(data)
        return data


class NativeLoop:
    """One sampling thread's ``mp_loop``: its row, its grid position, its read in flight and its read buffer,
    which C grows to the largest file read (``free()`` it when the thread is done: a replaced thread may still
    be reading into its own).

    ``taken`` is set by the watchdog to the sensor whose read it took over.
    """

    def __init__(
        self,
        tables: NativeTables,
        shared: SharedRing,
        period_s: float,
        stride: int,
        epoch: int,
        generation: int,
        budget_s: float,
        alarm: bool,
        origin_ns: int,
        tick: int,
    ):
        ring = shared.ring
        self._library, self._tables = tables.library, tables
        self._header = (_i64 * len(shared.header)).from_buffer(shared.header)
        self._texts = (ctypes.c_char * len(shared.texts)).from_buffer(shared.texts)
        self.taken: int | None = None
        self.loop = Loop(
            period_ns=round(period_s * 1e9),
            origin_ns=origin_ns,
            stride=stride,
            tick=tick,
            epoch=epoch,
            generation=generation,
            leader=ctypes.pointer(tables.leader),
            header=self._header,
            ring=ring.ctypes.data_as(ctypes.POINTER(_f64)),
            capacity=ring.shape[0],
            width=ring.shape[1],
            budget_us=round(budget_s * 1e6) if alarm else 0,
            reading=_C["MP_READING_NONE"],
            pending=0,
            n_sensors=len(tables.sensors),
            sensors=tables.sensors,
            files=tables.files,
            numbers=tables.numbers,
            channels=tables.channels,
            texts=ctypes.addressof(self._texts),
            buf=None,
            buf_size=0,
        )
        self._pointer = ctypes.byref(self.loop)

    def run(self) -> int:
        """Runs ticks until stopped (``STOPPED``), replaced (``REPLACED``) or a Python sensor is due (``PYTHON``)."""
        return self._library.mp_run(self._pointer)

    def read(self, sensor: int, row: np.ndarray) -> None:
        """One read of a sensor into ``row`` as a tick reads it; failed reads counted and worded in the shared
        memory as the loop does.

        Args:
            sensor: The index of a sensor declared as files (``file_reads``).
            row: A float64 row of the ring's width, written in place.
        """
        self._library.mp_read(self._pointer, sensor, row.ctypes.data_as(ctypes.POINTER(_f64)))

    def free(self) -> None:
        """Frees the read buffer, once no thread runs this loop (it grows on the next read if used again)."""
        self._library.mp_free(self._pointer)

    def take_over(self, budget_s: float) -> tuple[int | None, float]:
        """Takes over this loop's read in flight if it has run longer than ``budget_s``; sets ``taken``.

        Args:
            budget_s: The read budget, seconds.

        Returns:
            (the sensor, 0.0) if its read was taken over; else (None, seconds the read in flight has left,
            0.0 if none is in flight).
        """
        result = self._library.mp_take_over(self._pointer, budget_s)
        if result >= 0:
            self.taken = int(result)
            return self.taken, 0.0
        return None, max(0.0, (-2 - result) * 1e-6)
