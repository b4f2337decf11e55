"""The two NVML sensors: values read each at its own pace, and the energy counter in a thread of its own."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from typing import ClassVar

from tf_mobileperf.sensors.base import Sensor
from tf_mobileperf.sensors.errors import SensorReadError, SensorUnavailable
from tf_mobileperf.sensors.nvml.probe import NvmlProbe, probe_nvml
from tf_mobileperf.sensors.nvml.queries import BY_KEY, Query
from tf_mobileperf.sensors.nvml.rates import (
    CPU_SHARE,
    CPU_SHARE_MAX,
    MIN_PERIOD_S,
    ReadPeriod,
    choose_period,
)
from tf_mobileperf.sensors.nvml.session import LIBRARY, NvmlSession

log = logging.getLogger(__name__)


#: A counter read may take this much longer than the probe measured and still be stamped at its middle
#: (``NvmlEnergySensor.stamp_within_s``): calls measured 3.9-4.8 ms each on an H200.
STAMP_SLACK_S = 0.005


class NvmlSensorBase(Sensor):
    """What both NVML sensors share: a probe, an NVML session of their own, pickling without handles.

    A sensor reads the probed values of the kinds in ``kinds``; each read
    value is a float, or a ``SensorReadError`` ("NVML: <call>: <NVML's
    words>") where that call failed. A read whose NVML cannot be opened in
    this process raises it.
    """

    kinds: ClassVar[tuple[str, ...]] = ()
    what: ClassVar[str] = ""

    def __init__(self, indices: list[int] | None = None, library: str = LIBRARY, probed: NvmlProbe | None = None):
        probed = probed if probed is not None else probe_nvml(indices, library)
        gpus = [g for g in probed.gpus if indices is None or g.index in indices]
        self.probed = NvmlProbe(probed.library, gpus)
        self._reads = [
            (g.index, BY_KEY[key], g.periods[key]) for g in gpus for key in g.queries if BY_KEY[key].kind in self.kinds
        ]
        if not self._reads:
            why = {g.index: {k: v for k, v in g.unsupported.items() if BY_KEY[k].kind in self.kinds} for g in gpus}
            raise SensorUnavailable(f"NVML gives no {self.what} on GPUs {sorted(why)}: {why}")
        self._session = self.probed.session([g.index for g in gpus])
        self.channels = [query.channel(gpu) for gpu, query, _ in self._reads]

    @property
    def library(self) -> str:
        return self.probed.library

    @property
    def session(self) -> NvmlSession:
        """This sensor's NVML session (opened in whichever process uses it)."""
        return self._session

    def prepare(self) -> None:
        """Opens NVML in this process (the library's import and ``nvmlInit``: longer than a read may take).

        Raises:
            SensorReadError: NVML cannot be opened in this process (the reads say it again).
        """
        self._session.handles()

    def _value(self, query: Query, handle) -> float | SensorReadError:
        nvml = self._session.nvml
        try:
            return query.read(nvml, handle)
        except nvml.NVMLError as exc:
            return SensorReadError(f"NVML: {query.api}: {exc}")

    def metadata(self) -> dict:
        """``nvml_reads``: per GPU, each value's measured cost and change period, and its read period and why."""
        return {"nvml_reads": self.probed.reads_metadata()}

    def close(self) -> None:
        """Shuts NVML down if this process opened it."""
        self._session.close()


class NvmlSensor(NvmlSensorBase):
    """Power (W), utilization (%), graphics clock (Hz) and memory used (B) per GPU, each at its own pace.

    Args:
        indices: GPU indices to read; all visible GPUs by default.
        library: The import name of nvidia-ml-py's module (a fake's in tests); an unpickled copy imports it.
        probed: A probe already made (``nvml_sensors`` shares one); made here when None.
    """

    name = "nvml"
    provides = frozenset({("power", "gpu"), ("util", "gpu"), ("clock", "gpu"), ("memory", "gpu")})
    kinds = ("power", "util", "clock", "memory")
    what = "power, utilization, clock or memory"

    def __init__(self, indices: list[int] | None = None, library: str = LIBRARY, probed: NvmlProbe | None = None):
        super().__init__(indices, library, probed)
        self.min_period_s = max(MIN_PERIOD_S, min(period.period_s for _, _, period in self._reads))
        self._due: tuple[int | None, dict[str, float]] = (None, {})  # (pid, channel -> when it is due next)

    def read(self) -> dict[str, float | SensorReadError]:
        """The values due now (each at its own period); the others are left out. A new process starts afresh."""
        handles = self._session.handles()
        pid, due = self._due
        if pid != os.getpid():
            self._due = pid, due = os.getpid(), {}
        now = time.monotonic()
        slack = self.min_period_s / 2  # a read a little early (the sampler's grid, its jitter) still counts
        out: dict[str, float | SensorReadError] = {}
        for (gpu, query, period), channel in zip(self._reads, self.channels):
            if now < due.get(channel.name, 0.0):
                continue
            due[channel.name] = now + period.period_s - slack
            out[channel.name] = self._value(query, handles[gpu])
        return out

    def metadata(self) -> dict:
        """``nvml_reads`` and, per GPU, its name, UUID, memory, power source and the values it does not give."""
        gpus = {}
        for g in self.probed.gpus:
            power = next((BY_KEY[key].api for key in g.queries if BY_KEY[key].kind == "power"), None)
            gpus[g.index] = {
                "name": g.name,
                "uuid": g.uuid,
                "memory_total_bytes": g.memory_total_bytes,
                "energy_counter": "energy" in g.queries,
                "power_source": power,
                "unsupported": g.unsupported,
            }
        return super().metadata() | {"gpus": gpus}


class NvmlEnergySensor(NvmlSensorBase):
    """Each GPU's total-energy counter (J since the driver loaded), read in its own thread.

    Args:
        indices, library, probed: As ``NvmlSensor``'s.

    Its read period is the slowest its GPUs' counters ask for (each
    ``max(0.3 T, 10 ms, CPU cost / 0.2%)``), no shorter than one read of all
    of them takes, and long enough that a read of all of them costs at most
    0.2% of a core too; but never slower than a third of the counter's
    change period while that costs at most 1% of a core (read slower than it
    changes, a counter hides updates); ``metadata()["nvml_energy_read"]``
    says which.
    """

    name = "nvml energy"
    own_thread = True  # its ~4 ms call never sits in the sampler's loop
    provides = frozenset({("energy", "gpu")})
    kinds = ("energy",)
    what = "total-energy counter"

    def __init__(self, indices: list[int] | None = None, library: str = LIBRARY, probed: NvmlProbe | None = None):
        super().__init__(indices, library, probed)
        slowest = max((period for _, _, period in self._reads), key=lambda p: p.period_s)
        rates = [g.rates["energy"] for g in self.probed.gpus if "energy" in g.queries]
        wall, cpu = sum(r.wall_s for r in rates), sum(r.cpu_s for r in rates)
        whole = choose_period(wall, f"one read of its {len(rates)} GPU counter(s) takes {wall * 1e3:.1f} ms", cpu)
        if len(rates) > 1 and whole.why.startswith("its CPU cost"):
            whole = ReadPeriod(
                whole.period_s,
                f"one read of its {len(rates)} GPU counters costs {cpu * 1e6:.1f} us "
                f"of CPU, kept within {CPU_SHARE:.1%} of a core",
            )
        self.read_period = max((slowest, whole), key=lambda p: p.period_s)
        changes = [r.change_period_s for r in rates if r.change_period_s]
        if changes:  # read slower than it changes, a counter hides updates (a loaded machine measures dear calls)
            ceiling = max(min(changes) / 3, wall, cpu / CPU_SHARE_MAX)
            if ceiling < self.read_period.period_s:
                self.read_period = ReadPeriod(
                    ceiling,
                    f"a third of the counter's change period ({min(changes):.3f} s) "
                    f"at most, so no update goes unseen; a read's CPU ({cpu * 1e6:.1f} us) "
                    f"is then within {CPU_SHARE_MAX:.0%} of a core",
                )
        self.min_period_s = self.read_period.period_s
        # A read that took over twice what the probe measured stalled inside (a VM descheduled, say): which
        # instant its values are of is unknown by more than the read itself, so it is not stamped.
        self.stamp_within_s = max(2 * wall, wall + STAMP_SLACK_S)

    def read(self) -> dict[str, float | SensorReadError]:
        """Every GPU's total-energy counter now, J.

        Raises:
            SensorReadError: NVML cannot be opened in this process.
        """
        handles = self._session.handles()
        return {
            channel.name: self._value(query, handles[gpu])
            for (gpu, query, _), channel in zip(self._reads, self.channels)
        }

    def metadata(self) -> dict:
        """``nvml_reads`` and ``nvml_energy_read``: the read period chosen and why."""
        return super().metadata() | {"nvml_energy_read": dataclasses.asdict(self.read_period)}


def nvml_sensors(indices: list[int] | None = None, library: str = LIBRARY) -> list[Sensor]:
    """``NvmlSensor`` and, where a GPU has the counter, ``NvmlEnergySensor``, from one probe.

    Args:
        indices: NVML indices of the GPUs to read; None: every visible GPU.
        library: The import name of nvidia-ml-py's module (a fake's in tests).

    Returns:
        The sensors present, one or both.

    Raises:
        SensorUnavailable: NVML, or every value of it, is not there ("NVML: ..." where NVML said why).
    """
    probed = probe_nvml(indices, library)
    sensors: list[Sensor] = []
    reasons = []
    for cls in (NvmlSensor, NvmlEnergySensor):
        try:
            sensors.append(cls(indices, library, probed))
        except SensorUnavailable as exc:
            reasons.append(str(exc))
            log.debug("%s not present: %s", cls.name, exc)
    if not sensors:
        raise SensorUnavailable("; ".join(reasons))
    return sensors
