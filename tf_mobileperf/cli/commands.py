"""What each ``mobileperf`` command does once its arguments are parsed, and how it prints its results.

It exists apart from ``cli`` (the parser, its argument checks and ``main``)
so that a command's work and output can be read without the option
declarations. The sweep, predict, plot and combine commands import their
machinery when they run: ``mobileperf --help`` and ``mobileperf sensors``
import no TensorFlow.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
import re
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tf_mobileperf import sensors as sensors_mod
from tf_mobileperf.cli.shell import tool_command
from tf_mobileperf.sampling.sampler import Sampler
from tf_mobileperf.sampling.stats import SamplingStats
from tf_mobileperf.session.contention import BUSY_OTHER_PCT
from tf_mobileperf.session.reporting import by_cause
from tf_mobileperf.steps.precision import relative_half_width
from tf_mobileperf.sweep.results import contention_columns

if TYPE_CHECKING:
    from tf_mobileperf.sweep.config import SweepConfig

#: Batch sizes measured to predict others (benchmarks/predict.py: 1,2,4 are too close together).
MEASURE_DEFAULT = (1, 4, 16)


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
    """Samples ``found`` every ``period_s`` for ``seconds``; returns the sampling-quality summary."""
    with Sampler(found, period_s=period_s) as sampler:
        time.sleep(seconds)
    stats = SamplingStats.of(sampler)
    rows = sampler.drain()
    if len(rows):
        stats.add(rows)
    return stats.summary(sampler)


def _at_most(largest: int | None, batch: int) -> bool:
    """Whether ``batch`` fits where the largest that fits is ``largest`` (None: none does)."""
    return largest is not None and batch <= largest


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


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
            f"{_num(result['achieved_hz'], '.1f')} rows/s achieved of {_num(result['row_hz'], '.0f')} expected "
            f"from the first row on; interval error p50 {_num(result['interval_error_p50_ms'], '.3f')} ms, "
            f"p99 {_num(result['interval_error_p99_ms'], '.3f')} ms, "
            f"longest interval {_num(result['max_interval_ms'], '.2f')} ms\n"
            f"The sampler wakes on the grid only when a sensor is due (each at its own rate, above), so it writes "
            f"{_num(result['row_hz'], '.0f')} rows/s, not {1000 / args.period_ms:.0f}; the rows are fewer than the "
            "seconds times that rate by the sampler's start.\n"
        )
    for sensor in found.sensors:
        sensor.close()
    return 0


def _sweep_config(args: argparse.Namespace, models: list[str]) -> SweepConfig:
    """The ``SweepConfig`` of the sweep and predict commands' options, checked (ValueError) with the input size of
    each of ``models``; then one warning if it measures too few steps, after any error of the arguments."""
    from tf_mobileperf.sweep.config import SweepConfig
    from tf_mobileperf.sweep.runner import check_models, warn_few_measured_steps

    precision = getattr(args, "precision", None) or None  # predict's; 0 or absent: exactly --steps
    config = SweepConfig(
        out=args.out,
        steps=args.steps,
        warmup_steps=args.warmup_steps,
        input_size=args.input_size,
        memory_limit=args.memory_limit,
        sensors=args.sensors,
        precision=precision,
        max_steps=max(args.max_steps, args.steps) if precision else None,
    )
    check_models(models, config)
    warn_few_measured_steps(config)
    return config


def cmd_sweep(args: argparse.Namespace) -> int:
    from tf_mobileperf.analysis.predict import largest_fitting_batch
    from tf_mobileperf.sweep.power_modes import PowerPlan
    from tf_mobileperf.sweep.runner import find_max_batch, sweep
    from tf_mobileperf.sweep.search import search_largest

    plan = PowerPlan(args.power_modes, args.jetson_clocks, args.settle_s)
    if args.find_max_batch and plan.active:
        raise ValueError(
            "--find-max-batch searches in the board's current mode; it takes no --power-modes or --jetson-clocks"
        )
    if args.ray is None and args.boards:
        raise ValueError("--boards picks the board types of a fleet sweep: it needs --ray ADDRESS")
    if args.ray is not None and (args.find_max_batch or plan.active):
        raise ValueError(
            "--ray runs a sweep of models x batch sizes in each board's current mode; "
            "it takes no --find-max-batch, --power-modes or --jetson-clocks"
        )
    config = _sweep_config(args, args.models)
    if args.ray is not None:
        from tf_mobileperf.sweep.fleet import fleet_sweep

        rows = fleet_sweep(args.ray, args.models, args.batch_sizes, config, args.boards, args.ray_timeout)
        return _print_rows(args, rows, plan)
    if args.find_max_batch:
        for model in args.models:
            start = 1
            if args.predict and config.memory_limit:
                start = largest_fitting_batch(sweep([model], list(MEASURE_DEFAULT), config), config.memory_limit) or 1
            print(f"{model}: searching for the largest batch that fits, from batch {start} (one run each):")
            size, tried = find_max_batch(model, config, start=start, on_row=_print_search_row)
            baseline = search_largest(functools.partial(_at_most, size))[1]  # the same search from 1
            print(
                f"{model}: largest batch that fits: {size if size else 'none (batch 1 fails)'} ({len(tried)} runs; "
                f"the search from batch 1 takes {baseline} runs)"
            )
        _print_where(args.out)
        return 0
    return _print_rows(args, sweep(args.models, args.batch_sizes, config, plan), plan)


def _print_where(out: Path) -> None:
    """Where a sweep's results are, and the command that shows its runs."""
    print(f"results: {out / 'results.csv'}   dashboard: {tool_command('tensorboard')} --logdir {out / 'runs'}")


