"""Each example runs end to end with a few steps, offline (synthetic data where
the real data set would need the network; Atari ROMs ship with ale-py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"


@pytest.mark.parametrize("script,extra", [
    ("shakespeare_lstm.py", ["--synthetic", "--seq-len", "50"]),
    ("cifar10_cnn.py", ["--synthetic"]),
    ("atari_dqn.py", ["--learn-start", "40"]),
])
def test_example_runs_and_says_where_its_logdir_is(tmp_path, script, extra):
    logdir = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(EXAMPLES / script), "--steps", "6", "--batch-size", "8",
                           "--logdir", str(logdir), *extra], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("update 6/6" if script == "atari_dqn.py" else "step 6/6") in proc.stdout and "loss" in proc.stdout
    assert script != "atari_dqn.py" or "epsilon" in proc.stdout  # the DQN's progress: its exploration too
    assert f"tensorboard --logdir {logdir}" in proc.stdout
    report = json.loads((logdir / "report.json").read_text())
    assert report["success"] is True and report["steps_measured"] == 3 and report["batch_size"] == 8
