"""Whose CPU time a run used: the training process's, its children's, other processes' and the hypervisor's.

A Jetson is usually its user's alone, and the system-wide ``cpu_util`` is then
the training's own. On a shared server or a cloud VM it is not: ``cpu_util``
counts every process. This module gives each step the training process's own
CPU, and the run a ``contention`` block over its measured steps:

* ``process_cpu_util`` of a step: the CPU time of every thread of the training
  process (``time.process_time``) over the step's wall time, as a share of all
  online cores (%), the unit of ``cpu_util``;
* ``children_cpu_util``: the process's child processes (data-loader workers;
  live ones from ``/proc`` through psutil, reaped ones from
  ``RUSAGE_CHILDREN``), the monitor's own sampler process left out;
* ``other_cpu_pct``: the cores' busy time in ``/proc/stat`` (steal left out)
  less this process's, its children's and the sampler's, as a share of all
  cores: what other processes used;
* ``steal_pct``: the time the hypervisor ran other guests on these cores
  (``/proc/stat``'s steal);
* ``gpus``: per GPU that NVML measures, the other processes with a compute
  context on it and their SM utilization where the driver gives it
  (``sensors.nvml.processes``);
* ``busy_steps``: the measured steps in which others (other processes and the
  hypervisor) used more than ``STEP_OTHER_PCT`` of the cores, from the step's
  ``cpu_util`` less its ``process_cpu_util`` and the run's children's share.

The machine was busy when others used at least ``BUSY_OTHER_PCT``, the
hypervisor took at least ``BUSY_STEAL_PCT``, or another process used a GPU: step times are then longer and
vary more than on an idle machine, and the run says so in one warning.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from tf_mobileperf.sensors.nvml import NvmlSession
from tf_mobileperf.sensors.nvml.processes import busy_gpus, read_gpu_processes
from tf_mobileperf.session.cpu_times import Snapshot, StepCpu

if TYPE_CHECKING:
    from tf_mobileperf.steps.report import Report

log = logging.getLogger(__name__)

#: Others' mean share of all cores (%) over the measured steps at and above which the machine was busy.
BUSY_OTHER_PCT = 10.0
#: The hypervisor's steal (% of all cores) at and above which the machine was busy.
BUSY_STEAL_PCT = 10.0
#: Others' share of all cores (%) in one step above which that step counts in ``busy_steps``.
STEP_OTHER_PCT = 25.0


@dataclasses.dataclass
class Contention:
    """How busy the machine was with work not this run's, over the measured steps.

    Args:
        window_s: The wall time of the window (first measured step's begin to the run's end).
        process_cpu_util: This process's CPU over the window, % of all cores.
        children_cpu_util: Its child processes' (the sampler left out), % of all cores.
        other_cpu_pct: Other processes' CPU, % of all cores.
        steal_pct: The hypervisor's steal, % of all cores.
        busy_steps: Measured steps in which others used more than ``STEP_OTHER_PCT``.
        steps: Measured steps with both ``cpu_util`` and ``process_cpu_util`` known.
        gpus: Per NVML GPU index, the other processes on it (``nvml.processes.gpu_processes``).
        gpus_unavailable: Why ``gpus`` is empty (no NVML GPU, NVML would not open); None when read.
    """

    window_s: float
    process_cpu_util: float
    children_cpu_util: float
    other_cpu_pct: float
    steal_pct: float
    busy_steps: int
    steps: int
    gpus: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    gpus_unavailable: str | None = None

    @property
    def busy(self) -> bool:
        return self.other_cpu_pct >= BUSY_OTHER_PCT or self.steal_pct >= BUSY_STEAL_PCT or bool(busy_gpus(self.gpus))

    @property
    def verdict(self) -> str:
        """ "busy" or "quiet"."""
        return "busy" if self.busy else "quiet"

    @property
    def said(self) -> str:
        """The numbers in one plain sentence, and what a busy machine means for the step times."""
        per_step = (
            f"{self.busy_steps} of {self.steps} steps with others above {STEP_OTHER_PCT:.0f}%"
            if self.steps
            else "per step unknown: no step has the machine's cpu_util"
        )
        said = (
            f"other processes used {self.other_cpu_pct:.0f}% of the CPUs and the hypervisor took "
            f"{self.steal_pct:.0f}% over the measured steps ({per_step}); this process used "
            f"{self.process_cpu_util:.0f}%"
        )
        for index in busy_gpus(self.gpus):
            procs = ", ".join(
                f"pid {p['pid']} ({p['name'] or '?'}, "
                + ("SM utilization unknown" if p["sm_util"] is None else f"{p['sm_util']:.0f}% SM")
                + ")"
                for p in self.gpus[index]["other_processes"]
            )
            said += f"; GPU {index} was shared with {procs}"
        if self.busy:
            return f"{said}: the step times are longer and vary more than on an idle machine"
        return said

    def to_dict(self) -> dict[str, Any]:
        """The report's ``contention`` block: the fields, ``busy``, ``verdict``, ``said`` and the thresholds."""
        return dataclasses.asdict(self) | {
            "busy": self.busy,
            "verdict": self.verdict,
            "said": self.said,
            "thresholds_pct": {"other": BUSY_OTHER_PCT, "steal": BUSY_STEAL_PCT, "step_other": STEP_OTHER_PCT},
        }


