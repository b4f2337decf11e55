"""The seed's benchmark: models x batch sizes, each in a fresh child process.

Results go to ``DIR/results.json`` and ``DIR/results.csv`` (one row per
configuration, the report's summary keys), written after every configuration
so a sweep can be resumed: configurations already in ``results.json`` are
skipped. Each configuration is also a TensorBoard run under ``DIR/runs/``,
so the dashboard's cross-run view compares them. A child that runs out of
memory records ``success: False``; a child killed by a signal (SIGKILL from
the kernel's OOM killer) is recorded the same way, with the cause, the step
it died in (from the child's ``progress.bin``) and the steps it had written
to ``steps.csv`` before it died.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterable

from tqdm import tqdm

from .storage import PROGRESS_FILE, StepProgress, read_steps, write_json

log = logging.getLogger(__name__)

#: Summary keys copied to results.csv (scalars only).
CSV_KEYS = ["model", "batch_size", "success", "failed_step", "cause", "steps_measured", "energy_total",
            "energy_per_step_j", "energy_per_sample_j", "samples_per_s", "power_avg", "gpu_util_avg",
            "cpu_util_avg", "mem_peak_gb", "proc_peak_gb", "step_time_s_mean", "memory_limit_bytes"]


@dataclasses.dataclass
class SweepConfig:
    """How every configuration of a sweep runs."""

    out: Path
    steps: int = 10
    warmup_steps: int = 3
    input_size: int | None = None
    memory_limit: int | None = None
    sensors: str = "auto"
    timeout_s: float = 1800.0


def run_name(model: str, batch_size: int) -> str:
    return f"{model}-bs{batch_size}"


def run_one(model: str, batch_size: int, config: SweepConfig) -> dict:
    """Runs one configuration in a child process; returns its result row."""
    logdir = config.out / "runs" / run_name(model, batch_size)
    cmd = [sys.executable, "-m", "tf_mobileperf.sweep_child", "--model", model, "--batch-size", str(batch_size),
           "--steps", str(config.steps), "--warmup-steps", str(config.warmup_steps), "--sensors", config.sensors,
           "--logdir", str(logdir)]
    if config.input_size:
        cmd += ["--input-size", str(config.input_size)]
    if config.memory_limit:
        cmd += ["--memory-limit", str(config.memory_limit)]
    shutil.rmtree(logdir, ignore_errors=True)  # what an unfinished earlier try left: this run replaces it
    # Few malloc arenas: each reserves 64 MB of address space, which RLIMIT_AS would count.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"), MALLOC_ARENA_MAX="2")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=config.timeout_s, env=env)
        returncode, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        returncode, stderr = None, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    summary_file = logdir / "summary.json"
    if returncode == 0 and summary_file.exists():
        row = json.loads(summary_file.read_text())
        row["cause"] = None if row.get("success") else _cause(row.get("error"))
    else:
        cause = _exit_cause(returncode, stderr)
        if config.memory_limit and returncode is not None and returncode < 0 and "out of memory" not in cause:
            cause += " under the emulated memory limit (an allocation failure, most likely)"
        row = {"success": False, "error": stderr[-2000:], "cause": cause} | _steps_on_disk(logdir)
        if config.memory_limit:
            row["memory_limit_bytes"] = config.memory_limit
    row.update(model=model, batch_size=batch_size, logdir=str(logdir))
    row["energy_per_step_j"] = (row["energy_total"] / row["steps_measured"]
                                if row.get("energy_total") is not None and row.get("steps_measured") else None)
    row["step_time_s_mean"] = (row.get("step_time_s") or {}).get("mean")
    return row


def _steps_on_disk(logdir: Path) -> dict:
    """What a child that died without a report had measured: its steps.csv and progress."""
    steps = read_steps(logdir)
    durations = [s["duration_s"] for s in steps if not (s["warmup"] or s["failed"])]
    return {"failed_step": StepProgress.read(logdir / PROGRESS_FILE), "steps_on_disk": len(steps),
            "steps_measured": len(durations),
            "step_time_s": {"mean": sum(durations) / len(durations) if durations else None}}


def _cause(error: str | None) -> str:
    if not error:
        return "unknown"
    for name in ("ResourceExhaustedError", "MemoryError", "KeyboardInterrupt"):
        if name in error:
            return "out of memory" if name != "KeyboardInterrupt" else "interrupted"
    return error.splitlines()[0][:200]


def _exit_cause(returncode: int | None, stderr: str) -> str:
    if returncode is None:
        return "timed out"
    if returncode < 0:
        sig = signal.Signals(-returncode).name
        if sig == "SIGKILL":
            return "killed by SIGKILL (the kernel's OOM killer, most likely)"
        if sig == "SIGABRT" and ("bad_alloc" in stderr or "memory" in stderr.lower()):
            return "aborted: allocation failed (out of memory)"
        return f"killed by {sig}"
    if "MemoryError" in stderr or "ResourceExhaustedError" in stderr or "bad_alloc" in stderr:
        return "out of memory"
    return f"exit code {returncode}: " + (stderr.strip().splitlines() or [""])[-1][:200]


class Results:
    """results.json + results.csv of a sweep directory, rewritten after each row."""

    def __init__(self, out: Path):
        self.out = out
        self.path = out / "results.json"
        self.rows: list[dict] = json.loads(self.path.read_text()) if self.path.exists() else []

    def done(self, model: str, batch_size: int) -> dict | None:
        return next((r for r in self.rows if r["model"] == model and r["batch_size"] == batch_size), None)

    def add(self, row: dict) -> None:
        self.rows.append(row)
        write_json(self.path, self.rows)
        with open(self.out / "results.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=CSV_KEYS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(self.rows)


def sweep(models: Iterable[str], batch_sizes: Iterable[int], config: SweepConfig) -> list[dict]:
    """Runs every (model, batch size) not yet in the results; returns all rows."""
    config.out.mkdir(parents=True, exist_ok=True)
    results = Results(config.out)
    todo = [(m, b) for m in models for b in batch_sizes if not results.done(m, b)]
    for model, batch_size in tqdm(todo, desc="sweep", unit="config"):
        results.add(run_one(model, batch_size, config))
    return results.rows


def find_max_batch(model: str, config: SweepConfig, start: int = 1, ceiling: int = 4096) -> tuple[int | None, list[dict]]:
    """Largest batch size that trains, searched from ``start``. Returns (size, rows tried)."""
    config.out.mkdir(parents=True, exist_ok=True)
    results = Results(config.out)

    def fits(batch_size: int) -> bool:
        row = results.done(model, batch_size)
        if row is None:
            row = run_one(model, batch_size, config)
            results.add(row)
        return bool(row["success"])

    size, _ = search_largest(fits, start, ceiling)
    return size, [r for r in results.rows if r["model"] == model]


def search_largest(fits: Callable[[int], bool], start: int = 1, ceiling: int = 4096) -> tuple[int | None, int]:
    """(largest size that fits, sizes tried): doubling from ``start`` until one fails (halving
    first if ``start`` itself fails), then bisection. ``fits`` must be monotone."""
    tried = 0

    def probe(size: int) -> bool:
        nonlocal tried
        tried += 1
        return fits(size)

    good, bad, size = None, None, start
    while size <= ceiling and probe(size):
        good, size = size, size * 2
    if size <= ceiling:
        bad = size
    while good is None and bad is not None and bad > 1:
        size = bad // 2
        good, bad = (size, bad) if probe(size) else (None, size)
    while good is not None and bad is not None and bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if probe(middle) else (good, middle)
    return good, tried
