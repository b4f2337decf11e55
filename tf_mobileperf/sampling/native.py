"""The C tick loop (``_tick.c``) as Python sees it: loading the library, and the tables it runs on.

It exists so that ``loop.SamplingLoop`` can hand the sampler process's ticks to
C where the library was built (``setup.py`` builds it as an optional
extension with the system C compiler; ctypes loads it, so no Python headers
are needed), and run its own Python loop where not. ``load()`` says which;
``MOBILEPERF_NATIVE=0`` in the environment asks for the Python loop.

The tables mirror ``mp_loop`` and its arrays: one ``NativeLoop`` per
sampling thread (a leader), all sharing one ``NativeTables`` of sensors,
files, numbers and channels built once from the sensors' ``file_reads``.
"""

from __future__ import annotations

import ctypes
import logging
import os
from pathlib import Path

from tf_mobileperf.sampling.ring import SharedRing
from tf_mobileperf.sensors.base import Sensor

log = logging.getLogger(__name__)

STOPPED, PYTHON, REPLACED = 0, 1, 2
ABI = 2  # _tick.c's MP_ABI: the meaning of the tables this module builds
_BUFFER = 1 << 16  # the largest file read: /proc/stat of a 256-core machine fits

_i32, _i64, _f64 = ctypes.c_int32, ctypes.c_int64, ctypes.c_double


class File(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("fd", _i32), ("size", _i32), ("first_number", _i32), ("n_numbers", _i32)]


class Number(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p), ("key_len", _i32), ("fields", _i32), ("scale", _f64), ("floor", _f64),
                ("value", _f64), ("prev", _f64)]


class Channel(ctypes.Structure):
    _fields_ = [("column", _i32), ("a", _i32), ("b", _i32), ("op", _i32)]


class SensorEntry(ctypes.Structure):
    _fields_ = [("every", _i64), ("due", _i64), ("native", _i32), ("offloaded", _i32), ("due_now", _i32),
                ("first_file", _i32), ("n_files", _i32), ("first_channel", _i32), ("n_channels", _i32), ("pad", _i32)]


class Loop(ctypes.Structure):
    _fields_ = [("period_ns", _i64), ("origin_ns", _i64), ("stride", _i64), ("tick", _i64), ("epoch", _i64),
                ("generation", _i64), ("leader", ctypes.POINTER(_i64)), ("header", ctypes.POINTER(_i64)),
                ("ring", ctypes.POINTER(_f64)), ("capacity", _i64), ("width", _i64), ("budget_us", _i64),
                ("reading", _i64), ("reading_since", _f64), ("row", ctypes.POINTER(_f64)), ("pending", _i32),
                ("n_sensors", _i32), ("sensors", ctypes.POINTER(SensorEntry)), ("files", ctypes.POINTER(File)),
                ("numbers", ctypes.POINTER(Number)), ("channels", ctypes.POINTER(Channel)),
                ("buf", ctypes.c_void_p), ("buf_size", _i64)]


_OPS = {"": 0, "*": 1, "-": 2, "busy%": 3, "/": 4}
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
        _why_not = "the C tick loop was not built (no C compiler when the package was installed)"
        return None
    try:
        library = ctypes.CDLL(str(found[0]))
    except OSError as exc:
        _why_not = f"cannot load {found[0].name}: {exc}"
        return None
    library.mp_run.argtypes = [ctypes.POINTER(Loop)]
    library.mp_take_over.argtypes = [ctypes.POINTER(Loop), _f64]
    library.mp_run.restype = ctypes.c_int
    library.mp_take_over.restype = _i64
    abi = (_i64 * 6)()
    library.mp_abi(abi)
    if list(abi) != [ABI] + [ctypes.sizeof(s) for s in (Loop, SensorEntry, File, Number, Channel)]:
        _why_not = f"{found[0].name} does not match this version of the package (reinstall it to rebuild it)"
        return None
    _library = library
    return library


