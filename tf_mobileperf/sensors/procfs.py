"""Per-core CPU utilization and clocks, and memory, from /proc and /sys.

Utilization is the share of non-idle jiffies between two reads of
``/proc/stat``; jiffies tick at 100 Hz, so this sensor is read every 50 ms
rather than at the power rate. Cores are grouped into clusters by their core
type in ``/proc/cpuinfo`` (TX2: NVIDIA Denver2 and ARM Cortex-A57). An
offline core is absent from ``/proc/cpuinfo`` (TX2's Denver2 pair in its
default power mode), so its type is read from its device-tree node's
``compatible`` (``/sys/devices/system/cpu/cpuN/of_node``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from tf_mobileperf.sensors.base import Channel, Sensor
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.files import FileReads, parse_number
from tf_mobileperf.sensors.kernel_file import KernelFile, read_text

# (implementer, part) from /proc/cpuinfo on ARM -> core name.
ARM_CORES = {
    ("0x41", "0xd03"): "Cortex-A53",
    ("0x41", "0xd04"): "Cortex-A35",
    ("0x41", "0xd05"): "Cortex-A55",
    ("0x41", "0xd07"): "Cortex-A57",
    ("0x41", "0xd08"): "Cortex-A72",
    ("0x41", "0xd09"): "Cortex-A73",
    ("0x41", "0xd0a"): "Cortex-A75",
    ("0x41", "0xd0b"): "Cortex-A76",
    ("0x41", "0xd0c"): "Neoverse-N1",
    ("0x41", "0xd41"): "Cortex-A78",
    ("0x41", "0xd42"): "Cortex-A78AE",
    ("0x41", "0xd4f"): "Neoverse-V2",
    ("0x41", "0xd83"): "Neoverse-V3AE",
    ("0x4e", "0x000"): "Denver",
    ("0x4e", "0x003"): "Denver2",
    ("0x4e", "0x004"): "Carmel",
}


# Device-tree "compatible" of a core -> the name /proc/cpuinfo's part number gives it
# (the one Jetson with Denver cores is the TX2, whose cores are Denver2).
DT_CORES = {
    "nvidia,denver": "Denver2",
    "nvidia,tegra186-denver": "Denver2",
    "nvidia,tegra194-carmel": "Carmel",
    "nvidia,carmel": "Carmel",
}


def dt_core_type(compatible: str) -> str | None:
    """The core type a device-tree ``compatible`` names.

    Args:
        compatible: The core node's ``compatible``, NUL-separated entries ("arm,cortex-a57\\0arm,armv8").

    Returns:
        The type as /proc/cpuinfo's part number names it ("Cortex-A57", "Denver2"); None if no entry is known.
    """
    for entry in compatible.split("\0"):
        vendor, _, model = entry.strip().partition(",")
        if entry in DT_CORES:
            return DT_CORES[entry]
        if vendor == "arm" and model.startswith(("cortex-", "neoverse-")):
            family, _, part = model.partition("-")
            return f"{family.capitalize()}-{part.upper()}"
    return None


def dt_core_types(cpu_dir: Path, cores: list[int]) -> dict[int, str]:
    """Core index -> type, from each core's device-tree node (present even while the core is offline).

    Args:
        cpu_dir: The cores' sysfs directory (``/sys/devices/system/cpu`` under the tree's root).
        cores: The core indices to look up.

    Returns:
        Index -> type of each core whose node is readable and names a known type.
    """
    types = {}
    for core in cores:
        try:
            name = dt_core_type(read_text(cpu_dir / f"cpu{core}/of_node/compatible"))
        except OSError:
            continue
        if name:
            types[core] = name
    return types


def parse_cpu_list(text: str) -> list[int]:
    """Parses a kernel CPU list such as "0-3,5" into [0, 1, 2, 3, 5].

    Args:
        text: The list, comma-separated indices and ranges (``/sys/devices/system/cpu/present``).

    Returns:
        The core indices, in the list's order.
    """
    cores: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cores.extend(range(int(lo), int(hi or lo) + 1))
    return cores


def core_types(cpuinfo: str) -> dict[int, str]:
    """Core index -> core type name, from the text of /proc/cpuinfo.

    Args:
        cpuinfo: The text of /proc/cpuinfo; offline cores are absent from it.

    Returns:
        Index -> the ARM core's name (``ARM_CORES``), else the "model name", else its implementer and part.
    """
    types: dict[int, str] = {}
    for block in cpuinfo.split("\n\n"):
        fields = dict(
            (k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in block.splitlines()) if _
        )
        if "processor" not in fields or not fields["processor"].isdigit():
            continue
        core = int(fields["processor"])
        key = (fields.get("cpu implementer", "").lower(), fields.get("cpu part", "").lower())
        if key in ARM_CORES:
            types[core] = ARM_CORES[key]
        elif "model name" in fields:
            types[core] = fields["model name"]
        elif key != ("", ""):
            types[core] = f"implementer {key[0]} part {key[1]}"
    return types


#: /proc/stat's fields of a "cpu" line: user nice system idle iowait irq softirq steal (all of them), idle + iowait.
JIFFIES_ALL, JIFFIES_IDLE = 0xFF, 0x18


def _cpu_lines(stat: KernelFile) -> list[str]:
    """The names of the "cpu" and "cpuN" lines of /proc/stat."""
    return [line.split(None, 1)[0] for line in stat.read_bytes().decode().splitlines() if line.startswith("cpu")]


class CpuSensor(Sensor):
    """Utilization (%) of the whole CPU and of every core, and core clocks (Hz).

    A core that is offline reads NaN and is listed in ``metadata()["offline"]``.

    Args:
        root: Root of the file system tree to read.
        period_s: How often the sampler reads it (jiffies are 10 ms).
    """

    name = "cpu (/proc/stat)"
    provides = frozenset({("util", "cpu"), ("clock", "cpu")})

    def __init__(self, root: str | Path = "/", period_s: float = 0.05):
        root = Path(root)
        stat = KernelFile(root / "proc/stat", 1 << 16)
        self.min_period_s = period_s
        try:
            lines = _cpu_lines(stat)
        except (OSError, ValueError) as exc:
            raise SensorUnavailable(f"cannot read {stat.path}: {exc}") from exc
        finally:
            stat.close()
        cpu_dir = root / "sys/devices/system/cpu"
        try:
            present = parse_cpu_list(read_text(cpu_dir / "present"))
        except (OSError, ValueError):
            present = sorted(int(name[3:]) for name in lines if name != "cpu")
        try:
            types = core_types(read_text(root / "proc/cpuinfo"))
        except OSError:
            types = {}
        self.cores = present
        types = dt_core_types(cpu_dir, present) | types
        self.clusters = {core: types.get(core, "unknown") for core in present}
        self.offline = [core for core in present if f"cpu{core}" not in lines]
        self.file_reads: FileReads = FileReads()
        reads = self.file_reads
        for line in ["cpu"] + [f"cpu{core}" for core in present]:  # a line that is not there (offline) reads NaN
            jiffies = [
                reads.number(stat.path, 1.0, line.encode() + b" ", 1 << 16, fields)
                for fields in (JIFFIES_ALL, JIFFIES_IDLE)
            ]
            reads.channel(f"{line}_util", jiffies[0], jiffies[1], "busy%")
        source = str(stat.path)
        self.channels = [Channel("cpu_util", "util", source, group="cpu", device="cpu")]
        self.channels += [self._core_channel(f"cpu{core}_util", "util", source, core) for core in present]
        for core in present:
            freq = cpu_dir / f"cpu{core}/cpufreq/scaling_cur_freq"
            if freq.exists():
                reads.channel(f"cpu{core}_freq", reads.number(freq, 1e3))
                self.channels.append(self._core_channel(f"cpu{core}_freq", "clock", str(freq), core))
        reads.read()  # the first utilization is over the time to the sampler's first read

    def _core_channel(self, name: str, kind: str, source: str, core: int) -> Channel:
        return Channel(name, kind, source, group="cpu", cluster=self.clusters[core], device="cpu", core=core)

    def read(self) -> Mapping[str, float | Exception]:
        """Utilization (%) of the CPU and each core since the last read, and each core's clock (Hz)."""
        return self.file_reads.read()

    def close(self) -> None:
        """Closes the files it reads."""
        self.file_reads.close()

    def metadata(self) -> dict:
        """``cores`` present, ``clusters`` (core type -> its cores) and the ``offline`` cores."""
        clusters: dict[str, list[int]] = {}
        for core, kind in self.clusters.items():
            clusters.setdefault(kind, []).append(core)
        return {"cores": self.cores, "clusters": clusters, "offline": self.offline}


