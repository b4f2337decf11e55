"""Each example runs end to end with a few steps, offline (synthetic data where
the real data set would need the network; Atari ROMs ship with ale-py): it
falls back to synthetic data by itself where its download fails, says so
when a run is too short to measure a step, and refuses a bad argument in one
line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
EXAMPLES = ROOT / "examples"
#: A proxy on a port nothing listens on: every download is refused at once, network or not.
NO_NETWORK = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "no_proxy": ""}


def run_example(script: str, *args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """Runs ``script`` with ``args`` on this checkout's package."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=path, **env),
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "script,extra",
    [
        # The CIFAR and Shakespeare examples' --synthetic runs are the README's, run by test_readme_commands.py;
        # their offline fallback below trains them too.
        ("atari_dqn.py", ["--learn-start", "40"]),
    ],
)
def test_example_runs_and_says_where_its_logdir_is(tmp_path, script, extra):
    logdir = tmp_path / "run"
    proc = run_example(script, "--steps", "6", "--batch-size", "8", "--logdir", str(logdir), *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ("update 6/6" if script == "atari_dqn.py" else "step 6/6") in proc.stdout and "loss" in proc.stdout
    assert script != "atari_dqn.py" or "epsilon" in proc.stdout  # the DQN's progress: its exploration too
    assert f"tensorboard --logdir {logdir}" in proc.stdout
    assert "shuffle=True was passed" not in proc.stderr  # fit is not asked to shuffle a tf.data pipeline
    report = json.loads((logdir / "report.json").read_text())
    assert report["success"] is True and report["steps_measured"] == 3 and report["batch_size"] == 8
    # Memory says whose it is, the training process's peak first (system RAM is every process's).
    process = max(report["channels"][c]["peak"] for c in ("proc_peak", "proc_rss") if c in report["channels"])
    line = f"memory: process peak {process / 2**30:.3f} GiB, system RAM in use {report['mem_peak_gb']:.3f} GiB"
    assert line in proc.stdout.splitlines()
    # CPU says whose it is: the process's own share first, then every process's, and the machine's verdict.
    c = report["contention"]
    line = (
        f"CPU: this process {report['process_cpu_util_avg']:.1f} % of all cores, every process "
        f"{report['cpu_util_avg']:.1f} %; machine {c['verdict']} (others {c['other_cpu_pct']:.0f}%, "
        f"steal {c['steal_pct']:.0f}%)"
    )
    assert line in proc.stdout.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("script,extra", [("cifar10_cnn.py", []), ("shakespeare_lstm.py", ["--seq-len", "20"])])
def test_an_example_whose_download_fails_trains_on_synthetic_data_and_says_so(tmp_path, script, extra):
    logdir = tmp_path / "run"
    start = time.monotonic()
    proc = run_example(
        script,
        "--steps",
        "4",
        "--batch-size",
        "4",
        "--logdir",
        str(logdir),
        *extra,
        KERAS_HOME=str(tmp_path / "keras"),
        **NO_NETWORK,
    )  # no data set cached from an earlier run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert time.monotonic() - start < 120
    said = [line for line in proc.stderr.splitlines() if "could not be downloaded" in line]
    assert len(said) == 1 and "synthetic data" in said[0] and "Connection refused" in said[0]
    assert "Traceback" not in proc.stderr and "shuffle=True was passed" not in proc.stderr
    assert "step 4/4" in proc.stdout
    assert json.loads((logdir / "report.json").read_text())["steps_measured"] == 1


@pytest.mark.slow
def test_the_demo_with_fewer_steps_than_its_warm_up_says_no_step_was_measured(tmp_path):
    logdir = tmp_path / "run"
    proc = run_example("demo.py", "--steps", "2", "--batch-size", "4", "--logdir", str(logdir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no step was measured (all 2 steps were warm-up steps (warmup_steps=3))" in proc.stdout
    report = json.loads((logdir / "report.json").read_text())
    assert report["steps_measured"] == 0
    assert report["model"] == "demo_cnn"  # its own name in the report and the dashboard, not Keras' "sequential"
    # Each reason is said once: its quantities share a line, and the full text is in report.json.
    console = proc.stdout + proc.stderr
    for reason in report["unavailable"].values():
        assert console.count(reason) <= 1, reason
    assert console.count("no power sensor") <= 2  # the run's line at its start and the summary's "see above"
    assert "null" not in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,says",
    [
        (["--sensors", "foo"], "argument --sensors: sensors 'foo': unknown sensors"),
        (["--logdir", "gs://bucket/run"], "argument --logdir: logdir 'gs://bucket/run' is on a remote file system"),
        (["--steps", "0"], "argument --steps: must be >= 1"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_status_2(args, says):
    proc = run_example("demo.py", *args, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith(f"demo.py: error: {says}")
