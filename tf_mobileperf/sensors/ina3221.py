"""Jetson on-board power monitors (TI INA3221) read straight from sysfs.

jtop polls these at about 1 Hz; the paper samples every 5 ms, which only the
sysfs files themselves allow. Two kernel drivers exist:

* JetPack 4 (TX1/TX2/Nano): iio driver ``ina3221x``, ``rail_name_N`` and
  ``in_powerN_input`` in mW.
* JetPack 5/6 (Xavier/Orin): hwmon driver ``ina3221``, ``inK_label``,
  ``inK_input`` (mV) and ``currK_input`` (mA). The hwmon number changes
  between boots, so every path is globbed. On AGX Thor (JetPack 7) the
  board input VIN is on an INA238 (``ina238.py``), read with these rails.

AGX Orin and AGX Xavier have no rail on the module's input; ``metadata()``
says so and names the rails a total sums (``rail_budget``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from tf_mobileperf.sensors.base import Channel, Sensor, under_root
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.files import FileReads, SysfsValue
from tf_mobileperf.sensors.ina238 import HWMON_GLOB as INA238_GLOB
from tf_mobileperf.sensors.ina238 import ina238_rails
from tf_mobileperf.sensors.kernel_file import read_text

IIO_GLOB = "sys/bus/i2c/drivers/ina3221x/*/iio:device*"
HWMON_GLOB = "sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*"

# Rail-name keywords -> the paper's groups. Checked in order; a rail that
# feeds several blocks (Orin Nano's VDD_CPU_GPU_CV) gets all of them.
_GROUP_PATTERNS = [
    ("total", re.compile(r"(^|_)(IN|5V_IN)$|^VIN$")),
    ("sys", re.compile(r"SYS_?5V")),  # the carrier's 5 V system supply (VIN_SYS_5V0, SYS5V)
    ("cpu", re.compile(r"CPU")),
    ("gpu", re.compile(r"GPU")),
    ("mem", re.compile(r"DDR|VDDQ|VDDRQ|VDD2")),
    ("soc", re.compile(r"SOC")),
    ("cv", re.compile(r"(^|_)CV($|_)")),
]


def rail_group(rail: str) -> str:
    """The paper's group of a rail name: "cpu", "gpu", "mem", "total", ...

    Args:
        rail: The rail's name (its label), in any case.

    Returns:
        "total" for the board's input; else every group it names, joined by "+"; "" where it names none.

    Example:
        >>> rail_group("VDD_SYS_DDR"), rail_group("VDD_IN"), rail_group("VDD_CPU_GPU_CV"), rail_group("SYS5V")
        ('mem', 'total', 'cpu+gpu+cv', 'sys')
    """
    name = rail.upper()
    found = [group for group, pattern in _GROUP_PATTERNS if pattern.search(name)]
    if "total" in found:
        return "total"
    return "+".join(found)


def rail_device(group: str) -> str:
    """The device a rail of ``group`` belongs to: "gpu", "cpu", or "board".

    Args:
        group: The rail's group (``rail_group``).

    Returns:
        "cpu" or "gpu" for a rail of that block alone; "board" for any other, a rail that feeds several blocks
        ("cpu+gpu+cv", "gpu+soc") or the whole board ("total").

    Example:
        >>> rail_device("gpu"), rail_device("cpu+gpu+cv"), rail_device("total")
        ('gpu', 'board', 'board')
    """
    return group if group in ("cpu", "gpu") else "board"


#: What a set of rails can provide: power of the CPU, the GPU and the board.
RAIL_PROVIDES = frozenset(("power", device) for device in ("cpu", "gpu", "board"))


def rail_channel(name: str, source: str, label: str | None = None) -> Channel:
    """The power channel of a rail, with its group, device and rail.

    Args:
        name: The channel's name, also its rail.
        source: Where the value is read from (its files).
        label: The rail's label, which gives its group; None: ``name``.

    Returns:
        The channel, of kind "power".
    """
    group = rail_group(label or name)
    return Channel(name, "power", source, group=group, device=rail_device(group), rail=name)


def rail_budget(channels: list[Channel]) -> dict:
    """Which rail is the board's input, and which rails a total sums (as the report adds them).

    Args:
        channels: The sensor's channels; only those of kind "power" count.

    Returns:
        ``input_rail``: the first rail of group "total" (VDD_IN, POM_5V_IN, Thor's VIN), and ``total_sums``:
        the rails of that group. Without one (AGX Orin, AGX Xavier): ``input_rail`` None, ``total_sums`` every
        rail but sub-zones, and ``input_rail_reason`` saying what that sum leaves out.
    """
    rails = [c.name for c in channels if c.kind == "power"]
    inputs = [c.name for c in channels if c.kind == "power" and c.group == "total"]
    if inputs:
        return {"input_rail": inputs[0], "total_sums": inputs}
    return {
        "input_rail": None,
        "total_sums": [c.name for c in channels if c.kind == "power" and c.group != "subzone"],
        "input_rail_reason": f"no rail among {rails} measures the board's input (AGX Orin and AGX Xavier have none): "
        "the total is the sum of total_sums, without the carrier board and what no rail measures",
    }


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    taken.add(candidate)
    return candidate


class _RailSensor(Sensor):
    """Rails declared as file reads (``files.FileReads``): each rail's power is one sysfs value, or the
    product of two (mV * mA)."""

    min_period_s = 0.0  # the INA3221 converts every ~1 ms; read at the sampler's rate
    #: An INA3221 channel measures at most 26 V (its bus range) x 163.8 mV / its shunt: 852 W on the smallest
    #: shunt a Jetson rail has (5 mOhm); Thor's INA238 input is a 240 W supply's. Over 1 kW is no reading.
    max_power_w = 1000.0
    provides = RAIL_PROVIDES

    def __init__(self) -> None:
        self.file_reads: FileReads = FileReads()
        self.channels = []

    def _add_rail(self, label: str, values: list[SysfsValue], taken: set[str]) -> None:
        name = _unique(label, taken)
        source = " * ".join(str(v.path) for v in values)
        self.channels.append(rail_channel(name, source, label))
        numbers = [self.file_reads.number(v.path, v.scale) for v in values]
        if len(numbers) == 1:
            self.file_reads.channel(name, numbers[0])
        else:
            self.file_reads.channel(name, numbers[0], numbers[1], "*")

    def metadata(self) -> dict:
        """The board's input rail and the rails a total sums (``rail_budget``)."""
        return rail_budget(self.channels)

    def read(self) -> Mapping[str, float | Exception]:
        """Every rail's power now, W."""
        return self.file_reads.read()

    def close(self) -> None:
        """Closes the files it reads."""
        self.file_reads.close()


class Ina3221IioSensor(_RailSensor):
    """JetPack 4 ``ina3221x`` iio rails (TX2: VDD_IN, VDD_SYS_CPU, ...), in W.

    Args:
        root: Root of the file system tree to read (tests pass a fake sysfs).

    Example:
        >>> sensor = Ina3221IioSensor()          # doctest: +SKIP
        >>> sensor.read()["VDD_SYS_GPU"]          # doctest: +SKIP
        0.152
    """

    name = "ina3221x (iio)"

    def __init__(self, root: str | Path = "/"):
        super().__init__()
        taken: set[str] = set()
        devices = sorted(Path(root).glob(IIO_GLOB))
        for device in devices:
            for label_file in sorted(device.glob("rail_name_*")):
                index = label_file.name.rsplit("_", 1)[1]
                power_file = device / f"in_power{index}_input"
                try:
                    label = read_text(label_file).strip()
                except OSError:
                    continue
                if label and power_file.exists():
                    self._add_rail(label, [SysfsValue(power_file, 1e-3)], taken)
        if not self.channels:
            raise SensorUnavailable(f"no ina3221x iio rails under {under_root(root, IIO_GLOB)}")


class Ina3221HwmonSensor(_RailSensor):
    """JetPack 5-7 ``ina3221`` hwmon rails (Xavier, Orin, Thor), in W = mV * mA / 1e6.

    Labels containing "NC" (not connected) and the sum-of-shunts channel are
    skipped. Thor's INA238 input rail (``ina238.py``) is read here too.

    Args:
        root: Root of the file system tree to read.
    """

    name = "ina3221 (hwmon)"

    def __init__(self, root: str | Path = "/"):
        super().__init__()
        taken: set[str] = set()
        for hwmon in sorted(Path(root).glob(HWMON_GLOB)):
            for label_file in sorted(hwmon.glob("in*_label")):
                index = label_file.name[2 : -len("_label")]
                try:
                    label = read_text(label_file).strip()
                except OSError:
                    continue
                volt, curr = hwmon / f"in{index}_input", hwmon / f"curr{index}_input"
                if not label or "NC" in re.split(r"[^A-Z0-9]+", label.upper()):
                    continue
                if index == "7" or "sum" in label.lower() or not (volt.exists() and curr.exists()):
                    continue
                self._add_rail(label, [SysfsValue(volt, 1e-3), SysfsValue(curr, 1e-3)], taken)
        for label, values in ina238_rails(root):
            self._add_rail(label, values, taken)
        if not self.channels:
            raise SensorUnavailable(
                f"no ina3221 or ina238 hwmon rails under {under_root(root, HWMON_GLOB)} "
                f"or {under_root(root, INA238_GLOB)}"
            )