def why_not() -> str:
    """Why ``load()`` gives None ("" when it gives the library)."""
    if load() is None and os.environ.get("MOBILEPERF_NATIVE", "1") == "0":
        return "MOBILEPERF_NATIVE=0 asks for the Python loop"
    return _why_not


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
        files, numbers, channels, entries = [], [], [], []
        self._keep: list[bytes] = []  # the C strings the tables point to
        for i, sensor in enumerate(sensors):
            reads = sensor.file_reads
            entry = SensorEntry(every=every[i], due=0, native=int(reads is not None),
                                first_file=len(files), first_channel=len(channels))
            if reads is not None:
                where = {}
                for f, file in enumerate(reads.files):
                    mine = [k for k, n in enumerate(reads.numbers) if n.file == f]
                    files.append(File(self._bytes(str(file.path)), -1, file.size, len(numbers), len(mine)))
                    for k in mine:
                        where[k] = len(numbers)
                        number = reads.numbers[k]
                        numbers.append(Number(self._bytes(number.key) if number.key else None, len(number.key),
                                              number.fields, number.scale, number.floor, float("nan"), float("nan")))
                for c in reads.channels:
                    channels.append(Channel(columns[i][c.name], where[c.a], where.get(c.b, -1), _OPS[c.op]))
            entry.n_files, entry.n_channels = len(files) - entry.first_file, len(channels) - entry.first_channel
            entries.append(entry)
        self.sensors = (SensorEntry * len(entries))(*entries)
        self.files = (File * max(1, len(files)))(*files)
        self.numbers = (Number * max(1, len(numbers)))(*numbers)
        self.channels = (Channel * max(1, len(channels)))(*channels)
        self.buffer = ctypes.create_string_buffer(_BUFFER)
        self.leader = _i64(0)

    def _bytes(self, text: str | bytes) -> bytes:
        data = text.encode() if isinstance(text, str) else bytes(text)
        self._keep.append(data)
        return data


class NativeLoop:
    """One sampling thread's ``mp_loop``: its row, its grid position and its read in flight.

    ``taken`` is set by the watchdog to the sensor whose read it took over.
    """

    def __init__(self, tables: NativeTables, shared: SharedRing, period_s: float,
                 stride: int, epoch: int, generation: int, budget_s: float, alarm: bool, origin_ns: int, tick: int):
        ring = shared.ring
        self._library, self._tables = tables.library, tables
        self._header = (_i64 * len(shared.header)).from_buffer(shared.header)
        self.taken: int | None = None
        self.loop = Loop(
            period_ns=round(period_s * 1e9), origin_ns=origin_ns, stride=stride, tick=tick, epoch=epoch,
            generation=generation, leader=ctypes.pointer(tables.leader), header=self._header,
            ring=ring.ctypes.data_as(ctypes.POINTER(_f64)), capacity=ring.shape[0], width=ring.shape[1],
            budget_us=round(budget_s * 1e6) if alarm else 0, reading=-1, pending=0, n_sensors=len(tables.sensors),
            sensors=tables.sensors, files=tables.files, numbers=tables.numbers, channels=tables.channels,
            buf=ctypes.cast(tables.buffer, ctypes.c_void_p), buf_size=_BUFFER)
        self._pointer = ctypes.byref(self.loop)

    def run(self) -> int:
        """Runs ticks until stopped (``STOPPED``), replaced (``REPLACED``) or a Python sensor is due (``PYTHON``)."""
        return self._library.mp_run(self._pointer)

    def take_over(self, budget_s: float) -> tuple[int | None, float]:
        """(sensor, 0) if its read in flight is over ``budget_s`` and now taken over; else (None, seconds the
        read in flight has left, 0 if none)."""
        result = self._library.mp_take_over(self._pointer, budget_s)
        if result >= 0:
            self.taken = int(result)
            return self.taken, 0.0
        return None, max(0.0, (-2 - result) * 1e-6)
