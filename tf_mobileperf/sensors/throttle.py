"""Whether the board held a clock below what was asked, and why.

A step that ran slow on a Jetson may have been throttled, not heavy. The
kernel does not say "throttled" in one place, so this sensor watches the
places that do say it, one channel per cause:

- ``throttle_thermal``: a zone at or above its lowest passive/hot/critical
  trip point (the kernel caps clocks there), or a hwmon ``temp*_crit_alarm``
  / ``temp*_max_alarm`` set;
- ``throttle_overcurrent``: a hwmon ``curr*``/``in*``/``power*`` crit or max
  alarm set (INA3221 on JetPack 5/6 raises these on over-current);
- ``throttle_clock``: a CPU (cpufreq) or devfreq (GPU, ...) clock below what
  was asked of it: its floor (``scaling_min_freq``, ``min_freq``, which
  jetson_clocks raises to the top), the devfreq governor's ``target_freq``,
  the set speed under the "userspace" governor. The ceiling is not compared
  with: a thermal cap lowers the ceiling itself (that is the thermal cause).
  CPUs whose driver lets the hardware pick the clock (intel_pstate,
  amd-pstate, cppc) are left out: their ``scaling_cur_freq`` is an average
  the hardware measured, below the floor when cores idle.

``throttled`` (group "throttled") is 1 when any cause (group "throttle") is
1. A cause is 1 when any of its sources says so, 0 when every source was
read and none does, NaN otherwise.
"""

from __future__ import annotations

import abc
import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tf_mobileperf.sensors.base import NAN, Channel, Sensor, under_root
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.files import SysfsValue
from tf_mobileperf.sensors.thermal import ThermalZone, thermal_zones

#: A clock this far (relative) below what was asked is held below it; less is measurement noise.
CLOCK_TOLERANCE = 0.02
HWMON_GLOBS = ("sys/class/hwmon/hwmon*", "sys/bus/i2c/drivers/*/*/hwmon/hwmon*")
CPUFREQ_GLOB = "sys/devices/system/cpu/cpu[0-9]*/cpufreq"
DEVFREQ_GLOB = "sys/class/devfreq/*"
CAUSES = ("throttle_thermal", "throttle_overcurrent", "throttle_clock")
#: hwmon alarm file prefix ("temp1_crit_alarm": "temp") -> its cause; fan and other alarms are not throttling.
ALARM_CAUSES = {
    "temp": "throttle_thermal",
    "curr": "throttle_overcurrent",
    "in": "throttle_overcurrent",
    "power": "throttle_overcurrent",
}
_ALARM_FILE = re.compile(r"([a-z]+)\d*_(?:crit|max)_alarm$")


@dataclasses.dataclass
class Check(abc.ABC):
    """One source of one cause; ``read()`` is 1.0 (throttled), 0.0 (not) or NaN (unknown)."""

    cause: str
    source: str

    @abc.abstractmethod
    def read(self) -> float:
        """This source's verdict now."""

    def close(self) -> None:  # noqa: B027 - optional, a no-op by default
        """Releases its open files."""


@dataclasses.dataclass
class TripCheck(Check):
    """A zone's raw temperature against its trip, as the kernel compares them.

    A powered-off unit's -256 C is below every trip: the kernel does not
    throttle for it, so neither does this check.
    """

    temp: SysfsValue
    limit_c: float

    def read(self) -> float:
        """1.0 at or above the trip, 0.0 below it, NaN when the temperature cannot be read."""
        value = self.temp.read()
        return float(value >= self.limit_c) if value == value else NAN

    def close(self) -> None:
        """Closes the zone's temperature file."""
        self.temp.close()


@dataclasses.dataclass
class AlarmCheck(Check):
    """A hwmon alarm flag: 1 while the chip reports its limit crossed."""

    flag: SysfsValue

    def read(self) -> float:
        """1.0 while the flag is set, 0.0 while it is not, NaN when it cannot be read."""
        value = self.flag.read()
        return float(value != 0) if value == value else NAN

    def close(self) -> None:
        """Closes the flag's file."""
        self.flag.close()


@dataclasses.dataclass
class ClockCheck(Check):
    """A clock against the highest readable frequency asked of it, within ``CLOCK_TOLERANCE``."""

    current: SysfsValue
    asked: list[SysfsValue]

    def read(self) -> float:
        """1.0 when the clock is below the highest readable asked one by over the tolerance, else 0.0; NaN
        when the clock or every asked one cannot be read."""
        asked = np.array([a.read() for a in self.asked])
        current = self.current.read()
        if current != current or np.isnan(asked).all():
            return NAN
        return float(current < np.nanmax(asked) * (1.0 - CLOCK_TOLERANCE))

    def close(self) -> None:
        """Closes the clock's files."""
        for value in [self.current, *self.asked]:
            value.close()


def _thermal_checks(zones: list[ThermalZone]) -> list[Check]:
    return [
        TripCheck(
            "throttle_thermal",
            f"{zone.path / 'temp'} >= {zone.throttle_c:g} C",
            SysfsValue(zone.path / "temp", 1e-3),
            zone.throttle_c,
        )
        for zone in zones
        if zone.throttle_c is not None
    ]


