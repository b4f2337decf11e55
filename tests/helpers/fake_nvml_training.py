"""A fake NVML (the ``pynvml`` module's API) of one GPU under training, as hard as the device, for tests
without a GPU.

``fake_nvml_h200`` copies what one H200 showed while idle or under a smooth
load; this one adds what a real training run adds (published and measured,
``shared/reference.md``):

- Power follows the trainer's steps: ``BUSY_W`` while a step's kernels run,
  ``IDLE_W`` in the gaps between steps. The test says when the GPU is busy
  (``mark``): the instants go to the file named by ``$FAKE_NVML_STEPS``, which
  every process (the sampler's too) reads, so all see one GPU.
- Update instants are not an exact grid: update k is at ``k * UPDATE_S`` plus
  a jitter of up to ``JITTER_S`` either way (measured 99-102 ms apart), the
  same in every process.
- The total-energy counter (mJ, an integer) is the exact integral of the power
  up to its last update. One call takes 3.9-4.8 ms (``ENERGY_CALL_S``, a
  driver round trip: a sleep, or spinning as in ``driver_wait``) and its value is the counter at a random
  instant inside the call, so a stamp at the call's middle is off by up to
  half the call.
- The instant power field (``NVML_FI_DEV_POWER_INSTANT``) is the mean power
  of the ``INSTANT_WINDOW_S`` (25 ms) before each update: the part-time power
  measurement of A100/H100, which never sees 75% of the time.
- ``nvmlDeviceGetPowerUsage`` is the mean power of the second before each
  update.
- Utilization is the busy share (%) of the ``UTIL_S`` (200 ms) before each of
  its updates, so a per-step value straddles steps and gaps.
- ``nvmlInit``/``nvmlShutdown`` are reference-counted per process, and a
  forked child starts uninitialised (``fake_nvml_h200``'s rules).

Wrong devices, for the checks that must catch them: ``$FAKE_NVML_COUNTER_SCALE``
makes the counter run that many times the power it reports (1.3: 30% fast);
``$FAKE_NVML_UTIL`` pins utilization to a value (0: stuck);
``$FAKE_NVML_FREEZE_AFTER_STEPS`` stops the counter when that many steps
have begun, while the power fields go on; ``$FAKE_NVML_RELOAD_AFTER_STEPS``
reloads the driver then: the counter starts again from 0 and updates on a
clock ``RELOAD_OFFSET_S`` out of phase with the old one.

``Schedule`` holds busy intervals in memory and computes every value at any
instant without sleeping, for tests that generate many runs.
"""

from __future__ import annotations

import bisect
import math
import os
import random
import time
from types import SimpleNamespace

import numpy as np

from helpers.fake_nvml_h200 import (  # noqa: F401  (re-exported: the API this module is)
    FAIL,
    GRAPHICS_CLOCK_MHZ,
    MEMORY_TOTAL,
    NVML_CLOCK_GRAPHICS,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_UNINITIALIZED,
    NVML_FI_DEV_POWER_INSTANT,
    NVML_SUCCESS,
    PROCESSES,
    NVMLError,
    _check,
    _Handle,
    driver_wait,
    nvmlDeviceGetClockInfo,
    nvmlDeviceGetComputeProcesses,
    nvmlDeviceGetProcessUtilization,
    nvmlErrorString,
    nvmlInit,
    nvmlShutdown,
)

IDLE_W = 150.0
BUSY_W = 350.0
UPDATE_S = 0.1
JITTER_S = 0.001
UTIL_S = 0.2
INSTANT_WINDOW_S = 0.025
AVERAGE_S = 1.0
ENERGY_CALL_S = (0.0039, 0.0048)
GPUS = 1
RELOAD_OFFSET_S = 0.043
STEPS_ENV = "FAKE_NVML_STEPS"


def _jitter(k: int) -> float:
    """A fixed pseudo-random number in [-1, 1] per update index (the same in every process)."""
    x = math.sin(k * 12.9898) * 43758.5453
    return 2.0 * (x - math.floor(x)) - 1.0


