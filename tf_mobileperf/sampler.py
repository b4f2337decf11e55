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
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing as mp
import os
import signal
import threading
import time
from typing import Sequence

import numpy as np

from .sensors.base import Channel, Sensor


#: Below this the loop cannot keep up in Python (measured: benchmarks/sampling.py).
MIN_PERIOD_MS = 0.5


def check_period(period_ms: float) -> float:
    """Returns ``period_ms`` if the sampler can do it, else raises TypeError/ValueError."""
    if isinstance(period_ms, bool) or not isinstance(period_ms, (int, float)) or not math.isfinite(period_ms):
        raise TypeError(f"sample period must be a finite number of ms, got {period_ms!r}")
    if period_ms < MIN_PERIOD_MS:
        raise ValueError(f"sample period must be >= {MIN_PERIOD_MS} ms (what the sampler can sustain), got {period_ms}")
    return float(period_ms)


@dataclasses.dataclass
class Samples:
    """Rows drained from the sampler: ``t`` (n,) seconds, ``values`` (n, channels)."""

    t: np.ndarray
    values: np.ndarray
    channels: list[Channel]

    def __len__(self) -> int:
        return len(self.t)


def _sample_loop(sensors, period_s, ring, count, stop, errors, realtime, in_child):
    if in_child:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the trainer to handle
        if realtime.value:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
            except (PermissionError, OSError, AttributeError):
                realtime.value = 0
        parent = os.getppid()
    capacity, width = ring.shape
    columns = []
    col = 1
    for sensor in sensors:
        names = [c.name for c in sensor.channels]
        columns.append(list(zip(names, range(col, col + len(names)))))
        col += len(names)
    due = [0.0] * len(sensors)
    row = np.full(width, np.nan)
    next_t = time.monotonic()
    while not stop.value:
        now = time.monotonic()
        row[:] = np.nan
        row[0] = now
        for i, sensor in enumerate(sensors):
            if now < due[i]:
                continue
            due[i] = now + sensor.min_period_s * 0.95
            try:
                values = sensor.read()
            except Exception:  # a failing sensor leaves a NaN gap; sampling goes on
                errors[i] += 1
                continue
            for name, c in columns[i]:
                row[c] = values.get(name, math.nan)
        ring[count.value % capacity] = row
        count.value += 1
        next_t += period_s
        now = time.monotonic()
        if next_t <= now:  # overran: skip the ticks we missed, stay on the grid
            next_t += math.ceil((now - next_t) / period_s) * period_s
        time.sleep(max(0.0, next_t - time.monotonic()))
        if in_child and os.getppid() != parent:
            break


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
            mode = "process" if "fork" in mp.get_all_start_methods() else "thread"
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
        width = 1 + len(self.channels)
        ctx = mp.get_context("fork") if mode == "process" else None
        raw = mp.RawArray("d", capacity * width)
        self._ring = np.frombuffer(raw, dtype=np.float64).reshape(capacity, width)
        self._count = mp.RawValue("q", 0)
        self._stop = mp.RawValue("b", 0)
        self._errors = mp.RawArray("q", max(1, len(self.sensors)))
        self._realtime = mp.RawValue("b", 1 if realtime else 0)
        self._ctx = ctx
        self._worker: mp.Process | threading.Thread | None = None
        self._read = 0
        self.dropped = 0

    @property
    def running(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    @property
    def realtime_granted(self) -> bool:
        return self.mode == "process" and bool(self._realtime.value)

    def start(self) -> "Sampler":
        """Starts sampling; a second call while running does nothing."""
        if self.running:
            return self
        self._stop.value = 0
        args = (self.sensors, self.period_s, self._ring, self._count, self._stop, self._errors, self._realtime)
        if self.mode == "process":
            self._worker = self._ctx.Process(target=_sample_loop, args=args + (True,), daemon=True, name="mobileperf-sampler")
        else:
            self._realtime.value = 0
            self._worker = threading.Thread(target=_sample_loop, args=args + (False,), daemon=True, name="mobileperf-sampler")
        self._worker.start()
        return self

    def wait_for_first_row(self, timeout_s: float = 2.0) -> bool:
        """Blocks until the first row is written (a forked child takes a moment)."""
        deadline = time.monotonic() + timeout_s
        while self._count.value == 0 and time.monotonic() < deadline and self.running:
            time.sleep(0.0005)
        return self._count.value > 0

    def stop(self) -> None:
        """Stops sampling (idempotent); rows not yet drained stay drainable."""
        if self._worker is None:
            return
        self._stop.value = 1
        self._worker.join(timeout=2.0)
        if isinstance(self._worker, mp.process.BaseProcess) and self._worker.is_alive():
            self._worker.terminate()
            self._worker.join(timeout=1.0)
        self._worker = None

    def drain(self) -> Samples:
        """Returns the rows written since the last drain, oldest first."""
        capacity = self._ring.shape[0]
        end = self._count.value
        start = max(self._read, end - capacity)
        self.dropped += start - self._read
        idx = np.arange(start, end) % capacity
        rows = self._ring[idx].copy()
        # Rows the writer may have overwritten while we copied are dropped too.
        overwritten = self._count.value - capacity - start
        if overwritten > 0:
            rows = rows[overwritten:]
            self.dropped += overwritten
        self._read = end
        return Samples(rows[:, 0], rows[:, 1:], self.channels)

    def errors(self) -> dict[str, int]:
        """Failed ``read()`` calls per sensor so far (their channels read NaN;
        the monitor warns once when that makes a gap)."""
        return {s.name: int(self._errors[i]) for i, s in enumerate(self.sensors)}

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
