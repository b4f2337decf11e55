"""A recorded tegrastats log replayed as a sensor: its lines one after another at the log's interval."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path

from tf_mobileperf.sensors.base import NAN, Channel, Sensor
from tf_mobileperf.sensors.ina3221 import RAIL_PROVIDES, rail_budget, rail_channel
from tf_mobileperf.sensors.tegrastats import TegrastatsRecord, read_log

log = logging.getLogger(__name__)


def _check_positive(name: str, value: float) -> None:
    """ValueError unless ``value`` is a finite number > 0 (NaN and inf would stall or race the replay)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")


class ReplaySensor(Sensor):
    """Plays a recorded tegrastats log back as a live sensor.

    Record ``i`` is served from ``i * interval / speed`` seconds after the
    first read; after the last record every channel reads NaN and
    ``exhausted`` is True: the log covers ``covers_s`` (lines x interval /
    speed), and a longer run has no samples after that (the collector says
    so once). Lines that are not tegrastats are skipped and counted in
    ``skipped``.

    Each channel's ``period_s`` is the log's interval over the speed: the
    sampler reads the line in force at every tick, but a new reading comes
    once a line. ``cpu_util`` is the mean over the cores the line has a
    value for (an "off" core is not part of it); a channel the log leaves
    without a value in some line (a core "off", a temperature it stops
    giving) is named in ``absent_in_source`` with why, so its NaN there is
    not taken for a sensor that stopped answering.

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
    provides = RAIL_PROVIDES | {
        ("util", "cpu"),
        ("util", "gpu"),
        ("util", "board"),
        ("memory", "board"),
        ("clock", "cpu"),
        ("clock", "gpu"),
        ("clock", "board"),
        ("temperature", "cpu"),
        ("temperature", "gpu"),
        ("temperature", "board"),
    }

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
        # How long the log lasts when replayed: its lines x its interval / the speed (Sensor.covers_s).
        self.covers_s = len(self.records) * self.interval_s / speed
        self.min_period_s = 0.0
        self.path = path
        self._t0: float | None = None
        self.exhausted = False
        self._rows = [_values(r) for r in self.records]
        self.channels = _replay_channels(self.records, self._rows, f"replay of {path}", self.interval_s / speed)
        self._nan = {c.name: NAN for c in self.channels}
        self.absent_in_source = _absent_in_log(self.channels, self._rows)

    def _interval_from_timestamps(self) -> float:
        stamps = [r.timestamp for r in self.records if r.timestamp is not None]
        if len(stamps) >= 2 and stamps[-1] > stamps[0]:
            return (stamps[-1] - stamps[0]).total_seconds() * 1000.0 / (len(stamps) - 1)
        return 1000.0

    def read(self) -> Mapping[str, float]:
        """The values of the log's line in force now (the first read starts the clock); NaN after the last."""
        now = time.monotonic()
        if self._t0 is None:
            self._t0 = now
        index = int((now - self._t0) * self.speed / self.interval_s)
        if index >= len(self._rows):
            self.exhausted = True
            return dict(self._nan)
        return self._nan | self._rows[index]

    def ran_out(self, run_s: float) -> str:
        """What is said once when a run outlasted the log.

        Args:
            run_s: How long the run lasted, s.

        Returns:
            The message: how long the log covers at its speed, and how many lines a log of the run would need.
        """
        return (
            f"the log {self.path} covers {self.covers_s:.3g} s at speed {self.speed:g}; the run lasted "
            f"{run_s:.3g} s: samples after that are missing (a run needs a log of at least run time x speed "
            f"/ interval = {math.ceil(run_s * self.speed / self.interval_s)} lines)"
        )

    def metadata(self) -> dict:
        """The rails' budget (``rail_budget``), the log, its records, interval and speed, and its RAM total."""
        first = self.records[0]
        meta = rail_budget(self.channels) | {
            "replay_of": str(self.path),
            "records": len(self.records),
            "skipped_lines": self.skipped,
            "interval_ms": self.interval_s * 1000.0,
            "speed": self.speed,
            "log_covers_s": self.covers_s,
        }
        if first.ram_total_mb is not None:
            meta["ram_total_bytes"] = first.ram_total_mb * 1024 * 1024
        return meta