def _print_search_row(row: dict) -> None:
    """One line of a batch-size search as each run finishes: fits or why not, step time, the process's peak."""
    if row.get("success"):
        step = row.get("step_time_s_mean")
        said = f"fits, step {_num(None if step is None else step * 1e3, '.1f')} ms, process peak "
        said += f"{_num(row.get('proc_peak_gb'), '.3f')} GiB"
    else:
        said = f"does not fit: {row.get('cause') or 'failed'}"
    print(f"  batch {row['batch_size']:>5}: {said}", flush=True)


def _print_rows(args: argparse.Namespace, rows: list[dict], plan) -> int:
    """The sweep's table on stdout; 1 if a configuration did not run (it is retried by a rerun)."""
    mode = f"{'mode':>4} " if plan.active else ""
    width = max((len(r.get("board_type") or "") for r in rows), default=0)  # a fleet sweep's: a column
    board = f"{'board':<{width}} " if width else ""
    print(
        f"{board}{'model':<10} {'batch':>5} {mode}{'ok':>3} {'step ms':>9} {'samples/s':>10} {'J/step':>10} "
        f"{'J/sample':>10} {'proc GiB':>9} {'RAM GiB':>9} {'GPU GiB':>9} {'proc CPU%':>9} {'machine':>7}  cause"
    )
    for r in rows:
        step_ms = None if r.get("step_time_s_mean") is None else r["step_time_s_mean"] * 1e3
        mode = f"{(r.get('config') or {}).get('power_mode', ''):>4} " if plan.active else ""
        board = f"{r.get('board_type') or '':<{width}} " if width else ""
        ok = "yes" if r["success"] else "no"
        print(
            f"{board}{r['model']:<10} {r['batch_size']:>5} {mode}{ok:>3} {_cell(step_ms, 9)} "
            f"{_cell(r.get('samples_per_s'))} {_cell(r.get('energy_per_step_j'))} "
            f"{_cell(r.get('energy_per_sample_j'))} "
            f"{_cell(r.get('proc_peak_gb'), 9)} {_cell(r.get('mem_peak_gb'), 9)} {_cell(r.get('gpu_mem_peak_gb'), 9)} "
            f"{_cell(r.get('process_cpu_util_avg'), 9)} {contention_columns(r).get('machine', 'n/a'):>7}  "
            f"{r.get('cause') or ''}"
        )
    print(
        "proc GiB: peak RSS of the training process; RAM GiB: system RAM in use (every process); "
        "GPU GiB: peak of the framework's GPU allocator; proc CPU%: the training process's own CPU, % of all cores"
    )
    busy = [r for r in rows if contention_columns(r).get("machine") == "busy"]
    if busy:
        print(
            f"machine: {len(busy)} of {len(rows)} runs ran while other processes or the hypervisor took "
            f"{BUSY_OTHER_PCT:.0f}% or more of the CPUs (their report's contention says how much): their step "
            "times and energy are longer than on an idle machine; rerun them on an idle one to compare"
        )
    for cause, columns in by_cause(_missing(rows)).items():
        print(f"{', '.join(columns)} n/a: {cause}")
    _print_where(args.out)
    not_run = sum(1 for r in rows if r.get("retry"))
    if not_run:
        print(
            f"{not_run} configuration(s) did not run (cause above); they are not recorded and a rerun retries them",
            file=sys.stderr,
        )
        return 1
    return 0


#: The table's columns that may have no value: the row's field, and the report's ``unavailable`` keys saying why.
_MAY_BE_MISSING = {
    "step ms": ("step_time_s_mean", ("step_time_s",)),
    "samples/s": ("samples_per_s", ("samples_per_s", "step_time_s")),
    "J/step": ("energy_per_step_j", ("energy",)),
    "J/sample": ("energy_per_sample_j", ("energy_per_sample_j", "energy")),
    "RAM GiB": ("mem_peak_gb", ("mem_peak_gb",)),
    "GPU GiB": ("gpu_mem_peak_gb", ("gpu_mem_peak_gb",)),
    "proc CPU%": ("process_cpu_util_avg", ("process_cpu_util_avg",)),
}


