"""The paper's benchmark: models x batch sizes, each in a fresh child process.

Results go to ``DIR/results.json`` and ``DIR/results.csv`` (one row per
configuration, the report's summary keys; ``sweep_results``), written after
every configuration so a sweep can be resumed. A row is keyed on its whole configuration (model,
batch size, steps, warm-up steps, input size, memory limit, sensors, power mode, jetson_clocks, and the
board type in a fleet sweep, ``fleet``): a rerun skips the configurations already measured and runs any
other. Each row says where it ran (``host``, ``board``, ``jetpack``, ``board_type``). Each
configuration is also a TensorBoard run under ``DIR/runs/`` (``DIR/runs/<board type>/`` in a fleet
sweep), so the dashboard's cross-run view compares them.

A child that runs out of memory records ``success: False``; a child killed
by a signal (SIGKILL from the kernel's OOM killer) is recorded the same way,
with the cause, the step it died in (from the child's ``progress.bin``) and
the steps it had written to ``steps.csv`` before it died. A configuration
that failed for a reason other than the model's own run (a file gone
missing, a child that could not set the run up or crashed, an interrupt) is
not a result: its row has ``retry: True``, is not recorded, and the next
sweep runs it again.

Arguments are checked when the ``SweepConfig`` is made, and each model's
input size (``check_models``, from the zoo's ``shapes``), before any child
starts. A child that fails with a Python traceback has the exception's type
and message as its cause, not the traceback's last line. One sweep writes a
directory at a time (``sweep_results.Results`` holds its lock); a second one
gets ``SweepError``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.reader import read_sweep_summary
from tf_mobileperf.format.schema import ENVELOPE
from tf_mobileperf.format.steps_csv import read_steps
from tf_mobileperf.output.files import StepProgress
from tf_mobileperf.sensors.board import identify
from tf_mobileperf.sweep import launch, power_modes
from tf_mobileperf.sweep.causes import STOPPED_FROM_OUTSIDE, error_cause, exit_cause, is_oom, says_oom
from tf_mobileperf.sweep.config import SweepConfig
from tf_mobileperf.sweep.defaults import MEASURED_STEPS
from tf_mobileperf.sweep.power_modes import PowerPlan
from tf_mobileperf.sweep.results import Results, SweepError
from tf_mobileperf.sweep.search import search_largest
from tf_mobileperf.zoo import check_input_size

log = logging.getLogger(__name__)


def check_models(models: Iterable[str], config: SweepConfig) -> None:
    """Checks, before any child starts, that each model can take the configuration's input size.

    Args:
        models: Zoo names.
        config: The sweep's configuration (its ``input_size``; None: each model's default).

    Raises:
        ValueError: one line, for the first model that cannot take it.
    """
    for model in models:
        check_input_size(model, config.input_size)


def warn_few_measured_steps(config: SweepConfig) -> None:
    """Logs one warning where each configuration measures fewer than ``MEASURED_STEPS`` steps (means of noise).

    Args:
        config: The sweep's configuration (its ``steps`` and ``warmup_steps``).
    """
    if config.measured_steps < MEASURED_STEPS:
        log.warning(
            "--steps %d with %d warm-up steps measures %d step%s per configuration: step times and energy "
            "are noise, not averages (measure %d or more: --steps %d)",
            config.steps,
            config.warmup_steps,
            config.measured_steps,
            "" if config.measured_steps == 1 else "s",
            MEASURED_STEPS,
            config.warmup_steps + MEASURED_STEPS,
        )


def run_name(model: str, batch_size: int, config: SweepConfig) -> str:
    """The name of a configuration's TensorBoard run.

    Args:
        model: A zoo name.
        batch_size: The batch size.
        config: The rest of the configuration (its ``key`` and ``power_mode``).

    Returns:
        "MODEL-bsN-modeM-DIGEST" ("-modeM" only with a power mode), DIGEST 8 hex digits of a SHA-1 of the key.
    """
    digest = hashlib.sha1(json.dumps(config.key(), sort_keys=True).encode()).hexdigest()[:8]
    mode = "" if config.power_mode is None else f"-mode{config.power_mode}"
    return f"{model}-bs{batch_size}{mode}-{digest}"


def run_one(model: str, batch_size: int, config: SweepConfig) -> dict:
    """Runs one configuration in a child process, in ``config.runs``; does not record it.

    Args:
        model: A zoo name.
        batch_size: The batch size.
        config: The rest of the configuration.

    Returns:
        Its result row, with where it ran and its per-step energies; ``retry: True`` where it is not a result.
    """
    logdir = config.runs / run_name(model, batch_size, config)
    shutil.rmtree(logdir, ignore_errors=True)  # what an unfinished earlier try left: this run replaces it
    done = launch.run(
        launch.options(model, batch_size, config, logdir), config.memory_limit, config.timeout_s, config.board_type
    )
    logdir = _claimed_by(logdir, done.pid)
    row = _row(done.returncode, done.stderr, logdir, config)
    launch.record_end(logdir, done, row, is_oom(row))  # a run without a report says how it ended
    row.update(model=model, batch_size=batch_size, config=config.key(), logdir=str(logdir), **_where(config))
    for total, per_step in (("energy_total", "energy_per_step_j"), ("energy_active_total", "energy_active_per_step_j")):
        row[per_step] = (
            row[total] / row["steps_measured"] if row.get(total) is not None and row.get("steps_measured") else None
        )
    row["step_time_s_mean"] = (row.get("step_time_s") or {}).get("mean")
    return row


def _where(config: SweepConfig) -> dict:
    """Where a row ran: the host, its board and JetPack (``sensors.board``), the fleet's board type (or None)."""
    found = identify()
    return {
        "host": os.uname().nodename,
        "board": found.board,
        "jetpack": found.jetpack,
        "board_type": config.board_type,
    }


