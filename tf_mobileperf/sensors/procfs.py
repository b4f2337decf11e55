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
from pathlib import Path
from typing import Mapping

from tf_mobileperf.sensors.base import NAN, Channel, KernelFile, Sensor, SensorUnavailable, SysfsValue

# (implementer, part) from /proc/cpuinfo on ARM -> core name.
ARM_CORES = {
    ("0x41", "0xd03"): "Cortex-A53", ("0x41", "0xd04"): "Cortex-A35",
    ("0x41", "0xd05"): "Cortex-A55", ("0x41", "0xd07"): "Cortex-A57",
    ("0x41", "0xd08"): "Cortex-A72", ("0x41", "0xd09"): "Cortex-A73",
    ("0x41", "0xd0a"): "Cortex-A75", ("0x41", "0xd0b"): "Cortex-A76",
    ("0x41", "0xd0c"): "Neoverse-N1", ("0x41", "0xd41"): "Cortex-A78",
    ("0x41", "0xd42"): "Cortex-A78AE", ("0x41", "0xd4f"): "Neoverse-V2",
    ("0x41", "0xd83"): "Neoverse-V3AE",
    ("0x4e", "0x000"): "Denver", ("0x4e", "0x003"): "Denver2", ("0x4e", "0x004"): "Carmel",
}


# Device-tree "compatible" of a core -> the name /proc/cpuinfo's part number gives it
# (the one Jetson with Denver cores is the TX2, whose cores are Denver2).
DT_CORES = {"nvidia,denver": "Denver2", "nvidia,tegra186-denver": "Denver2", "nvidia,tegra194-carmel": "Carmel",
            "nvidia,carmel": "Carmel"}


def dt_core_type(compatible: str) -> str | None:
    """Core type from a device-tree ``compatible`` ("arm,cortex-a57\\0arm,armv8" -> "Cortex-A57"); None if unknown."""
    for entry in compatible.split("\0"):
        vendor, _, model = entry.strip().partition(",")
        if entry in DT_CORES:
            return DT_CORES[entry]
        if vendor == "arm" and model.startswith(("cortex-", "neoverse-")):
            family, _, part = model.partition("-")
            return f"{family.capitalize()}-{part.upper()}"
    return None


def dt_core_types(cpu_dir: Path, cores: list[int]) -> dict[int, str]:
    """Core index -> type, from each core's device-tree node (present even while the core is offline)."""
    types = {}
    for core in cores:
        try:
            name = dt_core_type((cpu_dir / f"cpu{core}/of_node/compatible").read_bytes().decode(errors="replace"))
        except OSError:
            continue
        if name:
            types[core] = name
    return types


def parse_cpu_list(text: str) -> list[int]:
    """Parses a kernel CPU list such as "0-3,5" into [0, 1, 2, 3, 5]."""
    cores: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cores.extend(range(int(lo), int(hi or lo) + 1))
    return cores


