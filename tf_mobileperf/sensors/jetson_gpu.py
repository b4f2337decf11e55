"""Jetson integrated-GPU load and clock from sysfs (NVML does not cover iGPUs).

The load file holds per-mille busy time (0..1000) averaged by the driver over
its own short window; it has moved between L4T releases, so known locations
are tried in order. AGX Thor's GPU is driven by OpenRM, which has no nvgpu
``load`` file: there the sensor is absent with that reason, and NVML gives
the GPU's utilization, clocks and memory. Only a Tegra device tree makes a
machine a Jetson (``board.tegra_soc``): a server's PCIe GPU is driven by
OpenRM too, and there the reason says this is not a Jetson.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tf_mobileperf.sensors.base import Channel, Sensor
from tf_mobileperf.sensors.board import DEVICE_TREES, TEGRA_FAMILIES, tegra_soc
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.files import FileReads

LOAD_GLOBS = [
    "sys/devices/gpu.0/load",
    "sys/devices/platform/gpu.0/load",
    "sys/devices/*.ga10b/load",
    "sys/devices/*.gv11b/load",
    "sys/devices/*.gp10b/load",
    "sys/devices/platform/*.ga10b/load",
    "sys/devices/platform/*.gv11b/load",
    "sys/devices/platform/bus@0/*.gpu/load",
    "sys/devices/platform/bus@0/*.g*b/load",
]
DEVFREQ_GLOB = "sys/class/devfreq/*"
GPU_DEVFREQ_NAMES = ("gpu", "gp10b", "gv11b", "ga10b", "gb10b", "gm20b")
#: The OpenRM driver's version file: present where the GPU is not nvgpu's (Thor, desktop GPUs).
OPENRM_VERSION = "proc/driver/nvidia/version"


def _first(root: Path, patterns: list[str]) -> Path | None:
    for pattern in patterns:
        found = sorted(root.glob(pattern))
        if found:
            return found[0]
    return None


def _no_load_reason(root: Path) -> str:
    """Why there is no load file: not a Jetson, a Jetson GPU driven by OpenRM (AGX Thor), or none found."""
    soc = tegra_soc(root)
    if soc is None:
        return (
            f"no Jetson GPU load file: this is not a Jetson (no Tegra SoC in the device tree's compatible, "
            f"{' or '.join(str(root / tree.lstrip('/') / 'compatible') for tree in DEVICE_TREES)})"
        )
    reason = f"no Jetson GPU load file under {root / 'sys/devices'} (tried gpu.0, *.ga10b, *.gv11b, ...)"
    if (root / OPENRM_VERSION).exists():
        board = TEGRA_FAMILIES.get(soc, soc)
        release = ", JetPack 7" if board == "AGX Thor" else ""
        reason += (
            f": the GPU is driven by OpenRM ({root / OPENRM_VERSION}; {board}, {soc}{release}), "
            "which has no nvgpu load file; NVML gives its utilization, clocks and memory"
        )
    return reason


class JetsonGpuSensor(Sensor):
    """GPU utilization (%) and clock (Hz) of a Jetson's integrated GPU.

    Args:
        root: Root of the file system tree to read.
    """

    name = "jetson gpu (sysfs)"
    provides = frozenset({("util", "gpu"), ("clock", "gpu")})
    min_period_s = 0.0

    def __init__(self, root: str | Path = "/"):
        root = Path(root)
        load = _first(root, LOAD_GLOBS)
        if load is None:
            raise SensorUnavailable(_no_load_reason(root))
        self.file_reads: FileReads = FileReads()
        reads = self.file_reads
        reads.channel("gpu_util", reads.number(load, 0.1))  # per mille
        self.channels = [Channel("gpu_util", "util", str(load), group="gpu", device="gpu")]
        for devfreq in sorted(root.glob(DEVFREQ_GLOB)):
            device_name = (devfreq.resolve().name if devfreq.is_symlink() else devfreq.name).lower()
            if any(key in device_name for key in GPU_DEVFREQ_NAMES) and (devfreq / "cur_freq").exists():
                reads.channel("gpu_freq", reads.number(devfreq / "cur_freq"))
                self.channels.append(Channel("gpu_freq", "clock", str(devfreq / "cur_freq"), group="gpu", device="gpu"))
                break

    def read(self) -> Mapping[str, float | Exception]:
        """GPU utilization (%) and, where a GPU devfreq is found, its clock (Hz) now."""
        return self.file_reads.read()

    def close(self) -> None:
        """Closes the files it reads."""
        self.file_reads.close()
