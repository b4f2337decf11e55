"""The one list of sensors this package knows, and what probing them found.

Each entry names a sensor, how to build it, and (through the sensor class's
``provides``) which kinds of quantity of which devices it measures. ``probe``
keeps the reason of every absent sensor under that sensor's label, so a
consumer asks ``why_absent("util", "gpu")`` and gets the reasons of exactly
the sensors that would have given GPU utilization, instead of matching words
in labels.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from tf_mobileperf.sensors.base import DEVICES, UNITS, Sensor
from tf_mobileperf.sensors.board import tegra_soc
from tf_mobileperf.sensors.emc import EmcSensor
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.ina3221 import Ina3221HwmonSensor, Ina3221IioSensor
from tf_mobileperf.sensors.jetson_gpu import JetsonGpuSensor
from tf_mobileperf.sensors.jtop_sensor import JtopSensor
from tf_mobileperf.sensors.nvml import NvmlEnergySensor, NvmlSensor, nvml_sensors
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor
from tf_mobileperf.sensors.rapl import RaplSensor
from tf_mobileperf.sensors.thermal import ThermalSensor
from tf_mobileperf.sensors.throttle import ThrottleSensor

log = logging.getLogger(__name__)

#: The report derives power from an energy counter and energy from a power rail,
#: so a sensor of either one explains why both are missing.
_SAME_QUANTITY = {"power": ("power", "energy"), "energy": ("power", "energy")}


@dataclasses.dataclass(frozen=True)
class SensorSpec:
    """A sensor this package knows.

    Args:
        label: The key of its reason in ``Probe.absent`` when it is absent.
        sensor: Its class; ``sensor.provides`` says what it measures.
        make: Builds it from (root of the file system tree, training pid); it may
            build several sensors from one probe (NVML: values and energy counter),
            returned as a list.
        real_machine_only: It reads the running machine through a library
            (NVML, jtop), not files under ``root``: tried only at ``root="/"``.
        fallback_for: Tried only when none of these sensors is present.
        companions: The classes of the other sensors ``make`` may build with it.
    """

    label: str
    sensor: type[Sensor]
    make: Callable[[Path, int | None], Sensor | list[Sensor]]
    real_machine_only: bool = False
    fallback_for: tuple[type[Sensor], ...] = ()
    companions: tuple[type[Sensor], ...] = ()

    @property
    def classes(self) -> tuple[type[Sensor], ...]:
        """Every class of sensor it may build."""
        return (self.sensor, *self.companions)

    @property
    def provides(self) -> frozenset[tuple[str, str]]:
        """The (kind, device) pairs of the channels it can have."""
        return frozenset().union(*(cls.provides for cls in self.classes))


REGISTRY: tuple[SensorSpec, ...] = (
    SensorSpec("ina3221x (iio, JetPack 4)", Ina3221IioSensor, lambda root, pid: Ina3221IioSensor(root)),
    SensorSpec("ina3221 (hwmon, JetPack 5/6)", Ina3221HwmonSensor, lambda root, pid: Ina3221HwmonSensor(root)),
    SensorSpec("jetson gpu load", JetsonGpuSensor, lambda root, pid: JetsonGpuSensor(root)),
    SensorSpec("rapl (powercap)", RaplSensor, lambda root, pid: RaplSensor(root)),
    SensorSpec("cpu (/proc/stat)", CpuSensor, lambda root, pid: CpuSensor(root)),
    SensorSpec("memory (/proc/meminfo)", MemorySensor, lambda root, pid: MemorySensor(root, pid=pid)),
    SensorSpec("thermal zones (sysfs)", ThermalSensor, lambda root, pid: ThermalSensor(root)),
    SensorSpec("emc (debugfs clock, actmon)", EmcSensor, lambda root, pid: EmcSensor(root)),
    SensorSpec(
        "throttling (thermal trips, hwmon alarms, clocks)", ThrottleSensor, lambda root, pid: ThrottleSensor(root)
    ),
    SensorSpec(
        "nvml", NvmlSensor, lambda root, pid: nvml_sensors(), real_machine_only=True, companions=(NvmlEnergySensor,)
    ),
    SensorSpec(
        "jtop (jetson-stats)",
        JtopSensor,
        lambda root, pid: _jtop(root),
        real_machine_only=True,
        fallback_for=(Ina3221IioSensor, Ina3221HwmonSensor),
    ),
)
_BY_LABEL = {spec.label: spec for spec in REGISTRY}


def _jtop(root: Path) -> JtopSensor:
    """jtop's sensor on a Jetson; elsewhere SensorUnavailable saying so (its service's advice is a Jetson's)."""
    if tegra_soc(root) is None:
        raise SensorUnavailable("not a Jetson (no Tegra SoC in the device tree): jtop reads Jetsons only")
    return JtopSensor()


