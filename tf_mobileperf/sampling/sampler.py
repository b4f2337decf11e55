"""Background sampling of sensors at a fixed period on the monotonic clock.

Why a separate process: in the training process a Python thread waits for
the GIL while TensorFlow's Python side runs, and its intervals stretch to
100+ ms (figures in the README, from ``benchmarks/sampling.py``). A forked
child has its own interpreter, and where the OS allows it (root or
CAP_SYS_NICE) it runs with SCHED_FIFO priority, which keeps the 5 ms period
within a fraction of a millisecond while both cores train.

The child writes rows (time, channel values...) into a shared-memory ring;
the parent ``drain()``s new rows as numpy arrays while sampling goes on.
``time.monotonic()`` is CLOCK_MONOTONIC, the same clock in both processes.
Sensors slower than the period (``Sensor.min_period_s``) are read only when
due; their columns are NaN in between, as they are after a failed read.

The child belongs to the process that started it (``owner_pid``). It is
forked with ``os.fork()`` and reaped with ``waitpid``, outside
multiprocessing's registry of children, so a process the trainer forks in
turn (a data-loader worker, ``os.fork()``) inherits nothing that stops it:
not multiprocessing's exit hook, and not the ``Sampler`` object, whose
stopping methods do nothing outside the owner. The child exits when its
parent dies. ``health()`` says when it died or stalled; ``restart()`` forks
a new one that goes on writing into the same ring.

Each sensor is isolated from the others. A read that raises or returns
anything but a mapping of real numbers is a failed read of that sensor
(counted in ``errors()``, its channels NaN). Sensors are read one after the
other in the sampling thread, so a fast rail pays no thread hand-off; a
watchdog replaces a sampling thread that stays inside one sensor's
``read()`` longer than ``inline_budget_s`` by a new one, and that sensor is
read in its own thread, with a deadline: a read that misses it is a failed
read, and the sensor's channels stay NaN until it returns. A value read so
reaches the ring one tick late; after 200 quick reads in a row the sensor is
read inline again. In the forked child SIGALRM, armed anew by each inline
read, wakes the watchdog only when no read started within the budget.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import mmap
import numbers
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tf_mobileperf.sensors.base import Channel, Sensor

log = logging.getLogger(__name__)

#: Below this the loop cannot keep up in Python (measured: benchmarks/sampling.py).
MIN_PERIOD_MS = 0.5

#: Slots of the shared header, before the ring: rows written, the epoch of the
#: worker allowed to write (a new one per start, stop or restart), whether
#: SCHED_FIFO was granted, then failed reads per sensor.
_COUNT, _EPOCH, _REALTIME, _ERRORS = 0, 1, 2, 3

#: An offloaded sensor whose reads took under half the inline budget this many
#: times in a row is read inline again: a thread hand-off per read costs more
#: CPU than most reads (measured about 90 us a read in a 2-core VM, where a
#: 5 ms rail then costs the sampler 1.8% of a core more).
_INLINE_AGAIN_AFTER = 200

#: The value of a read that raised.
_FAILED = object()


def check_period(period_ms: float) -> float:
    """Returns ``period_ms`` if the sampler can do it, else raises TypeError/ValueError."""
    if isinstance(period_ms, bool) or not isinstance(period_ms, (int, float)) or not math.isfinite(period_ms):
        raise TypeError(f"sample period must be a finite number of ms, got {period_ms!r}")
    if period_ms < MIN_PERIOD_MS:
        raise ValueError(f"sample period must be >= {MIN_PERIOD_MS} ms (what the sampler can sustain), got {period_ms}")
    return float(period_ms)


def inline_budget_s(period_s: float) -> float:
    """How long one sensor's ``read()`` may hold up the others before it is moved to its own thread.

    Long enough that a busy machine's scheduling delays rarely move a
    healthy sensor, short enough that the hole it leaves in the other
    channels stays well inside the join's allowed gap (0.1 s at 5 ms)."""
    return max(4 * period_s, 0.020)


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


class _Shared:
    """The header and the ring, in anonymous shared memory a forked child inherits."""

    def __init__(self, capacity: int, width: int, n_sensors: int):
        slots = _ERRORS + max(1, n_sensors)
        self._memory = mmap.mmap(-1, 8 * (slots + capacity * width))  # MAP_SHARED | MAP_ANONYMOUS
        self.header = memoryview(self._memory)[: 8 * slots].cast("q")  # Python ints: faster than numpy scalars
        self.ring = np.frombuffer(self._memory, np.float64, capacity * width, offset=8 * slots).reshape(capacity, width)

    def count(self) -> int:
        return self.header[_COUNT]

    def fail(self, sensor: int) -> None:
        self.header[_ERRORS + sensor] += 1


