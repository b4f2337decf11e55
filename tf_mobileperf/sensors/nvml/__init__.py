"""Desktop and server NVIDIA GPUs through NVML (nvidia-ml-py): each value read at its own pace, in the
process that reads it.

Measured on one H200 (driver 580, nvidia-ml-py 13, inside a VM), the facts
this design follows:

- NVML belongs to the process that initialised it: used in a child made by
  ``os.fork()`` every call raises ``NVMLError: Uninitialized``, and
  ``nvmlInit()`` again in the child works. So no handle crosses a process
  boundary: each sensor opens NVML in the process that reads it
  (``NvmlSession``); a forked child, or a copy unpickled in a spawned
  sampler, calls ``nvmlInit`` and gets its handles again by index, checking
  each GPU's UUID against the one probed.
- A failed call is a failed read in NVML's words (``SensorReadError``, "NVML:
  ...", as one channel's value), never a quiet NaN: swallowing that
  "Uninitialized" once left every NVML channel of a run empty with 0 sensor
  errors counted.
- One call costs: ``nvmlDeviceGetTotalEnergyConsumption`` 3.9-4.8 ms (a
  driver round trip), ``nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)``
  3.5 us, ``nvmlDeviceGetPowerUsage`` 1.1 us, ``nvmlDeviceGetUtilizationRates``
  0.9 us, ``nvmlDeviceGetClockInfo`` 3.4 us, ``nvmlDeviceGetMemoryInfo`` 5.2 us.
- Values change (read every 1 ms for 1.5-2 s): the energy counter every ~100
  ms (99-102), the instant power every ~100 ms, ``nvmlDeviceGetPowerUsage``
  every ~100 ms (a 1 s moving average), utilization every ~200 ms, memory
  used only when allocations change.

Hence two sensors, built from one probe by ``nvml_sensors`` (the registry's
"nvml" entry):

- ``NvmlSensor``: power (the instant field where the driver has it, else
  ``nvmlDeviceGetPowerUsage``), utilization, graphics clock and memory used.
  Each value is read at the rate it changes (power every ~100 ms,
  utilization every ~200 ms, clock and memory every 0.1 s: they change on
  events), only when its own period has come; a value not due is left out
  of the reading (NaN, not a failure).
- ``NvmlEnergySensor``: the total-energy counter (Volta and newer), read in
  its own thread (``own_thread``) so that its ~4 ms call never sits in the
  sampler's 5 ms loop, on a grid of its own, every max(0.3 T, 10 ms, its CPU
  cost / 0.2%) where T is the counter's change period measured at probe time
  (``nvml_rates``) and the CPU cost that of one read of every GPU's counter
  (``ENERGY_FRACTION`` says why 0.3).

Both say in ``metadata()["nvml_reads"]`` what was measured per GPU (each
query's cost and change period) and the read period chosen and why. No
reading on such GPUs resolves a step shorter than ~100 ms: per-step energy
of shorter steps comes from interpolating the counter between its update
instants. On Jetson AGX Thor (OpenRM) NVML gives the GPU's utilization,
clock and memory, and a power the driver does not measure has no channel.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from tf_mobileperf.sensors.base import RAIL_KINDS, Channel, Sensor
from tf_mobileperf.sensors.errors import SensorReadError, SensorUnavailable
from tf_mobileperf.sensors.nvml_rates import (
    CPU_SHARE,
    CPU_SHARE_MAX,
    MIN_PERIOD_S,
    QueryRate,
    ReadPeriod,
    choose_period,
    paced_period,
    watch,
)

log = logging.getLogger(__name__)

#: The import name of nvidia-ml-py.
LIBRARY = "pynvml"
#: How long the probe polls each GPU's values to measure their change periods and costs.
PROBE_WINDOW_S = 0.35
#: A counter read may take this much longer than the probe measured and still be stamped at its middle
#: (``NvmlEnergySensor.stamp_within_s``): calls measured 3.9-4.8 ms each on an H200.
STAMP_SLACK_S = 0.005
#: Values that change on events (an allocation, a clock step), not on a grid, are read this often.
EVENT_PERIOD_S = 0.1


def _power_instant(nvml, handle) -> float:
    value = nvml.nvmlDeviceGetFieldValues(handle, [nvml.NVML_FI_DEV_POWER_INSTANT])[0]
    if value.nvmlReturn != 0:
        raise nvml.NVMLError(value.nvmlReturn)
    return value.value.uiVal / 1000.0


def _power_usage(nvml, handle) -> float:
    return nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0


def _energy(nvml, handle) -> float:
    return nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0


def _util(nvml, handle) -> float:
    return float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)


def _clock(nvml, handle) -> float:
    return float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_GRAPHICS)) * 1e6


def _memory_used(nvml, handle) -> float:
    return float(nvml.nvmlDeviceGetMemoryInfo(handle).used)


@dataclasses.dataclass(frozen=True)
class Query:
    """One NVML value of a GPU: how it is read (in SI units), the channel it fills and its pace.

    ``fraction`` of its change period apart it is read (None: it changes on
    events, read every ``EVENT_PERIOD_S``); ``default_change_s`` is its change
    period on an H200, used where it was not seen to change while probing.
    """

    key: str
    kind: str
    suffix: str
    api: str
    read: Callable[[Any, Any], float]
    group: str = "gpu"
    fraction: float | None = None
    default_change_s: float = 0.0

    def channel(self, gpu: int) -> Channel:
        rail = f"gpu{gpu}" if self.kind in RAIL_KINDS else ""
        return Channel(f"gpu{gpu}_{self.suffix}", self.kind, self.api, group=self.group, device="gpu", rail=rail)

    def period(self, rate: QueryRate | None) -> ReadPeriod:
        """How often to read it, from what polling it measured."""
        if self.fraction is not None:
            return paced_period(rate, self.fraction, self.default_change_s, self.key)
        cpu = rate.cpu_s if rate is not None and rate.calls else 0.0
        return choose_period(EVENT_PERIOD_S, f"it changes on events, not on a grid: every {EVENT_PERIOD_S:g} s", cpu)


#: The energy counter is read this fraction of its change period apart: often enough to place each change
#: (the join fits the update grid through the brackets, which fall at other phases of it since 0.3 divides no
#: whole period), seldom enough for its cost in the sampler process (measured on this 2-core VM with the fake
#: H200's 4.3 ms call: about 0.2 ms of the process's CPU a read, wake-ups included: 2.0% of a core at 10 ms).
ENERGY_FRACTION = 0.3

#: Every value read, in channel order; of the two power queries a GPU uses the first that works.
QUERIES = (
    Query(
        "power_instant",
        "power",
        "power",
        "nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)",
        _power_instant,
        fraction=1.0,
        default_change_s=0.1,
    ),
    Query("power_usage", "power", "power", "nvmlDeviceGetPowerUsage", _power_usage, fraction=1.0, default_change_s=0.1),
    Query(
        "energy",
        "energy",
        "energy",
        "nvmlDeviceGetTotalEnergyConsumption",
        _energy,
        fraction=ENERGY_FRACTION,
        default_change_s=0.1,
    ),
    Query("util", "util", "util", "nvmlDeviceGetUtilizationRates", _util, fraction=1.0, default_change_s=0.2),
    Query("clock", "clock", "clock", "nvmlDeviceGetClockInfo(NVML_CLOCK_GRAPHICS)", _clock),
    Query("memory", "memory", "mem_used", "nvmlDeviceGetMemoryInfo", _memory_used, group="mem"),
)
_BY_KEY = {query.key: query for query in QUERIES}


def _text(value) -> str | None:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


class NvmlSession:
    """NVML opened in the process that reads it.

    ``handles()`` calls ``nvmlInit`` and gets each GPU's handle by index the
    first time it is called in a process (pid); in a forked child the
    parent's handles are never used. Pickled it keeps only the library's
    import name, the GPU indices and their UUIDs, so an unpickled copy opens
    its own. A GPU whose UUID is not the one probed fails the read.

    Args:
        library: The module's import name ("pynvml"; a fake's in tests).
        indices: GPU indices; all visible GPUs when None.
        uuids: Index -> UUID found at probe time, checked when reopening.
    """

    def __init__(
        self, library: str = LIBRARY, indices: list[int] | None = None, uuids: Mapping[int, str | None] | None = None
    ):
        self._setup(library, indices, uuids)

    def _setup(self, library: str, indices: list[int] | None, uuids: Mapping[int, str | None] | None) -> None:
        self.library = library
        self.indices = None if indices is None else list(indices)
        self.uuids = dict(uuids or {})
        self._pid: int | None = None
        self._nvml = None
        self._handles: dict[int, Any] = {}

    @property
    def nvml(self):
        """The library's module (imported by name on first use)."""
        if self._nvml is None:
            self._nvml = importlib.import_module(self.library)
        return self._nvml

    def handles(self) -> dict[int, Any]:
        """Index -> handle, opened in this process. Raises SensorReadError in NVML's words when it cannot."""
        if self._pid != os.getpid():
            self._open()
        return self._handles

    def _open(self) -> None:
        nvml, pid = self.nvml, os.getpid()
        self._pid, self._handles = None, {}
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise SensorReadError(f"NVML: nvmlInit in process {pid}: {exc}") from exc
        try:
            indices = self.indices if self.indices is not None else range(nvml.nvmlDeviceGetCount())
            handles = {i: nvml.nvmlDeviceGetHandleByIndex(i) for i in indices}
        except nvml.NVMLError as exc:
            self._shutdown()
            raise SensorReadError(f"NVML: getting the GPUs' handles in process {pid}: {exc}") from exc
        for i, handle in handles.items():
            uuid = gpu_uuid(nvml, handle)
            if self.uuids.get(i) and uuid and uuid != self.uuids[i]:
                self._shutdown()
                raise SensorReadError(f"NVML: GPU {i} is {uuid} in process {pid}, it was {self.uuids[i]} when probed")
        self._handles, self._pid = handles, pid
        if self.uuids:
            log.debug("NVML opened in process %d for GPUs %s", pid, sorted(handles))

    def _shutdown(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass

    def close(self) -> None:
        """Shuts NVML down if this process opened it."""
        if self._pid == os.getpid():
            self._shutdown()
        self._pid, self._handles = None, {}

    def __getstate__(self) -> dict:
        return {"library": self.library, "indices": self.indices, "uuids": self.uuids}

    def __setstate__(self, state: dict) -> None:
        self._setup(state["library"], state["indices"], state["uuids"])


def gpu_uuid(nvml, handle) -> str | None:
    """The GPU's UUID; None where this library or driver does not give one."""
    try:
        return _text(nvml.nvmlDeviceGetUUID(handle))
    except (AttributeError, nvml.NVMLError):
        return None


@dataclasses.dataclass
class GpuProbe:
    """What probing one GPU found.

    Args:
        index: Its NVML index.
        name, uuid, memory_total_bytes: As NVML names it (None where NVML would not say).
        queries: Keys (``QUERIES``) of the values its driver gives, at most one power.
        unsupported: Key -> NVML's words, for the values it does not give.
        rates: Key -> what polling that value measured (cost, change period).
        periods: Key -> the read period chosen and why.
    """

    index: int
    name: str | None
    uuid: str | None
    memory_total_bytes: int | None
    queries: list[str]
    unsupported: dict[str, str]
    rates: dict[str, QueryRate]
    periods: dict[str, ReadPeriod]

    def reads(self) -> dict:
        """Key -> measured cost and change period, read period and why: for ``metadata()["nvml_reads"]``."""
        return {
            key: self.rates[key].to_dict() | {"read_period_s": self.periods[key].period_s, "why": self.periods[key].why}
            for key in self.queries
        }


@dataclasses.dataclass
class NvmlProbe:
    """The GPUs NVML showed at probe time, with the library's import name."""

    library: str
    gpus: list[GpuProbe]

    def session(self, indices: list[int]) -> NvmlSession:
        uuids = {g.index: g.uuid for g in self.gpus if g.index in indices}
        return NvmlSession(self.library, indices, uuids)

    def reads_metadata(self) -> dict:
        return {g.index: g.reads() for g in self.gpus}


def _try(nvml, fn, *args):
    try:
        return fn(*args)
    except (AttributeError, nvml.NVMLError):
        return None


def _probe_gpu(nvml, index: int, handle, window_s: float) -> GpuProbe:
    """Which values GPU ``index`` gives, each value's cost and change period, and its read period."""
    working: dict[str, Callable[[], float]] = {}
    unsupported: dict[str, str] = {}
    for query in QUERIES:
        if query.kind == "power" and any(_BY_KEY[key].kind == "power" for key in working):
            continue
        try:
            query.read(nvml, handle)
        except (AttributeError, nvml.NVMLError) as exc:
            unsupported[query.key] = f"{type(exc).__name__}: {exc}"
            continue
        working[query.key] = functools.partial(query.read, nvml, handle)
    paced = [key for key in working if _BY_KEY[key].kind in ("power", "energy")]
    rates = watch(working, until_changes=paced, window_s=window_s)
    memory = _try(nvml, nvml.nvmlDeviceGetMemoryInfo, handle)
    return GpuProbe(
        index,
        _text(_try(nvml, nvml.nvmlDeviceGetName, handle)),
        gpu_uuid(nvml, handle),
        getattr(memory, "total", None),
        list(working),
        unsupported,
        rates,
        {key: _BY_KEY[key].period(rates[key]) for key in working},
    )


def probe_nvml(indices: list[int] | None = None, library: str = LIBRARY, window_s: float | None = None) -> NvmlProbe:
    """Opens NVML, finds each GPU's values and measures them (all GPUs at once, for up to ``window_s``,
    by default ``PROBE_WINDOW_S``), closes it.

    Raises:
        SensorUnavailable: no such library, NVML failed ("NVML: ..."), or no GPU.
    """
    try:
        nvml = importlib.import_module(library)
    except ImportError as exc:
        raise SensorUnavailable("nvidia-ml-py is not installed (pip install tf-mobileperf[nvidia])") from exc
    window_s = PROBE_WINDOW_S if window_s is None else window_s
    session = NvmlSession(library, indices)
    try:
        handles = session.handles()
    except SensorReadError as exc:
        raise SensorUnavailable(str(exc)) from exc
    try:
        if not handles:
            raise SensorUnavailable("NVML found no NVIDIA GPU")
        with ThreadPoolExecutor(len(handles), thread_name_prefix="mobileperf-nvml-probe") as pool:
            gpus = list(
                pool.map(
                    lambda index, handle: _probe_gpu(nvml, index, handle, window_s), handles.keys(), handles.values()
                )
            )
    finally:
        session.close()
    for gpu in gpus:
        log.debug(
            "NVML GPU %d (%s): %s",
            gpu.index,
            gpu.name,
            {key: (round(p.period_s, 4), p.why) for key, p in gpu.periods.items()},
        )
    return NvmlProbe(library, gpus)


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
            (g.index, _BY_KEY[key], g.periods[key])
            for g in gpus
            for key in g.queries
            if _BY_KEY[key].kind in self.kinds
        ]
        if not self._reads:
            why = {g.index: {k: v for k, v in g.unsupported.items() if _BY_KEY[k].kind in self.kinds} for g in gpus}
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

    def _value(self, query: Query, handle) -> float | SensorReadError:
        nvml = self._session.nvml
        try:
            return query.read(nvml, handle)
        except nvml.NVMLError as exc:
            return SensorReadError(f"NVML: {query.api}: {exc}")

    def metadata(self) -> dict:
        return {"nvml_reads": self.probed.reads_metadata()}

    def close(self) -> None:
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
        gpus = {}
        for g in self.probed.gpus:
            power = next((_BY_KEY[key].api for key in g.queries if _BY_KEY[key].kind == "power"), None)
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
        handles = self._session.handles()
        return {
            channel.name: self._value(query, handles[gpu])
            for (gpu, query, _), channel in zip(self._reads, self.channels)
        }

    def metadata(self) -> dict:
        return super().metadata() | {"nvml_energy_read": dataclasses.asdict(self.read_period)}


def nvml_sensors(indices: list[int] | None = None, library: str = LIBRARY) -> list[Sensor]:
    """``NvmlSensor`` and, where a GPU has the counter, ``NvmlEnergySensor``, from one probe.

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
