"""tegrastats: parse its lines, and replay a recorded log as a sensor.

tegrastats is what every Jetson user already has; its format changed across
L4T releases:

* JetPack 4 (TX2, Nano, Xavier): rails as ``VDD_IN 2356/2356`` (mW, current
  and average, no unit), ``GR3D_FREQ 0%@114``.
* JetPack 5/6 (Orin): ``VDD_IN 5139mW/5139mW``, ``GR3D_FREQ 0%@[305,305]``,
  an optional leading ``MM-DD-YYYY HH:MM:SS`` timestamp.
* JetPack 7: three values per rail (current/average/peak).

``parse_line`` returns only what a line says: a field the line lacks is None,
never a default.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import math
import re
import time
from pathlib import Path
from typing import Mapping

from tf_mobileperf.sensors.base import NAN, Channel, Sensor
from tf_mobileperf.sensors.ina3221 import RAIL_PROVIDES, rail_channel

log = logging.getLogger(__name__)

_TIMESTAMP = re.compile(r"^\s*(\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2})\s+")
_RAM = re.compile(r"(?<![A-Z])RAM (\d+)/(\d+)([kMG])B")
_CPU = re.compile(r"\bCPU \[([^\]]*)\]")
_CORE = re.compile(r"^(\d+)%(?:@(\d+))?$")
_EMC = re.compile(r"\bEMC_FREQ (\d+)%(?:@(\d+))?")
_GR3D = re.compile(r"\bGR3D_FREQ (\d+)%(?:@(\d+|\[[\d,]*\]))?")
_RAIL = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*) (\d+)(?:mW)?/(\d+)(?:mW)?(?:/(\d+)(?:mW)?)?(?=\s|$)")
_NOT_RAILS = {"RAM", "SWAP", "IRAM", "LFB"}
_MB = {"k": 1 / 1024, "M": 1.0, "G": 1024.0}


@dataclasses.dataclass
class TegrastatsRecord:
    """What one tegrastats line says. Units: W, MB, %, MHz."""

    timestamp: dt.datetime | None = None
    power_w: dict[str, float] = dataclasses.field(default_factory=dict)
    power_avg_w: dict[str, float] = dataclasses.field(default_factory=dict)
    ram_used_mb: float | None = None
    ram_total_mb: float | None = None
    cpu_util: list[float | None] | None = None
    cpu_freq_mhz: list[float | None] | None = None
    gpu_util: float | None = None
    gpu_freq_mhz: list[float] | None = None
    emc_util: float | None = None
    emc_freq_mhz: float | None = None


def parse_line(line: str) -> TegrastatsRecord:
    """Parses one tegrastats line.

    Raises:
        ValueError: if the line has none of tegrastats' fields (RAM, CPU,
            GR3D_FREQ, EMC_FREQ or a power rail).

    >>> r = parse_line("RAM 2410/7854MB CPU [2%@345,off] GR3D_FREQ 0%@114 VDD_IN 2356/2356")
    >>> r.power_w, r.cpu_util, r.gpu_util
    ({'VDD_IN': 2.356}, [2.0, None], 0.0)
    """
    if not isinstance(line, str):
        raise TypeError(f"parse_line expects str, got {type(line).__name__}")
    record = TegrastatsRecord()
    found = False
    if m := _TIMESTAMP.match(line):
        record.timestamp = dt.datetime.strptime(m.group(1), "%m-%d-%Y %H:%M:%S")
        line = line[m.end():]
    if m := _RAM.search(line):
        scale = _MB[m.group(3)]
        record.ram_used_mb, record.ram_total_mb = float(m.group(1)) * scale, float(m.group(2)) * scale
        found = True
    if m := _CPU.search(line):
        utils: list[float | None] = []
        freqs: list[float | None] = []
        for entry in m.group(1).split(","):
            entry = entry.strip()
            core = _CORE.match(entry)
            if entry == "off" or core is None:
                utils.append(None)
                freqs.append(None)
            else:
                utils.append(float(core.group(1)))
                freqs.append(float(core.group(2)) if core.group(2) else None)
        record.cpu_util, record.cpu_freq_mhz = utils, freqs
        found = True
    if m := _EMC.search(line):
        record.emc_util = float(m.group(1))
        record.emc_freq_mhz = float(m.group(2)) if m.group(2) else None
        found = True
    if m := _GR3D.search(line):
        record.gpu_util = float(m.group(1))
        if m.group(2):
            record.gpu_freq_mhz = [float(f) for f in m.group(2).strip("[]").split(",") if f]
        found = True
    for m in _RAIL.finditer(line):
        name = m.group(1)
        if name.upper() in _NOT_RAILS or name.upper() == "NC":
            continue
        record.power_w[name] = float(m.group(2)) / 1000.0
        record.power_avg_w[name] = float(m.group(3)) / 1000.0
        found = True
    if not found:
        raise ValueError(f"not a tegrastats line: {line[:80]!r}")
    return record


def read_log(path: str | Path) -> tuple[list[TegrastatsRecord], int]:
    """Parses a tegrastats log; returns (records, number of lines skipped).

    Skipped: lines that are not tegrastats, and a last line without its
    newline (tegrastats was cut off mid-line: its last number may be cut too).
    """
    path = Path(path)
    records, skipped = [], 0
    with path.open(errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            if not line.endswith("\n"):
                skipped += 1
                continue
            try:
                records.append(parse_line(line))
            except ValueError:
                skipped += 1
    return records, skipped


def _check_positive(name: str, value: float) -> None:
    """ValueError unless ``value`` is a finite number > 0 (NaN and inf would stall or race the replay)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