def _missing(rows: list[dict]) -> list[tuple[str, str]]:
    """(column, why) of each n/a cell of the rows that ran (a failed row says why in its cause column)."""
    missing = []
    for row in (r for r in rows if r.get("success")):
        unavailable = row.get("unavailable") or {}
        for column, (field, keys) in _MAY_BE_MISSING.items():
            if row.get(field) is None:
                missing.append((column, next((unavailable[k] for k in keys if k in unavailable), "not reported")))
    return missing


def _cell(value, width: int = 10) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.4g}"


def cmd_predict(args: argparse.Namespace) -> int:
    from tf_mobileperf.analysis.predict import describe, predict
    from tf_mobileperf.analysis.size_choice import choose_sizes
    from tf_mobileperf.output.files import write_json
    from tf_mobileperf.sweep.runner import sweep

    config = _sweep_config(args, [args.model])
    if args.measure is None:

        def measure(b: int):
            row = sweep([args.model], [b], config)[0]
            ci = row.get("step_time_s_ci95")
            return (row["step_time_s_mean"], tuple(ci) if ci else None) if row.get("success") else None

        measured, why, _ = choose_sizes(measure, max(args.target), args.budget)
    else:
        measured, why = args.measure, ["given by --measure"]
    rows = [r for r in sweep([args.model], measured, config) if r["model"] == args.model]
    try:
        predictions = predict(rows, args.target, args.memory_limit)
    except ValueError as exc:
        raise ValueError(f"cannot predict {args.model}: {exc}") from None
    print(f"{args.model}, measured at batch sizes {','.join(map(str, measured))}:")
    for line in why:
        print(f"  {line}")
    for r in sorted(rows, key=lambda r: r["batch_size"]):
        ci = r.get("step_time_s_ci95")
        print(
            f"  batch {r['batch_size']}: step time {_cell(r.get('step_time_s_mean'), 0).strip()} s"
            + (f", 95% interval {ci[0]:.4g}..{ci[1]:.4g} s over {r.get('steps_measured')} steps" if ci else "")
            + _short_of_precision(r, config.precision, config.max_steps)
        )
    print(
        f"{'batch':>5} {'peak RSS GiB':>16} {'step time s (95%)':>24} {'J/step (95%)':>24} {'J/sample':>10}"
        "  out of memory?"
    )
    for p in predictions:
        oom = "n/a (no --memory-limit)" if p.oom is None else ("yes" if p.oom else "no")
        print(
            f"{p.batch_size:>5} {_pm(p.proc_peak_gb, p.proc_peak_gb_pm)} {_range(p.step_time_s, p.step_time_s_ci95)} "
            f"{_range(p.energy_per_step_j, p.energy_per_step_j_ci95)} {_cell(p.energy_per_sample_j)}  {oom}"
        )
    if predictions and predictions[0].energy_unavailable:
        print(predictions[0].energy_unavailable)
    write_json(
        args.out / "prediction.json",
        {
            "model": args.model,
            "measured": measured,
            "why_measured": why,
            "precision": config.precision,
            "max_steps": config.max_steps,
            "memory_limit_bytes": args.memory_limit,
            "fitted": describe(rows),
            "predictions": [dataclasses.asdict(p) for p in predictions],
        },
    )
    print(f"-> {args.out / 'prediction.json'}")
    return 0


def _short_of_precision(row: dict, precision: float | None, max_steps: int | None) -> str:
    """ "; stopped at --max-steps N at +-X%, wider than the +-P% asked" where a size's interval is wider than the
    precision asked (the prediction's interval holds it: the fit weighs each size by its own interval)."""
    ci, mean = row.get("step_time_s_ci95"), row.get("step_time_s_mean")
    if precision is None or not ci or not mean:
        return ""
    half = relative_half_width(mean, *ci)
    if half <= precision:
        return ""
    return f"; stopped at --max-steps {max_steps} at +-{half:.1%}, wider than the +-{precision:.1%} asked"


def _range(value: float | None, interval) -> str:
    if value is None:
        return f"{'n/a':>24}"
    return f"{value:>9.4g} ({interval[0]:.3g}..{interval[1]:.3g})".rjust(24) if interval else f"{value:>24.4g}"


def _pm(value: float | None, plus_minus: float | None) -> str:
    if value is None:
        return f"{'n/a':>18}"
    return f"{value:>9.4g} ± {plus_minus:<6.2g}" if plus_minus is not None else f"{value:>18.4g}"


def cmd_combine(args: argparse.Namespace) -> int:
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
        print(
            f"{task:<10} {state:<22} energy {_cell(host['energy_total'])} J  peak {_cell(host['mem_peak_gb'], 6)} GiB"
        )
    print(
        f"combined: {report['steps_measured']} steps, energy {_cell(report['energy_total'])} J -> "
        f"{RunLayout(args.logdir).combined}"
    )
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from tf_mobileperf.figures.plot import plot

    for path in plot(args.directory):
        print(path)
    return 0