def _claimed_by(logdir: Path, pid: int) -> Path:
    """The directory the child's measurement claimed: ``logdir``, or ``logdir/run-N`` if that was taken
    (``storage.claim_logdir`` writes the claimer's pid); ``logdir`` if it claimed none."""
    for claim in (RunLayout(folder).claim for folder in [logdir, *sorted(logdir.glob("run-*"))]):
        try:
            if json.loads(claim.read_text()).get("pid") == pid:
                return claim.parent
        except (OSError, ValueError, AttributeError):  # gone, or cut short by a kill
            continue
    return logdir


def _row(returncode: int | None, stderr: str, logdir: Path, config: SweepConfig) -> dict:
    """The row of a finished child, from its summary.json or, if it died without one, its exit."""
    try:
        summary = read_sweep_summary(logdir) if returncode == 0 else None
    except (OSError, ValueError, RecursionError) as exc:  # the reader's message names the file
        return {"success": False, "retry": True, "error": stderr[-2000:], "cause": f"unreadable {exc}"}
    if summary is not None:
        row = {k: v for k, v in summary.items() if k not in ENVELOPE}  # a row of results.json, not a report
        row["cause"] = None if row.get("success") else error_cause(row.get("error"))
        if row["cause"] == "interrupted":
            row["retry"] = True
        return row
    cause = exit_cause(returncode, stderr)
    exited = returncode is not None and (returncode >= 0 or -returncode in STOPPED_FROM_OUTSIDE)
    if exited and not says_oom(cause):
        # Not the model's own run: a bad argument, a missing file, a crash of the child, a Ctrl-C.
        return {"success": False, "retry": True, "error": stderr[-2000:], "cause": cause}
    if config.memory_limit and returncode is not None and returncode < 0 and "out of memory" not in cause:
        cause += " under the emulated memory limit (an allocation failure, most likely)"
    row = {"success": False, "error": stderr[-2000:], "cause": cause} | _steps_on_disk(logdir)
    if config.memory_limit:
        row["memory_limit_bytes"] = config.memory_limit
    return row


def _steps_on_disk(logdir: Path) -> dict:
    """What a child that died without a report had measured: its steps.csv (whole rows only) and progress."""
    steps = read_steps(logdir)
    durations = [s["duration_s"] for s in steps if not (s["warmup"] or s["failed"])]
    return {
        "failed_step": StepProgress.read(RunLayout(logdir).progress),
        "steps_on_disk": len(steps),
        "steps_measured": len(durations),
        "step_time_s": {"mean": sum(durations) / len(durations) if durations else None},
    }


