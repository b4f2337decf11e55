"""Temperatures of every kernel thermal zone, and the trip points that throttle.

A Jetson trains at the edge of its thermal envelope: a step that runs hot may
run slow because a trip point was crossed and the clocks were capped. This
module finds the zones (``/sys/class/thermal/thermal_zone*``: ``type`` and
``temp`` in milli-degrees C), reads them in degrees C, and keeps each zone's
trip points, which ``throttle.py`` compares the temperatures with.

Two kinds of zone give no measurement and are not channels: a PMIC die zone
(it reports a fixed 100 C on TX1/TX2, ``PMIC@100C`` in tegrastats), and a
reading of -256 C (Tegra's value for a sensor whose unit is powered off, such
as ``GPU@-256C`` on an idle Orin), which reads NaN.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

from tf_mobileperf.sensors.base import Channel, Sensor, under_root
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.files import FileReads
from tf_mobileperf.sensors.kernel_file import read_text

ZONES_DIR = "sys/class/thermal"
#: Tegra's reading of a sensor whose unit is powered off, in degrees C.
OFFLINE_C = -256.0
#: The kernel's THERMAL_TEMP_INVALID (-274 C) marks a disabled trip point.
INVALID_TRIP_C = -274.0
#: Trip types at which the kernel caps clocks; "active" trips only start a fan.
THROTTLE_TRIPS = ("passive", "hot", "critical")
_TRIP_FILE = re.compile(r"trip_point_(\d+)_temp$")
_ZONE_DIR = re.compile(r"thermal_zone(\d+)$")


@dataclasses.dataclass(frozen=True)
class Trip:
    """One trip point of a zone: its kernel type and temperature in degrees C."""

    type: str
    temp_c: float


@dataclasses.dataclass(frozen=True)
class ThermalZone:
    """A thermal zone: where it is, its type, the channel it gives, its trips."""

    path: Path
    type: str
    name: str
    device: str
    trips: tuple[Trip, ...]

    @property
    def throttle_c(self) -> float | None:
        """The lowest temperature at which the kernel caps clocks; None without such a trip."""
        temps = [t.temp_c for t in self.trips if t.type in THROTTLE_TRIPS and t.temp_c > INVALID_TRIP_C]
        return min(temps) if temps else None


def zone_device(zone_type: str) -> str:
    """The device a zone's type names.

    Args:
        zone_type: The zone's ``type`` ("GPU-therm", "BCPU-therm", "x86_pkg_temp", ...).

    Returns:
        "gpu" where it names the GPU; "cpu" where it names a CPU (BCPU-therm, CPU-therm, cpu-thermal) or an x86
        package; else "board".
    """
    lowered = zone_type.lower()
    if "gpu" in lowered:
        return "gpu"
    return "cpu" if "cpu" in lowered or lowered.startswith("x86_pkg") else "board"


def _trips(zone: Path) -> tuple[Trip, ...]:
    trips = []
    for temp_file in sorted(zone.glob("trip_point_*_temp")):
        match = _TRIP_FILE.search(temp_file.name)
        if match is None:  # the glob's "*" is not a number
            continue
        index = match.group(1)
        try:
            kind = read_text(zone / f"trip_point_{index}_type").strip()
            trips.append(Trip(kind, float(read_text(temp_file)) / 1000.0))
        except (OSError, ValueError):
            continue
    return tuple(trips)


def thermal_zones(root: str | Path = "/") -> tuple[list[ThermalZone], dict[str, str]]:
    """The zones under ``root`` that give a temperature, and why each of the others does not.

    Args:
        root: Root of the file system tree ("/" for this machine, a fake tree in tests).

    Returns:
        (zones, skipped): zones in kernel order with unique channel names
        ("<type>_temp", the zone's number added when two types repeat), and
        zone directory name -> reason for those left out.
    """
    zones: list[ThermalZone] = []
    skipped: dict[str, str] = {}
    names: set[str] = set()
    found = Path(root).glob(f"{ZONES_DIR}/thermal_zone*")
    numbered = ((int(m.group(1)), p) for p in found if (m := _ZONE_DIR.match(p.name)))
    for number, zone in sorted(numbered):
        try:
            zone_type = read_text(zone / "type").strip()
        except OSError as exc:
            skipped[zone.name] = f"type not readable: {exc.strerror or exc}"
            continue
        if not (zone / "temp").exists():
            skipped[zone.name] = f"{zone_type}: no temp file"
            continue
        if zone_type.upper().startswith("PMIC"):
            skipped[zone.name] = f"{zone_type}: a PMIC die zone reports a fixed 100 C, not a measurement"
            continue
        name = f"{zone_type}_temp"
        if name in names:
            name = f"{zone_type}_{number}_temp"
        names.add(name)
        zones.append(ThermalZone(zone, zone_type, name, zone_device(zone_type), _trips(zone)))
    return zones, skipped


class ThermalSensor(Sensor):
    """Temperature (degrees C) of every thermal zone; trip points in ``metadata()``.

    Args:
        root: Root of the file system tree to read.
        period_s: How often the sampler reads it; zone temperatures change
            over tenths of a second, and a read on Tegra is a call to the
            power-management processor.
    """

    name = "thermal zones (sysfs)"
    provides = frozenset({("temperature", "cpu"), ("temperature", "gpu"), ("temperature", "board")})

    def __init__(self, root: str | Path = "/", period_s: float = 0.1):
        self.min_period_s = period_s
        self.zones, self.skipped = thermal_zones(root)
        if not self.zones:
            detail = "; ".join(f"{k}: {v}" for k, v in self.skipped.items())
            raise SensorUnavailable(
                f"no readable thermal zone under {under_root(root, ZONES_DIR)}" + (f" ({detail})" if detail else "")
            )
        self.file_reads: FileReads = FileReads()
        reads = self.file_reads
        for zone in self.zones:  # a powered-off zone's -256 C reads NaN
            reads.channel(zone.name, reads.number(zone.path / "temp", 1e-3, floor=OFFLINE_C))
        self.channels = [
            Channel(
                zone.name,
                "temperature",
                str(zone.path / "temp"),
                group=zone.device if zone.device != "board" else "",
                device=zone.device,
            )
            for zone in self.zones
        ]

    def read(self) -> Mapping[str, float | Exception]:
        """Every zone's temperature now, degrees C; NaN for a powered-off unit's -256 C."""
        return self.file_reads.read()

    def metadata(self) -> dict:
        """Per channel, its zone, type, trip points and throttle temperature; and the zones left out, with why."""
        zones = {
            zone.name: {
                "zone": zone.path.name,
                "type": zone.type,
                "trips": [dataclasses.asdict(t) for t in zone.trips],
                "throttle_c": zone.throttle_c,
            }
            for zone in self.zones
        }
        return {"thermal_zones": zones, "thermal_zones_skipped": self.skipped}

    def close(self) -> None:
        """Closes the files it reads."""
        self.file_reads.close()
