"""``mobileperf sweep``: the sweep run, searched or not, and its table printed."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import TYPE_CHECKING

from tf_mobileperf.cli.printing import cell, num, print_where
from tf_mobileperf.session.contention import BUSY_OTHER_PCT
from tf_mobileperf.session.reporting import by_cause
from tf_mobileperf.sweep.results import contention_columns

if TYPE_CHECKING:
    from tf_mobileperf.sweep.config import SweepConfig


#: Batch sizes measured to predict others (benchmarks/predict.py: 1,2,4 are too close together).
MEASURE_DEFAULT = (1, 4, 16)


def _at_most(largest: int | None, batch: int) -> bool:
    """Whether ``batch`` fits where the largest that fits is ``largest`` (None: none does)."""
    return largest is not None and batch <= largest


def sweep_config(args: argparse.Namespace, models: list[str]) -> SweepConfig:
    """The ``SweepConfig`` of the sweep and predict commands' options, checked against each model's input size;
    then one warning if it measures too few steps, after any error of the arguments.

    Args:
        args: The parsed options of ``sweep`` or ``predict`` (``precision`` and ``max_steps``: predict's only).
        models: The zoo names the configuration will run.

    Returns:
        The configuration.

    Raises:
        ValueError: an option is out of range, or a model cannot take the input size.
    """
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
    """``mobileperf sweep``: a local or fleet sweep and its table, or a search for each model's largest batch.

    Args:
        args: The parsed options of ``sweep``.

    Returns:
        The exit status: 0, or 1 where a configuration did not run (a rerun retries it).

    Raises:
        ValueError: options that do not go together: ``--find-max-batch`` with ``--power-modes`` or
            ``--jetson-clocks``, ``--ray`` with any of those three, ``--boards`` without ``--ray``.
    """
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
    config = sweep_config(args, args.models)
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
        print_where(args.out)
        return 0
    return _print_rows(args, sweep(args.models, args.batch_sizes, config, plan), plan)


def _print_search_row(row: dict) -> None:
    """One line of a batch-size search as each run finishes: fits or why not, step time, the process's peak."""
    if row.get("success"):
        step = row.get("step_time_s_mean")
        said = f"fits, step {num(None if step is None else step * 1e3, '.1f')} ms, process peak "
        said += f"{num(row.get('proc_peak_gb'), '.3f')} GiB"
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
            f"{board}{r['model']:<10} {r['batch_size']:>5} {mode}{ok:>3} {cell(step_ms, 9)} "
            f"{cell(r.get('samples_per_s'))} {cell(r.get('energy_per_step_j'))} "
            f"{cell(r.get('energy_per_sample_j'))} "
            f"{cell(r.get('proc_peak_gb'), 9)} {cell(r.get('mem_peak_gb'), 9)} {cell(r.get('gpu_mem_peak_gb'), 9)} "
            f"{cell(r.get('process_cpu_util_avg'), 9)} {contention_columns(r).get('machine', 'n/a'):>7}  "
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
    print_where(args.out)
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
