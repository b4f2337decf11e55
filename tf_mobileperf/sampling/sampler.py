"""Background sampling of sensors on a fixed grid of the monotonic clock: the owner's side.

Why a separate process: in the training process a Python thread waits for the GIL while TensorFlow's Python
side runs, and its intervals stretch to 100+ ms (figures in the README, from ``benchmarks/sampling.py``). A
sampler process has its own interpreter and, where the OS allows it, SCHED_FIFO (``priority.choose``), which
keeps the 5 ms grid within a fraction of a millisecond while every core trains. Its ticks run in C where built
(``native``); it wakes only when a sensor is due (``schedule``), so a row's columns of sensors not read in it
are NaN, as after a failed read.

The process is started fresh or forked (``start_choice``). It writes rows into a shared-memory ring (``ring``)
that the owner ``drain()``s while sampling goes on (``drain``). It belongs to the process that started it
(``owner_pid``), is reaped with ``waitpid`` outside multiprocessing's registry (so a process the trainer forks
inherits nothing that stops it), and exits when its parent dies (``child``, ``worker``). ``health()`` says when
it died or stalled; ``restart()`` starts a new one on the same ring. A read that raises or gives anything but a
real number is a failed read (``errors()``, its words in ``error_texts()``); a hung read is taken over by the
watchdog (``watchdog.HungReadWatchdog``). The worker's loop is ``loop``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence

from tf_mobileperf.sampling import native
from tf_mobileperf.sampling.child import SamplerProcess, spawn_settings
from tf_mobileperf.sampling.drain import RingReader
from tf_mobileperf.sampling.loop import SamplingLoop
from tf_mobileperf.sampling.period import check_period, silence_limit_s
from tf_mobileperf.sampling.ring import EPOCH, REALTIME, SharedRing
from tf_mobileperf.sampling.samples import Samples
from tf_mobileperf.sampling.schedule import grid_periods, plan
from tf_mobileperf.sampling.start_choice import start_choice
from tf_mobileperf.sensors.base import Sensor

log = logging.getLogger(__name__)

#: How a sampler process may be started (``Sampler(start=...)``).
STARTS = ("auto", "spawn", "fork")

#: How long ``wait_for_first_row`` waits by default; it returns as soon as the first row is there.
FIRST_ROW_TIMEOUT_S = 10.0


class Sampler:
    """Reads sensors every ``period_s`` seconds in the background.

    Args:
        sensors: The sensors to read (see ``tf_mobileperf.sensors.detect``).
        period_s: Requested sampling period, seconds (at least ``period.MIN_PERIOD_S``); the paper uses 5 ms.
        mode: "process" (a sampler process, default where fork exists), or "thread" (in this process: the GIL).
        start: How the sampler process starts: "spawn" (a fresh interpreter the sensors are pickled to), "fork",
            or "auto" (spawn where the sensors can be pickled to a fresh process, else fork: ``start_reason``).
        capacity: Rows the ring holds between two drains (default 2**16, 5.5 min at 200 Hz); older are dropped.
        realtime: Ask for SCHED_FIFO in the sampler process (refused without privileges: ``realtime_granted``).
        priority_reason: Why SCHED_FIFO was asked for or not, for the report.

    Only the process that created it (``owner_pid``) starts, stops or restarts it; in any other (a forked child
    of the trainer) those calls do nothing, and ``health()`` is None.

    Raises:
        ValueError: a bad ``mode`` or ``start``, channel names that repeat, or ``start="spawn"`` with sensors
            that cannot be pickled.

    Example:
        >>> sampler = Sampler(detect(), period_s=0.005)     # doctest: +SKIP
        >>> sampler.start(); time.sleep(1); rows = sampler.drain(); sampler.stop()
    """

    def __init__(
        self,
        sensors: Sequence[Sensor],
        period_s: float = 0.005,
        mode: str = "auto",
        capacity: int = 1 << 16,
        realtime: bool = True,
        priority_reason: str = "",
        start: str = "auto",
    ):
        if mode == "auto":
            mode = "process" if hasattr(os, "fork") else "thread"
        if mode not in ("process", "thread"):
            raise ValueError(f"mode must be 'auto', 'process' or 'thread', got {mode!r}")
        if start not in STARTS:
            raise ValueError(f"start must be one of {list(STARTS)}, got {start!r}")
        names = [c.name for s in sensors for c in s.channels]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"channel names appear in more than one sensor: {duplicated}")
        self.sensors = list(sensors)
        self.channels = [c for s in self.sensors for c in s.channels]
        self.period_s = check_period(period_s)
        self.mode = mode
        self.realtime = realtime
        self.priority_reason = priority_reason
        self.owner_pid = os.getpid()
        self._shared = SharedRing(capacity, 1 + len(self.channels), len(self.sensors))
        self._active = False  # between start() and stop()
        self._child = SamplerProcess()  # process mode
        self._thread: threading.Thread | None = None
        self._loop: SamplingLoop | None = None  # thread mode
        self._started_loop: str | None = None  # process mode: the last child's tick loop
        self._started_at = 0.0
        self._rows_at_start = 0
        self._lifecycle = threading.RLock()  # start, stop and restart may come from the monitor's thread too
        self._reader = RingReader(self._shared, self.channels)
        self._start_asked = start
        self.start_method: str | None = None  # "spawn" or "fork" (None in thread mode), and why, for the report
        self.start_reason = "thread mode: sampled in a thread of this process"
        if mode == "process":
            self.start_method, self.start_reason = start_choice(self._start_asked, self.sensors, self._shared.fd)[:2]
            if start == "spawn" and self.start_method != "spawn":
                raise ValueError(f"start='spawn' is not possible: {self.start_reason.removeprefix('fork: ')}")

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
        return self.period_s * plan(grid_periods(self.sensors), self.period_s)[1]

    @property
    def tick_loop(self) -> str:
        """Which loop runs the ticks: "C" or "Python" and why (process mode: as the last process was started)."""
        if self.mode == "thread":
            return "Python (thread mode)"
        return self._started_loop or native.loop_name()

    @property
    def realtime_granted(self) -> bool:
        return self.mode == "process" and bool(self._shared.header[REALTIME])

    def start(self) -> Sampler:
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
            self._started_loop = native.loop_name()  # the child's, from the environment it is started with
            sensors = None
            if self.start_method == "spawn":
                # pickled now: the sensors' state of this moment
                method, reason, sensors = start_choice(self._start_asked, self.sensors, self._shared.fd)
                if method != "spawn":
                    self._fall_back(reason)
            if sensors is not None:
                self._child.spawn(
                    spawn_settings(sensors, self.period_s, self._shared, epoch, self.realtime), self._shared
                )
            else:
                native.load()  # dlopen here: in a child forked from a threaded trainer it could deadlock
                loop = SamplingLoop(self.sensors, self.period_s, self._shared, epoch, parent=os.getpid())
                self._child.fork(loop, self._shared, self.realtime)
        else:
            self._shared.header[REALTIME] = 0
            self._loop = SamplingLoop(self.sensors, self.period_s, self._shared, epoch, parent=None)
            self._thread = threading.Thread(
                target=self._loop.run, args=(False,), daemon=True, name="mobileperf-sampler"
            )
            self._thread.start()

    def _fall_back(self, reason: str) -> None:
        """From now on the sampler process is forked, for ``reason`` (fork: ...)."""
        log.info("mobileperf: the sampler process is forked: %s", reason.removeprefix("fork: "))
        self.start_method, self.start_reason = "fork", reason

    def _forked_after_load_failure(self) -> bool:
        """With ``start="auto"``: a started process that could not load the sensors is replaced by a forked
        one (True); the reason, with its error, goes to ``start_reason``."""
        with self._lifecycle:
            error = self._child.load_error if self._active and self._owner() else None
            if error is None or self._start_asked != "auto" or self.start_method != "spawn":
                return False
            self._fall_back(f"fork: the sampler process could not load the sensors ({error})")
            self._start()
            return True

    def wait_for_first_row(self, timeout_s: float = FIRST_ROW_TIMEOUT_S) -> bool:
        """Whether the first row since ``start()`` came: blocks until it does, the process dies or time is up.

        Args:
            timeout_s: Seconds at most (a started process takes ~0.17 s, seconds on a loaded board; a fork 10-25 ms).
        """
        deadline = time.monotonic() + timeout_s
        while self._shared.count() == self._rows_at_start and time.monotonic() < deadline:
            if not self.running and not self._forked_after_load_failure():
                break
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
        if ended is not None and self._forked_after_load_failure():
            ended = None
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
        pid = os.getpid()
        log.debug("mobileperf: %s of the sampler ignored in pid %d (it belongs to %d)", action, pid, self.owner_pid)
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
        """Returns the rows written since the last drain, oldest first (``drain.RingReader``)."""
        return self._reader.drain(self.running)

    @property
    def dropped(self) -> int:
        """Rows lost before they were drained: overwritten in the ring, or side readings that came too late."""
        return self._reader.dropped

    def errors(self) -> dict[str, int]:
        """Failed reads per sensor so far, sensors of the same name summed (``drain.RingReader.errors``)."""
        return self._reader.errors(self.sensors)

    def error_texts(self) -> dict[str, str]:
        """Channel name -> the words of its last failed read (``drain.RingReader.error_texts``)."""
        return self._reader.error_texts()

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
