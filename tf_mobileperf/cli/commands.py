"""What the ``sensors``, ``combine`` and ``plot`` commands do once their arguments are parsed (``sweep`` and
``predict`` have modules of their own), and how they print their results.

It exists apart from ``cli`` (the parser, its argument checks and ``main``)
so that a command's work and output can be read without the option
declarations. The sweep, predict, plot and combine commands import their
machinery when they run: ``mobileperf --help`` and ``mobileperf sensors``
import no TensorFlow.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import threading
import time

from tf_mobileperf import sensors as sensors_mod
from tf_mobileperf.cli.printing import cell, num
from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sampling.stats import SamplingStats


def _format(value: float | Exception, unit: str) -> str:
    if isinstance(value, Exception):  # this channel's read failed; the library's words
        return f"read failed: {value}"
    if math.isnan(value):
        return "unreadable (NaN)"
    if unit == "B":
        return f"{value / 2**30:.3f} GiB"
    if unit == "Hz":
        return f"{value / 1e6:.0f} MHz"
    return f"{value:.3f} {unit}"


def sampling_test(found: list, period_s: float, seconds: float) -> dict:
    """Samples ``found`` every ``period_s`` for ``seconds``; returns the sampling-quality summary.

    Args:
        found: The sensors to sample.
        period_s: The sampler's grid period, in seconds.
        seconds: How long to sample, in seconds.

    Returns:
        ``SamplingStats.summary``: rows achieved and expected per second, interval errors, the sampler's mode.
    """
    with Sampler(found, period_s=period_s) as sampler:
        time.sleep(seconds)
    stats = SamplingStats.of(sampler)
    rows = sampler.drain()
    if len(rows):
        stats.add(rows)
    return stats.summary(sampler)


#: How long ``mobileperf sensors`` waits for one sensor's read: a driver that never answers (a hung I2C bus)
#: is said, and the command goes on.
READ_TIMEOUT_S = 2.0


def _read_once(sensor) -> dict:
    """One read of ``sensor`` in a thread of its own: a failed read's exception, or a ``TimeoutError`` after
    ``READ_TIMEOUT_S``, as the value of each channel it failed."""
    got: dict = {}

    def read() -> None:
        try:
            got.update(sensor.read())
        except Exception as exc:  # every channel failed: say why on each
            got.update({channel.name: exc for channel in sensor.channels})

    thread = threading.Thread(target=read, daemon=True, name=f"mobileperf-read-{sensor.name}")
    thread.start()
    thread.join(READ_TIMEOUT_S)
    if thread.is_alive():
        return {channel.name: TimeoutError(f"no answer in {READ_TIMEOUT_S:g} s") for channel in sensor.channels}
    return got


def cmd_sensors(args: argparse.Namespace) -> int:
    """``mobileperf sensors``: prints each sensor found, one read of its channels, the absent ones and why, and
    the result of a sampling test.

    Args:
        args: The parsed options: ``root`` (of sysfs/procfs), ``period_ms`` and ``seconds`` (0: no sampling test).

    Returns:
        The exit status, 0.
    """
    found = sensors_mod.probe(args.root)
    out = sys.stdout
    out.write(f"Sensors found under {args.root}: {len(found.sensors)}\n")
    for sensor in found.sensors:
        reading = _read_once(sensor)
        out.write(f"\n* {sensor.name} (read at most every {sensor.min_period_s * 1000:g} ms)\n")
        for channel in sensor.channels:
            value = reading.get(channel.name, math.nan)
            group = f" [{channel.group}]" if channel.group else ""
            cluster = f" ({channel.cluster})" if channel.cluster else ""
            shown = _format(value, channel.unit)
            out.write(f"    {channel.name:<18} {channel.unit:<2}{group}{cluster}  {shown:<18} from {channel.source}\n")
    out.write("\nNot present:\n")
    for label, reason in found.absent.items():
        out.write(f"    {label}: {reason}\n")
    if not found.has_kind("power") and not found.has_kind("energy"):
        out.write(
            "\nNo power sensor is present on this machine (no INA3221 rails, no RAPL powercap "
            "counters, no NVML device): power and energy will be reported as null, not 0.\n"
        )
    if found.sensors and args.seconds > 0:
        result = sampling_test(found.sensors, args.period_ms / 1e3, args.seconds)
        out.write(
            f"\nSampling test ({args.seconds:g} s on a {args.period_ms:g} ms grid, {result['mode']}"
            f"{', SCHED_FIFO' if result['realtime'] else ''}): {result['samples']} rows, "
            f"{num(result['achieved_hz'], '.1f')} rows/s achieved of {num(result['row_hz'], '.0f')} expected "
            f"from the first row on; interval error p50 {num(result['interval_error_p50_ms'], '.3f')} ms, "
            f"p99 {num(result['interval_error_p99_ms'], '.3f')} ms, "
            f"longest interval {num(result['max_interval_ms'], '.2f')} ms\n"
            f"The sampler wakes on the grid only when a sensor is due (each at its own rate, above), so it writes "
            f"{num(result['row_hz'], '.0f')} rows/s, not {1000 / args.period_ms:.0f}; the rows are fewer than the "
            "seconds times that rate by the sampler's start.\n"
        )
    for sensor in found.sensors:
        sensor.close()
    return 0


def cmd_combine(args: argparse.Namespace) -> int:
    """``mobileperf combine``: combines a multi-worker logdir's runs and prints each task's state and energy.

    Args:
        args: The parsed options: ``logdir`` and ``tasks`` (None: every chief-N/worker-N folder of ``logdir``).

    Returns:
        The exit status, 0.

    Raises:
        ValueError: ``tasks`` is None and ``logdir`` holds no chief-N or worker-N folder.
    """
    from tf_mobileperf.format.layout import RunLayout
    from tf_mobileperf.session.cluster import combine

    tasks = args.tasks or tuple(
        sorted(p.name for p in args.logdir.iterdir() if p.is_dir() and re.fullmatch(r"(chief|worker)-\d+", p.name))
    )
    if not tasks:
        raise ValueError(f"no chief-N or worker-N folder in {args.logdir}")
    report = combine(args.logdir, tasks)
    for task, host in report["hosts"].items():
        state = (
            "missing (no report)"
            if host["missing"]
            else ("ok" if host["success"] else f"failed at step {host['failed_step']}")
        )
        print(f"{task:<10} {state:<22} energy {cell(host['energy_total'])} J  peak {cell(host['mem_peak_gb'], 6)} GiB")
    print(
        f"combined: {report['steps_measured']} steps, energy {cell(report['energy_total'])} J -> "
        f"{RunLayout(args.logdir).combined}"
    )
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """``mobileperf plot``: writes a sweep's figures and report.html and prints their paths.

    Args:
        args: The parsed options: ``directory``, a sweep's ``--out`` directory.

    Returns:
        The exit status, 0.
    """
    from tf_mobileperf.figures.plot import plot

    for path in plot(args.directory):
        print(path)
    return 0
