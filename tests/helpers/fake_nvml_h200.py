"""A fake NVML (the ``pynvml`` module's API) modelled on one NVIDIA H200 as measured, for tests without a GPU.

Each behaviour below copies what was measured on an H200 (driver 580,
nvidia-ml-py 13, inside a VM; each value read every 1 ms for 1.5-2 s); the
power curve itself is invented, a known function of time so that a test can
compute the exact energy. Nothing here is a reading of hardware.

- Per-process initialisation: NVML initialised in one process and used in a
  child made by ``os.fork()`` raises ``NVMLError: Uninitialized`` on every
  call; ``nvmlInit()`` again in the child works (measured). Here the library
  is initialised in the pid that called ``nvmlInit`` only, and a handle is
  valid only in the pid that got it. A handle cannot be pickled (pynvml's are
  ctypes pointers).
- Power of GPU i: ``BASE_W[i] + SWING_W[i] * sin(2 pi t / PERIOD_S)`` W on
  ``time.monotonic()`` (invented). The hardware updates its values on a grid
  of CLOCK_MONOTONIC, so two processes see the same values:
- the total-energy counter (mJ since "driver load", an integer) is the exact
  integral of that power up to its last update instant, updated every 100 ms
  (measured 99-102 ms) and held between updates;
- the instant power field (``NVML_FI_DEV_POWER_INSTANT``) is the power at
  the last update instant, every 100 ms (measured ~100 ms);
- ``nvmlDeviceGetPowerUsage`` is the mean power over the second before the
  last update instant, every 100 ms (measured: a 1 s average updated every
  ~100 ms);
- utilization changes every 200 ms (measured); memory used only when
  allocations change (measured): constant here; the graphics clock is fixed.
- Call costs: ``nvmlDeviceGetTotalEnergyConsumption`` sleeps ``ENERGY_CALL_S``
  (measured 3.9-4.8 ms of wall time, its CPU not measured: a driver round
  trip, taken as a sleep); with ``$FAKE_NVML_ENERGY_CALL=cpu`` it spins
  instead, as a driver that polls would (``driver_wait``). Every other call
  costs what Python does (measured 0.9-5.2 us).

- Other processes on a GPU: ``PROCESSES`` (GPU index -> a list of
  ``{"pid", "used_memory_b", "sm_util"}``; ``$FAKE_NVML_PROCESSES`` as JSON
  fills it in every process) are what ``nvmlDeviceGetComputeProcesses``
  lists (``usedGpuMemory`` None where the entry has none: a container's or a
  VM's driver does not say) and ``nvmlDeviceGetProcessUtilization`` samples
  (every 200 ms, those with an ``sm_util``; NOT_FOUND when it has none, as
  NVML does with no sample since the timestamp asked for).

``FAIL`` (function name -> NVML error code) makes a call fail, e.g.
``FAIL["nvmlDeviceGetUtilizationRates"] = NVML_ERROR_GPU_IS_LOST``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from types import SimpleNamespace

BASE_W = (200.0, 120.0)
SWING_W = (50.0, 30.0)
PERIOD_S = 3.0
GPUS = len(BASE_W)
ENERGY_UPDATE_S = 0.1
POWER_UPDATE_S = 0.1
#: The power fields' update grid is this far from the counter's. On a grid in phase with ``PERIOD_S`` the
#: sine's peaks fell midway between two updates, whose values were then equal to the milliwatt: a change
#: missing every 1.5 s, which a real GPU's noisy field does not show on a schedule.
POWER_OFFSET_S = 0.037
UTIL_UPDATE_S = 0.2
ENERGY_CALL_S = 0.0043
GRAPHICS_CLOCK_MHZ = 1980
MEMORY_TOTAL = 143771 * 2**20  # an H200's 141 GB as nvidia-smi shows it (MiB)

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_GPU_IS_LOST = 15
NVML_CLOCK_GRAPHICS = 0
NVML_FI_DEV_POWER_INSTANT = 186
_WORDS = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
}

FAIL: dict[str, int] = {}
PROCESSES: dict[int, list[dict]] = {
    int(gpu): procs for gpu, procs in json.loads(os.environ.get("FAKE_NVML_PROCESSES", "{}")).items()
}
_state = {"pid": None, "count": 0}


class NVMLError(Exception):
    """As pynvml's: made from an error code, its str is NVML's words for it."""

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return nvmlErrorString(self.value)


def nvmlErrorString(result: int) -> str:
    return _WORDS.get(result, f"NVML Error with code {result}")


@dataclasses.dataclass(frozen=True)
class _Handle:
    index: int
    pid: int

    def __reduce__(self):
        raise ValueError("ctypes objects containing pointers cannot be pickled")


def _check(name: str, handle: _Handle | None = None) -> None:
    pid = os.getpid()
    if _state["pid"] != pid or _state["count"] == 0 or (handle is not None and handle.pid != pid):
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    if name in FAIL:
        raise NVMLError(FAIL[name])


def power_w(gpu: int, t: float) -> float:
    """GPU ``gpu``'s power (W) at monotonic time ``t``."""
    return BASE_W[gpu] + SWING_W[gpu] * math.sin(2 * math.pi * t / PERIOD_S)


def _energy_since_zero_j(gpu: int, t: float) -> float:
    omega = 2 * math.pi / PERIOD_S
    return BASE_W[gpu] * t + SWING_W[gpu] / omega * (1.0 - math.cos(omega * t))


def exact_energy_j(gpu: int, t0: float, t1: float) -> float:
    """The exact integral of GPU ``gpu``'s power from ``t0`` to ``t1`` (monotonic seconds), in J."""
    return _energy_since_zero_j(gpu, t1) - _energy_since_zero_j(gpu, t0)


