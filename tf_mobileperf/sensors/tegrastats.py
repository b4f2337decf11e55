"""tegrastats: its lines parsed, whatever the L4T release that wrote them (``replay.py`` replays a log as a sensor).

tegrastats is what every Jetson user already has; its format changed across
L4T releases:

* JetPack 4 (TX2, Nano, Xavier): rails as ``VDD_IN 2356/2356`` (mW, current
  and average, no unit), ``GR3D_FREQ 0%@114``.
* JetPack 5/6 (Orin): ``VDD_IN 5139mW/5139mW``, ``GR3D_FREQ 0%@[305,305]``,
  an optional leading ``MM-DD-YYYY HH:MM:SS`` timestamp.
* JetPack 7 (Thor): two (7.1) or three (7.2) values per rail, and
  ``GR3D_FREQ @[f,f,f]`` with clocks but no percentage.
* L4T 28.1 (TX1): ``cpu [17%,13%]@408 EMC 1%@408 GR3D 3%@76``: lower-case
  ``cpu`` with one clock after the list (Thor's ``CPU [..]@f`` too), and
  ``EMC``/``GR3D`` without ``_FREQ``.

``parse_line`` returns only what a line says: a field the line lacks is None,
never a default.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
from pathlib import Path

log = logging.getLogger(__name__)

_TIMESTAMP = re.compile(r"^\s*(\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2})\s+")
_RAM = re.compile(r"(?<![A-Z])RAM (\d+)/(\d+)([kMG])B")
_CPU = re.compile(r"\b(?:CPU|cpu) +\[([^\]]*)\](?:@(\d+))?")
_CORE = re.compile(r"^(\d+)%(?:@(\d+))?$")
# "N%", "@F", "N%@F" (and for the GPU "@[F,F]"): each part optional, one required.
# Fields are separated by one space, or several where JetPack 6 pads its columns.
_EMC = re.compile(r"\bEMC(?:_FREQ)? +(?=\d+%|@)(?:(\d+)%)?(?:@(\d+))?")
_GR3D = re.compile(r"\bGR3D(?:_FREQ)? +(?=\d+%|@)(?:(\d+)%)?(?:@(\d+|\[[^\]]*\]))?")
_RAIL = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*) +(\d+)(?:mW)?/(\d+)(?:mW)?(?:/(\d+)(?:mW)?)?(?=\s|$)")
_NOT_RAILS = {"RAM", "SWAP", "IRAM", "LFB"}
#: A temperature: "GPU@36.5C", "cpu@45.062C", "tj@47.25C"; Orin prints -256C for a powered-off unit.
_TEMP = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_]*)@(-?\d+(?:\.\d+)?)C(?=\s|$)")
#: Zones that are not a temperature: TX2's PMIC@100C is a constant.
_NOT_TEMPS = {"PMIC"}
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
    temps_c: dict[str, float | None] = dataclasses.field(default_factory=dict)  # None: the unit is powered off


def parse_line(line: str) -> TegrastatsRecord:
    """Parses one tegrastats line.

    Args:
        line: The line, of any L4T release's format, with or without its leading timestamp.

    Returns:
        What the line says, in W, MB, %, MHz; a field the line lacks is None (or empty).

    Raises:
        TypeError: ``line`` is not a str.
        ValueError: if the line has none of tegrastats' fields (RAM, CPU,
            GR3D(_FREQ), EMC(_FREQ) or a power rail).

    Example:
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
        line = line[m.end() :]
    if m := _RAM.search(line):
        scale = _MB[m.group(3)]
        record.ram_used_mb, record.ram_total_mb = float(m.group(1)) * scale, float(m.group(2)) * scale
        found = True
    if m := _CPU.search(line):
        record.cpu_util, record.cpu_freq_mhz = _cores(m.group(1), m.group(2))
        found = True
    if m := _EMC.search(line):
        record.emc_util = _number(m.group(1))
        record.emc_freq_mhz = _number(m.group(2))
        found = True
    if m := _GR3D.search(line):
        record.gpu_util = _number(m.group(1))
        if m.group(2):
            record.gpu_freq_mhz = [f for f in map(_number, m.group(2).strip("[]").split(",")) if f is not None]
        found = True
    for m in _TEMP.finditer(line):
        if m.group(1).upper() not in _NOT_TEMPS:
            celsius = float(m.group(2))
            record.temps_c[m.group(1)] = None if celsius <= -256 else celsius
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


def _number(text: str | None) -> float | None:
    """``text`` as a float; None when absent or not a number ("off", "N/A")."""
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _cores(entries: str, shared_mhz: str | None) -> tuple[list[float | None], list[float | None]]:
    """Per-core (util %, clock MHz) of ``CPU [..]``; ``shared_mhz``: the one clock after the list (TX1, Thor)."""
    utils: list[float | None] = []
    freqs: list[float | None] = []
    for entry in entries.split(","):
        core = _CORE.match(entry.strip())
        if core is None:  # "off", or cut short
            utils.append(None)
            freqs.append(None)
        else:
            utils.append(float(core.group(1)))
            freqs.append(_number(core.group(2) or shared_mhz))
    return utils, freqs


def read_log(path: str | Path) -> tuple[list[TegrastatsRecord], int]:
    """Parses a tegrastats log.

    Args:
        path: The log file; bytes that are not text are replaced, blank lines ignored.

    Returns:
        (records, number of lines skipped). Skipped: lines that are not tegrastats, and a last line without its
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
