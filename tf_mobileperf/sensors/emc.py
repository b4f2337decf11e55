"""The memory controller (EMC) clock and utilization of a Jetson.

DRAM energy is a large share of a training step on a Jetson (the paper's
finding), and it follows the EMC clock, which the board scales with load and
nvpmodel caps. The clock is only in debugfs on most releases (root only), so
this sensor is often absent for a normal user; it then says which files it
tried. Utilization comes from the activity monitor: ``mc_all`` is the average
active EMC frequency in kHz, so utilization is ``mc_all * 1000 / clock_hz``
in percent; without a readable clock it cannot be computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tf_mobileperf.sensors.base import Channel, Sensor, under_root
from tf_mobileperf.sensors.errors import SensorUnavailable
from tf_mobileperf.sensors.files import FileReads, SysfsValue

#: Where the EMC clock (Hz) is, in the order tried.
CLOCK_PATHS = (
    "sys/kernel/debug/bpmp/debug/clk/emc/rate",  # Xavier, Orin: bpmp debugfs, root only
    "sys/kernel/debug/clk/emc/clk_rate",  # TX1, TX2, Nano: clock debugfs, root only
    "sys/class/devfreq/bwmgr/cur_freq",  # Thor: the bandwidth manager's devfreq
)
#: The activity monitor's average active EMC frequency, kHz.
ACTIVITY_PATH = "sys/kernel/actmon_avg_activity/mc_all"


def _readable(path: Path) -> Path | None:
    """``path`` if it holds a number now, else None."""
    value = SysfsValue(path)
    number = value.read()
    value.close()
    return path if number == number else None


class EmcSensor(Sensor):
    """EMC clock (Hz) and, where the activity monitor is readable, EMC utilization (%).

    Args:
        root: Root of the file system tree to read.
        period_s: How often the sampler reads it; the activity monitor
            averages over about 10 ms and a bpmp read is a firmware call.
    """

    name = "emc (debugfs clock, actmon)"
    provides = frozenset({("clock", "board"), ("util", "board")})

    def __init__(self, root: str | Path = "/", period_s: float = 0.05):
        self.min_period_s = period_s
        tried = [under_root(root, path) for path in CLOCK_PATHS]
        self._clock = next((value for value in map(_readable, tried) if value is not None), None)
        if self._clock is None:
            raise SensorUnavailable(
                f"EMC clock not readable at {', '.join(map(str, tried))} (debugfs is readable by root only)"
            )
        self.channels = [Channel("emc_freq", "clock", str(self._clock), group="mem", device="board")]
        self.file_reads: FileReads = FileReads()
        reads = self.file_reads
        clock = reads.number(self._clock)
        reads.channel("emc_freq", clock)
        self._activity = _readable(under_root(root, ACTIVITY_PATH))
        self.util_unavailable = ""
        if self._activity is None:
            self.util_unavailable = f"EMC activity monitor not readable at {under_root(root, ACTIVITY_PATH)}"
        else:
            self.channels.append(
                Channel("emc_util", "util", f"{self._activity} / {self._clock}", group="mem", device="board")
            )
            # mc_all (kHz of average activity) * 1e3 Hz/kHz * 100 % / the clock in Hz
            reads.channel("emc_util", reads.number(self._activity, 1e5), clock, "/")

    def read(self) -> Mapping[str, float | Exception]:
        """The EMC clock (Hz) and, where readable, utilization (%) now."""
        return self.file_reads.read()

    def metadata(self) -> dict:
        """``{"emc": ...}``: the clock's and activity monitor's files, and why utilization is missing if it is."""
        emc = {"clock_source": str(self._clock), "activity_source": str(self._activity) if self._activity else None}
        if self.util_unavailable:
            emc["util_unavailable"] = self.util_unavailable
        return {"emc": emc}

    def close(self) -> None:
        """Closes the files it reads."""
        self.file_reads.close()