def core_types(cpuinfo: str) -> dict[int, str]:
    """Core index -> core type name, from the text of /proc/cpuinfo."""
    types: dict[int, str] = {}
    for block in cpuinfo.split("\n\n"):
        fields = dict(
            (k.strip().lower(), v.strip())
            for k, _, v in (line.partition(":") for line in block.splitlines())
            if _
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


def _read_stat(stat: KernelFile) -> dict[str, tuple[int, int]]:
    """"cpu"/"cpuN" -> (busy jiffies, total jiffies)."""
    out = {}
    for line in stat.read_bytes().decode().splitlines():
        if not line.startswith("cpu"):
            continue
        name, *fields = line.split()
        values = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
        idle = values[3] + (values[4] if len(values) > 4 else 0)
        out[name] = (sum(values) - idle, sum(values))
    return out


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
        self._stat = KernelFile(root / "proc/stat", 1 << 16)
        self.min_period_s = period_s
        try:
            first = _read_stat(self._stat)
        except (OSError, ValueError) as exc:
            raise SensorUnavailable(f"cannot read {self._stat.path}: {exc}") from exc
        cpu_dir = root / "sys/devices/system/cpu"
        try:
            present = parse_cpu_list((cpu_dir / "present").read_text())
        except (OSError, ValueError):
            present = sorted(int(name[3:]) for name in first if name != "cpu")
        try:
            types = core_types((root / "proc/cpuinfo").read_text())
        except OSError:
            types = {}
        self.cores = present
        types = dt_core_types(cpu_dir, present) | types
        self.clusters = {core: types.get(core, "unknown") for core in present}
        self.offline = [core for core in present if f"cpu{core}" not in first]
        source = str(self._stat.path)
        self.channels = [Channel("cpu_util", "util", source, group="cpu", device="cpu")]
        self.channels += [self._core_channel(f"cpu{core}_util", "util", source, core) for core in present]
        self._freqs = {}
        for core in present:
            freq = cpu_dir / f"cpu{core}/cpufreq/scaling_cur_freq"
            if freq.exists():
                self._freqs[f"cpu{core}_freq"] = SysfsValue(freq, 1e3)
                self.channels.append(self._core_channel(f"cpu{core}_freq", "clock", str(freq), core))
        self._last = first

    def _core_channel(self, name: str, kind: str, source: str, core: int) -> Channel:
        return Channel(name, kind, source, group="cpu", cluster=self.clusters[core], device="cpu", core=core)

    def read(self) -> Mapping[str, float]:
        out: dict[str, float] = {c.name: NAN for c in self.channels}
        try:
            now = _read_stat(self._stat)
        except (OSError, ValueError):
            return out
        for name, (busy, total) in now.items():
            before = self._last.get(name)
            if before is not None and total > before[1]:
                out[f"{name}_util"] = 100.0 * (busy - before[0]) / (total - before[1])
        self._last = now
        for name, value in self._freqs.items():
            out[name] = value.read()
        return out

    def metadata(self) -> dict:
        clusters: dict[str, list[int]] = {}
        for core, kind in self.clusters.items():
            clusters.setdefault(kind, []).append(core)
        return {"cores": self.cores, "clusters": clusters, "offline": self.offline}


def _kb_field(text: bytes, key: bytes) -> float:
    """Bytes of the "Key:   123 kB" line of /proc/meminfo or /proc/<pid>/status; NaN if absent."""
    prefix = key + b":"
    for line in text.splitlines():
        if line.startswith(prefix):
            try:
                return float(line.split()[1]) * 1024
            except (IndexError, ValueError):
                return math.nan
    return math.nan


class MemorySensor(Sensor):
    """System RAM in use (bytes) and the training process's RSS and peak RSS.

    On a Jetson, CPU and GPU share one DRAM, so system RAM in use is the
    seed's "peak memory". ``pid`` is the training process: the sampler may run
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
        self._meminfo = KernelFile(root / "proc/meminfo", 8192)
        self._status = KernelFile(root / f"proc/{pid or os.getpid()}/status", 8192)
        try:
            total = _kb_field(self._meminfo.read_bytes(), b"MemTotal")
        except OSError as exc:
            raise SensorUnavailable(f"cannot read {self._meminfo.path}: {exc}") from exc
        if math.isnan(total):
            raise SensorUnavailable(f"{self._meminfo.path} has no MemTotal")
        self.total_bytes = total
        self.channels = [
            Channel("ram_used", "memory", f"{self._meminfo.path} MemTotal-MemAvailable", group="mem", device="board"),
            Channel("proc_rss", "memory", f"{self._status.path} VmRSS", group="mem", device="process"),
            Channel("proc_peak", "memory", f"{self._status.path} VmHWM", group="mem", device="process"),
        ]

    def read(self) -> Mapping[str, float]:
        out = {"ram_used": NAN, "proc_rss": NAN, "proc_peak": NAN}
        try:
            info = self._meminfo.read_bytes()
            available = _kb_field(info, b"MemAvailable")
            if math.isnan(available):
                available = _kb_field(info, b"MemFree")
            out["ram_used"] = _kb_field(info, b"MemTotal") - available
        except OSError:
            pass
        try:
            status = self._status.read_bytes()
            out["proc_rss"] = _kb_field(status, b"VmRSS")
            out["proc_peak"] = _kb_field(status, b"VmHWM")
        except OSError:
            pass
        return out

    def close(self) -> None:
        self._meminfo.close()
        self._status.close()

    def metadata(self) -> dict:
        return {"ram_total_bytes": self.total_bytes}
