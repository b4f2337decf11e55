"""A sweep configuration whose child is a helper that dies as a test asks (an abort on std::bad_alloc)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

from tf_mobileperf.sweep import launch
from tf_mobileperf.sweep import runner as sweep_mod
from tf_mobileperf.sweep.config import SweepConfig

HELPERS = Path(__file__).parent


DIE_AT = 4


def start_run(logdir: Path, batch_size: int, how: str) -> subprocess.Popen:
    """The helper ``dying_run.py``: a real measured run that dies in step DIE_AT (``how``: abort or wait)."""
    path = os.pathsep.join([str(HELPERS.parent), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path)
    return subprocess.Popen(
        [sys.executable, str(HELPERS / "dying_run.py"), str(logdir), str(batch_size), how, str(DIE_AT)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def aborted_sweep_run(out: Path, batch_size: int = 32) -> dict:
    """A sweep configuration under a memory limit whose child aborts on std::bad_alloc: the sweep's own
    ``run_one``, its child the helper instead of a zoo model. Returns the sweep's row."""

    def run(args: list[str], memory_limit, timeout_s, board_type=None) -> launch.Exit:
        proc = start_run(Path(args[args.index("--logdir") + 1]), batch_size, "abort")
        _, stderr = proc.communicate(timeout=300)
        return launch.Exit(proc.pid, proc.returncode, stderr)

    config = SweepConfig(out=out, steps=10, warmup_steps=1, memory_limit=2**30, sensors="none")
    with mock.patch.object(launch, "run", run):
        return sweep_mod.run_one("cnn", batch_size, config)
