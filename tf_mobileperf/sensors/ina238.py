"""Jetson AGX Thor's board-input monitor: a TI INA238 under hwmon (driver ``ina238``).

Thor (JetPack 7) keeps an INA3221 for its module rails and measures the
board input (VIN) with an INA238, which the kernel exposes in standard hwmon
units: ``in1_input`` bus voltage in mV, ``curr1_input`` in mA and
``power1_input`` in uW. The driver has no per-channel labels, so the rail is
named from the hwmon ``label`` (the device-tree ``label`` property), else the
device-tree node's ``label``, else the node's own name. The INA3221 hwmon
sensor reads these rails with its own, so one sensor holds every rail of the
board and says which one is its input.
"""

from __future__ import annotations

from pathlib import Path

from tf_mobileperf.sensors.files import SysfsValue
from tf_mobileperf.sensors.kernel_file import read_text

HWMON_GLOB = "sys/bus/i2c/drivers/ina238/*/hwmon/hwmon*"


def _text(path: Path) -> str:
    try:
        return read_text(path).strip("\x00\n ")
    except OSError:
        return ""


def rail_label(hwmon: Path) -> str:
    """The rail's name: hwmon ``label``, else the device-tree node's ``label``, else the node's name.

    Args:
        hwmon: The INA238's hwmon directory (``.../ina238/<device>/hwmon/hwmonN``).

    Returns:
        The name; "ina238 <device>" (the I2C device's directory name) where none of those is there.
    """
    device = hwmon.parent.parent
    node = device / "of_node"
    return (
        _text(hwmon / "label")
        or _text(node / "label")
        or (node.resolve().name if node.exists() else "")
        or f"ina238 {device.name}"
    )


def rail_values(hwmon: Path) -> list[SysfsValue] | None:
    """The values whose product is the rail's power in W.

    Args:
        hwmon: The INA238's hwmon directory.

    Returns:
        ``power1_input`` (uW, scaled to W) alone, else ``in1_input`` and ``curr1_input`` (mV and mA, scaled to
        V and A); None if neither is there.
    """
    if (hwmon / "power1_input").exists():
        return [SysfsValue(hwmon / "power1_input", 1e-6)]
    volt, curr = hwmon / "in1_input", hwmon / "curr1_input"
    if volt.exists() and curr.exists():
        return [SysfsValue(volt, 1e-3), SysfsValue(curr, 1e-3)]
    return None


def ina238_rails(root: str | Path) -> list[tuple[str, list[SysfsValue]]]:
    """Every INA238 rail under ``root``: none on boards before Thor.

    Args:
        root: Root of the file system tree ("/" for this machine, a fake tree in tests).

    Returns:
        (name, values) of each rail with readable files: its ``rail_label`` and ``rail_values``.
    """
    rails = []
    for hwmon in sorted(Path(root).glob(HWMON_GLOB)):
        values = rail_values(hwmon)
        if values is not None:
            rails.append((rail_label(hwmon), values))
    return rails