def _values(record: TegrastatsRecord) -> dict[str, float]:
    """Channel name -> value (SI units) of what ``record`` holds; what it lacks is left out, what it says
    is off (a core, a powered-off unit's temperature) is NaN.

    ``cpu_util`` is the mean of the cores with a value in the line. The GPU's clock is the highest of its
    GPCs' (Orin has two, Thor three).
    """
    out = dict(record.power_w)
    for i, (util, mhz) in enumerate(zip(record.cpu_util or [], record.cpu_freq_mhz or [])):
        out[f"cpu{i}_util"] = NAN if util is None else util
        out[f"cpu{i}_freq"] = NAN if mhz is None else mhz * 1e6
    online = [u for u in record.cpu_util or [] if u is not None]
    if online:
        out["cpu_util"] = sum(online) / len(online)
    scalars = {
        "gpu_util": record.gpu_util,
        "emc_util": record.emc_util,
        "emc_freq": None if record.emc_freq_mhz is None else record.emc_freq_mhz * 1e6,
        "gpu_freq": max(record.gpu_freq_mhz) * 1e6 if record.gpu_freq_mhz else None,
        "ram_used": None if record.ram_used_mb is None else record.ram_used_mb * 1024 * 1024,
    }
    out.update({name: value for name, value in scalars.items() if value is not None})
    out.update({_temp_name(zone): NAN if c is None else c for zone, c in record.temps_c.items()})
    return out


def _temp_name(zone: str) -> str:
    return f"{zone.lower()}_temp"


def _temp_device(zone: str) -> str:
    """GPU zones are the GPU's, CPU zones (CPU, BCPU, MCPU) the CPU's, the rest the board's."""
    upper = zone.upper()
    return "gpu" if "GPU" in upper else "cpu" if upper.endswith("CPU") else "board"


def _replay_channels(
    records: list[TegrastatsRecord], rows: list[dict[str, float]], source: str, period_s: float
) -> list[Channel]:
    """The channels of every quantity some record of the log holds (``rows``: their values), with their roles,
    each with the log's period."""
    rails: dict[str, None] = {}
    cores = clocked = 0
    for record in records:
        rails.update(dict.fromkeys(record.power_w))
        cores = max(cores, len(record.cpu_util or []))
        clocked = max(clocked, len([f for f in record.cpu_freq_mhz or [] if f is not None]))
    channels = [rail_channel(r, source) for r in rails]
    present = {name for row in rows for name in row}
    if "cpu_util" in present:
        channels.append(Channel("cpu_util", "util", source, group="cpu", device="cpu"))
    channels += [Channel(f"cpu{i}_util", "util", source, group="cpu", device="cpu", core=i) for i in range(cores)]
    if clocked:
        channels += [Channel(f"cpu{i}_freq", "clock", source, group="cpu", device="cpu", core=i) for i in range(cores)]
    roles = {
        "gpu_util": ("util", "gpu", "gpu"),
        "gpu_freq": ("clock", "gpu", "gpu"),
        "emc_util": ("util", "board", "mem"),
        "emc_freq": ("clock", "board", "mem"),
        "ram_used": ("memory", "board", "mem"),
    }
    channels += [
        Channel(name, kind, source, group=group, device=device)
        for name, (kind, device, group) in roles.items()
        if name in present
    ]
    # A unit powered off for the whole log (Orin's idle GPU at -256C) never had a temperature: no channel.
    zones = dict.fromkeys(zone for record in records for zone, c in record.temps_c.items() if c is not None)
    channels += [Channel(_temp_name(z), "temperature", source, device=_temp_device(z)) for z in zones]
    return [dataclasses.replace(c, period_s=period_s) for c in channels]


#: Why a channel of a replay has no value in some line: the line says it is off, or does not have it.
OFF_IN_LOG = "off in the log"


NOT_IN_EVERY_LINE = "not in every line of the log"


def _absent_in_log(channels: list[Channel], rows: list[dict[str, float]]) -> dict[str, str]:
    """Channel -> why some line of the log leaves it without a value (``OFF_IN_LOG``, ``NOT_IN_EVERY_LINE``)."""
    out = {}
    for c in channels:
        values = [row.get(c.name) for row in rows]
        if any(v is not None and math.isnan(v) for v in values):
            out[c.name] = OFF_IN_LOG
        elif any(v is None for v in values):
            out[c.name] = NOT_IN_EVERY_LINE
    return out
