"""Background sampling of sensors on a fixed grid of the monotonic clock.

Why a separate process: in the training process a Python thread waits for
the GIL while TensorFlow's Python side runs, and its intervals stretch to
100+ ms (figures in the README, from ``benchmarks/sampling.py``). A sampler
process has its own interpreter and, where the OS allows it, SCHED_FIFO
(``priority.choose``), which keeps the 5 ms grid within a fraction of a
millisecond while every core trains. Its ticks run in C where built
(``native``); it wakes only when a sensor is due (``schedule``), so a row's
columns of sensors not read in it are NaN, as after a failed read.

The sampler process is started fresh (``start="spawn"``, the default: its
sensors are pickled to it) or, for sensors that cannot be pickled, forked
(``start_method`` and ``start_reason`` say which and why; ``child`` says
why fork remains and what each costs). It writes rows (time, channel
values...) in place into a shared-memory ring; the parent ``drain()``s them
as numpy arrays while sampling goes on. It belongs to the process that
started it (``owner_pid``) and is reaped with ``waitpid``, outside
multiprocessing's registry, so a process the trainer forks in turn inherits
nothing that stops it; it exits when its parent dies. ``health()`` says when
it died or stalled; ``restart()`` starts a new one that goes on writing into
the same ring. A read that raises, or gives an exception or anything but a
real number as a channel's value, is a failed read of that sensor
(``errors()``), its words kept per channel (``error_texts()``); a hung read
is taken over by the watchdog (``watchdog.HungReadWatchdog``).

This module is the owner's side; the worker's loop is ``loop``, the sampler
process's life ``child`` (and ``worker``), the memory they share ``ring``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np

from tf_mobileperf.sampling import native
from tf_mobileperf.sampling.child import SamplerProcess, spawn_settings
from tf_mobileperf.sampling.loop import SamplingLoop
from tf_mobileperf.sampling.ring import EPOCH, ERRORS, REALTIME, SharedRing
from tf_mobileperf.sampling.schedule import grid_periods, plan
from tf_mobileperf.sensors.base import Channel, Sensor

log = logging.getLogger(__name__)

#: How long merged rows wait for readings of sensors read in their own thread (``drain``): longer than such
#: a read takes (NVML's energy counter: 4-9 ms for one or two GPUs, measured on an H200).
SIDE_HOLD_S = 0.1

#: Below this the loop cannot keep up in Python (measured: benchmarks/sampling.py): 0.5 ms.
MIN_PERIOD_S = 0.0005
#: The slowest sample period taken: slower is no power measurement of a step (and is a period given in ms by mistake).
MAX_PERIOD_S = 10.0

#: How a sampler process may be started (``Sampler(start=...)``).
STARTS = ("auto", "spawn", "fork")

#: How long ``wait_for_first_row`` waits by default: a sampler process's first row comes 0.17 s after start()
#: on a 2-core x86 VM (``child``), but can take seconds on a loaded Jetson; it returns as soon as it is there.
FIRST_ROW_TIMEOUT_S = 10.0


def check_period(period: float, unit: str = "s") -> float:
    """Returns ``period`` (in ``unit``: "s", or "ms" as MonitorOptions and the CLI take it) as a float if the
    sampler can do it, else raises TypeError/ValueError: the one check of a sample period."""
    least = MIN_PERIOD_S * {"s": 1.0, "ms": 1e3}[unit]
    if isinstance(period, bool) or not isinstance(period, (int, float)) or not math.isfinite(period):
        raise TypeError(f"sample period must be a finite number of {unit}, got {period!r}")
    if period < least:
        raise ValueError(f"sample period must be >= {least:g} {unit} (what the sampler can sustain), got {period}")
    if period > MAX_PERIOD_S * {"s": 1.0, "ms": 1e3}[unit]:
        raise ValueError(
            f"sample period must be at most {MAX_PERIOD_S:g} s, got {period} {unit}"
            + (" (the period is in seconds: 5 ms is 0.005)" if unit == "s" else "")
        )
    return float(period)


def silence_limit_s(period_s: float) -> float:
    """How long without a new row before ``health()`` calls the sampler stalled."""
    return max(1.0, 50 * period_s)


@dataclasses.dataclass
class Samples:
    """Rows drained from the sampler: ``t`` (n,) seconds, ``values`` (n, channels).

    ``on_grid`` marks the rows of the sampling grid (None: all are); the others are readings of sensors read
    in their own thread, each at its read's instant, with NaN in every other channel."""

    t: np.ndarray
    values: np.ndarray
    channels: list[Channel]
    on_grid: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.t)


