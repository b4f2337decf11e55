"""The options of a measurement, checked once.

``MonitorOptions`` holds every option of ``PerfMonitor``; the Keras callback
passes its keywords straight through, so ``fit`` reaches all of them and a
wrong one is refused, with the same message, before any measurement starts.
``resolve_sensors`` turns the ``sensors`` option into the sensors to read;
``check_logdir`` turns the logdir into a ``Path``, once, where it is given.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from tf_mobileperf.output.files import local_dir
from tf_mobileperf.sampling.period import check_period
from tf_mobileperf.sampling.priority import PRIORITIES
from tf_mobileperf.sensors import Probe, ReplaySensor, Sensor, probe

SensorSpec = str | Sequence[Sensor]


def check_int(name: str, value, minimum: int = 0) -> int:
    """``value`` as an int, checked.

    Args:
        name: The option's name, for the error.
        value: The value given; an int or a numpy integer, not a bool.
        minimum: The smallest value allowed.

    Returns:
        ``value`` as a Python int.

    Raises:
        TypeError: ``value`` is not an int (a bool is not), naming ``name``.
        ValueError: ``value`` is below ``minimum``, naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _check_seconds(name: str, value, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not math.isfinite(value):
        raise TypeError(f"{name} must be a finite number of seconds, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'} s, got {value}")
    return float(value)


def check_logdir(logdir: str | os.PathLike) -> Path:
    """``logdir`` as a local ``Path``: the one conversion, where the callback or monitor is given it.

    Args:
        logdir: The logdir given; a ``Path`` passes through as it is, so a value checked here once is never
            converted again.

    Returns:
        The local ``Path``.

    Raises:
        ValueError: it names a remote file system (from ``output.files.local_dir``).
    """
    return logdir if isinstance(logdir, Path) else local_dir(logdir)


def _replay_spec(spec: str) -> tuple[str, float]:
    """ "replay:PATH[@SPEED]" -> (PATH, SPEED)."""
    path, _, speed = spec[len("replay:") :].partition("@")
    try:
        return path, float(speed) if speed else 1.0
    except ValueError:
        raise ValueError(f"replay speed must be a number: {spec!r}") from None


def check_sensors(sensors: SensorSpec) -> str | tuple[Sensor, ...]:
    """The ``sensors`` option, checked.

    Args:
        sensors: "auto", "none", "replay:PATH[@SPEED]" or an iterable of ``Sensor`` objects.

    Returns:
        The string as given, or the sensors as a tuple.

    Raises:
        ValueError: an unknown string, or a replay SPEED that is not a number.
        TypeError: an item that is not a ``Sensor``.
    """
    if isinstance(sensors, str):
        if sensors in ("auto", "none"):
            return sensors
        if sensors.startswith("replay:"):
            _replay_spec(sensors)
            return sensors
        raise ValueError(
            f"unknown sensors {sensors!r}: use 'auto', 'none', 'replay:PATH[@SPEED]' or a list of Sensor objects"
        )
    sensors = tuple(sensors)
    bad = [type(s).__name__ for s in sensors if not isinstance(s, Sensor)]
    if bad:
        raise TypeError(f"sensors must be Sensor objects, got {bad}")
    return sensors


def resolve_sensors(sensors: SensorSpec) -> Probe:
    """The sensors the ``sensors`` option names, as a ``Probe``.

    Args:
        sensors: "auto" (probe this machine for this process), "none", "replay:PATH[@SPEED]" (a recorded
            log replayed at SPEED times its pace) or a list of ``Sensor`` objects.

    Returns:
        The probe: the sensors to read, and why the others are absent ("none": all of them, by request).

    Raises:
        ValueError, TypeError: ``sensors`` is not well formed (``check_sensors``).
    """
    sensors = check_sensors(sensors)
    if sensors == "auto":
        return probe(pid=os.getpid())
    if sensors == "none":
        return Probe([], {"all": "sensors='none' was requested"})
    if isinstance(sensors, str):
        path, speed = _replay_spec(sensors)
        return Probe([ReplaySensor(path, speed=speed)], {})
    return Probe(list(sensors), {})


@dataclasses.dataclass(frozen=True)
class MonitorOptions:
    """Every option of a measurement (``PerfMonitor`` and ``MobilePerfCallback``).

    Args:
        warmup_steps: Steps recorded but left out of averages (the paper's 3).
        sample_period_ms: Sampler period (the paper's 5 ms).
        sensors: "auto" (detect), "none", "replay:PATH[@SPEED]" (a recorded
            tegrastats log, time-compressed by SPEED), or sensor objects.
        profile_steps: ``(first, last)`` global steps to trace with the TF
            profiler; both must be measured steps (>= warmup_steps). TF
            backend only: under JAX or torch the report says why there is
            no trace.
        batch_size: Samples per batch, for J/sample and samples/s.
        run: Run name inside logdir; "train" shares the run of
            ``keras.callbacks.TensorBoard(log_dir=logdir)``.
        flush_s: How often samples are drained, joined and written.
        keep_steps: Measured steps kept in memory for ``report.steps`` and
            ``report.json``; older ones are only in ``steps.csv`` (the
            totals cover every step), so a long run's memory stays bounded.
        clock: Seconds on the sampler's clock (``time.monotonic``); step
            windows are taken on it. Simulations pass their own clock.
        combine_wait_s: In a multi-worker run, how long the chief waits at
            its end for the other workers' reports before combining.
        idle_s: Seconds sampled at ``begin()``, before the first step, with
            nothing training: the idle power of each rail, which the report
            subtracts from each step's energy (``energy_active_j``); 0 skips.
        sampler_priority: "fifo" asks for SCHED_FIFO for the sampler process
            (granted to root or CAP_SYS_NICE), "normal" keeps the default
            scheduler, "auto" chooses by the number of cores
            (``sampling.priority.choose``, from benchmarks/overhead.py's
            figures). The report's ``sampling`` says what was asked and got.

    A wrong value raises TypeError or ValueError naming the option; an
    unknown option raises TypeError naming it.
    """

    warmup_steps: int = 3
    sample_period_ms: float = 5.0
    sensors: SensorSpec = "auto"
    profile_steps: tuple[int, int] | None = None
    batch_size: int | None = None
    run: str = "train"
    flush_s: float = 0.5
    keep_steps: int = 10_000
    clock: Callable[[], float] = time.monotonic
    combine_wait_s: float = 60.0
    idle_s: float = 2.0
    sampler_priority: str = "auto"

    def __post_init__(self) -> None:
        warmup_steps = check_int("warmup_steps", self.warmup_steps)
        checked: dict[str, object] = {"warmup_steps": warmup_steps}
        if self.batch_size is not None:
            checked["batch_size"] = check_int("batch_size", self.batch_size, 1)
        if self.profile_steps is not None:
            checked["profile_steps"] = self._checked_profile_steps(warmup_steps)
        checked["keep_steps"] = check_int("keep_steps", self.keep_steps, 1)
        checked["sample_period_ms"] = check_period(self.sample_period_ms, "ms")
        checked["sensors"] = check_sensors(self.sensors)
        if not isinstance(self.run, str) or not self.run:
            raise TypeError(f"run must be a non-empty folder name, got {self.run!r}")
        checked["flush_s"] = _check_seconds("flush_s", self.flush_s, positive=True)
        checked["combine_wait_s"] = _check_seconds("combine_wait_s", self.combine_wait_s, positive=False)
        checked["idle_s"] = _check_seconds("idle_s", self.idle_s, positive=False)
        if self.sampler_priority not in PRIORITIES:
            raise ValueError(f"sampler_priority must be one of {PRIORITIES}, got {self.sampler_priority!r}")
        if not callable(self.clock):
            raise TypeError(f"clock must be a function returning seconds, got {type(self.clock).__name__}")
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: the checked form replaces the given one

    def _checked_profile_steps(self, warmup_steps: int) -> tuple[int, int]:
        steps = self.profile_steps
        if not (isinstance(steps, (tuple, list)) and len(steps) == 2):
            raise TypeError(f"profile_steps must be a (first, last) pair, got {steps!r}")
        first, last = (check_int("profile_steps", s) for s in steps)
        if first < warmup_steps or last < first:
            raise ValueError(
                f"profile_steps {steps} must be measured steps: warmup_steps ({warmup_steps}) <= first <= last"
            )
        return first, last

    @property
    def period_s(self) -> float:
        """The sampler period in seconds: what the Sampler and everything after it take."""
        return self.sample_period_ms / 1000.0
