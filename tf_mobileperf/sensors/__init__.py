"""Sensors: what can be read on this machine, behind one small interface.

``detect(root="/")`` tries every sensor this package knows and returns the
ones present; ``probe(root="/")`` also returns, for each absent one, the
reason it is absent, so tools can tell the user instead of printing zeros.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Callable

from tf_mobileperf.sensors.base import UNITS, Channel, Sensor, SensorUnavailable
from tf_mobileperf.sensors.ina3221 import Ina3221HwmonSensor, Ina3221IioSensor, rail_group
from tf_mobileperf.sensors.jetson_gpu import JetsonGpuSensor
from tf_mobileperf.sensors.jtop_sensor import JtopSensor
from tf_mobileperf.sensors.nvml import NvmlSensor
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor
from tf_mobileperf.sensors.rapl import RaplSensor
from tf_mobileperf.sensors.synthetic import SyntheticSensor
from tf_mobileperf.sensors.tegrastats import ReplaySensor, TegrastatsRecord, parse_line

log = logging.getLogger(__name__)

__all__ = [
    "UNITS", "Channel", "Sensor", "SensorUnavailable", "Ina3221IioSensor", "Ina3221HwmonSensor",
    "JetsonGpuSensor", "JtopSensor", "NvmlSensor", "CpuSensor", "MemorySensor", "RaplSensor",
    "SyntheticSensor", "ReplaySensor", "TegrastatsRecord", "parse_line", "rail_group",
    "detect", "probe", "Probe",
]


@dataclasses.dataclass
class Probe:
    """What ``probe`` found: the sensors present and why the others are not."""

    sensors: list[Sensor]
    absent: dict[str, str]

    def has_kind(self, kind: str) -> bool:
        return any(c.kind == kind for s in self.sensors for c in s.channels)


def probe(root: str | Path = "/", pid: int | None = None, use_jtop: bool = True) -> Probe:
    """Tries every known sensor; returns those present and reasons for the rest.

    Args:
        root: Root of the file system tree (a fake tree in tests).
        pid: The training process, for its memory (default: this process).
        use_jtop: Try jtop as a fallback when no INA3221 rails are readable.
            Only at ``root="/"``: jtop reads the real machine.
    """
    candidates: list[tuple[str, Callable[[], Sensor]]] = [
        ("ina3221x (iio, JetPack 4)", lambda: Ina3221IioSensor(root)),
        ("ina3221 (hwmon, JetPack 5/6)", lambda: Ina3221HwmonSensor(root)),
        ("jetson gpu load", lambda: JetsonGpuSensor(root)),
        ("rapl (powercap)", lambda: RaplSensor(root)),
        ("cpu (/proc/stat)", lambda: CpuSensor(root)),
        ("memory (/proc/meminfo)", lambda: MemorySensor(root, pid=pid)),
    ]
    if str(root) == "/":
        candidates.append(("nvml", NvmlSensor))
    sensors: list[Sensor] = []
    absent: dict[str, str] = {}
    for label, make in candidates:
        try:
            sensors.append(make())
        except SensorUnavailable as exc:
            absent[label] = str(exc)
    has_rails = any(isinstance(s, (Ina3221IioSensor, Ina3221HwmonSensor)) for s in sensors)
    if use_jtop and str(root) == "/" and not has_rails:
        try:
            sensors.append(JtopSensor())
        except SensorUnavailable as exc:
            absent["jtop (jetson-stats)"] = str(exc)
    for label, reason in absent.items():
        log.debug("sensor %s not present: %s", label, reason)
    return Probe(sensors, absent)


def detect(root: str | Path = "/", pid: int | None = None) -> list[Sensor]:
    """The sensors present on this machine (or in the tree at ``root``)."""
    return probe(root, pid=pid).sensors