class Sampler:
    """Reads sensors every ``period_s`` seconds in the background.

    Args:
        sensors: The sensors to read (see ``tf_mobileperf.sensors.detect``).
        period_s: Requested sampling period, seconds (at least ``MIN_PERIOD_S``); the paper uses 5 ms.
        mode: "process" (a sampler process, default where fork exists), or
            "thread" (in this process; simpler, but suffers from the GIL).
        start: How the sampler process starts: "spawn" (a fresh interpreter
            the sensors are pickled to), "fork", or "auto" (spawn, unless the
            sensors cannot be pickled to a fresh process: then fork, and
            ``start_reason`` says why).
        capacity: Rows the ring holds between two drains (default 2**16,
            5.5 min at 200 Hz); older rows are counted as dropped.
        realtime: Ask for SCHED_FIFO in the sampler process (silently refused without
            privileges; ``realtime_granted`` tells).
        priority_reason: Why SCHED_FIFO was asked for or not, for the report.

    Only the process that created it (``owner_pid``) starts, stops or
    restarts it; in any other (a forked child of the trainer) those calls do
    nothing, and ``health()`` is None.

    Raises:
        ValueError: a bad ``mode`` or ``start``, channel names that repeat,
            or ``start="spawn"`` with sensors that cannot be pickled.

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
        self._read = 0
        self.dropped = 0
        self._side_sensors = any(sensor.own_thread for sensor in self.sensors)
        self._side_read = 0
        self._held = np.empty((0, 1 + len(self.channels)))  # merged rows of the last SIDE_HOLD_S, not returned yet
        self._held_on_grid = np.empty(0, bool)
        self._returned_until = -math.inf
        self._start_asked = start
        self.start_method: str | None = None  # "spawn" or "fork" (None in thread mode), and why, for the report
        self.start_reason = "thread mode: sampled in a thread of this process"
        if mode == "process":
            self.start_method, self.start_reason = self._start_choice()[:2]
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

    def _start_choice(self) -> tuple[str, str, bytes | None]:
        """(start method, why, the pickled sensors for spawn) as things stand now."""
        if self._start_asked == "fork":
            return "fork", "fork: asked for (start='fork')", None
        if self._shared.fd is None:
            return "fork", "fork: no os.memfd_create here to share the ring with a fresh process", None
        if not sys.executable:
            return "fork", "fork: no Python executable to start (sys.executable is empty)", None
        try:
            sensors = pickle.dumps(self.sensors)
        except Exception:
            return "fork", f"fork: {self._unpicklable()}", None
        if b"__main__" in sensors:  # the fresh process's __main__ is not the trainer's script
            culprit = next((s for s in self.sensors if b"__main__" in pickle.dumps(s)), self.sensors[0])
            return (
                "fork",
                (
                    f"fork: sensor {culprit.name!r} refers to the script's __main__ (its class or a "
                    "function defined there), which a fresh process cannot import"
                ),
                None,
            )
        why = "asked for (start='spawn')" if self._start_asked == "spawn" else "the sensors can be pickled"
        return "spawn", f"spawn: {why}", sensors

    def _unpicklable(self) -> str:
        """Which sensor cannot be pickled, and pickle's words."""
        for sensor in self.sensors:
            try:
                pickle.dumps(sensor)
            except Exception as exc:
                return f"sensor {sensor.name!r} cannot be pickled ({exc})"
        return "the sensors cannot be pickled together"

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
                method, reason, sensors = self._start_choice()  # pickled now: the sensors' state of this moment
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
        """Blocks until the first row since ``start()`` is written (a started process takes a moment:
        about 0.17 s, seconds on a loaded board; a forked one 10-25 ms)."""
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
        log.debug(
            "mobileperf: %s of the sampler ignored in pid %d (it belongs to pid %d)",
            action,
            os.getpid(),
            self.owner_pid,
        )
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
        """Returns the rows written since the last drain, oldest first.

        Rows of sensors read in their own thread (the side ring) are merged in by their read's instant. A
        read is published when it returns, after rows of later instants may already be in the main ring,
        so while the worker runs the rows of the last ``SIDE_HOLD_S`` are held back to the next drain; a
        side row older than what was already returned (a read that took longer) is dropped."""
        rows = self._take(self._shared.ring, self._shared.count, "_read")
        if not self._side_sensors:
            return Samples(rows[:, 0], rows[:, 1:], self.channels)
        side = self._take(self._shared.side, self._shared.side_count, "_side_read")
        late = side[:, 0] < self._returned_until
        self.dropped += int(late.sum())
        merged = np.concatenate([self._held, rows, side[~late]])
        on_grid = np.concatenate([self._held_on_grid, np.ones(len(rows), bool), np.zeros(int((~late).sum()), bool)])
        order = np.argsort(merged[:, 0], kind="stable")
        merged, on_grid = merged[order], on_grid[order]
        keep = len(merged)
        if self.running and len(merged):
            keep = int(np.searchsorted(merged[:, 0], merged[-1, 0] - SIDE_HOLD_S, side="right"))
        self._held, self._held_on_grid = merged[keep:], on_grid[keep:]
        merged, on_grid = merged[:keep], on_grid[:keep]
        if keep:
            self._returned_until = float(merged[-1, 0])
        return Samples(merged[:, 0], merged[:, 1:], self.channels, on_grid)

    def _take(self, ring: np.ndarray, count: Callable[[], int], read_attr: str) -> np.ndarray:
        """The rows of ``ring`` (``count()`` written so far) after those already read (``self.<read_attr>``)."""
        capacity, end = ring.shape[0], count()
        read = getattr(self, read_attr)
        start = max(read, end - capacity)
        self.dropped += start - read
        rows = ring[np.arange(start, end) % capacity].copy()
        # Rows the writer may have overwritten while we copied are dropped too; the writer fills the
        # row after the last published one in place, so the oldest row is overwritten one count early.
        overwritten = count() + 1 - capacity - start
        if overwritten > 0:
            rows = rows[overwritten:]
            self.dropped += overwritten
        setattr(self, read_attr, end)
        return rows

    def errors(self) -> dict[str, int]:
        """Failed reads per sensor so far (raised, gave an exception or no number for a channel, or missed
        their deadline; their channels read NaN; the monitor warns once when that makes a gap). Sensors of
        the same name are summed."""
        counts: dict[str, int] = {}
        for i, s in enumerate(self.sensors):
            counts[s.name] = counts.get(s.name, 0) + self._shared.header[ERRORS + i]
        return counts

    def error_texts(self) -> dict[str, str]:
        """Channel name -> the words of its last failed read, for the channels that failed so far.

        An exception reads ``f"{type(exc).__name__}: {exc}"`` (``"NVMLError: Uninitialized"``); a value
        that is no number, or a read past its deadline, says so. Cut to ``ring.TEXT_BYTES`` bytes."""
        texts = {c.name: self._shared.text(column) for column, c in enumerate(self.channels, start=1)}
        return {name: text for name, text in texts.items() if text}

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