class ReplaySensor(Sensor):
    """Plays a recorded tegrastats log back as a live sensor.

    Record ``i`` is served from ``i * interval / speed`` seconds after the
    first read; after the last record every channel reads NaN and
    ``exhausted`` is True. Lines that are not tegrastats are skipped and
    counted in ``skipped``.

    Args:
        path: A tegrastats log file.
        interval_ms: The ``--interval`` the log was recorded with. By default
            it is taken from the timestamps when the log has them, else
            tegrastats' default of 1000 ms.
        speed: Time compression: 10 plays 10 s of log per second.

    Example:
        >>> sensor = ReplaySensor("tx2.log", speed=100)   # doctest: +SKIP
    """

    name = "tegrastats replay"
    provides = RAIL_PROVIDES | {("util", "cpu"), ("util", "gpu"), ("memory", "board")}

    def __init__(self, path: str | Path, interval_ms: float | None = None, speed: float = 1.0):
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"tegrastats log not found: {path}")
        _check_positive("replay speed", speed)
        if interval_ms is not None:
            _check_positive("interval_ms", interval_ms)
        self.records, self.skipped = read_log(path)
        if not self.records:
            raise ValueError(f"{path} holds no tegrastats lines ({self.skipped} lines skipped)")
        if self.skipped:
            log.warning("%s: skipped %d lines that are not tegrastats", path, self.skipped)
        self.interval_s = (interval_ms if interval_ms is not None else self._interval_from_timestamps()) / 1000.0
        self.speed = speed
        self.min_period_s = 0.0
        self.path = path
        self._t0: float | None = None
        self.exhausted = False
        source = f"replay of {path}"
        rails: dict[str, None] = {}
        cores = 0
        for record in self.records:
            rails.update(dict.fromkeys(record.power_w))
            cores = max(cores, len(record.cpu_util or []))
        self.channels = [rail_channel(r, source) for r in rails]
        self.channels += [Channel(f"cpu{i}_util", "util", source, group="cpu", device="cpu", core=i) for i in range(cores)]
        if any(r.gpu_util is not None for r in self.records):
            self.channels.append(Channel("gpu_util", "util", source, group="gpu", device="gpu"))
        if any(r.ram_used_mb is not None for r in self.records):
            self.channels.append(Channel("ram_used", "memory", source, group="mem", device="board"))

    def _interval_from_timestamps(self) -> float:
        stamps = [r.timestamp for r in self.records if r.timestamp is not None]
        if len(stamps) >= 2 and stamps[-1] > stamps[0]:
            return (stamps[-1] - stamps[0]).total_seconds() * 1000.0 / (len(stamps) - 1)
        return 1000.0

    def read(self) -> Mapping[str, float]:
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        index = int((now - self._t0) * self.speed / self.interval_s)
        out = {c.name: NAN for c in self.channels}
        if index >= len(self.records):
            self.exhausted = True
            return out
        record = self.records[index]
        out.update(record.power_w)
        for i, util in enumerate(record.cpu_util or []):
            out[f"cpu{i}_util"] = NAN if util is None else util
        if record.gpu_util is not None:
            out["gpu_util"] = record.gpu_util
        if record.ram_used_mb is not None:
            out["ram_used"] = record.ram_used_mb * 1024 * 1024
        return out

    def metadata(self) -> dict:
        first = self.records[0]
        meta = {"replay_of": str(self.path), "records": len(self.records), "skipped_lines": self.skipped,
                "interval_ms": self.interval_s * 1000.0, "speed": self.speed}
        if first.ram_total_mb is not None:
            meta["ram_total_bytes"] = first.ram_total_mb * 1024 * 1024
        return meta