class MemorySensor(Sensor):
    """System RAM in use (bytes) and the training process's RSS and peak RSS.

    On a Jetson, CPU and GPU share one DRAM, so system RAM in use is the
    paper's "peak memory". ``pid`` is the training process: the sampler may run
    in a child process, where ``/proc/self`` would be the wrong one.

    Args:
        root: Root of the file system tree to read.
        pid: Process whose RSS is read; defaults to the calling process.
    """

    name = "memory (/proc/meminfo)"
    min_period_s = 0.02
    provides = frozenset({("memory", "board"), ("memory", "process")})

    def __init__(self, root: str | Path = "/", pid: int | None = None):
        root = Path(root)
        meminfo = KernelFile(root / "proc/meminfo", 8192)
        status = root / f"proc/{pid or os.getpid()}/status"
        try:
            info = meminfo.read_bytes()
        except OSError as exc:
            raise SensorUnavailable(f"cannot read {meminfo.path}: {exc}") from exc
        finally:
            meminfo.close()
        total = parse_number(info, b"MemTotal:") * 1024
        if math.isnan(total):
            raise SensorUnavailable(f"{meminfo.path} has no MemTotal")
        self.total_bytes = total
        free = b"MemAvailable:" if b"\nMemAvailable:" in info else b"MemFree:"  # MemAvailable since Linux 3.14
        self.file_reads: FileReads = FileReads()
        reads = self.file_reads
        used = (reads.number(meminfo.path, 1024, b"MemTotal:", 8192), reads.number(meminfo.path, 1024, free, 8192))
        reads.channel("ram_used", *used, "-")
        reads.channel("proc_rss", reads.number(status, 1024, b"VmRSS:", 8192))
        reads.channel("proc_peak", reads.number(status, 1024, b"VmHWM:", 8192))
        self.channels = [
            Channel("ram_used", "memory", f"{meminfo.path} MemTotal-{free[:-1].decode()}", group="mem", device="board"),
            Channel("proc_rss", "memory", f"{status} VmRSS", group="mem", device="process"),
            Channel("proc_peak", "memory", f"{status} VmHWM", group="mem", device="process"),
        ]

    def read(self) -> Mapping[str, float | Exception]:
        """System RAM in use and the process's RSS and peak RSS now, bytes."""
        return self.file_reads.read()

    def close(self) -> None:
        """Closes the files it reads."""
        self.file_reads.close()

    def metadata(self) -> dict:
        """``ram_total_bytes``: the system's RAM (MemTotal)."""
        return {"ram_total_bytes": self.total_bytes}