def last_update(t: float, every_s: float = UPDATE_S, offset_s: float = 0.0) -> float:
    """The last jittered update instant of a grid of ``every_s`` at or before ``t``: one of the three grid
    points around ``t``, the jitter being under half a period (plain Python: a call of the fake costs
    microseconds, as NVML's do, so that the sampler's CPU measured over it is the sampler's)."""
    k = math.floor((t - offset_s) / every_s)
    return next(u for i in (k + 1, k, k - 1) if (u := i * every_s + offset_s + JITTER_S * _jitter(i)) <= t)


class Schedule:
    """When the GPU was busy: sorted edges, busy from each even one to the next (to now while open)."""

    def __init__(self, edges=()):
        self.edges = np.asarray(edges, dtype=np.float64)
        closed = self.edges if len(self.edges) % 2 == 0 else np.append(self.edges, np.inf)
        self._starts, self._ends = closed[0::2].tolist(), closed[1::2].tolist()
        self._done = np.concatenate([[0.0], np.cumsum(closed[1::2] - closed[0::2])]).tolist()

    @classmethod
    def from_steps(cls, starts, ends) -> Schedule:
        return cls(np.column_stack([starts, ends]).ravel())

    def busy_s_to(self, x) -> np.ndarray:
        """Busy seconds from the first edge to each ``x``."""
        x = np.atleast_1d(np.asarray(x, dtype=np.float64))
        edges = self.edges if len(self.edges) % 2 == 0 else np.append(self.edges, np.inf)
        s, e = edges[0::2], edges[1::2]
        return (np.clip(x[:, None], s, e) - s).sum(axis=1)

    def busy_s_at(self, x: float) -> float:
        """``busy_s_to`` of one instant, in plain Python (bisect over the edges)."""
        i = bisect.bisect_right(self._ends, x)  # windows ended by x
        inside = max(0.0, x - self._starts[i]) if i < len(self._starts) else 0.0
        return self._done[i] + inside

    def energy_j(self, t0, t1) -> np.ndarray:
        """The exact integral of the power from ``t0`` to ``t1`` (J)."""
        t0, t1 = np.asarray(t0, dtype=np.float64), np.asarray(t1, dtype=np.float64)
        return IDLE_W * (t1 - t0) + (BUSY_W - IDLE_W) * (self.busy_s_to(t1) - self.busy_s_to(t0)).reshape(t1.shape)

    def counter_mj(self, t: float, scale: float = 1.0, reload_at: float | None = None) -> int:
        """The counter a read whose value is taken at ``t`` returns: from 0 at monotonic time 0, or from 0 at
        ``reload_at`` on a clock ``RELOAD_OFFSET_S`` out of phase once the driver reloaded."""
        since, u = 0.0, last_update(t)
        if reload_at is not None and t >= reload_at:
            since, u = reload_at, max(reload_at, last_update(t, offset_s=RELOAD_OFFSET_S))
        joules = IDLE_W * (u - since) + (BUSY_W - IDLE_W) * (self.busy_s_at(u) - self.busy_s_at(since))
        return int(scale * joules * 1000.0)

    def _mean_w(self, t0: float, t1: float) -> float:
        return IDLE_W + (BUSY_W - IDLE_W) * (self.busy_s_at(t1) - self.busy_s_at(t0)) / (t1 - t0)

    def instant_power_w(self, t: float) -> float:
        u = last_update(t, offset_s=0.037)
        return self._mean_w(u - INSTANT_WINDOW_S, u)

    def average_power_w(self, t: float) -> float:
        u = last_update(t, offset_s=0.037)
        return self._mean_w(u - AVERAGE_S, u)

    def util(self, t: float) -> int:
        u = last_update(t, UTIL_S, offset_s=0.011)
        return round(100.0 * (self.busy_s_at(u) - self.busy_s_at(u - UTIL_S)) / UTIL_S)