def _alarm_checks(root: Path) -> list[Check]:
    devices = {d.resolve(): d for pattern in HWMON_GLOBS for d in sorted(root.glob(pattern))}
    checks: list[Check] = []
    for device in devices.values():
        for flag in sorted([*device.glob("*_crit_alarm"), *device.glob("*_max_alarm")]):
            found = _ALARM_FILE.match(flag.name)
            cause = ALARM_CAUSES.get(found.group(1)) if found else None
            if cause:
                checks.append(AlarmCheck(cause, str(flag), SysfsValue(flag)))
    return checks


@dataclasses.dataclass(frozen=True)
class ClockFiles:
    """The file names of one kind of clock directory: current clock, governor, what is asked."""

    current: str
    governor: str
    asked: tuple[str, ...]
    asked_by_governor: dict[str, str]


CPUFREQ = ClockFiles("scaling_cur_freq", "scaling_governor", ("scaling_min_freq",), {"userspace": "scaling_setspeed"})
DEVFREQ = ClockFiles("cur_freq", "governor", ("min_freq", "target_freq"), {})
#: cpufreq drivers whose current clock is a hardware-measured average, not the clock that was set.
MEASURED_DRIVERS = ("intel_pstate", "intel_cpufreq", "amd-pstate", "amd-pstate-epp", "cppc_cpufreq")


def _clock_check(directory: Path, files: ClockFiles) -> Check | None:
    """A check of ``directory``'s clock; None when it has no current clock or no asked one."""
    try:
        governor = (directory / files.governor).read_text().strip()
    except OSError:
        governor = ""
    names = [*files.asked, files.asked_by_governor.get(governor, "")]
    asked = [SysfsValue(directory / name) for name in names if name and (directory / name).is_file()]
    if not (directory / files.current).is_file() or not asked:
        return None
    source = f"{directory / files.current} < {' | '.join(a.path.name for a in asked)} ({governor or 'no governor'})"
    return ClockCheck("throttle_clock", source, SysfsValue(directory / files.current), asked)


def _driver(directory: Path) -> str:
    try:
        return (directory / "scaling_driver").read_text().strip()
    except OSError:
        return ""


def _clock_checks(root: Path) -> list[Check]:
    cpus = {d.resolve(): d for d in sorted(root.glob(CPUFREQ_GLOB)) if _driver(d) not in MEASURED_DRIVERS}
    checks = [_clock_check(d, CPUFREQ) for d in cpus.values()]
    checks += [_clock_check(d, DEVFREQ) for d in sorted(root.glob(DEVFREQ_GLOB))]
    return [c for c in checks if c is not None]


def verdict(values: np.ndarray) -> float:
    """One verdict from several: throttled if any says so.

    Args:
        values: Verdicts, each 1.0 (throttled), 0.0 (not) or NaN (unknown).

    Returns:
        1.0 when any value is 1, NaN when none is and one is unknown, else 0.0.
    """
    if np.any(values == 1.0):
        return 1.0
    return NAN if np.isnan(values).any() else 0.0


class ThrottleSensor(Sensor):
    """``throttled`` and one 0/1 channel per cause the board exposes (see the module docstring).

    Args:
        root: Root of the file system tree to read.
        period_s: How often the sampler reads it.
    """

    name = "throttling (thermal trips, hwmon alarms, clocks)"
    provides = frozenset({("state", "board")})

    def __init__(self, root: str | Path = "/", period_s: float = 0.1):
        root = Path(root)
        self.min_period_s = period_s
        self._checks = _thermal_checks(thermal_zones(root)[0]) + _alarm_checks(root) + _clock_checks(root)
        if not self._checks:
            raise SensorUnavailable(
                f"nothing says whether the board throttles: no thermal zone with a passive/hot/critical trip under "
                f"{under_root(root, 'sys/class/thermal')}, no hwmon *_crit_alarm/*_max_alarm, no cpufreq or "
                f"devfreq clock with an asked frequency under {under_root(root, 'sys')}"
            )
        self.causes = [cause for cause in CAUSES if any(c.cause == cause for c in self._checks)]
        self._index = {cause: [i for i, c in enumerate(self._checks) if c.cause == cause] for cause in self.causes}
        sources = {cause: "; ".join(self._checks[i].source for i in rows) for cause, rows in self._index.items()}
        self.channels = [
            Channel("throttled", "state", "any of " + ", ".join(self.causes), group="throttled", device="board")
        ]
        self.channels += [
            Channel(cause, "state", sources[cause], group="throttle", device="board") for cause in self.causes
        ]

    def read(self) -> Mapping[str, float]:
        """``throttled`` and each cause now: 1.0 (throttled), 0.0 (not) or NaN (unknown)."""
        values = np.array([check.read() for check in self._checks])
        out = {cause: verdict(values[rows]) for cause, rows in self._index.items()}
        return {"throttled": verdict(np.array(list(out.values())))} | out

    def metadata(self) -> dict:
        """``throttle``: each cause's sources, and the clock tolerance."""
        causes = {cause: [self._checks[i].source for i in rows] for cause, rows in self._index.items()}
        return {"throttle": {"causes": causes, "clock_tolerance": CLOCK_TOLERANCE}}

    def close(self) -> None:
        """Closes every check's files."""
        for check in self._checks:
            check.close()