def last_update(t: float, every_s: float, offset_s: float = 0.0) -> float:
    """The last update instant at or before ``t`` on the grid of ``every_s`` from ``offset_s`` of CLOCK_MONOTONIC."""
    return math.floor((t - offset_s) / every_s + 1e-9) * every_s + offset_s


def counter_mj(gpu: int, t: float) -> int:
    """The total-energy counter a read at ``t`` returns (mJ)."""
    return int(_energy_since_zero_j(gpu, last_update(t, ENERGY_UPDATE_S)) * 1000.0)


def nvmlInit() -> None:
    pid = os.getpid()
    if _state["pid"] != pid:  # a fresh process (or a forked child): NVML starts over here
        _state["pid"], _state["count"] = pid, 0
    _state["count"] += 1


def nvmlShutdown() -> None:
    _check("nvmlShutdown")
    _state["count"] -= 1


def nvmlDeviceGetCount() -> int:
    _check("nvmlDeviceGetCount")
    return GPUS


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    _check("nvmlDeviceGetHandleByIndex")
    if not 0 <= index < GPUS:
        raise NVMLError(2)
    return _Handle(index, os.getpid())


def nvmlDeviceGetName(handle: _Handle) -> str:
    _check("nvmlDeviceGetName", handle)
    return "NVIDIA H200"


def nvmlDeviceGetUUID(handle: _Handle) -> str:
    _check("nvmlDeviceGetUUID", handle)
    return f"GPU-fa4e0000-0000-0000-0000-00000000000{handle.index}"


def driver_wait(until: float) -> None:
    """Waits for the driver's answer until monotonic time ``until``: asleep, or spinning on the CPU where
    ``$FAKE_NVML_ENERGY_CALL`` is ``cpu``."""
    if os.environ.get("FAKE_NVML_ENERGY_CALL", "sleep") == "cpu":
        while time.monotonic() < until:
            pass
    else:
        time.sleep(max(0.0, until - time.monotonic()))


def nvmlDeviceGetTotalEnergyConsumption(handle: _Handle) -> int:
    _check("nvmlDeviceGetTotalEnergyConsumption", handle)
    driver_wait(time.monotonic() + ENERGY_CALL_S)  # the driver round trip
    return counter_mj(handle.index, time.monotonic())


def nvmlDeviceGetFieldValues(handle: _Handle, fields: list[int]) -> list[SimpleNamespace]:
    _check("nvmlDeviceGetFieldValues", handle)
    t = last_update(time.monotonic(), POWER_UPDATE_S, POWER_OFFSET_S)
    out = []
    for field in fields:
        if field == NVML_FI_DEV_POWER_INSTANT:
            milliwatts = int(power_w(handle.index, t) * 1000.0)
            out.append(SimpleNamespace(fieldId=field, nvmlReturn=NVML_SUCCESS, value=SimpleNamespace(uiVal=milliwatts)))
        else:
            out.append(SimpleNamespace(fieldId=field, nvmlReturn=NVML_ERROR_NOT_SUPPORTED, value=None))
    return out


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    _check("nvmlDeviceGetPowerUsage", handle)
    t = last_update(time.monotonic(), POWER_UPDATE_S, POWER_OFFSET_S)
    return int(exact_energy_j(handle.index, t - 1.0, t) * 1000.0)  # a 1 s mean, mW


def utilization(gpu: int, t: float) -> int:
    """GPU ``gpu``'s utilization (%) as a read at monotonic time ``t`` returns it."""
    return round(50 + 40 * math.sin(2 * math.pi * last_update(t, UTIL_UPDATE_S) / PERIOD_S + gpu))


def nvmlDeviceGetUtilizationRates(handle: _Handle) -> SimpleNamespace:
    _check("nvmlDeviceGetUtilizationRates", handle)
    gpu = utilization(handle.index, time.monotonic())
    return SimpleNamespace(gpu=gpu, memory=gpu // 2)


def nvmlDeviceGetMemoryInfo(handle: _Handle) -> SimpleNamespace:
    _check("nvmlDeviceGetMemoryInfo", handle)
    used = (10 + handle.index) * 2**30
    return SimpleNamespace(total=MEMORY_TOTAL, used=used, free=MEMORY_TOTAL - used)


def nvmlDeviceGetClockInfo(handle: _Handle, kind: int) -> int:
    _check("nvmlDeviceGetClockInfo", handle)
    if kind != NVML_CLOCK_GRAPHICS:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return GRAPHICS_CLOCK_MHZ


def nvmlDeviceGetComputeProcesses(handle: _Handle) -> list[SimpleNamespace]:
    _check("nvmlDeviceGetComputeProcesses", handle)
    return [
        SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("used_memory_b"), gpuInstanceId=0xFFFFFFFF)
        for p in PROCESSES.get(handle.index, [])
    ]


def nvmlDeviceGetProcessUtilization(handle: _Handle, last_seen_us: int) -> list[SimpleNamespace]:
    _check("nvmlDeviceGetProcessUtilization", handle)
    now_us = int(time.time() * 1e6)
    stamps = range(max(last_seen_us, now_us - 10_000_000) // 200_000 * 200_000 + 200_000, now_us, 200_000)
    samples = [
        SimpleNamespace(pid=p["pid"], timeStamp=t, smUtil=p["sm_util"], memUtil=p["sm_util"] // 2, encUtil=0, decUtil=0)
        for p in PROCESSES.get(handle.index, [])
        if p.get("sm_util") is not None
        for t in stamps
    ]
    if not samples:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return samples
