"""CPU time at an instant: this process's, its children's, the sampler's and the machine's; and each step's
share of the process's own.

``Snapshot.take`` reads them all (``/proc/stat`` for the machine, ``time.process_time`` for every thread of
this process, psutil and ``RUSAGE_CHILDREN`` for its children); ``StepCpu`` gives a step's
``process_cpu_util``. ``session.contention`` turns two snapshots into what others took.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import time

import psutil

#: /proc/stat's "cpu" line: user nice system idle iowait irq softirq steal (guest time is in user already).
_IDLE, _IOWAIT, _STEAL = 3, 4, 7


@dataclasses.dataclass(frozen=True)
class SystemTimes:
    """All cores' time from ``/proc/stat``'s "cpu" line, in seconds: busy (steal left out), steal, all."""

    busy_s: float
    steal_s: float
    total_s: float


def read_system(path: str | os.PathLike = "/proc/stat") -> SystemTimes:
    """All cores' busy, steal and total time since boot.

    Args:
        path: The file to read, in ``/proc/stat``'s format.

    Returns:
        The times, in seconds (the file's clock ticks over ``SC_CLK_TCK``).

    Raises:
        OSError: ``path`` cannot be read.
        ValueError: it has no "cpu" line of at least 8 numbers.
    """
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(b"cpu "):
                fields = [int(x) for x in line.split()[1:9]]
                break
        else:
            raise ValueError(f"{path} has no 'cpu' line")
    if len(fields) < 8:
        raise ValueError(f"{path}'s 'cpu' line has {len(fields)} fields, not 8")
    hz = os.sysconf("SC_CLK_TCK")
    idle = fields[_IDLE] + fields[_IOWAIT]
    steal = fields[_STEAL]
    total = sum(fields)
    return SystemTimes(busy_s=(total - idle - steal) / hz, steal_s=steal / hz, total_s=total / hz)


def steal_s(path: str | os.PathLike = "/proc/stat") -> float | None:
    """The hypervisor's steal since boot: CPU seconds, all cores summed, in 10 ms ticks.

    Args:
        path: The file to read, in ``/proc/stat``'s format.

    Returns:
        The seconds, or None where the file cannot be read or has no steal field.
    """
    try:
        return read_system(path).steal_s
    except (OSError, ValueError):
        return None


def children_cpu_s(exclude: int | None = None) -> float:
    """CPU seconds of this process's children: the live ones and their descendants (psutil), and those
    reaped (``RUSAGE_CHILDREN``).

    Args:
        exclude: The pid of a live child (the sampler) left out with its descendants; None leaves none out.

    Returns:
        User plus system seconds since each began; a child that exits while it is read is left out.
    """
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = usage.ru_utime + usage.ru_stime
    skip = set()
    me = psutil.Process()
    if exclude is not None:
        try:
            sampler = psutil.Process(exclude)
            skip = {exclude} | {p.pid for p in sampler.children(recursive=True)}
        except psutil.Error:
            pass
    for child in me.children(recursive=True):
        if child.pid in skip:
            continue
        try:
            times = child.cpu_times()
        except psutil.Error:  # it exited since it was listed
            continue
        total += times.user + times.system
    return total


def process_cpu_s(pid: int | None) -> float:
    """CPU seconds of process ``pid``.

    Args:
        pid: The process; None gives 0.0.

    Returns:
        Its user plus system seconds; 0.0 for a process that is gone or cannot be read.
    """
    if pid is None:
        return 0.0
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """CPU time at one instant: this process's, its children's, the sampler's and the machine's (seconds)."""

    wall_s: float
    epoch_s: float  # time.time(), for NVML's per-process samples
    process_s: float
    children_s: float
    sampler_s: float
    system: SystemTimes

    @classmethod
    def take(cls, sampler_pid: int | None, stat: str | os.PathLike = "/proc/stat") -> Snapshot:
        """Reads them all now.

        Args:
            sampler_pid: The monitor's sampler process; None when it is a thread of this process, whose CPU is
                then the process's.
            stat: The file read for the machine's times, in ``/proc/stat``'s format.

        Returns:
            A snapshot of every time, in seconds.

        Raises:
            OSError, ValueError: ``/proc/stat`` cannot be read (see ``read_system``).
        """
        return cls(
            wall_s=time.monotonic(),
            epoch_s=time.time(),
            process_s=time.process_time(),
            children_s=children_cpu_s(exclude=sampler_pid),
            sampler_s=process_cpu_s(sampler_pid),
            system=read_system(stat),
        )


class StepCpu:
    """The training process's own CPU in each step, as a share of all online cores (%).

    ``begin()`` at a step's begin, ``share()`` at its end; two clock reads each
    (about a microsecond). The wall time is ``time.monotonic``'s, whatever
    clock the steps are marked on.
    """

    def __init__(self) -> None:
        self.cores = os.cpu_count() or 1
        self._begin: tuple[float, float] | None = None

    def begin(self) -> None:
        """Marks a step's begin: reads the wall clock and the process's CPU time."""
        self._begin = (time.monotonic(), time.process_time())

    def share(self) -> float | None:
        """The process's CPU since ``begin()`` (%), None without a begin or over no time."""
        if self._begin is None:
            return None
        wall0, cpu0 = self._begin
        self._begin = None
        wall = time.monotonic() - wall0
        return 100.0 * (time.process_time() - cpu0) / (wall * self.cores) if wall > 0 else None