def sweep(
    models: Iterable[str], batch_sizes: Iterable[int], config: SweepConfig, plan: PowerPlan | None = None
) -> list[dict]:
    """Runs every (model, batch size) of ``config`` not yet in the results; returns their rows, in order.

    Args:
        models: Zoo names.
        batch_sizes: The batch sizes; each (model, batch size) pair runs once.
        config: The rest of every configuration; its ``out`` is the sweep directory.
        plan: Power modes and jetson_clocks: each configuration runs in each mode, mode after mode, and the
            board's own mode and clocks are restored however the sweep ends (None or inactive: as it is).

    Returns:
        The rows, mode after mode; one with ``retry: True`` did not run for a reason other than the model's own
        run (see the module's docstring): it is returned, not recorded.

    Raises:
        ValueError: a model cannot take the input size.
        PowerModeError: before anything runs, where the board cannot be set (not root, not a Jetson); or at
            the end, where it could not be restored.
        SweepError: the sweep directory is in use by another sweep, or its results are unreadable.
    """
    pairs = list(dict.fromkeys((m, b) for m in models for b in batch_sizes))
    check_models(dict.fromkeys(m for m, _ in pairs), config)
    if plan is not None and plan.active:
        power_modes.check(plan)
    with Results(config.out) as results:
        if plan is None or not plan.active:
            return _run_pairs(results, pairs, [config])
        with power_modes.controlled(plan, config.out) as board:
            configs = [dataclasses.replace(config, power_mode=m, jetson_clocks=plan.jetson_clocks) for m in board.modes]
            return _run_pairs(results, pairs, configs, board)


def _run_pairs(
    results: Results, pairs: list[tuple[str, int]], configs: list[SweepConfig], board: power_modes.Board | None = None
) -> list[dict]:
    """Runs the pairs not yet in ``results``, config after config (setting each one's mode on ``board``)."""
    todo = [(i, p) for i, c in enumerate(configs) for p in pairs if results.done(*p, c.key()) is None]
    ran: dict[tuple, dict] = {}
    # One bar per sweep, none when nothing is left to run; log lines go above it instead of breaking it.
    with logging_redirect_tqdm(), tqdm(total=len(todo), desc="sweep", unit="config", disable=not todo) as bar:
        mode = None
        for i, (model, batch_size) in todo:
            config = configs[i]
            if board is not None and config.power_mode != getattr(mode, "id", None):
                if config.power_mode is None:  # run_sweep gives every config a mode of the board's
                    raise ValueError(f"a sweep in power modes needs each configuration's mode, {config.key()} has none")
                mode = board.apply(config.power_mode)
            in_mode = "" if mode is None else f" mode {mode.id}"
            bar.set_postfix_str(f"{model} batch {batch_size}{in_mode}")
            row = run_one(model, batch_size, config)
            if mode is not None:
                row.update(power_mode=mode.id, power_mode_name=mode.name, jetson_clocks=config.jetson_clocks)
            ran[i, (model, batch_size)] = results.add(row)
            bar.update()
    rows = []
    for i, c in enumerate(configs):
        for p in pairs:
            got = ran.get((i, p)) or results.done(*p, c.key())
            if got is None:  # each pair either ran above or was recorded already
                raise RuntimeError(f"{p[0]} batch {p[1]} has no row after the sweep")
            rows.append(got)
    return rows


def find_max_batch(
    model: str,
    config: SweepConfig,
    start: int = 1,
    ceiling: int = 4096,
    on_row: Callable[[dict], None] | None = None,
) -> tuple[int | None, list[dict]]:
    """The largest batch size that trains, searched from ``start``; each size tried is recorded in the results.

    Args:
        model: A zoo name.
        config: The rest of every configuration; its ``out`` is the sweep directory.
        start: The first batch size tried (doubling from it, then bisection: ``search_largest``).
        ceiling: The largest batch size tried.
        on_row: Called with each batch size's row as the search takes it (run now, or done before).

    Returns:
        (the largest batch size that trains, None if none does; every recorded row of ``model`` and ``config``).

    Raises:
        SweepError: a batch size did not run for a reason other than the model's own run.
        ValueError: ``model`` cannot take the configuration's input size.
    """
    check_models([model], config)
    with Results(config.out) as results:

        def fits(batch_size: int) -> bool:
            row = results.done(model, batch_size, config.key()) or results.add(run_one(model, batch_size, config))
            if on_row is not None:
                on_row(row)
            if row.get("retry"):
                raise SweepError(f"{model} batch {batch_size} did not run: {row['cause']}")
            return bool(row["success"])

        size, _ = search_largest(fits, start, ceiling)
        return size, [r for r in results.rows if r["model"] == model and r.get("config") == config.key()]
