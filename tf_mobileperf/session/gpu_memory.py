"""GPU memory of each step: the peak of the framework's allocator.

What a GPU user means by a step's peak memory is the most memory the
framework's allocator held for tensors during the step, not the system's RAM
(``mem_peak_gb``) and not what NVML says the device has in use (the
allocator's cached pool as well, and every process's memory: NVML's
``gpu{i}_mem_used`` channel, reported as ``gpu_device_mem_peak_gb``). Each
Keras backend has its own allocator statistics:

* torch: ``torch.cuda.max_memory_allocated(device)``, reset at each step's
  begin by ``torch.cuda.reset_peak_memory_stats(device)``: the step's own peak;
* TensorFlow: ``tf.config.experimental.get_memory_info('GPU:0')['peak']``,
  reset by ``tf.config.experimental.reset_memory_stats('GPU:0')``: the step's
  own peak;
* JAX: ``Device.memory_stats()['peak_bytes_in_use']``, which JAX cannot
  reset: each step records the running peak since the process started
  (``gpu_mem_peak_cumulative: true``). A step whose value is higher than the
  step before set a new peak, and that is its own; the run's peak is exact.

The allocator is chosen once, when the measurement begins; without a GPU
every step call does nothing (one attribute test) and the report says why
the quantity is null, never 0. Only the first GPU is read (torch's current
device, TF's ``GPU:0``, JAX's first GPU).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from tf_mobileperf.session import backend
from tf_mobileperf.steps.records import GIB

if TYPE_CHECKING:
    from tf_mobileperf.sensors import Probe
    from tf_mobileperf.steps.report import Report

log = logging.getLogger(__name__)


class NoGpu(Exception):
    """The active backend has no GPU allocator to read; the message says why."""


@dataclasses.dataclass(frozen=True)
class Allocator:
    """How one backend's allocator gives its peak.

    ``read`` returns the peak in bytes since the last ``reset``; without
    ``reset`` (JAX) it is the peak since the process started."""

    source: str
    device: str
    read: Callable[[], int]
    reset: Callable[[], None] | None = None

    @property
    def cumulative(self) -> bool:
        return self.reset is None


def _torch() -> Allocator:
    import torch

    if not torch.cuda.is_available():
        raise NoGpu("no GPU device visible to torch (torch.cuda.is_available() is False)")
    device = torch.cuda.current_device()
    return Allocator(
        "torch.cuda.max_memory_allocated",
        f"cuda:{device}",
        read=lambda: torch.cuda.max_memory_allocated(device),
        reset=lambda: torch.cuda.reset_peak_memory_stats(device),
    )


def _tensorflow() -> Allocator:
    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        raise NoGpu("no GPU device visible to tensorflow (tf.config.list_physical_devices('GPU') is empty)")
    name = "GPU:0"
    experimental = tf.config.experimental
    try:
        experimental.get_memory_info(name)
    except (ValueError, RuntimeError) as exc:  # an allocator without statistics
        raise NoGpu(f"tensorflow keeps no allocator statistics for {name}: {exc}") from None
    return Allocator(
        "tf.config.experimental.get_memory_info('GPU:0')['peak']",
        name,
        read=lambda: experimental.get_memory_info(name)["peak"],
        reset=lambda: experimental.reset_memory_stats(name),
    )


def _jax() -> Allocator:
    import jax

    gpus = [d for d in jax.devices() if d.platform in ("gpu", "cuda", "rocm")]
    if not gpus:
        platforms = sorted({d.platform for d in jax.devices()})
        raise NoGpu(f"no GPU device visible to jax (jax.devices() are {', '.join(platforms)})")
    device = gpus[0]
    if "peak_bytes_in_use" not in (device.memory_stats() or {}):
        raise NoGpu(f"jax's {device} gives no peak_bytes_in_use in memory_stats()")
    return Allocator(
        "jax Device.memory_stats()['peak_bytes_in_use'] (running peak, no reset)",
        str(device),
        read=lambda: device.memory_stats()["peak_bytes_in_use"],
    )


#: The allocator of each Keras backend.
ALLOCATORS: dict[str, Callable[[], Allocator]] = {"torch": _torch, "tensorflow": _tensorflow, "jax": _jax}


def find_allocator(backend_name: str) -> Allocator:
    """The allocator of ``backend_name``.

    Args:
        backend_name: "tensorflow", "jax" or "torch"; any other has no allocator.

    Returns:
        The allocator of the backend's GPU (torch's current device, TF's ``GPU:0``, JAX's first GPU).

    Raises:
        NoGpu: saying why there is none: a backend without allocator statistics, no GPU visible to it, or its
            allocator cannot be read (the error of a broken GPU runtime or an old backend, in its message).
    """
    find = ALLOCATORS.get(backend_name)
    if find is None:
        raise NoGpu(f"the {backend_name} backend has no GPU allocator statistics")
    try:
        return find()
    except NoGpu:
        raise
    except Exception as exc:  # a broken GPU runtime, a backend too old for the call
        raise NoGpu(f"cannot read {backend_name}'s GPU allocator: {type(exc).__name__}: {exc}") from None


class GpuMemory:
    """The framework allocator's peak GPU memory of each step, for the active Keras backend.

    Args:
        backend_name: "tensorflow", "jax", "torch" or "numpy"; by default the
            active Keras backend (``tf_mobileperf.session.backend.active``).

    ``start()`` chooses the allocator once; after it, ``begin_step()`` resets
    the peak (torch, TF) and ``end_step()`` returns the step's peak in bytes,
    or None with the reason in ``unavailable``. A read that fails is logged
    once and ends the readings; it never reaches training.

    Example:
        >>> memory = GpuMemory()
        >>> memory.start()
        >>> memory.begin_step(); train_step(); peak = memory.end_step()  # doctest: +SKIP
        >>> memory.unavailable  # on a machine without a GPU                # doctest: +SKIP
        'no GPU device visible to tensorflow (...)'
    """

    def __init__(self, backend_name: str | None = None):
        self.backend_name = backend_name
        self.allocator: Allocator | None = None
        self.source: str | None = None  # the allocator's, kept if a read fails later
        self.cumulative: bool | None = None
        self.unavailable: str | None = "the measurement never began"
        self._started = False

    def start(self) -> None:
        """Chooses the allocator of the backend (once; later calls do nothing)."""
        if self._started:
            return
        self._started = True
        self.backend_name = self.backend_name or backend.active()
        try:
            self.allocator, self.unavailable = find_allocator(self.backend_name), None
            self.source, self.cumulative = self.allocator.source, self.allocator.cumulative
        except NoGpu as exc:
            self.unavailable = str(exc)
            log.debug("mobileperf: no allocator peak of GPU memory: %s", exc)

    def begin_step(self) -> None:
        """Resets the allocator's peak, where it can be reset."""
        allocator = self.allocator
        if allocator is not None and allocator.reset is not None:
            self._call(allocator, allocator.reset)

    def end_step(self) -> int | None:
        """The allocator's peak in bytes since ``begin_step`` (JAX: since the process started); None without one."""
        allocator = self.allocator
        return None if allocator is None else self._call(allocator, allocator.read)

    def end_step_gb(self) -> float | None:
        """``end_step()`` in GiB."""
        peak = self.end_step()
        return None if peak is None else peak / GIB

    def _call(self, allocator: Allocator, fn: Callable):
        """``fn()`` of ``allocator``; a failure drops the allocator for the rest of the run."""
        try:
            return fn()
        except Exception as exc:  # monitoring must never break training
            self.unavailable = f"reading {allocator.source} failed: {type(exc).__name__}: {exc}"
            log.warning("mobileperf: %s; GPU peak memory is not recorded from here on", self.unavailable)
            self.allocator = None
            return None

    def report_fields(self, report: Report, probe: Probe | None = None) -> tuple[dict, dict[str, str]]:
        """The report's run-level GPU memory fields, and the reasons of those that are null.

        Args:
            report: The run's report, its totals, channels and ``unavailable`` read.
            probe: Says why no GPU memory sensor was found; None leaves that out of the reason.

        Returns:
            (fields, reasons). Fields: ``gpu_mem_peak_gb``, the allocator's highest peak over the measured steps
            (GiB; ``gpu_mem_source`` says whose, ``gpu_mem_peak_cumulative`` whether its steps' values are running
            peaks); ``gpu_device_mem_peak_gb``, the highest device memory in use by NVML's channels (kind
            "memory", device "gpu") over the measured steps, every process's memory and the allocator's cache
            included (GiB; ``gpu_device_mem_source`` names them). Reasons: each null field -> why.
        """
        totals = report.totals
        device = [c for c in report.channels if c.kind == "memory" and c.device == "gpu"]
        peaks = [peak for v in totals.channel_summary(device).values() if (peak := v.get("peak")) is not None]
        fields = {
            "gpu_mem_peak_gb": totals.gpu_mem_peak_gb,
            "gpu_mem_source": self.source,
            "gpu_mem_peak_cumulative": self.cumulative,
            "gpu_device_mem_peak_gb": max(peaks) / GIB if peaks else None,
            "gpu_device_mem_source": ", ".join(f"{c.name} ({c.source})" for c in device) or None,
        }
        no_step = report.unavailable.get("step_time_s")
        reasons = {}
        if fields["gpu_mem_peak_gb"] is None:
            reasons["gpu_mem_peak_gb"] = self.unavailable or no_step or "no measured step has the allocator's peak"
        if fields["gpu_device_mem_peak_gb"] is None:
            reasons["gpu_device_mem_peak_gb"] = (
                no_step
                if device and no_step
                else "no measured step has a reading of GPU memory in use"
                if device
                else "no GPU memory sensor (NVML)" + (": " + probe.why_absent("memory", "gpu") if probe else "")
            )
        return fields, reasons

    def attach(self, report: Report, probe: Probe | None = None) -> Report:
        """``report`` with the GPU memory fields in its summary and their reasons in its ``unavailable``.

        Args:
            report: The run's report, changed in place (``report_fields``).
            probe: Says why no GPU memory sensor was found; None leaves that out of the reason.

        Returns:
            ``report`` itself.
        """
        report.gpu_memory, reasons = self.report_fields(report, probe)
        report.unavailable.update(reasons)
        return report