_IDLE = Schedule()


# -- the trainer's side ----------------------------------------------------------------------------------------
def mark(busy: bool) -> float:
    """Says the GPU turns busy (or idle) now; returns the instant (``time.monotonic()``)."""
    t = time.monotonic()
    with open(os.environ[STEPS_ENV], "ab") as f:
        f.write(np.float64(t).tobytes())
    assert busy == (os.path.getsize(os.environ[STEPS_ENV]) // 8 % 2 == 1), "marks alternate busy, idle"
    return t


_read: dict[str, tuple[int, Schedule]] = {}  # path -> (its size when read, its schedule): the file only grows


def schedule() -> Schedule:
    """What the trainer marked so far (idle all along without ``$FAKE_NVML_STEPS``)."""
    path = os.environ.get(STEPS_ENV)
    try:
        size = os.stat(path).st_size if path else -1
    except FileNotFoundError:
        size = -1
    if size < 0:
        return _IDLE
    if _read.get(path, (None,))[0] != size:
        _read[path] = (size, Schedule(np.fromfile(path, dtype=np.float64, count=size // 8)))
    return _read[path][1]


# -- the API ---------------------------------------------------------------------------------------------------
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
    return "NVIDIA H100 80GB HBM3 (fake, training)"


def nvmlDeviceGetUUID(handle: _Handle) -> str:
    _check("nvmlDeviceGetUUID", handle)
    return f"GPU-7a1e0000-0000-0000-0000-00000000000{handle.index}"


def nvmlDeviceGetTotalEnergyConsumption(handle: _Handle) -> int:
    _check("nvmlDeviceGetTotalEnergyConsumption", handle)
    start = time.monotonic()
    cost = random.uniform(*ENERGY_CALL_S)
    busy, at = schedule(), start + random.random() * cost
    frozen, reload = (
        2 * int(os.environ.get(f"FAKE_NVML_{what}_AFTER_STEPS", 10**9)) - 2 for what in ("FREEZE", "RELOAD")
    )
    if len(busy.edges) > frozen:  # the begin of the last step before the counter froze
        at = min(at, float(busy.edges[frozen]))
    reload_at = float(busy.edges[reload]) if len(busy.edges) > reload else None
    value = busy.counter_mj(at, float(os.environ.get("FAKE_NVML_COUNTER_SCALE", 1)), reload_at)
    driver_wait(start + cost)
    return value


def nvmlDeviceGetFieldValues(handle: _Handle, fields: list[int]) -> list[SimpleNamespace]:
    _check("nvmlDeviceGetFieldValues", handle)
    out = []
    for field in fields:
        if field == NVML_FI_DEV_POWER_INSTANT:
            milliwatts = int(schedule().instant_power_w(time.monotonic()) * 1000.0)
            out.append(SimpleNamespace(fieldId=field, nvmlReturn=NVML_SUCCESS, value=SimpleNamespace(uiVal=milliwatts)))
        else:
            out.append(SimpleNamespace(fieldId=field, nvmlReturn=NVML_ERROR_NOT_SUPPORTED, value=None))
    return out


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    _check("nvmlDeviceGetPowerUsage", handle)
    return int(schedule().average_power_w(time.monotonic()) * 1000.0)


def nvmlDeviceGetUtilizationRates(handle: _Handle) -> SimpleNamespace:
    _check("nvmlDeviceGetUtilizationRates", handle)
    pinned = os.environ.get("FAKE_NVML_UTIL")
    gpu = int(pinned) if pinned is not None else schedule().util(time.monotonic())
    return SimpleNamespace(gpu=gpu, memory=gpu // 2)


def nvmlDeviceGetMemoryInfo(handle: _Handle) -> SimpleNamespace:
    _check("nvmlDeviceGetMemoryInfo", handle)
    used = 10 * 2**30
    return SimpleNamespace(total=MEMORY_TOTAL, used=used, free=MEMORY_TOTAL - used)