class _Offloaded:
    """A sensor that overran the inline budget, read on request by its own thread."""

    def __init__(self, sensor: Sensor, since: float):
        self.sensor = sensor
        self.requested = threading.Event()
        self.since: float | None = since  # start of the read in flight (the hung one at first), None when idle
        self.missed = True  # the read in flight is already counted as failed
        self.result: tuple[Any, float] | None = None  # (values, seconds it took) until the sampler takes it
        self.quick = 0  # reads in a row that took under half the inline budget
        self.retired = False  # read inline again: this thread ends

    def serve(self, alive: Callable[[], bool]) -> None:
        """Reads on request while ``alive()``; run by the thread whose inline read hung."""
        self.since = None  # the hung read has returned: too late to use
        while alive() and not self.retired:
            if not self.requested.wait(0.5):
                continue
            self.requested.clear()
            start = self.since
            values = _read(self.sensor)
            self.result = (values, time.monotonic() - start)
            self.since = None  # after result: the sampler sees idle only with the result in place


def _read(sensor: Sensor) -> Any:
    try:
        return sensor.read()
    except Exception:  # a failing sensor leaves a NaN gap; sampling goes on
        return _FAILED


class _Loop:
    """One worker's sampling: a sampling thread, and the watchdog that replaces it when a read hangs.

    Rows are written only by the current sampling thread (``leader``), and
    only while the shared epoch is this worker's.
    """

    def __init__(self, sensors: list[Sensor], period_s: float, shared: _Shared, epoch: int, parent: int | None):
        self.sensors = sensors
        self.period_s = period_s
        self.shared = shared
        self.epoch = epoch
        self.parent = parent
        self.budget_s = inline_budget_s(period_s)
        self.deadline_s = [max(self.budget_s, s.min_period_s) for s in sensors]
        self.columns: list[list[tuple[str, int]]] = []
        col = 1
        for sensor in sensors:
            self.columns.append([(c.name, col + k) for k, c in enumerate(sensor.channels)])
            col += len(sensor.channels)
        self.due = [0.0] * len(sensors)
        self.offloaded: list[_Offloaded | None] = [None] * len(sensors)
        self.reading: tuple[int, float] | None = None  # (sensor, start) of the leader's read in flight
        self.leader = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.failed = False
        self.alarm = False

    def alive(self) -> bool:
        """Whether this worker should go on: not stopped or replaced, and its parent is there."""
        return self.shared.header[_EPOCH] == self.epoch and (self.parent is None or os.getppid() == self.parent)

    def run(self, alarm: bool) -> int:
        """Samples until stopped or the parent dies; this thread is the watchdog. 1 if sampling failed.

        With ``alarm`` (the forked child, whose main thread this is) each
        inline read arms SIGALRM for its budget, so the watchdog wakes only
        when no read started within the budget; without (a thread in the
        trainer's process, whose signals are the trainer's) it looks every
        half budget."""
        self.alarm = alarm
        if alarm:
            signal.signal(signal.SIGALRM, self._on_alarm)
        self._lead(0)
        while not self.done.wait(0.25 if alarm else self.budget_s / 2) and self.alive():
            if not alarm:
                self._replace_if_hung()
        self.done.set()
        return int(self.failed)

    def _lead(self, generation: int) -> None:
        threading.Thread(target=self._sample, args=(generation,), daemon=True, name="mobileperf-sampling").start()

    def _on_alarm(self, *_) -> None:
        if self.lock.acquire(blocking=False):  # else the read has just returned (or an alarm is being handled)
            try:
                generation = self._take_over_hung_read()
            finally:
                self.lock.release()
            if generation is not None:
                self._lead(generation)

    def _replace_if_hung(self) -> None:
        with self.lock:
            generation = self._take_over_hung_read()
        if generation is not None:
            self._lead(generation)

    def _take_over_hung_read(self) -> int | None:
        """With the lock held: if the leader's read is over budget, moves that sensor to its
        own thread and returns the generation of a new leader to start."""
        if self.reading is None:
            return None
        i, since = self.reading
        left = since + self.budget_s - time.monotonic()
        if left >= 0:
            if self.alarm:
                signal.setitimer(signal.ITIMER_REAL, left + 0.001)
            return None
        self.offloaded[i] = _Offloaded(self.sensors[i], since)
        self.shared.fail(i)  # this read missed its deadline
        self.reading = None
        self.leader += 1
        log.debug("sensor %s held up sampling for > %.3f s; it is read in its own thread now",
                  self.sensors[i].name, self.budget_s)
        return self.leader

    def _sample(self, generation: int) -> None:
        try:
            if self.alarm:  # SIGALRM goes to the watchdog, never interrupts a sensor's system call
                signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            self._sample_rows(generation)
        except BaseException:
            log.exception("mobileperf: the sampling loop failed")
            self.failed = True
            self.done.set()

    def _sample_rows(self, generation: int) -> None:
        period_s = self.period_s
        row = np.full(self.shared.ring.shape[1], np.nan)
        next_t = time.monotonic()
        while self.alive():
            now = time.monotonic()
            row[:] = np.nan
            row[0] = now
            for i, sensor in enumerate(self.sensors):
                offloaded = self.offloaded[i]
                if offloaded is not None:
                    self._poll(i, offloaded, now, row)
                elif now >= self.due[i]:
                    self.due[i] = now + sensor.min_period_s * 0.95
                    if not self._read_inline(i, generation, row):  # replaced while the read hung
                        self.offloaded[i].serve(self.alive)
                        return
            if not self._write(row):
                return
            next_t += period_s
            now = time.monotonic()
            if next_t <= now:  # overran: skip the ticks we missed, stay on the grid
                next_t += math.ceil((now - next_t) / period_s) * period_s
            time.sleep(max(0.0, next_t - time.monotonic()))
        self.done.set()

    def _read_inline(self, i: int, generation: int, row: np.ndarray) -> bool:
        """Reads sensor i in this thread; False if the watchdog replaced this thread meanwhile."""
        self.reading = (i, time.monotonic())
        if self.alarm:  # replaces the previous read's timer: it fires only if no read starts within the budget
            signal.setitimer(signal.ITIMER_REAL, self.budget_s)
        values = _read(self.sensors[i])
        with self.lock:
            if self.leader != generation:
                return False
            self.reading = None
        self._store(i, values, row)
        return True

    def _write(self, row: np.ndarray) -> bool:
        """Appends ``row`` to the ring unless this worker was stopped or replaced."""
        shared = self.shared
        with self.lock:
            if shared.header[_EPOCH] != self.epoch:
                return False
            count = shared.count()
            shared.ring[count % len(shared.ring)] = row
            shared.header[_COUNT] = count + 1
        return True

    def _poll(self, i: int, offloaded: _Offloaded, now: float, row: np.ndarray) -> None:
        """Takes an offloaded sensor's finished read and asks for the next one when due."""
        if offloaded.since is not None:  # a read in flight
            if not offloaded.missed and now - offloaded.since > self.deadline_s[i]:
                offloaded.missed = True
                self.shared.fail(i)
            return
        if offloaded.result is not None:
            values, took = offloaded.result
            offloaded.result = None
            if took <= self.deadline_s[i]:
                self._store(i, values, row)
            elif not offloaded.missed:
                self.shared.fail(i)
            offloaded.quick = offloaded.quick + 1 if took < self.budget_s / 2 else 0
            if offloaded.quick >= _INLINE_AGAIN_AFTER:  # its thread is idle: no read in flight to race with
                offloaded.retired = True
                self.offloaded[i] = None
                return
        if now >= self.due[i]:
            self.due[i] = now + self.sensors[i].min_period_s * 0.95
            offloaded.missed = False
            offloaded.since = now
            offloaded.requested.set()

    def _store(self, i: int, values: Any, row: np.ndarray) -> None:
        """Puts sensor i's reading into ``row``; anything but real numbers is a failed read.

        A channel missing from the mapping is NaN (not a failure); a value
        that is not a real number (str, None, complex...) is NaN and the read
        counts as failed. A read that is no mapping at all fails whole."""
        if type(values) is not dict and not isinstance(values, Mapping):
            self.shared.fail(i)
            return
        bad = False
        try:
            for name, c in self.columns[i]:
                value = values.get(name, math.nan)
                if isinstance(value, float):  # also numpy's float64
                    row[c] = value
                elif isinstance(value, numbers.Real) and not isinstance(value, bool):
                    row[c] = float(value)
                else:
                    bad = True
        except Exception:  # a mapping whose get() or float() raises
            row[[c for _, c in self.columns[i]]] = np.nan
            bad = True
        if bad:
            self.shared.fail(i)