def check_role(kind: str, device: str | None = None) -> None:
    """Checks that a channel kind and device are known.

    Args:
        kind: A channel kind, one of ``UNITS``.
        device: One of ``DEVICES``; None: any device.

    Raises:
        ValueError: naming ``kind`` or ``device``, whichever is not known.
    """
    if kind not in UNITS:
        raise ValueError(f"unknown channel kind {kind!r}; expected one of {sorted(UNITS)}")
    if device is not None and device not in DEVICES:
        raise ValueError(f"unknown channel device {device!r}; expected one of {list(DEVICES)}")


@dataclasses.dataclass
class Probe:
    """What ``probe`` found: the sensors present and, by label, why the others are not.

    A label that is not in ``REGISTRY`` (the monitor's "all" when the user
    asked for no sensors) is a reason for every missing quantity.
    """

    sensors: list[Sensor]
    absent: dict[str, str]

    def has_kind(self, kind: str, device: str | None = None) -> bool:
        """Whether a present sensor has a channel of ``kind`` (of ``device``, when given).

        Args:
            kind: A channel kind, one of ``UNITS``.
            device: One of ``DEVICES``; None: any device.

        Returns:
            True if any present sensor has such a channel.

        Raises:
            ValueError: an unknown kind or device.
        """
        check_role(kind, device)
        return any(c.kind == kind and device in (None, c.device) for s in self.sensors for c in s.channels)

    def absent_for(self, kind: str, device: str | None = None) -> dict[str, str]:
        """The absent sensors that would give ``kind`` of ``device``.

        Power and energy count as one quantity (the report derives each from the other).

        Args:
            kind: A channel kind, one of ``UNITS``.
            device: One of ``DEVICES``; None: any device.

        Returns:
            Label -> reason of each such sensor, and of every label not in ``REGISTRY``.

        Raises:
            ValueError: an unknown kind or device.
        """
        check_role(kind, device)
        kinds = _SAME_QUANTITY.get(kind, (kind,))
        return {
            label: reason
            for label, reason in self.absent.items()
            if label not in _BY_LABEL or any(k in kinds and device in (None, d) for k, d in _BY_LABEL[label].provides)
        }

    def why_absent(self, kind: str, device: str | None = None) -> str:
        """Why no present sensor gives ``kind`` of ``device``.

        Args:
            kind: A channel kind, one of ``UNITS``.
            device: One of ``DEVICES``; None: any device.

        Returns:
            The reasons ("label: reason; ...") of the absent sensors that would give it (``absent_for``), or
            "no such sensor among those given" where there are none.

        Raises:
            ValueError: an unknown kind or device.
        """
        reasons = [f"{label}: {reason}" for label, reason in self.absent_for(kind, device).items()]
        return "; ".join(reasons) or "no such sensor among those given"


def probe(
    root: str | Path = "/", pid: int | None = None, use_jtop: bool = True, real_machine: bool | None = None
) -> Probe:
    """Tries every known sensor; returns those present and reasons for the rest.

    Args:
        root: Root of the file system tree (a fake tree in tests).
        pid: The training process, for its memory (default: this process).
        use_jtop: Try jtop as a fallback when no INA3221 rails are readable.
            Only at ``root="/"``: jtop reads the real machine.
        real_machine: Whether the tree at ``root`` is this machine, so that
            sensors read through a library (NVML, jtop) are tried too; by
            default only at ``root="/"``. On AGX Thor, where the GPU has no
            nvgpu load file, NVML is then what gives GPU utilization.

    Returns:
        The sensors present and, by label, why each of the others is absent.
    """
    if real_machine is None:
        real_machine = str(root) == "/"
    sensors: list[Sensor] = []
    absent: dict[str, str] = {}
    for spec in REGISTRY:
        if spec.real_machine_only and not real_machine:
            continue
        if spec.sensor is JtopSensor and not use_jtop:
            continue
        if any(isinstance(s, spec.fallback_for) for s in sensors):
            continue
        try:
            made = spec.make(Path(root), pid)
        except SensorUnavailable as exc:
            absent[spec.label] = str(exc)
            continue
        sensors.extend(made if isinstance(made, list) else [made])
    for label, reason in absent.items():
        log.debug("sensor %s not present: %s", label, reason)
    return Probe(sensors, absent)


def detect(root: str | Path = "/", pid: int | None = None) -> list[Sensor]:
    """The sensors present on this machine (or in the tree at ``root``).

    Args:
        root: Root of the file system tree ("/" for this machine, a fake tree in tests).
        pid: The training process, for its memory; None: this process.

    Returns:
        The sensors that ``probe`` found present.
    """
    return probe(root, pid=pid).sensors
