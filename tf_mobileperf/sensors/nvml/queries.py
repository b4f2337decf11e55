"""The NVML values a GPU is read for: how each is read (in SI units), the channel it fills and its pace."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from tf_mobileperf.sensors.base import RAIL_KINDS, Channel
from tf_mobileperf.sensors.nvml.rates import (
    QueryRate,
    ReadPeriod,
    choose_period,
    paced_period,
)

log = logging.getLogger(__name__)


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
        """The channel this value fills for one GPU.

        Args:
            gpu: The GPU's NVML index.

        Returns:
            Channel ``gpu<index>_<suffix>``; a power or energy channel has rail ``gpu<index>``.
        """
        rail = f"gpu{gpu}" if self.kind in RAIL_KINDS else ""
        return Channel(f"gpu{gpu}_{self.suffix}", self.kind, self.api, group=self.group, device="gpu", rail=rail)

    def period(self, rate: QueryRate | None) -> ReadPeriod:
        """How often to read it, from what polling it measured.

        Args:
            rate: What polling it measured (``rates.watch``); None: it was not polled.

        Returns:
            ``fraction`` of its change period (``paced_period``), or for a value that changes on events
            ``EVENT_PERIOD_S``, within ``choose_period``'s limits, and why.
        """
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


BY_KEY = {query.key: query for query in QUERIES}
