"""Sensors: what can be read on this machine, behind one small interface.

``detect(root="/")`` tries every sensor this package knows (``REGISTRY``) and
returns the ones present; ``probe(root="/")`` also returns, for each absent
one, the reason it is absent, so tools can tell the user instead of printing
zeros; ``Probe.why_absent(kind, device)`` picks the reasons that explain one
missing quantity. What each channel means is declared on its ``Channel``
(kind, device, rail, core) by the sensor that defines it.
"""

from __future__ import annotations

from tf_mobileperf.sensors.base import DEVICES, UNITS, Channel, Sensor
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.ina3221 import Ina3221HwmonSensor, Ina3221IioSensor, rail_device, rail_group
from tf_mobileperf.sensors.jetson_gpu import JetsonGpuSensor
from tf_mobileperf.sensors.jtop_sensor import JtopSensor
from tf_mobileperf.sensors.nvml import NvmlSensor
from tf_mobileperf.sensors.procfs import CpuSensor, MemorySensor
from tf_mobileperf.sensors.rapl import RaplSensor
from tf_mobileperf.sensors.registry import REGISTRY, Probe, SensorSpec, detect, probe
from tf_mobileperf.sensors.replay import ReplaySensor
from tf_mobileperf.sensors.synthetic import SyntheticSensor
from tf_mobileperf.sensors.tegrastats import TegrastatsRecord, parse_line

__all__ = [
    "DEVICES",
    "UNITS",
    "Channel",
    "Sensor",
    "SensorUnavailable",
    "Ina3221IioSensor",
    "Ina3221HwmonSensor",
    "JetsonGpuSensor",
    "JtopSensor",
    "NvmlSensor",
    "CpuSensor",
    "MemorySensor",
    "RaplSensor",
    "SyntheticSensor",
    "ReplaySensor",
    "TegrastatsRecord",
    "parse_line",
    "rail_device",
    "rail_group",
    "REGISTRY",
    "SensorSpec",
    "detect",
    "probe",
    "Probe",
]