def _become_sampler(shared: _Shared, realtime: bool) -> None:
    """Settings of the forked child: its own signal handling, and SCHED_FIFO where allowed."""
    for sig in signal.valid_signals():  # Python handlers the trainer installed are the trainer's
        if callable(signal.getsignal(sig)):
            signal.signal(sig, signal.SIG_DFL)
    # Ctrl-C, and SIGTERM sent to the whole process group (Slurm, systemd), are for the trainer to handle:
    # it writes its partial report while the sampler still samples, then stops it (SIGKILL) or dies.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.setswitchinterval(0.001)  # a sensor thread holding the GIL delays the sampling thread by at most this
    shared.header[_REALTIME] = 0
    if realtime:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # threads started later inherit it
            shared.header[_REALTIME] = 1
        except (PermissionError, OSError, AttributeError):
            pass


def _describe_exit(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


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
        self.owner_pid = os.getpid()
        self._shared = _Shared(capacity, 1 + len(self.channels), len(self.sensors))
        self._active = False  # between start() and stop()
        self._pid: int | None = None  # the child, in process mode
        self._ended: str | None = None  # how the child ended, once reaped
        self._thread: threading.Thread | None = None
        self._loop: _Loop | None = None  # thread mode
        self._started_at = 0.0
        self._rows_at_start = 0
        self._lifecycle = threading.RLock()  # start, stop and restart may come from the monitor's thread too
        self._reaping = threading.Lock()
        self._read = 0
        self.dropped = 0

    @property
    def pid(self) -> int | None:
        """The sampler child's pid (process mode, while started)."""
        return self._pid

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
            return self._pid is not None and self._reap() is None
        return self._thread is not None and self._thread.is_alive()

    @property
    def realtime_granted(self) -> bool:
        return self.mode == "process" and bool(self._shared.header[_REALTIME])

    def start(self) -> "Sampler":
        """Starts sampling; a second call while running does nothing."""
        if self._owned("start"):
            with self._lifecycle:
                if not self.running:
                    self._start()
        return self

    def _start(self) -> None:
        self._retire()  # a worker that died is reaped; the new one gets a new epoch
        epoch = self._shared.header[_EPOCH] + 1
        self._shared.header[_EPOCH] = epoch
        self._started_at = time.monotonic()
        self._rows_at_start = self._shared.count()
        self._active = True
        if self.mode == "process":
            self._fork(epoch)
        else:
            self._shared.header[_REALTIME] = 0
            self._loop = _Loop(self.sensors, self.period_s, self._shared, epoch, parent=None)
            self._thread = threading.Thread(target=self._loop.run, args=(False,), daemon=True,
                                            name="mobileperf-sampler")
            self._thread.start()

    def _fork(self, epoch: int) -> None:
        loop = _Loop(self.sensors, self.period_s, self._shared, epoch, parent=os.getpid())
        pid = os.fork()
        if pid == 0:  # the child: never returns into the trainer's code
            code = 1
            try:
                _become_sampler(self._shared, self.realtime)
                code = loop.run(alarm=True)
            except BaseException:
                log.exception("mobileperf: the sampler process failed")
            finally:
                os._exit(code)
        self._pid, self._ended = pid, None

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
        ended = self._reap() if self.mode == "process" else None
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
        if silent > silence_limit_s(self.period_s):
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
                self._shared.header[_EPOCH] += 1
        else:
            self._shared.header[_EPOCH] += 1
        if self._thread is not None:
            self._thread.join(timeout=grace_s)
            self._thread = self._loop = None
        if self._pid is not None:
            if not self._wait_exit(grace_s):
                try:
                    os.kill(self._pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                if not self._wait_exit(1.0):
                    log.warning("mobileperf: sampler process %d did not exit after SIGKILL", self._pid)
            self._pid = None

    def _wait_exit(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self._reap() is None:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.002)
        return True

    def _reap(self) -> str | None:
        """How the child ended (None while it runs); reaps it."""
        with self._reaping:
            child = self._pid
            if self._ended is None and child is not None:
                try:
                    pid, status = os.waitpid(child, os.WNOHANG)
                except ChildProcessError:  # reaped by someone else (SIGCHLD ignored, os.wait())
                    self._ended = "reaped elsewhere"
                else:
                    if pid:
                        self._ended = _describe_exit(status)
            return self._ended

    def drain(self) -> Samples:
        """Returns the rows written since the last drain, oldest first."""
        ring = self._shared.ring
        capacity = ring.shape[0]
        end = self._shared.count()
        start = max(self._read, end - capacity)
        self.dropped += start - self._read
        idx = np.arange(start, end) % capacity
        rows = ring[idx].copy()
        # Rows the writer may have overwritten while we copied are dropped too.
        overwritten = self._shared.count() - capacity - start
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
            counts[s.name] = counts.get(s.name, 0) + self._shared.header[_ERRORS + i]
        return counts

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
