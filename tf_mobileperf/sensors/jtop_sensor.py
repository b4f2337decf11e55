"""jetson-stats (jtop): board metadata, and a slow fallback power sensor.

jtop talks to its root service over a socket and refreshes at most every
0.5 s (its maintainer's advice), so it cannot give the paper's 5 ms; it is
used for what sysfs does not say (board, JetPack/L4T, nvpmodel mode) and for
power only when the INA3221 files are not readable. Off a Jetson, starting
jtop raises ``JtopException``: that means "not present".

A started jtop is a socket to its service and a thread that receives its
updates; neither crosses a process boundary (a forked child has the object
but not the thread, so its values would stay as they were at the fork), so
the connection is opened in the process that reads it and a pickled sensor
carries only its interval and channels.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from tf_mobileperf.sensors.base import NAN, Sensor
from tf_mobileperf.sensors.errors import SensorReadError, SensorUnavailable
from tf_mobileperf.sensors.ina3221 import RAIL_PROVIDES, rail_channel


class JtopSensor(Sensor):
    """Power rails (W) as jtop reports them, at jtop's own rate.

    Args:
        interval_s: jtop's refresh interval (>= 0.5 s recommended).
    """

    name = "jtop (jetson-stats)"
    provides = RAIL_PROVIDES

    def __init__(self, interval_s: float = 0.5):
        try:
            import jtop  # noqa: F401  (started in _connection, in the process that reads)
        except ImportError as exc:
            raise SensorUnavailable("jetson-stats is not installed (pip install tf-mobileperf[jetson])") from exc
        self.min_period_s = interval_s
        self._jetson: Any = None  # a jtop.jtop, started in the process that reads (jtop has no type hints)
        self._pid: int | None = None
        try:
            rails = self._rails()
        except SensorReadError as exc:
            raise SensorUnavailable(str(exc)) from exc
        self.channels = [rail_channel(name, "jtop power['rail']") for name in rails]
        if not self.channels:
            self.close()
            raise SensorUnavailable("jtop reports no power rails")

    def _connection(self):
        """The jtop started in this process (started here on first use). Raises SensorReadError if it cannot."""
        if self._pid != os.getpid():
            from jtop import JtopException, jtop

            self._jetson, self._pid = None, None  # a forked child's copy of the parent's: never used, never closed
            try:
                jetson = jtop(interval=self.min_period_s)
                jetson.start()
            except JtopException as exc:
                raise SensorReadError("jtop: " + " ".join(str(exc).split())) from exc
            self._jetson, self._pid = jetson, os.getpid()
        return self._jetson

    def prepare(self) -> None:
        """Starts jtop in this process (it connects to the jtop service and waits for its first data: longer
        than a read may take).

        Raises:
            SensorReadError: jtop could not be started in this process (the reads say it again).
        """
        self._connection()

    def _rails(self) -> dict:
        return (self._connection().power or {}).get("rail", {})

    def read(self) -> Mapping[str, float]:
        """Every rail's power as jtop last reported it, W; NaN for a rail it no longer reports.

        Raises:
            SensorReadError: jtop could not be started in this process.
        """
        rails = self._rails()
        out = {}
        for channel in self.channels:
            milliwatts = rails.get(channel.name, {}).get("power")
            out[channel.name] = NAN if milliwatts is None else milliwatts / 1000.0
        return out

    def metadata(self) -> dict:
        """Board, JetPack/L4T and power mode as jtop reports them (``jetson_metadata``)."""
        return jetson_metadata(self._connection())

    def close(self) -> None:
        """Stops the jtop this process started, if any; a copy from another process is dropped unclosed."""
        if self._pid == os.getpid():
            self._jetson.close()
        self._jetson, self._pid = None, None

    def __getstate__(self) -> dict:
        return self.__dict__ | {"_jetson": None, "_pid": None}


def jetson_metadata(jetson) -> dict:
    """Board, JetPack/L4T and power mode from a started ``jtop`` object.

    Args:
        jetson: A started ``jtop.jtop``.

    Returns:
        ``board`` (its model, else its module), ``jetpack``, ``l4t`` and ``platform`` as jtop names them (None
        where it does not), and ``nvpmodel``: the power mode's name, None where jtop cannot say.
    """
    board = getattr(jetson, "board", {}) or {}
    hardware = board.get("hardware", {})
    libraries = board.get("platform", {})
    meta = {
        "board": hardware.get("Model") or hardware.get("Module"),
        "jetpack": hardware.get("Jetpack"),
        "l4t": hardware.get("L4T"),
        "platform": libraries,
    }
    try:
        meta["nvpmodel"] = str(jetson.nvpmodel)
    except Exception:  # jtop raises various errors when nvpmodel is absent
        meta["nvpmodel"] = None
    return meta