def contention(
    begin: Snapshot, end: Snapshot, step_others: np.ndarray, gpus: tuple[dict, str | None] = ({}, None)
) -> Contention:
    """The contention between two snapshots.

    Args:
        begin: Taken at the first measured step's begin.
        end: Taken at the run's end, before the sampler stops.
        step_others: Per measured step, ``cpu_util - process_cpu_util`` (%).
        gpus: The other processes on the GPUs, and why not (``read_gpu_processes``).

    Returns:
        The window's contention, each share in % of all cores' time over the window (``/proc/stat``'s; the wall
        time times the cores where under one clock tick passed).
    """
    total = end.system.total_s - begin.system.total_s
    if total <= 0:  # under one jiffy: nothing to divide by
        total = (end.wall_s - begin.wall_s) * (os.cpu_count() or 1)

    def pct(seconds: float) -> float:
        return 100.0 * seconds / total if total > 0 else 0.0

    process = pct(end.process_s - begin.process_s)
    children = pct(end.children_s - begin.children_s)
    sampler = pct(end.sampler_s - begin.sampler_s)
    busy = pct(end.system.busy_s - begin.system.busy_s)
    steal = pct(end.system.steal_s - begin.system.steal_s)
    # busy is counted in jiffies (10 ms), the processes' times in nanoseconds: clamp the rounding at 0
    other = max(0.0, busy - process - children - sampler)
    others_in_steps = step_others - children - sampler
    return Contention(
        window_s=end.wall_s - begin.wall_s,
        process_cpu_util=process,
        children_cpu_util=children,
        other_cpu_pct=other,
        steal_pct=steal,
        busy_steps=int(np.count_nonzero(others_in_steps > STEP_OTHER_PCT)),
        steps=len(step_others),
        gpus=gpus[0],
        gpus_unavailable=gpus[1],
    )


class RunCpu:
    """A session's CPU accounting: each step's ``process_cpu_util`` and the run's ``Contention``.

    Args:
        unavailable: Why there is none (steps on a simulated clock); None to measure.
        gpu_sessions: The NVML sessions of the run's GPU sensors, for the other processes on those GPUs.

    Example::

        cpu = RunCpu()
        cpu.step_begins(measured=True, sampler_pid=None)
        ...  # the step
        step.process_cpu_util = cpu.step_ends()
        cpu.run_ends(sampler_pid=None)
        block, reason = cpu.contention(step_others)
    """

    def __init__(self, unavailable: str | None = None, gpu_sessions: list[NvmlSession] | None = None):
        self.unavailable = unavailable
        self._gpu_sessions = gpu_sessions or []
        self._gpus: tuple[dict, str | None] = ({}, "the run has not ended")
        self._step = StepCpu()
        self._begin: Snapshot | None = None
        self._end: Snapshot | None = None

    def step_begins(self, measured: bool, sampler_pid: int | None) -> None:
        """Marks a step's begin; the first measured one begins the contention window.

        Args:
            measured: The step is measured (not warm-up).
            sampler_pid: The sampler's process; None when it is a thread of this process.
        """
        if self.unavailable:
            return
        if measured and self._begin is None:
            try:
                self._begin = Snapshot.take(sampler_pid)
            except (OSError, ValueError) as exc:
                self.unavailable = f"cannot read the machine's CPU time: {exc}"
        self._step.begin()

    def step_ends(self) -> float | None:
        """The process's CPU share (%) since the step began; None when unmeasured."""
        return None if self.unavailable else self._step.share()

    def run_ends(self, sampler_pid: int | None) -> None:
        """Ends the contention window and reads the other processes on the GPUs since it began; call before
        the sampler stops (its CPU is read while it lives). Nothing without a window begun, or once ended.

        Args:
            sampler_pid: The sampler's process; None when it is a thread of this process.
        """
        if self._begin is not None and self._end is None and not self.unavailable:
            try:
                self._end = Snapshot.take(sampler_pid)
            except (OSError, ValueError) as exc:
                self.unavailable = f"cannot read the machine's CPU time: {exc}"
                return
            self._gpus = read_gpu_processes(self._gpu_sessions, int(self._begin.epoch_s * 1e6))

    def contention(self, step_others: np.ndarray) -> tuple[Contention | None, str | None]:
        """The run's contention, or None and why.

        Args:
            step_others: Per measured step, ``cpu_util - process_cpu_util`` (%).

        Returns:
            (the ``Contention``, None), or (None, why there is none: unmeasured, no measured step began, or the
            run has not ended).
        """
        if self.unavailable:
            return None, self.unavailable
        if self._begin is None:
            return None, "no measured step began"
        if self._end is None:
            return None, "the run has not ended"
        return contention(self._begin, self._end, step_others, self._gpus), None

    def attach(self, report: Report) -> Report:
        """``report`` with its ``contention`` block, or the reasons it and ``process_cpu_util_avg`` are null.

        Args:
            report: The run's report; its ``contention`` and ``unavailable`` are set in place.

        Returns:
            ``report`` itself.
        """
        block, reason = self.contention(report.totals.others)
        report.contention = block.to_dict() if block else None
        no_step = report.unavailable.get("step_time_s")  # why the run measured no step, if it did not
        if reason:
            report.unavailable["contention"] = (no_step if self._begin is None else None) or reason
        if report.totals.mean("process_cpu_util") is None:
            report.unavailable["process_cpu_util_avg"] = (
                self.unavailable or no_step or "no measured step has the process's CPU time"
            )
        return report

    def say_if_busy(self, report: Report) -> None:
        """Logs one warning when other work took the machine's CPUs or GPUs during the measured steps.

        Args:
            report: The run's report, its ``contention`` block set (``attach``); without one nothing is said.
        """
        block = report.contention
        if block and block["busy"]:
            log.warning(
                "mobileperf: the machine was busy during the measured steps: %s. Compare step times and "
                "energy only with runs on an idle machine (report: contention)",
                block["said"],
            )
