"""Ctrl-C during a real sweep: one line and exit status 130, no traceback, no child left behind, the finished
configurations kept, and a rerun runs only what is missing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tf_mobileperf.cli.parser import INTERRUPTED, main
from tf_mobileperf.sweep import runner as sweep_mod

from conftest import DATA

ROOT = Path(__file__).parent.parent.parent
#: Two tiny configurations (cnn at batch 1 and 2, 3 steps of which 1 is warm-up), sensors replayed.
TWO = [
    "--models",
    "cnn",
    "--batch-sizes",
    "1,2",
    "--steps",
    "3",
    "--warmup-steps",
    "1",
    "--sensors",
    f"replay:{DATA / 'tx2_tegrastats.log'}",
]


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux: /proc's children of each of its threads)."""
    children = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children += [int(c) for c in (task / "children").read_text().split()]
        except OSError:  # a thread that ended
            continue
    return children


def _rows(out: Path) -> list[dict]:
    try:
        return json.loads((out / "results.json").read_text())
    except (OSError, ValueError):  # not written yet, or being replaced
        return []


def _wait_for(what: str, done, timeout_s: float = 300.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = done()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)  # the child leads a process group of its own, with its sampler
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_ctrl_c_during_a_sweep_is_one_line_and_exit_130_and_a_rerun_runs_only_what_is_missing(tmp_path, monkeypatch):
    out = tmp_path / "sweep"
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    sweep = subprocess.Popen(
        [sys.executable, "-m", "tf_mobileperf.cli.parser", "sweep", *TWO, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=dict(os.environ, PYTHONPATH=path),
    )
    try:
        _wait_for("the first configuration's row", lambda: len(_rows(out)) == 1 or sweep.poll() is not None)
        assert sweep.poll() is None, "the sweep ended before it could be interrupted"
        (child,) = _wait_for("the second configuration's child", lambda: _children(sweep.pid))
        assert len(_rows(out)) == 1  # the child of batch 2, importing TensorFlow
        os.killpg(sweep.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the sweep's foreground group
        stdout, stderr = sweep.communicate(timeout=60)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()

    assert sweep.returncode == INTERRUPTED
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    assert [line for line in stderr.splitlines() if line.startswith("mobileperf")] == ["mobileperf: sweep interrupted"]
    assert sum("measures 2 steps per configuration" in line for line in stderr.splitlines()) == 1  # said once
    _wait_for("the child and its sampler to be gone", lambda: _gone(child), timeout_s=10)
    (kept,) = _rows(out)
    assert kept["batch_size"] == 1 and kept["success"] is True

    ran = []

    def run_one(model, batch_size, config):
        ran.append((model, batch_size))
        return real_run_one(model, batch_size, config)

    real_run_one = sweep_mod.run_one
    monkeypatch.setattr(sweep_mod, "run_one", run_one)
    assert main(["sweep", *TWO, "--out", str(out)]) == 0
    assert ran == [("cnn", 2)]
    rows = _rows(out)
    assert rows[0] == kept and [(r["batch_size"], r["success"]) for r in rows] == [(1, True), (2, True)]
