"""Sensors and signals defined at module level, so that they pickle to a sampler process started fresh.

A lambda or a closure exists only in the process that built it (the sampler
then forks); these are found by name in the new process, which gets the
test's ``sys.path``.
"""

from __future__ import annotations

import functools
import math
import os
import threading
import time

from tf_mobileperf.sensors import Channel, MemorySensor, Sensor, SyntheticSensor


def _constant(value: float, t: float) -> float:
    return value


def _offset_sine(offset: float, t: float) -> float:
    return offset + math.sin(t)


def _clock(t: float) -> float:
    return t


def constant(value: float):
    """A signal reading ``value`` at every t."""
    return functools.partial(_constant, value)


def offset_sine(offset: float):
    """A signal reading ``offset + sin(t)``."""
    return functools.partial(_offset_sine, offset)


#: A signal reading its own read time (seconds on the monotonic clock).
clock = _clock


def rail(name: str = "rail", watts: float = 3.0) -> SyntheticSensor:
    """A synthetic rail at a constant ``watts``, picklable."""
    return SyntheticSensor(power_w={name: constant(watts)})


class NVMLError(RuntimeError):
    """Stands for pynvml.NVMLError (whose str is the error's name)."""


class Raises(Sensor):
    """Power channels (``names``); every read raises ``error``."""

    name = "raises"

    def __init__(self, error: Exception, names: tuple[str, ...] = ("dead_a", "dead_b"), name: str = "raises"):
        self.error, self.name = error, name
        self.channels = [Channel(n, "power", "test") for n in names]

    def read(self):
        raise self.error


class OneChannelFails(Sensor):
    """Channel "good" reads 2 W; channel "bad" gives an ``OSError`` as its value; "nan" reads NaN (no reading)."""

    name = "one channel fails"

    def __init__(self):
        self.channels = [Channel(n, "power", "test") for n in ("good", "bad", "nan")]

    def read(self):
        return {"good": 2.0, "bad": OSError(5, "Input/output error"), "nan": math.nan}


class Slow(Sensor):
    """A device call of ``seconds`` (NVML's total energy: about 4 ms); channel "slow_t" is when the read started,
    "slow_end" when its wait ended (on a loaded machine the call takes longer than ``seconds``)."""

    name = "slow"
    own_thread = True

    def __init__(self, seconds: float, own_thread: bool = True):
        self.seconds = seconds
        self.own_thread = own_thread
        self.channels = [Channel("slow_t", "state", "test"), Channel("slow_end", "state", "test")]

    def read(self):
        started = time.monotonic()
        time.sleep(self.seconds)
        return {"slow_t": started, "slow_end": time.monotonic()}


class Stalling(Slow):
    """``Slow``, whose every ``every``-th read stalls ``stall_s`` more (a descheduled thread, a frozen VM);
    ``stamp_within_s`` as given."""

    def __init__(self, seconds: float, every: int, stall_s: float, stamp_within_s: float | None):
        super().__init__(seconds)
        self.every, self.stall_s, self.stamp_within_s, self.reads = every, stall_s, stamp_within_s, 0

    def read(self):
        self.reads += 1
        if self.reads % self.every == 0:
            time.sleep(self.stall_s)
        return super().read()


class OpensSlowly(Sensor):
    """A device whose opening in a process takes ``open_s`` (a library imported, ``nvmlInit``); channel "opened"
    then reads 1.0 at once. Its ``prepare`` opens it where ``prepares``, else its first read does."""

    name = "opens slowly"

    def __init__(self, open_s: float, prepares: bool = True):
        self.open_s, self.prepares, self.pid = open_s, prepares, None
        self.channels = [Channel("opened", "state", "test")]

    def _open(self) -> None:
        if self.pid != os.getpid():
            time.sleep(self.open_s)
            self.pid = os.getpid()

    def prepare(self) -> None:
        if self.prepares:
            self._open()

    def read(self):
        self._open()
        return {"opened": 1.0}


#: A device's lock, as a driver library holds one around its calls.
DEVICE_LOCK = threading.Lock()


class Locked(Sensor):
    """Channel "locked" reads 1.0 inside ``DEVICE_LOCK``."""

    name = "locked"

    def __init__(self):
        self.channels = [Channel("locked", "state", "test")]

    def read(self):
        with DEVICE_LOCK:
            return {"locked": 1.0}


class Unloadable(Sensor):
    """Pickles, but cannot be unpickled: as a sensor whose state another process cannot take up."""

    name = "unloadable"

    def __init__(self):
        self.channels = [Channel("unloadable_w", "power", "test")]

    def read(self):
        return {"unloadable_w": 6.0}

    def __setstate__(self, state):
        raise RuntimeError("this device opens in its own process only")


class OwnThreadMemory(MemorySensor):
    """This machine's memory (a file sensor, read in C inline), read in its own thread instead."""

    own_thread = True
