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
    """Static facts of the machine (its board, L4T and JetPack) and its sensors, and its power mode."""
    device = {"hostname": os.uname().nodename, "cpu_count": os.cpu_count()}
    guard("board identity", lambda: device.update(identify().to_dict()))
    for sensor in sensors:
        guard("sensor metadata", lambda s=sensor: device.update(s.metadata()))
    if "power_mode" not in device:  # a sensor (a replay, jtop) may know it already
        guard("power mode", lambda: device.update(power_mode().to_dict()))
    return device


def log_absent_power(probe: Probe) -> None:
    """Says once, at the start, in one info line, that power and energy will be null (a machine without a
    power sensor is not a fault: the report's ``unavailable`` says why too); the reason of each absent power
    sensor is a debug message (``mobileperf sensors`` lists them all)."""
    if not probe.has_kind("power") and not probe.has_kind("energy"):
        looked_for = ", ".join(probe.absent_for("power")) or "none was given"
        log.info(
            "mobileperf: no power sensor on this machine (looked for: %s): power and energy are reported "
            "as null, not 0; `mobileperf sensors` says why each is absent",
            looked_for,
        )
        log.debug("absent power sensors: %s", probe.why_absent("power"))


def say_if_unsteady(durations: np.ndarray) -> None:
    """Says once whether the step time was not steady: a warning where the run was disturbed
    (``precision.WARN_WIDE``, ``WARN_DRIFT``), at info level where it was only uneven."""
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
    """Quantities without a value grouped by the first words of their reason ("no power sensor: ina3221x ...:
    ..." -> "no power sensor"), in order, each once: for a console that says each cause once (the full reasons
    are the report's ``unavailable``)."""
    grouped: dict[str, list[str]] = {}
    for what, why in missing:
        names = grouped.setdefault(why.split(": ", 1)[0], [])
        if what not in names:
            names.append(what)
    return grouped


def missing_sensors(channels: list[Channel], probe: Probe) -> dict[str, str]:
    """The paper's quantities no channel measures, by role, each with the reasons the probe gave."""
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
    """Why the idle baseline, the throttled steps and the input rail have no value."""
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
    """Why the run has no measured step."""
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
    """Quantity -> why the report has no value for it; a channel that never gave a valid value -> why."""
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
    """The report of what ``collector`` has kept and totalled so far."""
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
