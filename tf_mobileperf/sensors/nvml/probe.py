"""Probing NVML: which values each GPU gives, what each call costs and how often each value changes."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from tf_mobileperf.sensors.errors import SensorReadError, SensorUnavailable
from tf_mobileperf.sensors.nvml.queries import BY_KEY, QUERIES
from tf_mobileperf.sensors.nvml.rates import (
    QueryRate,
    ReadPeriod,
    watch,
)
from tf_mobileperf.sensors.nvml.session import LIBRARY, NvmlSession, as_text, gpu_uuid

log = logging.getLogger(__name__)


#: The longest the probe polls each GPU's values to measure their change periods and costs. It stops once
#: the power and energy values have 2 spacings between changes placed in time (~0.3 s at 100 ms updates); the rest is
#: room for a loaded machine, whose stalls leave changes unplaced (with 0.35 s, and with 0.6 s stopping at
#: 3 changes placed or not, a probe in CI under load placed fewer than 2).
PROBE_WINDOW_S = 1.0


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
        """An NVML session for some of the probed GPUs, checked against their probed UUIDs.

        Args:
            indices: NVML indices of the GPUs.

        Returns:
            The session; it opens NVML in the process that first uses it.
        """
        uuids = {g.index: g.uuid for g in self.gpus if g.index in indices}
        return NvmlSession(self.library, indices, uuids)

    def reads_metadata(self) -> dict:
        """GPU index -> its ``GpuProbe.reads()``: for ``metadata()["nvml_reads"]``."""
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
        if query.kind == "power" and any(BY_KEY[key].kind == "power" for key in working):
            continue
        try:
            query.read(nvml, handle)
        except (AttributeError, nvml.NVMLError) as exc:
            unsupported[query.key] = f"{type(exc).__name__}: {exc}"
            continue
        working[query.key] = functools.partial(query.read, nvml, handle)
    paced = [key for key in working if BY_KEY[key].kind in ("power", "energy")]
    rates = watch(working, until_changes=paced, window_s=window_s)
    memory = _try(nvml, nvml.nvmlDeviceGetMemoryInfo, handle)
    return GpuProbe(
        index,
        as_text(_try(nvml, nvml.nvmlDeviceGetName, handle)),
        gpu_uuid(nvml, handle),
        getattr(memory, "total", None),
        list(working),
        unsupported,
        rates,
        {key: BY_KEY[key].period(rates[key]) for key in working},
    )


def probe_nvml(indices: list[int] | None = None, library: str = LIBRARY, window_s: float | None = None) -> NvmlProbe:
    """Opens NVML, finds each GPU's values and measures them (all GPUs at once), closes it.

    Args:
        indices: NVML indices of the GPUs to probe; None: every visible GPU.
        library: The import name of nvidia-ml-py's module (a fake's in tests).
        window_s: The longest each GPU's values are polled, s; None: ``PROBE_WINDOW_S``.

    Returns:
        The library's name and, per GPU, the values it gives, what each costs and how often it changes.

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
