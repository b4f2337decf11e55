"""What a measurement reports: its ``Report``, and why a quantity has no value.

Builds the report from what the collector kept, names the reason for every
quantity that is ``null`` (``unavailable``: no such sensor, no batch size, no
measured step, no idle baseline, no input rail, ...; a missing sensor is
found by the channels' roles and explained by the probe; a channel that
never gave a valid value, in the sensor library's own words with its failed
reads, ``session.collector.unread_reasons``), gives the static facts of
the device, and says once whether the step time was steady.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

import numpy as np

from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sensors import Probe, Sensor
from tf_mobileperf.sensors.base import Channel
from tf_mobileperf.sensors.board import identify
from tf_mobileperf.sensors.power_mode import power_mode
from tf_mobileperf.session.collector import Collector
from tf_mobileperf.session.guard import Guard
from tf_mobileperf.session.idle import IdleBaseline
from tf_mobileperf.session.options import MonitorOptions
from tf_mobileperf.session.unread import never_valued, unread_reasons
from tf_mobileperf.steps import precision
from tf_mobileperf.steps.records import Roles
from tf_mobileperf.steps.report import Report

log = logging.getLogger(__name__)

#: The quantities that a run without a measured step cannot have.
_MEASURED = ("energy", "power", "cpu_util", "gpu_util", "mem_peak_gb", "step_time_s")


def device_metadata(sensors: list[Sensor], guard: Guard) -> dict:
    """Static facts of the machine (its board, L4T and JetPack) and its sensors, and its power mode.

    Args:
        sensors: The sensors in use; each adds its ``metadata()``.
        guard: Runs each read; one that fails is logged and left out.

    Returns:
        ``hostname``, ``cpu_count``, the board's identity, each sensor's metadata and the power mode.
    """
    device = {"hostname": os.uname().nodename, "cpu_count": os.cpu_count()}
    guard("board identity", lambda: device.update(identify().to_dict()))
    for sensor in sensors:
        guard("sensor metadata", lambda s=sensor: device.update(s.metadata()))
    if "power_mode" not in device:  # a sensor (a replay, jtop) may know it already
        guard("power mode", lambda: device.update(power_mode().to_dict()))
    return device


def log_absent_power(probe: Probe) -> None:
    """Logs one info line, at the start, that power and energy will be null where no power sensor is found
    (not a fault: the report's ``unavailable`` says why too); each absent power sensor's reason is a debug
    message (``mobileperf sensors`` lists them all).

    Args:
        probe: The sensors found and why the others are absent.
    """
    if not probe.has_kind("power") and not probe.has_kind("energy"):
        looked_for = ", ".join(probe.absent_for("power")) or "none was given"
        log.info(
            "mobileperf: no power sensor on this machine (looked for: %s): power and energy are reported "
            "as null, not 0; `mobileperf sensors` says why each is absent",
            looked_for,
        )
        log.debug("absent power sensors: %s", probe.why_absent("power"))


def say_if_unsteady(durations: np.ndarray) -> None:
    """Logs once whether the step time was not steady: a warning where the run was disturbed
    (``precision.WARN_WIDE``, ``WARN_DRIFT``), at info level where it was only uneven; nothing where steady.

    Args:
        durations: The measured steps' durations, in seconds.
    """
    disturbed = precision.unsteady(durations, precision.WARN_WIDE, precision.WARN_DRIFT)
    why = disturbed or precision.unsteady(durations)
    if why:
        log.log(
            logging.WARNING if disturbed else logging.INFO,
            "mobileperf: the step time is not steady: %s. Other processes on this machine, throttling or an "
            "uneven input pipeline do this; compare runs by their intervals (report: step_time_ci95_s, "
            "step_time_drift)",
            why,
        )


def by_cause(missing: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Quantities without a value grouped by the first words of their reason, for a console that says each
    cause once (the full reasons are the report's ``unavailable``).

    Args:
        missing: (quantity, reason) pairs, as the items of ``unavailable``.

    Returns:
        Cause (the reason up to its first ": ", "no power sensor: ina3221x ..." -> "no power sensor") -> its
        quantities, each once, causes and quantities in the order first seen.
    """
    grouped: dict[str, list[str]] = {}
    for what, why in missing:
        names = grouped.setdefault(why.split(": ", 1)[0], [])
        if what not in names:
            names.append(what)
    return grouped


def missing_sensors(channels: list[Channel], probe: Probe) -> dict[str, str]:
    """The paper's quantities no channel measures, by role, each with the reasons the probe gave.

    Args:
        channels: The channels sampled.
        probe: Says why each kind of sensor is absent.

    Returns:
        Quantity (``power``, ``energy``, ``gpu_util``, ``cpu_util``, ``mem_peak_gb``) -> why no channel has it.
    """
    roles = Roles.of(channels)
    out = {}
    if not roles.rails:
        out["power"] = out["energy"] = "no power sensor: " + probe.why_absent("power")
    if not roles.gpus:
        out["gpu_util"] = "no GPU utilization sensor: " + probe.why_absent("util", "gpu")
    if not roles.cpu:
        out["cpu_util"] = "no CPU utilization sensor: " + probe.why_absent("util", "cpu")
    if not roles.memory:
        out["mem_peak_gb"] = "no memory sensor: " + probe.why_absent("memory", "board")
    return out


def board_reasons(channels: list[Channel], probe: Probe, idle: IdleBaseline) -> dict[str, str]:
    """Why the idle baseline, the throttled steps and the input rail have no value.

    Args:
        channels: The channels sampled.
        probe: Says why each kind of sensor is absent.
        idle: The idle baseline's outcome; its ``reason`` is used where there are rails.

    Returns:
        Quantity (``idle_power_w``, ``energy_active``, ``input_rail``, ``throttled_steps``) -> why it has none;
        only those without a value.
    """
    roles = Roles.of(channels)
    out = {}
    if not roles.rails:
        out["idle_power_w"] = out["energy_active"] = out["input_rail"] = "no power sensor: " + probe.why_absent("power")
    elif idle.reason:
        out["idle_power_w"] = out["energy_active"] = idle.reason
    if roles.rails and roles.input_rail is None:
        out["input_rail"] = (
            "the board has no input rail (no rail of group 'total'): the total is the sum of "
            + ", ".join(c.name for c in roles.total)
        )
    if not roles.throttle:
        out["throttled_steps"] = "no throttle sensor: " + probe.why_absent("state")
    return out


def no_measured_steps(count: int, failure: tuple[int, str] | None, warmup_steps: int) -> str:
    """Why the run has no measured step.

    Args:
        count: Steps that ran, warm-up included.
        failure: (step, error) of the run's first failure; None when it did not fail.
        warmup_steps: Steps not measured at the start.

    Returns:
        The reason: no step ran (with the error's first line where training failed before it), training
        failed within the warm-up, or every step was a warm-up step.
    """
    if count == 0:
        return "no step ran" + (f": training failed before it ({failure[1].splitlines()[0]})" if failure else "")
    if failure is not None and failure[0] < warmup_steps:
        return f"training failed at step {failure[0]}, within the {warmup_steps} warm-up steps"
    return f"all {count} steps were warm-up steps (warmup_steps={warmup_steps})"


def unavailable(
    options: MonitorOptions,
    probe: Probe,
    collector: Collector,
    failure: tuple[int, str] | None,
    no_profiler: str | None,
    sampler: Sampler | None = None,
) -> dict[str, str]:
    """Quantity -> why the report has no value for it; a channel that never gave a valid value -> why.

    Args:
        options: The measurement's options (its ``batch_size`` and ``warmup_steps``).
        probe: Says why each kind of sensor is absent.
        collector: What was kept: its channels, sampling stats, idle baseline, steps and totals.
        failure: (step, error) of the run's first failure; None when it did not fail.
        no_profiler: Why there is no energy per op; None when the profiler ran.
        sampler: Its sensors' failed reads explain the channels without a value; None without a sampler.

    Returns:
        The report's ``unavailable``: each quantity or channel without a value -> why.
    """
    out = missing_sensors(collector.channels, probe)
    if collector.stats.rows:
        out |= unread_reasons(never_valued(collector.stats), sampler, "no valid reading in the run")
    out |= board_reasons(collector.channels, probe, collector.idle)
    if options.batch_size is None:
        out["energy_per_sample_j"] = out["samples_per_s"] = "batch size unknown: pass batch_size="
    if no_profiler:
        out["op_energy"] = no_profiler
    if collector.totals.count == 0:
        why = no_measured_steps(collector.count, failure, options.warmup_steps)
        for key in _MEASURED:
            out.setdefault(key, why)
    elif collector.totals.energy_complete == 0 and "energy" not in out:
        out["energy"] = out["power"] = (
            "no measured step has the total's energy: its rails had gaps over every "
            "step (see incomplete_rails, sampling.channel_gaps and sampling.sampler_outages)"
        )
    return out


def build_report(
    options: MonitorOptions,
    probe: Probe,
    collector: Collector,
    sampler: Sampler | None,
    failure: tuple[int, str] | None,
    device: dict,
    model: str | None,
    no_profiler: str | None,
) -> Report:
    """The report of what ``collector`` has kept and totalled so far.

    Args:
        options: The measurement's options.
        probe: The sensors found and why the others are absent.
        collector: The steps, totals, channels and sampling stats kept so far.
        sampler: The sampler, for its failed reads and outages; None without a sensor.
        failure: (step, error) of the run's first failure; None when it did not fail (``success: true``).
        device: Static facts of the machine (``device_metadata``).
        model: The model's name; None when unknown.
        no_profiler: Why there is no energy per op; None when the profiler ran.

    Returns:
        A new ``Report``, ``success`` false where there is a ``failure``.
    """
    failed_step, error = failure if failure else (None, None)
    return Report(
        success=failure is None,
        failed_step=failed_step,
        error=error,
        warmup_steps=options.warmup_steps,
        steps=list(collector.steps),
        totals=collector.totals,
        steps_not_kept=collector.not_kept,
        channels=collector.channels,
        sampling=collector.stats.summary(sampler) | {"frozen_counters": collector.watch.frozen_since_s},
        sensors=[s.describe() for s in probe.sensors],
        device=device,
        unavailable=unavailable(options, probe, collector, failure, no_profiler, sampler),
        batch_size=options.batch_size,
        model=model,
        idle_power_w=collector.idle.power_w,
    )
