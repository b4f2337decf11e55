"""How the parent runs one sweep configuration's child and keeps how it ended.

``run`` is the parent's side, the same in a local sweep and in a fleet
sweep's Ray task: the child runs in a process group of its own (with its
sampler), which is killed whole on a timeout or an interrupt (Ctrl-C, a
cancelled task); the child also dies with its parent (``PR_SET_PDEATHSIG``),
so a killed sweep or a lost Ray worker leaves none behind. A child that
ended without writing its report (an abort on ``std::bad_alloc``, the OOM
killer) has how it ended written into its run (``record_end``): the
dashboard shows that run failed with its cause, not "running".
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tf_mobileperf.format.layout import RunLayout
from tf_mobileperf.format.writer import write_json
from tf_mobileperf.sensors.board import BOARD_TYPE_ENV

if TYPE_CHECKING:
    from tf_mobileperf.sweep.config import SweepConfig

#: Exit status of a child that could not set its run up (unknown model, bad sensors, unwritable logdir).
SETUP_FAILED = 3
#: The parent's pid, given to the child: it asks to die with that parent.
PARENT_ENV = "MOBILEPERF_SWEEP_PARENT"


@dataclasses.dataclass
class Exit:
    """How a child ended: its pid, its exit status (None: timed out, killed) and its stderr."""

    pid: int
    returncode: int | None
    stderr: str


def options(model: str, batch_size: int, config: SweepConfig, logdir: Path) -> list[str]:
    """The child's command-line options for one configuration (``child``'s parser reads them).

    Args:
        model: A zoo name.
        batch_size: The batch size.
        config: The sweep's configuration: steps, warm-up, sensors, and the input size, memory limit and
            precision where set.
        logdir: The run directory the child measures into.

    Returns:
        The options, as ``run``'s ``args``.
    """
    args = [
        "--model",
        model,
        "--batch-size",
        str(batch_size),
        "--steps",
        str(config.steps),
        "--warmup-steps",
        str(config.warmup_steps),
        "--sensors",
        config.sensors,
        "--logdir",
        str(logdir),
    ]
    if config.input_size:
        args += ["--input-size", str(config.input_size)]
    if config.memory_limit:
        args += ["--memory-limit", str(config.memory_limit)]
    if config.precision:
        args += ["--precision", str(config.precision), "--max-steps", str(config.max_steps)]
    return args


def run(
    args: list[str],
    memory_limit: int | None,
    timeout_s: float,
    board_type: str | None = None,
    module: str = "tf_mobileperf.sweep.child",
) -> Exit:
    """Runs ``python -m module`` in a process group of its own and waits for it; on a timeout or an interrupt
    (Ctrl-C, a cancelled Ray task) its whole group is killed.

    Args:
        args: The child's command-line options (``options``).
        memory_limit: The configuration's memory limit, in bytes (None: none), which ``args`` passes on; with
            one, oneDNN is turned off unless the environment sets ``TF_ENABLE_ONEDNN_OPTS``.
        timeout_s: How long to wait for the child, in seconds.
        board_type: A fleet sweep's board type, for the report's device (None: a local sweep).
        module: The module the child runs.

    Returns:
        How the child ended (``returncode`` None: timed out and killed).
    """
    # Few malloc arenas: each reserves 64 MB of address space, which RLIMIT_AS would count.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"), MALLOC_ARENA_MAX="2")
    env[PARENT_ENV] = str(os.getpid())
    if board_type:
        env[BOARD_TYPE_ENV] = board_type
    if memory_limit:
        # oneDNN's CPU kernels (TF's default on x86) crash with SIGSEGV when an allocation fails under
        # RLIMIT_AS (seen on AVX-512/AMX CPUs); TF's own kernels raise ResourceExhaustedError.
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        env=env,
        start_new_session=True,
    )
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
        return Exit(proc.pid, proc.returncode, stderr or "")
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        _, stderr = proc.communicate()
        return Exit(proc.pid, None, stderr or "")
    except BaseException:  # Ctrl-C in the sweep, a cancelled Ray task: the child and its sampler go too
        _kill_group(proc.pid)
        proc.wait()
        raise


def record_end(logdir: Path, done: Exit, row: dict, oom: bool) -> Path | None:
    """Writes how the child ended into the run it claimed in ``logdir`` when it ended without a report, so that
    the dashboard shows the run failed, with its cause, rather than "running" forever.

    Args:
        logdir: The run directory the child claimed.
        done: How the child ended.
        row: The sweep's row of the configuration (its ``cause``, ``failed_step``, ``steps_on_disk``).
        oom: Whether that cause is running out of memory.

    Returns:
        The file written (``RunLayout.ended``), or None where the child claimed no run there or wrote its report.
    """
    layout = RunLayout(logdir)
    try:
        claimed = json.loads(layout.claim.read_text()).get("pid") == done.pid
    except (OSError, ValueError, AttributeError):  # no claim, or one cut short by a kill
        claimed = False
    if not claimed or layout.report.exists():
        return None
    signal_name = _signal_name(done.returncode)
    said = ": ".join(part for part in (signal_name, _last_words(done.stderr)) if part)
    head = "out of memory" if oom else str(row.get("cause") or "its process ended")
    path = layout.ended
    write_json(
        path,
        {
            "pid": done.pid,
            "host": socket.gethostname(),
            "ended_wall_s": time.time(),
            "exit_status": done.returncode,
            "signal": signal_name,
            "cause": row.get("cause"),
            "error": f"{head} ({said})" if said else head,
            "failed_step": row.get("failed_step"),
            "steps_on_disk": row.get("steps_on_disk"),
            "written_by": "mobileperf sweep",
        },
    )
    return path


def _signal_name(returncode: int | None) -> str | None:
    """The signal that ended a child ("SIGABRT"), from its return code; None if it exited or timed out."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _last_words(stderr: str) -> str | None:
    """What the child said as it died: a C++ exception's ``what()`` ("std::bad_alloc"), or the last line of a
    Python exception; None if it said neither (TensorFlow's log lines are not a cause)."""
    for line in reversed(stderr.strip().splitlines()):
        line = line.strip()
        if "what():" in line:
            return line.split("what():", 1)[1].strip()[:200] or None
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b", line):
            return line[:200]
    return None


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # gone already
        os.killpg(pid, signal.SIGKILL)
