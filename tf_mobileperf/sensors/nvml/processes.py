"""The other processes on the GPUs a run measured, from NVML: who else used the GPU while it trained.

``nvmlDeviceGetComputeProcesses`` lists the processes with a compute context
on a GPU, with the device memory each holds (None where the driver does not
say: a container, a VM without the rights); ``nvmlDeviceGetProcessUtilization``
gives their SM utilization samples since a timestamp (wall-clock
microseconds), where the driver keeps them (NOT_FOUND: no sample since then;
NOT_SUPPORTED on many boards). A process is this run's when it is the
training process or one of its children; every other one is listed.

Inside a container, NVML may give the host's pids, which match none of this
container's: the run's own process is then absent from the list, and the
result says so (``own_pid_listed: false``) rather than calling it another's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

import psutil

from tf_mobileperf.sensors.errors import SensorReadError
from tf_mobileperf.sensors.nvml import NvmlSession

log = logging.getLogger(__name__)

#: A GPU process's mean SM utilization (%) at and above which it counts as using the GPU.
GPU_BUSY_SM_PCT = 5.0


def own_pids() -> set[int]:
    """This process and its live descendants."""
    me = psutil.Process()
    return {me.pid} | {p.pid for p in me.children(recursive=True)}


def _name(pid: int) -> str | None:
    try:
        return psutil.Process(pid).name()
    except psutil.Error:  # gone, or another pid namespace's
        return None


def _sm_util(nvml, handle, since_us: int) -> tuple[dict[int, float], str | None]:
    """pid -> mean SM utilization (%) of its samples since ``since_us``, or why there are none."""
    try:
        samples = nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
    except nvml.NVMLError as exc:
        return {}, f"nvmlDeviceGetProcessUtilization: {exc}"
    by_pid: dict[int, list[float]] = {}
    for s in samples:
        by_pid.setdefault(int(s.pid), []).append(float(s.smUtil))
    return {pid: sum(v) / len(v) for pid, v in by_pid.items()}, None


def gpu_processes(session: NvmlSession, since_us: int, own: Iterable[int] | None = None) -> dict[str, dict[str, Any]]:
    """Per GPU index (a string): the processes with a compute context that are not this run's.

    Args:
        session: The NVML session of the sensor that measured the GPUs.
        since_us: Utilization samples from this wall-clock instant on (microseconds since the epoch).
        own: The run's pids; this process and its children when None.

    Returns:
        ``{"0": {"other_processes": [{"pid", "name", "used_memory_gb", "sm_util"}], "own_pid_listed": bool,
        "sm_util_unavailable": str | None}}``; a GPU NVML cannot list has ``"unavailable"`` instead.

    Raises:
        SensorReadError: NVML cannot be opened in this process.
    """
    own = set(own_pids() if own is None else own)
    nvml = session.nvml
    out: dict[str, dict[str, Any]] = {}
    for index, handle in session.handles().items():
        try:
            listed = nvml.nvmlDeviceGetComputeProcesses(handle)
        except nvml.NVMLError as exc:
            out[str(index)] = {"unavailable": f"nvmlDeviceGetComputeProcesses: {exc}"}
            continue
        util, why = _sm_util(nvml, handle, since_us)
        others = []
        for p in listed:
            pid = int(p.pid)
            if pid in own:
                continue
            memory = getattr(p, "usedGpuMemory", None)
            others.append(
                {
                    "pid": pid,
                    "name": _name(pid),
                    "used_memory_gb": None if memory is None else memory / 2**30,
                    "sm_util": util.get(pid),
                }
            )
        out[str(index)] = {
            "other_processes": others,
            "own_pid_listed": any(int(p.pid) in own for p in listed),
            "sm_util_unavailable": why,
        }
    return out


def busy_gpus(gpus: dict[str, dict[str, Any]]) -> list[str]:
    """The GPUs with another process on them that used them.

    Args:
        gpus: Per GPU index, its processes as ``gpu_processes`` gives them.

    Returns:
        The indices of the GPUs with another process at ``GPU_BUSY_SM_PCT`` SM utilization or more, or of
        unknown utilization.
    """
    return [
        index
        for index, gpu in gpus.items()
        if any(p["sm_util"] is None or p["sm_util"] >= GPU_BUSY_SM_PCT for p in gpu.get("other_processes", []))
    ]


def read_gpu_processes(sessions: list[NvmlSession], since_us: int) -> tuple[dict[str, dict[str, Any]], str | None]:
    """``gpu_processes`` of every session (each GPU once), or {} and why not.

    Args:
        sessions: The NVML sessions of the sensors that measured the GPUs.
        since_us: Utilization samples from this wall-clock instant on (microseconds since the epoch).

    Returns:
        (per GPU index, its other processes; None), or ({}, why not): no session, NVML could not be opened,
        or the library lacks these calls.
    """
    if not sessions:
        return {}, "no NVML GPU is measured"
    out: dict[str, dict[str, Any]] = {}
    try:
        for session in sessions:
            out |= gpu_processes(session, since_us)
    except SensorReadError as exc:
        return {}, str(exc)
    except AttributeError as exc:  # a library older than these calls
        return {}, f"this NVML library cannot list a GPU's processes: {exc}"
    log.debug("GPU processes in pid %d: %s", os.getpid(), out)
    return out, None
