"""Background sampling of sensors on a fixed grid of the monotonic clock.

Why a separate process: in the training process a Python thread waits for
the GIL while TensorFlow's Python side runs, and its intervals stretch to
100+ ms (figures in the README, from ``benchmarks/sampling.py``). A forked
child has its own interpreter and, where the OS allows it, SCHED_FIFO
(``priority.choose``), which keeps the 5 ms grid within a fraction of a
millisecond while every core trains. Its ticks run in C where built
(``native``); it wakes only when a sensor is due (``schedule``), so a row's
columns of sensors not read in it are NaN, as after a failed read.

The child writes rows (time, channel values...) in place into a
shared-memory ring; the parent ``drain()``s them as numpy arrays while
sampling goes on. It belongs to the process that started it
(``owner_pid``): forked with ``os.fork()`` and reaped with ``waitpid``,
outside multiprocessing's registry, so a process the trainer forks in turn
inherits nothing that stops it; it exits when its parent dies.
``health()`` says when it died or stalled; ``restart()`` forks a new one
that goes on writing into the same ring. A read that raises or returns
anything but real numbers is a failed read of that sensor (``errors()``);
a hung read is taken over by the watchdog (``loop.SamplingLoop``).

This module is the owner's side; the worker's loop is ``loop``, the forked
child's life ``child``, the memory they share ``ring``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import threading
import time
from typing import Sequence

import numpy as np

from tf_mobileperf.sampling.child import SamplerProcess
from tf_mobileperf.sampling import native
from tf_mobileperf.sampling.loop import SamplingLoop
from tf_mobileperf.sampling.schedule import plan
from tf_mobileperf.sampling.ring import EPOCH, ERRORS, REALTIME, SharedRing
from tf_mobileperf.sensors.base import Channel, Sensor

log = logging.getLogger(__name__)

#: Below this the loop cannot keep up in Python (measured: benchmarks/sampling.py).
MIN_PERIOD_MS = 0.5


def check_period(period_ms: float) -> float:
    """Returns ``period_ms`` if the sampler can do it, else raises TypeError/ValueError."""
    if isinstance(period_ms, bool) or not isinstance(period_ms, (int, float)) or not math.isfinite(period_ms):
        raise TypeError(f"sample period must be a finite number of ms, got {period_ms!r}")
    if period_ms < MIN_PERIOD_MS:
        raise ValueError(f"sample period must be >= {MIN_PERIOD_MS} ms (what the sampler can sustain), got {period_ms}")
    return float(period_ms)


def silence_limit_s(period_s: float) -> float:
    """How long without a new row before ``health()`` calls the sampler stalled."""
    return max(1.0, 50 * period_s)


@dataclasses.dataclass
class Samples:
    """Rows drained from the sampler: ``t`` (n,) seconds, ``values`` (n, channels)."""

    t: np.ndarray
    values: np.ndarray
    channels: list[Channel]

    def __len__(self) -> int:
        return len(self.t)


class Sampler:
    """Reads sensors every ``period_ms`` in the background.

    Args:
        sensors: The sensors to read (see ``tf_mobileperf.sensors.detect``).
        period_ms: Requested sampling period; the seed uses 5 ms.
        mode: "process" (forked child, default where fork exists), or
            "thread" (in this process; simpler, but suffers from the GIL).
        capacity: Rows the ring holds between two drains (default 2**16,
            5.5 min at 200 Hz); older rows are counted as dropped.
        realtime: Ask for SCHED_FIFO in the child (silently refused without
            privileges; ``realtime_granted`` tells).
        priority_reason: Why SCHED_FIFO was asked for or not, for the report.

    Only the process that created it (``owner_pid``) starts, stops or
    restarts it; in any other (a forked child of the trainer) those calls do
    nothing, and ``health()`` is None.

    Example:
        >>> sampler = Sampler(detect(), period_ms=5.0)     # doctest: +SKIP
        >>> sampler.start(); time.sleep(1); rows = sampler.drain(); sampler.stop()
    """

    def __init__(
        self,
        sensors: Sequence[Sensor],
        period_ms: float = 5.0,
        mode: str = "auto",
        capacity: int = 1 << 16,
        realtime: bool = True,
        priority_reason: str = "",
    ):
        check_period(period_ms)
        if mode == "auto":
            mode = "process" if hasattr(os, "fork") else "thread"
        if mode not in ("process", "thread"):
            raise ValueError(f"mode must be 'auto', 'process' or 'thread', got {mode!r}")
        names = [c.name for s in sensors for c in s.channels]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"channel names appear in more than one sensor: {duplicated}")
        self.sensors = list(sensors)
        self.channels = [c for s in self.sensors for c in s.channels]
        self.period_s = period_ms / 1000.0
        self.mode = mode
        self.realtime = realtime
        self.priority_reason = priority_reason
        self.owner_pid = os.getpid()
        self._shared = SharedRing(capacity, 1 + len(self.channels), len(self.sensors))
        self._active = False  # between start() and stop()
        self._child = SamplerProcess()  # process mode
        self._thread: threading.Thread | None = None
        self._loop: SamplingLoop | None = None  # thread mode
        self._started_at = 0.0
        self._rows_at_start = 0
        self._lifecycle = threading.RLock()  # start, stop and restart may come from the monitor's thread too
        self._read = 0
        self.dropped = 0

    @property
    def pid(self) -> int | None:
        """The sampler child's pid (process mode, while started)."""
        return self._child.pid

    @property
    def rows_written(self) -> int:
        """Rows written since the sampler was created (over restarts)."""
        return self._shared.count()

    @property
    def running(self) -> bool:
        """Whether this process's worker is alive (False in a process that does not own it)."""
        if not self._owner():
            return False
        if self.mode == "process":
            return self._child.alive()
        return self._thread is not None and self._thread.is_alive()

    @property
    def row_period_s(self) -> float:
        """How often a row is written: the sampler wakes only when its fastest sensor is due."""
        return self.period_s * plan([s.min_period_s for s in self.sensors], self.period_s)[1]

    @property
    def tick_loop(self) -> str:
        """Which loop runs the ticks: "C" (the forked child with the built library), else "Python" and why."""
        if self.mode == "thread":
            return "Python (thread mode)"
        return "C" if native.load() is not None else f"Python ({native.why_not()})"

    @property
    def realtime_granted(self) -> bool:
        return self.mode == "process" and bool(self._shared.header[REALTIME])

    def start(self) -> "Sampler":
        """Starts sampling; a second call while running does nothing."""
        if self._owned("start"):
            with self._lifecycle:
                if not self.running:
                    self._start()
        return self

    def _start(self) -> None:
        self._retire()  # a worker that died is reaped; the new one gets a new epoch
        epoch = self._shared.header[EPOCH] + 1
        self._shared.header[EPOCH] = epoch
        self._started_at = time.monotonic()
        self._rows_at_start = self._shared.count()
        self._active = True
        if self.mode == "process":
            native.load()  # dlopen here: in a child forked from a threaded trainer it could deadlock
            loop = SamplingLoop(self.sensors, self.period_s, self._shared, epoch, parent=os.getpid())
            self._child.fork(loop, self._shared, self.realtime)
        else:
            self._shared.header[REALTIME] = 0
            self._loop = SamplingLoop(self.sensors, self.period_s, self._shared, epoch, parent=None)
            self._thread = threading.Thread(target=self._loop.run, args=(False,), daemon=True,
                                            name="mobileperf-sampler")
            self._thread.start()

    def wait_for_first_row(self, timeout_s: float = 2.0) -> bool:
        """Blocks until the first row since ``start()`` is written (a forked child takes a moment)."""
        deadline = time.monotonic() + timeout_s
        while self._shared.count() == self._rows_at_start and time.monotonic() < deadline and self.running:
            time.sleep(0.0005)
        return self._shared.count() > self._rows_at_start

    def stop(self) -> None:
        """Stops sampling (idempotent); rows not yet drained stay drainable."""
        if self._owned("stop"):
            with self._lifecycle:
                self._active = False
                self._retire(grace_s=2.0)

    def restart(self) -> None:
        """Ends the worker (killed if it still runs) and starts a fresh one on the same ring.

        The row count goes on, rows not yet drained stay drainable."""
        if self._owned("restart"):
            with self._lifecycle:
                self._retire(grace_s=0.0)
                self._start()

    def health(self) -> str | None:
        """None while sampling runs as it should; else why not, in one line. Cheap."""
        if not self._active or not self._owner():
            return None
        ended = self._child.reap() if self.mode == "process" else None
        if ended is not None:
            return f"sampler process exited ({ended})"
        thread = self._thread
        if self.mode == "thread" and not (thread and thread.is_alive()):
            return "sampler thread ended"
        count = self._shared.count()
        last = self._started_at
        if count > self._rows_at_start:
            last = max(last, float(self._shared.ring[(count - 1) % len(self._shared.ring), 0]))
        silent = time.monotonic() - last
        if silent > silence_limit_s(self.row_period_s):
            return f"sampler wrote no row for {silent:.1f} s"
        return None

    def _owner(self) -> bool:
        return os.getpid() == self.owner_pid

    def _owned(self, action: str) -> bool:
        if self._owner():
            return True
        log.debug("mobileperf: %s of the sampler ignored in pid %d (it belongs to pid %d)",
                  action, os.getpid(), self.owner_pid)
        return False

    def _retire(self, grace_s: float = 0.0) -> None:
        """Ends the worker: a new epoch stops its writes; a child still there after ``grace_s`` is killed."""
        if self._loop is not None:
            with self._loop.lock:  # a thread worker's row in progress is written before, or not at all
                self._shared.header[EPOCH] += 1
        else:
            self._shared.header[EPOCH] += 1
        if self._thread is not None:
            self._thread.join(timeout=grace_s)
            self._thread = self._loop = None
        self._child.end(grace_s)

    def drain(self) -> Samples:
        """Returns the rows written since the last drain, oldest first."""
        ring = self._shared.ring
        capacity = ring.shape[0]
        end = self._shared.count()
        start = max(self._read, end - capacity)
        self.dropped += start - self._read
        idx = np.arange(start, end) % capacity
        rows = ring[idx].copy()
        # Rows the writer may have overwritten while we copied are dropped too; the writer fills the
        # row after the last published one in place, so the oldest row is overwritten one count early.
        overwritten = self._shared.count() + 1 - capacity - start
        if overwritten > 0:
            rows = rows[overwritten:]
            self.dropped += overwritten
        self._read = end
        return Samples(rows[:, 0], rows[:, 1:], self.channels)

    def errors(self) -> dict[str, int]:
        """Failed reads per sensor so far (raised, returned no numbers, or missed
        their deadline; their channels read NaN; the monitor warns once when
        that makes a gap). Sensors of the same name are summed."""
        counts: dict[str, int] = {}
        for i, s in enumerate(self.sensors):
            counts[s.name] = counts.get(s.name, 0) + self._shared.header[ERRORS + i]
        return counts

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
