"""CPU package and DRAM energy counters through Linux powercap (RAPL).

``energy_uj`` counts microjoules and wraps at ``max_energy_range_uj``; the
sensor unwraps it into a monotonic counter in J, so the join can take the
difference at a step's edges. Intel and recent AMD CPUs both expose it here.
Since 2020 the files are readable by root only.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tf_mobileperf.sensors.base import NAN, Channel, Sensor, under_root
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.files import SysfsValue
from tf_mobileperf.sensors.kernel_file import read_text

ZONE_GLOBS = ["sys/class/powercap/intel-rapl:*", "sys/class/powercap/amd-rapl:*"]
_GROUPS = {"package": "cpu", "dram": "mem", "psys": "total"}
#: Zone label -> device: the package and its core/uncore parts are the CPU; DRAM and psys (the platform) the board.
_DEVICES = {"dram": "board", "psys": "board"}


class RaplSensor(Sensor):
    """Cumulative energy (J) of every RAPL zone, wrap-around handled.

    Args:
        root: Root of the file system tree to read.
    """

    name = "rapl (powercap)"
    min_period_s = 0.001
    provides = frozenset({("energy", "cpu"), ("energy", "board")})

    def __init__(self, root: str | Path = "/"):
        zones = sorted(z for pattern in ZONE_GLOBS for z in Path(root).glob(pattern))
        if not zones:
            raise SensorUnavailable(f"no RAPL powercap zones under {under_root(root, 'sys/class/powercap')}")
        self.channels = []
        self._zones: list[tuple[str, SysfsValue, float]] = []
        denied = []
        for zone in zones:
            counter = SysfsValue(zone / "energy_uj", 1e-6)
            if counter.read() != counter.read():  # NaN: unreadable (root only) or absent
                denied.append(str(zone / "energy_uj"))
                continue
            try:
                label = read_text(zone / "name").strip()
                wrap = float(read_text(zone / "max_energy_range_uj")) * 1e-6
            except (OSError, ValueError):
                continue
            name = f"rapl_{zone.name.split(':', 1)[1].replace(':', '_')}_{label}"
            # Subzones (core, uncore, dram under a package) are parts of their package.
            base = label.split("-")[0]
            group = "subzone" if zone.name.count(":") > 1 else _GROUPS.get(base, "")
            device = _DEVICES.get(base, "cpu")
            self.channels.append(
                Channel(name, "energy", str(zone / "energy_uj"), group=group, device=device, rail=name)
            )
            self._zones.append((name, counter, wrap))
        if not self._zones:
            raise SensorUnavailable(f"RAPL counters present but not readable (needs root): {', '.join(denied)}")
        self._last = {name: NAN for name, _, _ in self._zones}
        self._offset = {name: 0.0 for name, _, _ in self._zones}

    def read(self) -> Mapping[str, float]:
        """Every zone's energy counter now, J, unwrapped (a wrap seen since the first read adds its range)."""
        out = {}
        for name, counter, wrap in self._zones:
            raw = counter.read()
            if raw == raw:
                if raw < self._last[name]:
                    self._offset[name] += wrap
                self._last[name] = raw
            out[name] = raw + self._offset[name]
        return out

    def close(self) -> None:
        """Closes the counters' files."""
        for _, counter, _ in self._zones:
            counter.close()
