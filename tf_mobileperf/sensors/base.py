"""The one small interface every sensor implements.

A sensor names its channels once (``channels``) and then, on every ``read()``,
returns ``{channel name: value}`` in SI-like units: W for power, J for
cumulative energy counters, % for utilization, bytes for memory, Hz for clocks,
degrees C for temperatures. A channel that could not be read this time is NaN,
never 0: a zero would be a reading the hardware never gave.

What a channel means (its kind, the device it belongs to, the rail it
measures, the CPU core it is) is declared here, on the ``Channel``, by the
sensor that defines it; consumers read these roles, never the channel's name.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from tf_mobileperf.sensors.files import FileReads

NAN = math.nan

#: Channel kinds and their units.
UNITS = {
    "power": "W",
    "energy": "J",
    "util": "%",
    "memory": "B",
    "clock": "Hz",
    "temperature": "C",
    "state": "",  # on/off, throttled, a mode: a code, no unit
}

#: What a channel's quantity belongs to ("" when none of these).
DEVICES = ("cpu", "gpu", "board", "process")

#: Kinds that measure a power rail, and so name the ``rail``.
RAIL_KINDS = ("power", "energy")

#: What a reading of each kind can be, (lowest, highest): a value outside is not a measurement (a torn or
#: garbled read, a driver's error code read as a number, a busy share from a counter gone backwards), so it
#: is a failed read, never averaged or integrated. Power's highest is the sensor's ``max_power_w``.
RANGES = {
    "power": (0.0, math.inf),
    "energy": (0.0, math.inf),
    "util": (0.0, 100.0),
    "memory": (0.0, math.inf),
    "clock": (0.0, math.inf),
    "temperature": (-273.15, math.inf),
}


@dataclasses.dataclass(frozen=True)
class Channel:
    """One measured quantity and its roles.

    Args:
        name: Unique name within a run, e.g. ``"VDD_SYS_GPU"`` or ``"cpu3_util"``.
        kind: One of ``UNITS`` ("power", "energy", "util", "memory", "clock",
            "temperature", "state").
        source: Where the value is read from (a file path or an API call).
        group: The paper's grouping: "cpu", "gpu", "mem", "total", "soc",
            "subzone", "cpu+gpu+cv", ... or "" when the channel belongs to none.
        cluster: For per-core CPU channels, the core type (e.g. "Denver2").
        device: What the quantity belongs to: one of ``DEVICES`` or "".
        rail: For power and energy channels, the rail measured: a power
            channel and an energy counter of one rail share it (NVML
            ``gpu0_power`` and ``gpu0_energy``: rail "gpu0"). Defaults to the
            channel's name; "" for every other kind.
        core: Index of the CPU core of a per-core channel; None otherwise.
        period_s: How often the source has a new reading, where it says so
            (a replayed log: its line interval over the replay's speed);
            None: each read is a new reading. The sampler may read it
            faster; the report and the dashboard give this rate as the
            channel's own.

    Raises:
        ValueError: an unknown kind or device, a rail on a channel that is
            not power or energy, a core that is not a CPU core index, or a
            period that is not a finite number > 0.
    """

    name: str
    kind: str
    source: str
    group: str = ""
    cluster: str = ""
    device: str = ""
    rail: str = ""
    core: int | None = None
    period_s: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in UNITS:
            raise ValueError(f"unknown channel kind {self.kind!r}; expected one of {sorted(UNITS)}")
        if self.device and self.device not in DEVICES:
            raise ValueError(
                f"unknown channel device {self.device!r} of {self.name!r}; expected one of {list(DEVICES)} or ''"
            )
        if self.kind in RAIL_KINDS and not self.rail:
            object.__setattr__(self, "rail", self.name)
        elif self.rail and self.kind not in RAIL_KINDS:
            raise ValueError(
                f"channel {self.name!r} of kind {self.kind!r} has rail {self.rail!r}: only {list(RAIL_KINDS)} have one"
            )
        if self.core is not None:
            if isinstance(self.core, bool) or not isinstance(self.core, int) or self.core < 0:
                raise ValueError(f"core of {self.name!r} must be a CPU core index >= 0 or None, got {self.core!r}")
            if self.device != "cpu":
                raise ValueError(f"channel {self.name!r} has core {self.core} but device {self.device!r}, not 'cpu'")
        if self.period_s is not None and (
            isinstance(self.period_s, bool)
            or not isinstance(self.period_s, (int, float))
            or not (math.isfinite(self.period_s) and self.period_s > 0)
        ):
            raise ValueError(f"period_s of {self.name!r} must be a finite number > 0 or None, got {self.period_s!r}")

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    def to_dict(self) -> dict[str, Any]:
        """Every field and the unit, as stored in ``channels.json`` and the report."""
        return dataclasses.asdict(self) | {"unit": self.unit}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Channel:
        """The channel ``data`` describes (the inverse of ``to_dict``).

        Args:
            data: A channel's fields by name; keys that are not fields (``unit``, newer ones) are ignored.

        Returns:
            The channel.
        """
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in fields})


class Sensor(abc.ABC):
    """A source of channels read by the sampler.

    Subclasses set ``name``, ``channels`` and ``min_period_s`` (the fastest
    rate the hardware updates or the read can sustain; the sampler reads the
    sensor no more often than that), declare in ``provides`` the (kind,
    device) pairs their channels can have (the registry uses it to say why a
    quantity is missing when the sensor is absent) and implement ``read``.
    A sensor that reads only fixed kernel files declares them in
    ``file_reads`` (``files.FileReads``) and reads through it; the sampler
    then reads it without Python on the tick. A sensor whose read is a slow
    device call (NVML's total-energy counter takes about 4 ms) sets
    ``own_thread``: the sampler then reads it in a thread of its own from the
    start, so it never holds up the other sensors' ticks; each reading is a
    row of its own at the instant of the read (the middle of the call).

    The sampler reads a sensor in another process, started fresh (the
    sensor is pickled there) or forked: a handle to a device (a file
    descriptor, an NVML or jtop handle) is opened by the process that reads,
    not carried over. Where opening it is slow, ``prepare`` opens it there
    before the first read.
    """

    name: str = "sensor"
    channels: list[Channel]
    min_period_s: float = 0.0
    file_reads: FileReads | None = None
    own_thread: bool = False
    #: For an ``own_thread`` sensor: the longest a read may take and still be stamped at its middle. A longer
    #: one (the thread or the machine stalled inside it) read its values at an instant it cannot tell, and is
    #: dropped: a counter's next reading still holds what it had. None: every read is kept.
    stamp_within_s: float | None = None
    #: The most power one channel of this sensor can read, W: more is a failed read (``reading_range``).
    #: By default the most one device this library reads can draw: a datacenter GPU (H200 700 W, B200 1 kW,
    #: GB200 1.2 kW) with room to spare; sensors of smaller parts say their own.
    max_power_w: ClassVar[float] = 2000.0
    provides: ClassVar[frozenset[tuple[str, str]]] = frozenset()
    #: Channel -> why its source itself gives it no value at times (a core a tegrastats log says is "off"):
    #: a NaN there is the source's word, not a sensor that stopped answering, and is not warned about as a gap.
    absent_in_source: Mapping[str, str] = MappingProxyType({})
    #: How long the source lasts from the first read (a replayed log), s; None: as long as the run.
    covers_s: float | None = None

    @abc.abstractmethod
    def read(self) -> Mapping[str, float | Exception]:
        """Returns the current value of every channel; NaN where there is no reading.

        NaN (or a channel left out) is "no reading this time", not an error.
        A failure is said, and counted by the sampler as one failed read of
        this sensor (``Sampler.errors()``) with its words kept as the
        channel's last error text (``Sampler.error_texts()``):

        - raise: every channel of this sensor failed this read;
        - an ``Exception`` instance as a channel's value: that channel failed
          this read, the others are stored.

        The text is ``f"{type(exc).__name__}: {exc}"`` (the type alone when
        ``str(exc)`` is empty), e.g. ``"NVMLError: Uninitialized"``, cut to
        120 bytes of UTF-8. A value that is not a real number (a str, None)
        fails its channel too, with a text that says what it was.
        """

    def ran_out(self, run_s: float) -> str:
        """What is said once when a run outlasted the source (``covers_s``).

        Args:
            run_s: How long the run lasted, s.

        Returns:
            The message: how long the source covers and that later samples are missing.
        """
        return f"{self.name} covers {self.covers_s:.3g} s; the run lasted {run_s:.3g} s: samples after that are missing"

    def prepare(self) -> None:  # noqa: B027 - optional, a no-op by default
        """Opens what the reads use, in the process that reads, before the first read: a library or device
        whose first use is slow (``nvmlInit``), so that the first read takes what every read takes and is not
        taken for a hung one. A no-op by default; what fails here is left to the reads to say."""

    def metadata(self) -> dict:
        """Static facts about the device (board, driver, limits) for the report."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional, a no-op by default
        """Releases handles; the default holds none."""

    def describe(self) -> dict:
        """The sensor's name, ``min_period_s`` and every channel's ``to_dict()``, for the report."""
        return {
            "name": self.name,
            "min_period_s": self.min_period_s,
            "channels": [c.to_dict() for c in self.channels],
        }


def reading_range(sensor: Sensor, channel: Channel) -> tuple[float, float, str]:
    """The range of ``channel``'s readings (``RANGES``); a value outside it is a failed read.

    It is checked where each loop stores a reading: ``rows.SampleRows._store`` for sensors read in Python,
    ``_tick.c`` for those it reads (``native.NativeTables`` copies the ranges).

    Args:
        sensor: The sensor of the channel; its ``name`` is in the text, its ``max_power_w`` is power's highest.
        channel: The channel; a kind not in ``RANGES`` has the range (-inf, inf).

    Returns:
        (lowest, highest, text): ``text % value`` words a value outside, a printf format that ``_tick.c``
        formats the same way: a GPU load of -5 per mille reads
        "reading -0.5 % outside [0, 100] %, the util range of jetson gpu (sysfs)".
    """
    low, high = RANGES.get(channel.kind, (-math.inf, math.inf))
    if channel.kind == "power":
        high = sensor.max_power_w
    rest = f" {channel.unit} outside [{low:g}, {high:g}] {channel.unit}, the {channel.kind} range of {sensor.name}"
    return low, high, "reading %g" + rest.replace("%", "%%")


def under_root(root: str | Path, path: str) -> Path:
    """``path`` inside the tree at ``root``.

    Args:
        root: Root of the file system tree ("/" for this machine, a fake tree in tests).
        path: An absolute path, e.g. "/sys/...".

    Returns:
        ``root`` joined with ``path`` without its leading "/".
    """
    return Path(root) / path.lstrip("/")
